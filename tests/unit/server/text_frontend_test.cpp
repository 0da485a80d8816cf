// The text frontend (server/text_frontend.h) over real tokenizers: the demo model's (ChatML,
// Qwen3 architecture) and the Qwen3, Llama 3 and DeepSeek V3 fixtures. Checks chat rendering
// against @huggingface/jinja renders, streaming detokenization, token bytes for logprobs, the
// reasoning + tool-call parser chain (split at every byte, malformed and hostile output), the
// open-reasoning prompt detection, special-token handling and eos ids.
#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "server/text_frontend.h"
#include "test_assets.h"

namespace flare::server {
namespace {

using json = nlohmann::ordered_json;
using namespace std::string_literals;
namespace fs = std::filesystem;

using testing::demo_assets;
using testing::fixture_assets;
using testing::read_file;

// Loaded once per process: the Qwen3 tokenizer takes a moment.
const Frontend& qwen3() {
  static const std::unique_ptr<Frontend> frontend = make_text_frontend(fixture_assets("qwen3", "Qwen3ForCausalLM"));
  return *frontend;
}

const Frontend& demo() {
  static const std::unique_ptr<Frontend> frontend = make_text_frontend(demo_assets());
  return *frontend;
}

// Everything one parser produced, with adjacent text events merged.
struct Parsed {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  int n_unbalanced = 0;                                     // begin/end mismatches
};

void collect(const std::vector<ParsedEvent>& events, Parsed& out, int& open_calls) {
  for (const auto& event : events) {
    switch (event.kind) {
      case ParsedEvent::Kind::content: out.content += event.text; break;
      case ParsedEvent::Kind::reasoning: out.reasoning += event.text; break;
      case ParsedEvent::Kind::tool_call_begin:
        if (open_calls++ != 0) ++out.n_unbalanced;
        out.calls.emplace_back(event.tool_name, "");
        break;
      case ParsedEvent::Kind::tool_call_arguments:
        if (open_calls != 1 || out.calls.empty()) ++out.n_unbalanced;
        else out.calls.back().second += event.text;
        break;
      case ParsedEvent::Kind::tool_call_end:
        if (open_calls-- != 1) ++out.n_unbalanced;
        break;
    }
  }
}

// Feeds `text` in pieces of `piece_bytes` (0: all at once).
Parsed parse(const Frontend& frontend, const ParserOptions& options, const std::string& text, size_t piece_bytes = 0) {
  auto parser = frontend.make_parser(options);
  Parsed out;
  int open_calls = 0;
  size_t step = piece_bytes == 0 ? std::max<size_t>(text.size(), 1) : piece_bytes;
  for (size_t at = 0; at < text.size(); at += step) collect(parser->push(text.substr(at, step)), out, open_calls);
  collect(parser->finish(), out, open_calls);
  if (open_calls != 0) ++out.n_unbalanced;
  return out;
}

ParserOptions tool_options(bool prompt_opened_reasoning = false) {
  ParserOptions options;
  options.parse_tool_calls = true;
  options.prompt_opened_reasoning = prompt_opened_reasoning;
  return options;
}

TEST(TextFrontend, DemoEncodeDecodeRoundTrip) {
  const Frontend& frontend = demo();
  EXPECT_EQ(frontend.vocab_size(), 8192);
  std::string text = "def add(a, b):\n    return a + b  # héllo 日本語 😀\n";
  auto ids = frontend.encode(text, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(frontend.decode(ids, true), text);
  EXPECT_EQ(frontend.encode(text, true), ids);  // the demo tokenizer adds no BOS
  std::vector<TokenId> with_eos = ids;
  with_eos.push_back(0);  // <|endoftext|>
  EXPECT_EQ(frontend.decode(with_eos, true), text);
  EXPECT_EQ(frontend.decode(with_eos, false), text + "<|endoftext|>");
}

TEST(TextFrontend, DemoChatTemplateIsChatml) {
  const Frontend& frontend = demo();
  json messages = json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(frontend.render_chat(messages, json::array(), json::object(), true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(frontend.render_chat(messages, nullptr, nullptr, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_FALSE(frontend.chat_prompt_needs_special_tokens());
  // <|im_start|> is one token in the encoded prompt.
  auto ids = frontend.encode("<|im_start|>user\nHi<|im_end|>\n", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(frontend.token_text(ids[0]), "<|im_start|>");
}

TEST(TextFrontend, TemplateKwargsCannotReplaceTheConversation) {
  const Frontend& frontend = demo();
  json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  json kwargs = {{"messages", json::array()}, {"add_generation_prompt", false}, {"extra", 1}};
  EXPECT_EQ(frontend.render_chat(messages, nullptr, kwargs, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_THROW(frontend.render_chat(messages, nullptr, json::array({1}), true), Error);
  EXPECT_THROW(frontend.render_chat(json::object(), nullptr, nullptr, true), Error);
  // A list content in a template that concatenates strings renders or fails cleanly, never crashes.
  json parts = json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "x"}}})}}});
  try {
    frontend.render_chat(parts, nullptr, nullptr, true);
  } catch (const Error&) {
  }
}

TEST(TextFrontend, DemoStreamingDetokenizerMatchesDecode) {
  const Frontend& frontend = demo();
  std::string text = "print('ünïcödé ✓ 🚀')\n\tx = 1<|im_end|>";
  auto ids = frontend.encode(text, false);
  for (bool skip : {true, false}) {
    auto detokenizer = frontend.make_detokenizer(skip);
    std::string streamed;
    for (TokenId id : ids) {
      std::string piece = detokenizer->push(id);
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "a delta split a character";
      streamed += piece;
    }
    streamed += detokenizer->flush();
    EXPECT_EQ(streamed, frontend.decode(ids, skip));
  }
}

TEST(TextFrontend, TokenTextGivesRawBytes) {
  for (const Frontend* frontend : {&demo(), &qwen3()}) {
    std::string text = "naïve 日本語 😀 done";
    auto ids = frontend->encode(text, false);
    std::string joined;
    for (TokenId id : ids) joined += frontend->token_text(id);
    EXPECT_EQ(joined, text);
  }
  EXPECT_EQ(demo().token_text(-1), "");
  EXPECT_EQ(demo().token_text(1 << 30), "");
}

TEST(TextFrontend, Qwen3RendersLikeTransformers) {
  const Frontend& frontend = qwen3();
  auto conversations = json::parse(read_file(fs::path(FLARE_TEST_DATA) / "templates" / "conversations.json"));
  auto expected = json::parse(read_file(fs::path(FLARE_TEST_DATA) / "templates" / "expected.json"))["conversations"]["qwen3"];
  int n_compared = 0;
  for (const auto& conversation : conversations) {
    std::string name = conversation["name"];
    const json& want = expected[name];
    json tools = conversation.value("tools", json());
    json kwargs = conversation.value("kwargs", json::object());
    bool add_generation_prompt = conversation.value("add_generation_prompt", true);
    if (want.contains("error")) {
      EXPECT_THROW(frontend.render_chat(conversation["messages"], tools, kwargs, add_generation_prompt), Error) << name;
      continue;
    }
    // Bodies keep the client's key order (ordered_json), so tool schemas and call arguments
    // render byte for byte as transformers renders them.
    std::string rendered = frontend.render_chat(conversation["messages"], tools, kwargs, add_generation_prompt);
    EXPECT_EQ(rendered, want["output"].get<std::string>()) << name;
    ++n_compared;
  }
  EXPECT_GE(n_compared, 14);
}

TEST(TextFrontend, Qwen3OpenReasoningPromptDetection) {
  const Frontend& frontend = qwen3();
  json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  auto prompt = [&](const json& kwargs) {
    return frontend.encode(frontend.render_chat(messages, nullptr, kwargs, true), frontend.chat_prompt_needs_special_tokens());
  };
  EXPECT_FALSE(frontend.chat_prompt_needs_special_tokens());
  EXPECT_FALSE(frontend.prompt_opens_reasoning(prompt(json::object())));                      // the model writes <think>
  EXPECT_FALSE(frontend.prompt_opens_reasoning(prompt({{"enable_thinking", false}})));        // <think></think> closed
  auto opened = frontend.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n", false);
  EXPECT_TRUE(frontend.prompt_opens_reasoning(opened));
  EXPECT_FALSE(frontend.prompt_opens_reasoning({}));
  // A long user message mentioning <think> far back does not count; one just before the end does.
  std::string long_text = "<think> ";
  for (int i = 0; i < 100; ++i) long_text += " word" + std::to_string(i);
  EXPECT_FALSE(frontend.prompt_opens_reasoning(frontend.encode(long_text, false)));
  // A user message about the tag, followed by the generation prompt, opens nothing.
  json about_tag = json::array({{{"role", "user"}, {"content", "What does <think> do?\n<think>"}}});
  EXPECT_FALSE(frontend.prompt_opens_reasoning(frontend.encode(frontend.render_chat(about_tag, nullptr, nullptr, true), false)));
  // DeepSeek-R1-style templates end the generation prompt inside the block.
  TextFrontendAssets r1 = fixture_assets("qwen3", "Qwen3ForCausalLM");
  r1.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                     "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}{# </think> #}";
  auto r1_frontend = make_text_frontend(r1);
  auto r1_prompt = r1_frontend->encode(r1_frontend->render_chat(messages, nullptr, nullptr, true), false);
  EXPECT_TRUE(r1_frontend->prompt_opens_reasoning(r1_prompt));
  ParserOptions r1_options;
  r1_options.prompt_opened_reasoning = r1_frontend->prompt_opens_reasoning(r1_prompt);
  Parsed r1_parsed = parse(*r1_frontend, r1_options, "Let me think.\n</think>\n\nAnswer.", 3);
  EXPECT_EQ(r1_parsed.reasoning, "Let me think.");
  EXPECT_EQ(r1_parsed.content, "Answer.");
  EXPECT_FALSE(demo().prompt_opens_reasoning(demo().encode("<think>\n", false)));  // no reasoning template
}

TEST(TextFrontend, Qwen3ReasoningAndToolCallsAtEverySplit) {
  const Frontend& frontend = qwen3();
  std::string output =
      "<think>\nI should call the tool.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>";
  for (size_t piece : {0, 1, 2, 3, 5, 7, 13}) {
    Parsed parsed = parse(frontend, tool_options(), output, piece);
    EXPECT_EQ(parsed.reasoning, "I should call the tool.") << piece;
    EXPECT_EQ(parsed.content.find("<tool_call>"), std::string::npos) << piece;
    EXPECT_NE(parsed.content.find("Let me check."), std::string::npos) << piece;
    ASSERT_EQ(parsed.calls.size(), 1u) << piece;
    EXPECT_EQ(parsed.calls[0].first, "get_weather");
    EXPECT_EQ(json::parse(parsed.calls[0].second), json::parse(R"({"city": "Paris", "days": 2})"));
    EXPECT_EQ(parsed.n_unbalanced, 0);
  }
  // Without declared tools the markup stays content.
  ParserOptions no_tools;
  Parsed plain = parse(frontend, no_tools, output, 3);
  EXPECT_TRUE(plain.calls.empty());
  EXPECT_NE(plain.content.find("<tool_call>"), std::string::npos);
  EXPECT_EQ(plain.reasoning, "I should call the tool.");
  // Reasoning parsing can be turned off.
  ParserOptions raw;
  raw.parse_reasoning = false;
  EXPECT_NE(parse(frontend, raw, output).content.find("<think>"), std::string::npos);
}

TEST(TextFrontend, ReasoningOpenedByThePrompt) {
  const Frontend& frontend = qwen3();
  for (size_t piece : {0, 1, 4}) {
    Parsed parsed = parse(frontend, tool_options(true), "step one\nstep two\n</think>\n\nThe answer.", piece);
    EXPECT_EQ(parsed.reasoning, "step one\nstep two") << piece;
    EXPECT_EQ(parsed.content, "The answer.") << piece;
  }
  // Not told: the same text is content up to a literal </think>.
  Parsed untold = parse(frontend, tool_options(false), "step one\n</think>\n\nThe answer.");
  EXPECT_EQ(untold.reasoning, "");
  // The end tag never comes: everything is reasoning.
  Parsed unfinished = parse(frontend, tool_options(true), "thinking forever <tool_call>{\"name\": \"x\"", 2);
  EXPECT_EQ(unfinished.content, "");
  EXPECT_TRUE(unfinished.calls.empty());
}

TEST(TextFrontend, HostileModelOutputNeverBreaksTheParser) {
  const Frontend& frontend = qwen3();
  const std::vector<std::string> outputs = {
      "<tool_call>\n{not json}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\":",  // cut off
      "<tool_call><tool_call></tool_call></tool_call>",
      "</tool_call></think><think><think>",
      "<think></think><think>second</think>x",
      "\xFF\xFE<tool_call>\x00\x01{\"name\": \"f\"}</tool_call>"s,
      "<tool_call>\n[1, 2, 3]\n</tool_call>",
      "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",
      std::string(5000, '<'),
      "<tool_" + std::string(3000, '{') + "</tool_call>",
  };
  for (const auto& output : outputs) {
    for (size_t piece : {0, 1, 3}) {
      Parsed parsed;
      ASSERT_NO_THROW(parsed = parse(frontend, tool_options(), output, piece)) << output.substr(0, 80);
      EXPECT_EQ(parsed.n_unbalanced, 0) << output.substr(0, 80);
      for (const auto& call : parsed.calls) {
        auto arguments = json::parse(call.second, nullptr, false);
        EXPECT_FALSE(arguments.is_discarded()) << "a call with invalid arguments JSON: " << call.second;
      }
      // No text is invented: what comes out is at most what went in.
      size_t n_out = parsed.content.size() + parsed.reasoning.size();
      for (const auto& call : parsed.calls) n_out += call.first.size() + call.second.size();
      EXPECT_LE(n_out, output.size() + 16) << output.substr(0, 80);
    }
  }
}

// Random outputs built from tag fragments, JSON pieces and bytes: the events do not depend on
// how the text is split into deltas, calls are balanced with valid JSON arguments, and text
// without markup passes through unchanged.
TEST(TextFrontend, RandomOutputsParseTheSameAtAnySplit) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "<", "</", "<tool", "think>", "\n", "\n\n", " ",
      "{\"name\": \"f\", \"arguments\": {\"a\": 1}}", "{\"name\": \"g\", \"arguments\": {}}", "{", "}", "\"", ":",
      "hello", "é", "\xF0\x9F\x98", "\x80", "\xFF", "```", "name", "arguments",
      "<tool_call>\n{\"name\": \"h\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>"};
  std::mt19937 random(12345);
  int n_with_calls = 0;
  for (int round = 0; round < 400; ++round) {
    std::string text;
    size_t n_pieces = 1 + random() % 12;
    for (size_t i = 0; i < n_pieces; ++i) text += pieces[random() % pieces.size()];
    for (bool opened : {false, true}) {
      Parsed whole = parse(qwen3(), tool_options(opened), text);
      EXPECT_EQ(whole.n_unbalanced, 0) << text;
      for (const auto& call : whole.calls) EXPECT_FALSE(json::parse(call.second, nullptr, false).is_discarded()) << text;
      n_with_calls += whole.calls.empty() ? 0 : 1;
      for (size_t piece : {1, 2, 5}) {
        Parsed split = parse(qwen3(), tool_options(opened), text, piece);
        EXPECT_EQ(split.content, whole.content) << "split " << piece << ": " << text;
        EXPECT_EQ(split.reasoning, whole.reasoning) << "split " << piece << ": " << text;
        EXPECT_EQ(split.calls, whole.calls) << "split " << piece << ": " << text;
      }
    }
    if (text.find('<') == std::string::npos) {
      EXPECT_EQ(parse(qwen3(), tool_options(), text, 1).content, text);
    }
  }
  EXPECT_GT(n_with_calls, 0);
}

TEST(TextFrontend, DemoUsesHermesToolCallsWithoutReasoning) {
  const Frontend& frontend = demo();
  Parsed parsed = parse(frontend, tool_options(true),
                        "<think>x</think>ok <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", 1);
  EXPECT_EQ(parsed.reasoning, "");  // the ChatML template has no reasoning block
  EXPECT_EQ(parsed.content, "<think>x</think>ok ");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].first, "f");
}

TEST(TextFrontend, ToolFormatFollowsTheModelFamily) {
  // Llama 3: bare JSON with "parameters"; its template writes <|begin_of_text|> itself.
  auto llama = make_text_frontend(fixture_assets("llama3", "LlamaForCausalLM"));
  Parsed llama_parsed = parse(*llama, tool_options(), "{\"name\": \"lookup\", \"parameters\": {\"q\": \"x\"}}", 2);
  ASSERT_EQ(llama_parsed.calls.size(), 1u);
  EXPECT_EQ(llama_parsed.calls[0].first, "lookup");
  EXPECT_EQ(json::parse(llama_parsed.calls[0].second), json::parse(R"({"q": "x"})"));
  EXPECT_FALSE(llama->chat_prompt_needs_special_tokens());
  std::string llama_prompt = llama->render_chat(json::array({{{"role", "user"}, {"content", "Hi"}}}), nullptr, nullptr, true);
  EXPECT_TRUE(llama_prompt.starts_with("<|begin_of_text|>"));

  // DeepSeek V3: its marker tokens.
  auto deepseek = make_text_frontend(fixture_assets("deepseek_v3", "DeepseekV3ForCausalLM"));
  std::string call =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"UTC\"}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  Parsed deepseek_parsed = parse(*deepseek, tool_options(), call, 5);
  ASSERT_EQ(deepseek_parsed.calls.size(), 1u);
  EXPECT_EQ(deepseek_parsed.calls[0].first, "get_time");
  EXPECT_FALSE(deepseek->chat_prompt_needs_special_tokens());
  // The markers survive detokenization with skip_special_tokens.
  auto ids = deepseek->encode(call, false);
  auto detokenizer = deepseek->make_detokenizer(true);
  std::string streamed;
  for (TokenId id : ids) streamed += detokenizer->push(id);
  streamed += detokenizer->flush();
  EXPECT_EQ(parse(*deepseek, tool_options(), streamed).calls.size(), 1u);

  // An architecture with no known tool format and a plain template: the markup is content.
  TextFrontendAssets other = demo_assets();
  other.architecture = "GPTNeoXForCausalLM";
  other.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  auto plain = make_text_frontend(other);
  EXPECT_EQ(parse(*plain, tool_options(), "<tool_call>{\"name\": \"f\"}</tool_call>").content,
            "<tool_call>{\"name\": \"f\"}</tool_call>");
}

TEST(TextFrontend, ChatTemplateAssetWinsOverTheConfig) {
  TextFrontendAssets assets = demo_assets();
  assets.chat_template = "{% if bos_token is defined %}B{% else %}-{% endif %}|{{ eos_token }}|{{ pad_token }}|{{ additional_special_tokens | length }}|"
                         "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ custom }}";
  auto frontend = make_text_frontend(assets);
  json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  // bos_token is null in the demo config: undefined, as transformers leaves it out.
  EXPECT_EQ(frontend->render_chat(messages, nullptr, {{"custom", "!"}}, true),
            "-|<|endoftext|>|<|endoftext|>|2|[user]Hi!");
}

TEST(TextFrontend, SpecialTokensWhenTheTemplateOmitsTheBos) {
  // The Gemma 3 tokenizer prepends <bos>; its own template writes it, so the prompt must not get
  // a second one, while a template that does not write it needs the tokenizer's.
  TextFrontendAssets assets = fixture_assets("gemma3", "Gemma3ForCausalLM");
  auto gemma = make_text_frontend(assets);
  EXPECT_FALSE(gemma->chat_prompt_needs_special_tokens());
  json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  std::string prompt = gemma->render_chat(messages, nullptr, nullptr, true);
  EXPECT_TRUE(prompt.starts_with("<bos>")) << prompt;
  auto ids = gemma->encode(prompt, gemma->chat_prompt_needs_special_tokens());
  EXPECT_EQ(gemma->decode(ids, false), prompt);  // exactly one <bos>
  assets.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  auto custom = make_text_frontend(assets);
  EXPECT_TRUE(custom->chat_prompt_needs_special_tokens());
}

TEST(TextFrontend, BadAssetsFailCleanly) {
  TextFrontendAssets empty;
  EXPECT_THROW(make_text_frontend(empty), Error);
  TextFrontendAssets broken = demo_assets();
  broken.tokenizer_json = "{\"model\": ";
  EXPECT_THROW(make_text_frontend(broken), Error);
  TextFrontendAssets bad_template = demo_assets();
  bad_template.chat_template = "{% for m in messages %}{{ m.content ";
  EXPECT_THROW(make_text_frontend(bad_template), Error);
  TextFrontendAssets raising = demo_assets();
  raising.chat_template = "{{ raise_exception('roles must alternate') }}";
  auto frontend = make_text_frontend(raising);
  EXPECT_THROW(frontend->render_chat(json::array(), nullptr, nullptr, true), Error);
  // No template at all: completions still work, chat says why it cannot.
  TextFrontendAssets no_template = demo_assets();
  auto config = json::parse(no_template.tokenizer_config_json);
  config.erase("chat_template");
  no_template.tokenizer_config_json = config.dump();
  auto bare = make_text_frontend(no_template);
  EXPECT_FALSE(bare->encode("x = 1", false).empty());
  try {
    bare->render_chat(json::array({{{"role", "user"}, {"content", "Hi"}}}), nullptr, nullptr, true);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no chat template"), std::string::npos);
  }
}

TEST(TextFrontend, EosTokenIds) {
  TextFrontendAssets assets = demo_assets();
  EXPECT_EQ(eos_token_ids(assets, demo()), std::vector<TokenId>{0});
  assets.generation_config_json = R"({"eos_token_id": [1, 2, 1]})";
  EXPECT_EQ(eos_token_ids(assets, demo()), (std::vector<TokenId>{1, 2}));
  assets.generation_config_json = R"({"eos_token_id": null})";
  EXPECT_EQ(eos_token_ids(assets, demo()), std::vector<TokenId>{0});  // the tokenizer's eos
  assets.generation_config_json = "";
  EXPECT_EQ(eos_token_ids(assets, demo()), std::vector<TokenId>{0});
  for (const char* bad : {R"({"eos_token_id": 9000000})", R"({"eos_token_id": -1})", R"({"eos_token_id": "2"})",
                          R"({"eos_token_id": [1, 2.5]})", "[1]", "{not json"}) {
    assets.generation_config_json = bad;
    EXPECT_THROW(eos_token_ids(assets, demo()), Error) << bad;
  }
  // Qwen3 without a generation config: <|im_end|> from tokenizer_config.json.
  auto qwen_ids = eos_token_ids(fixture_assets("qwen3", "Qwen3ForCausalLM"), qwen3());
  ASSERT_EQ(qwen_ids.size(), 1u);
  EXPECT_EQ(qwen3().token_text(qwen_ids[0]), "<|im_end|>");
}

TEST(TextFrontend, ConcurrentUseFromManyThreads) {
  const Frontend& frontend = qwen3();
  json messages = json::array({{{"role", "user"}, {"content", "Hello from a thread"}}});
  std::string want_prompt = frontend.render_chat(messages, nullptr, nullptr, true);
  auto want_ids = frontend.encode(want_prompt, false);
  std::atomic<int> n_mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        std::string prompt = frontend.render_chat(messages, nullptr, nullptr, true);
        auto ids = frontend.encode(prompt, false);
        if (prompt != want_prompt || ids != want_ids || frontend.decode(ids, false) != want_prompt) ++n_mismatches;
        Parsed parsed = parse(frontend, tool_options(), "<think>a</think>b", 1);
        if (parsed.reasoning != "a" || parsed.content != "b") ++n_mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(n_mismatches.load(), 0);
}

}  // namespace
}  // namespace flare::server
