// The Qwen3-MoE end-to-end checks (tests/e2e/qwen3moe_sdk.sh) against a running `flare run` of the
// tiny random-weight Qwen3MoeForCausalLM checkpoint, through the unchanged openai and
// @anthropic-ai/sdk clients plus fetch: Qwen's ChatML prompt reaches the model (no BOS, the system
// turn first, a bare "<|im_start|>assistant\n" generation prompt, the empty <think> block only when
// enable_thinking is false), greedy text is the same streamed or not in the chat, completions and
// Anthropic APIs, <|im_end|> and <|endoftext|> stop generation, max_tokens 1 gives one token,
// requests decoded together (batched through the router and the experts) give exactly the text each
// gives alone, a strict tool's calls under tool_choice auto follow its schema (ajv), and malformed requests are 400s in each API's own shape. The weights are random, so
// the text itself is not checked.
// Usage: FLARE_URL=http://127.0.0.1:PORT FLARE_API_KEY=KEY node tests/e2e/lib/qwen3moe_suite.mjs
import assert from "node:assert/strict";

import { Anthropic, OpenAI, anthropicClient, call, check, finish, openaiClient } from "../sdk_clients.mjs";
import { makeAjv } from "./structured_validate.mjs";

const openai = openaiClient();
const anthropic = anthropicClient();
const greedy = { temperature: 0 };
const conversation = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say hi." },
];
// Qwen3's chat template (tests/data/tokenizers/qwen3/tokenizer_config.json): add_bos_token is false
// and there is no bos_token, the system message is its own turn, and the generation prompt is
// "<|im_start|>assistant\n", with "<think>\n\n</think>\n\n" after it only when enable_thinking is false.
const conversationPrompt = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n";
const noThinkingPrompt = conversationPrompt + "<think>\n\n</think>\n\n";
const ENDOFTEXT = 151643;  // bos_token_id in config.json; also an eos in generation_config.json
const IM_START = 151644;
const IM_END = 151645;  // eos_token_id
const THINK = 151667;
const END_THINK = 151668;
const TOOL_CALL = 151657;  // <tool_call>, one special token
const VOCAB = 151936;  // the checkpoint's embedding rows
let model;

// An Anthropic message's text (no block at all when the model stopped at once).
const textOf = (message) => message.content.filter((block) => block.type === "text").map((block) => block.text).join("");

// A chat stream's content and reasoning, concatenated, its usage, and when (performance.now()) its
// first and last text arrived.
async function readChatStream(stream) {
  let content = "";
  let reasoning = "";
  let usage;
  let finishReason;
  let firstAt;
  let lastAt;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      const text = (choice.delta?.content ?? "") + (choice.delta?.reasoning_content ?? "");
      if (text) {
        firstAt ??= performance.now();
        lastAt = performance.now();
      }
      content += choice.delta?.content ?? "";
      reasoning += choice.delta?.reasoning_content ?? "";
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
  }
  return { content, reasoning, usage, finishReason, firstAt, lastAt };
}

await check("models list", async () => {
  const page = await openai.models.list();
  assert.ok(page.data.length >= 1);
  const ids = page.data.map((card) => card.id);
  assert.ok(ids.includes("tiny-qwen3moe"), JSON.stringify(ids));
  model = ids[0];
});
model ??= "tiny-qwen3moe";

await check("chat prompt is Qwen's ChatML with no BOS", async () => {
  const tokenized = await call("/tokenize", { body: { model, messages: conversation, return_token_strs: true } });
  assert.equal(tokenized.status, 200, tokenized.text);
  const { tokens, token_strs: strs } = tokenized.json;
  assert.equal(tokens[0], IM_START, "the prompt starts with <|im_start|>");
  assert.ok(!tokens.includes(ENDOFTEXT), "no <|endoftext|> BOS");
  assert.equal(tokens.filter((id) => id === IM_START).length, 3, JSON.stringify(strs));
  assert.equal(tokens.filter((id) => id === IM_END).length, 2, JSON.stringify(strs));
  assert.ok(!tokens.includes(THINK) && !tokens.includes(END_THINK), "thinking on: no <think> in the prompt");
  assert.ok(strs.includes("<|im_start|>") && strs.includes("<|im_end|>"), JSON.stringify(strs));
  const detokenized = await call("/detokenize", { body: { model, tokens } });
  assert.equal(detokenized.status, 200, detokenized.text);
  assert.equal(detokenized.json.prompt, conversationPrompt);
});

await check("enable_thinking false adds the template's empty <think> block", async () => {
  const tokenized = await call("/tokenize", {
    body: { model, messages: conversation, chat_template_kwargs: { enable_thinking: false } },
  });
  assert.equal(tokenized.status, 200, tokenized.text);
  const { tokens } = tokenized.json;
  assert.equal(tokens.filter((id) => id === THINK).length, 1, JSON.stringify(tokens));
  assert.equal(tokens.filter((id) => id === END_THINK).length, 1, JSON.stringify(tokens));
  const detokenized = await call("/detokenize", { body: { model, tokens } });
  assert.equal(detokenized.status, 200, detokenized.text);
  assert.equal(detokenized.json.prompt, noThinkingPrompt);
});

let chatText;
let chatReasoning;
await check("chat completion", async () => {
  const response = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 16, ...greedy });
  const choice = response.choices[0];
  assert.equal(choice.message.role, "assistant");
  assert.equal(typeof choice.message.content, "string");
  assert.ok(["stop", "length"].includes(choice.finish_reason), choice.finish_reason);
  assert.ok(response.usage.completion_tokens > 0 && response.usage.completion_tokens <= 16);
  const tokenized = await call("/tokenize", { body: { model, messages: conversation } });
  assert.equal(response.usage.prompt_tokens, tokenized.json.count, "the prompt is the template's rendering");
  chatText = choice.message.content;
  chatReasoning = choice.message.reasoning_content ?? "";
  const again = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 16, ...greedy });
  assert.equal(again.choices[0].message.content, chatText, "greedy decoding repeats");
});

await check("chat stream gives the same greedy text", async () => {
  const stream = await openai.chat.completions.create({
    model, messages: conversation, max_tokens: 16, stream: true, stream_options: { include_usage: true }, ...greedy,
  });
  const streamed = await readChatStream(stream);
  assert.equal(streamed.content, chatText);
  assert.equal(streamed.reasoning, chatReasoning);
  assert.ok(streamed.usage && streamed.usage.completion_tokens > 0);
});

await check("<|im_end|> and <|endoftext|> stop generation", async () => {
  for (const id of [IM_END, ENDOFTEXT]) {
    const response = await openai.chat.completions.create({
      model, messages: conversation, max_tokens: 16, logit_bias: { [id]: 100 }, ...greedy,
    });
    const choice = response.choices[0];
    assert.equal(choice.finish_reason, "stop", `token ${id}: ${JSON.stringify(response)}`);
    assert.equal(choice.message.content, "", `token ${id}`);
    assert.equal(response.usage.completion_tokens, 1, `token ${id}`);
  }
});

// <tool_call> biased up makes the random model open calls; a strict tool's grammar then writes
// each call it opens (name, arguments following the schema, </tool_call>) and lets go. The same
// request without "strict" gives no valid call at all, so the grammar is what made them.
await check("a strict tool under tool_choice auto: every call the model begins follows the schema", async () => {
  const ajv = makeAjv();
  const parameters = {
    type: "object", additionalProperties: false, required: ["city", "days"],
    properties: { city: { type: "string", maxLength: 8 }, days: { type: "integer", minimum: 1, maximum: 7 } },
  };
  const validate = ajv.compile(parameters);
  const request = (strict, seed) => ({
    model, messages: [{ role: "user", content: "Weather?" }], max_tokens: 96, temperature: 1, seed,
    tools: [{ type: "function", function: { name: "get_weather", strict, parameters } }], logit_bias: { [TOOL_CALL]: 100 },
  });
  for (const seed of [1, 2]) {
    const choice = (await openai.chat.completions.create(request(true, seed))).choices[0];
    const calls = choice.message.tool_calls ?? [];
    assert.ok(calls.length >= 1, JSON.stringify(choice));
    for (const { function: fn } of calls) {
      assert.equal(fn.name, "get_weather");
      assert.ok(validate(JSON.parse(fn.arguments)), `${fn.arguments}: ${ajv.errorsText(validate.errors)}`);
    }
    const loose = (await openai.chat.completions.create(request(false, seed))).choices[0];
    assert.equal((loose.message.tool_calls ?? []).length, 0, JSON.stringify(loose));
  }
});

await check("max_tokens 1 gives one token", async () => {
  const response = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 1, ...greedy });
  assert.equal(response.usage.completion_tokens, 1, JSON.stringify(response));
  assert.ok(["stop", "length"].includes(response.choices[0].finish_reason), response.choices[0].finish_reason);
  const stream = await openai.chat.completions.create({
    model, messages: conversation, max_tokens: 1, stream: true, stream_options: { include_usage: true }, ...greedy,
  });
  const streamed = await readChatStream(stream);
  assert.equal(streamed.usage?.completion_tokens, 1);
  assert.equal(streamed.content, response.choices[0].message.content ?? "");
  assert.equal(streamed.finishReason, response.choices[0].finish_reason);
  const message = await anthropic.messages.create({
    model, messages: [{ role: "user", content: "Say hi." }], max_tokens: 1, temperature: 0,
  });
  assert.equal(message.usage.output_tokens, 1, JSON.stringify(message));
  assert.ok(["max_tokens", "end_turn"].includes(message.stop_reason), message.stop_reason);
  const completion = await openai.completions.create({ model, prompt: "Once upon a time", max_tokens: 1, ...greedy });
  assert.equal(completion.usage.completion_tokens, 1);
});

await check("anthropic message with system", async () => {
  const request = { model, system: "You are terse.", messages: [{ role: "user", content: "Say hi." }], max_tokens: 16, temperature: 0 };
  const message = await anthropic.messages.create(request);
  assert.equal(message.type, "message");
  assert.equal(message.role, "assistant");
  assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason), message.stop_reason);
  const tokenized = await call("/tokenize", { body: { model, messages: conversation } });
  // Anthropic's input_tokens leaves out prompt tokens read from the prefix cache (the chat requests
  // above rendered the same prompt).
  const prompt_tokens = message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0);
  assert.equal(prompt_tokens, tokenized.json.count, "the system text is the system turn");
  assert.ok(message.usage.output_tokens > 0 && message.usage.output_tokens <= 16);
  const streamed = await anthropic.messages.stream(request).finalMessage();
  assert.equal(textOf(streamed), textOf(message));
  assert.equal(streamed.stop_reason, message.stop_reason);
  assert.equal(streamed.usage.output_tokens, message.usage.output_tokens);
  assert.equal(textOf(message), chatText, "the same prompt and greedy decoding as the chat API");
});

await check("responses with instructions", async () => {
  const response = await openai.responses.create({ model, instructions: "You are terse.", input: "Say hi.", max_output_tokens: 16, ...greedy });
  assert.ok(response.status === "completed" || response.status === "incomplete", response.status);
  assert.equal(response.output_text, chatText, "instructions are the system turn");
});

await check("completions with a raw prompt, streamed and not", async () => {
  const request = { model, prompt: "Once upon a time", max_tokens: 12, ...greedy };
  const response = await openai.completions.create(request);
  assert.equal(typeof response.choices[0].text, "string");
  assert.ok(response.usage.completion_tokens > 0 && response.usage.completion_tokens <= 12);
  const tokenized = await call("/tokenize", { body: { model, prompt: "Once upon a time" } });
  assert.equal(response.usage.prompt_tokens, tokenized.json.count);
  assert.ok(!tokenized.json.tokens.includes(ENDOFTEXT), "no BOS is added to a raw prompt");
  let text = "";
  for await (const chunk of await openai.completions.create({ ...request, stream: true })) {
    for (const choice of chunk.choices) text += choice.text ?? "";
  }
  assert.equal(text, response.choices[0].text);
});

// Each request alone, then all at once: decoded in one batch the rows go through the router, the
// top-k choice and the experts together, and each must still get exactly its own greedy text.
await check("concurrent requests equal their sequential greedy answers", async () => {
  const questions = ["Say hi.", "Name three colors of the rainbow, please.", "What is 2 + 2?", "Write one word about the sea, then stop."];
  const request = (content) => ({ model, messages: [{ role: "user", content }], max_tokens: 24, ...greedy });
  const sequential = [];
  for (const question of questions) {
    const response = await openai.chat.completions.create(request(question));
    sequential.push({ text: response.choices[0].message.content, tokens: response.usage.completion_tokens });
  }
  for (let round = 0; round < 2; ++round) {
    const together = await Promise.all(questions.map((question) => openai.chat.completions.create(request(question))));
    together.forEach((response, i) => {
      assert.equal(response.choices[0].message.content, sequential[i].text, `round ${round}, request ${i} (${questions[i]})`);
      assert.equal(response.usage.completion_tokens, sequential[i].tokens, `round ${round}, request ${i}`);
    });
  }
  // Streams at once, too, each against its non-streamed answer; their tokens arrive interleaved
  // (every stream had its first token before any had its last), so they were decoded together.
  const streams = await Promise.all(questions.map((question) =>
    openai.chat.completions.create({ ...request(question), stream: true }).then(readChatStream)));
  streams.forEach((streamed, i) => assert.equal(streamed.content, sequential[i].text, `stream ${i} (${questions[i]})`));
  const long = streams.filter((_, i) => sequential[i].tokens >= 8);
  assert.ok(long.length >= 2, "at least two answers run 8 tokens or more");
  const lastFirst = Math.max(...long.map((s) => s.firstAt)), firstLast = Math.min(...long.map((s) => s.lastAt));
  assert.ok(lastFirst < firstLast, `the streams did not overlap: ${JSON.stringify(long.map((s) => [s.firstAt, s.lastAt]))}`);
});

await check("malformed requests are 400s in each API's shape", async () => {
  await assert.rejects(openai.chat.completions.create({ model, messages: "Say hi.", max_tokens: 4 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.status, 400);
    assert.equal(error.type, "invalid_request_error");
    assert.equal(error.param, "messages");
    return true;
  });
  await assert.rejects(openai.chat.completions.create({ model, messages: conversation, max_tokens: -1 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.type, "invalid_request_error");
    assert.equal(error.param, "max_tokens", JSON.stringify(error.error));
    return true;
  });
  const broken = await call("/v1/chat/completions", { body: '{"model": "x", "messages": [' });
  assert.equal(broken.status, 400, broken.text);
  assert.equal(broken.json?.error?.type, "invalid_request_error", broken.text);
  await assert.rejects(anthropic.messages.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 0 }), (error) => {
    assert.ok(error instanceof Anthropic.BadRequestError, String(error));
    assert.equal(error.status, 400);
    assert.equal(error.error?.type, "error", JSON.stringify(error.error));
    assert.equal(error.error?.error?.type, "invalid_request_error", JSON.stringify(error.error));
    return true;
  });
  const anthropicBroken = await call("/v1/messages", {
    headers: { "anthropic-version": "2023-06-01" },
    body: { model, max_tokens: 4, messages: [{ role: "user" }] },
  });
  assert.equal(anthropicBroken.status, 400, anthropicBroken.text);
  assert.equal(anthropicBroken.json?.type, "error", anthropicBroken.text);
  assert.equal(anthropicBroken.json?.error?.type, "invalid_request_error", anthropicBroken.text);
});

await check("a token id past the embedding is a 400, and the server keeps serving", async () => {
  const ids = await call("/v1/completions", { body: { model, prompt: [IM_START, VOCAB], max_tokens: 4 } });
  assert.equal(ids.status, 400, ids.text);
  assert.equal(ids.json?.error?.type, "invalid_request_error", ids.text);
  const health = await call("/health", { method: "GET" });
  assert.equal(health.status, 200);
});

await check("server still serves and nothing is left running", async () => {
  const response = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 16, ...greedy });
  assert.equal(response.choices[0].message.content, chatText);
  let running;
  for (let i = 0; i < 50; i += 1) {
    const metrics = await call("/metrics", { method: "GET" });
    running = /^flare_num_requests_running\S*\s+(\S+)$/m.exec(metrics.text)?.[1];
    if (running === "0") break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(running, "0");
});

finish();
