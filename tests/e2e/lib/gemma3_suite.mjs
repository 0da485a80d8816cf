// The Gemma 3 end-to-end checks (tests/e2e/gemma3_sdk.sh) against a running `flare run` of the
// tiny random-weight Gemma 3 checkpoint, through the unchanged openai and @anthropic-ai/sdk
// clients plus fetch: the Gemma prompt format reaches the model (<bos>, <start_of_turn>, the system
// text folded into the first user turn), greedy text is the same streamed or not, <end_of_turn> and
// <eos> stop generation, the chat template's role-order errors are 400s in each API's own shape, and
// a prompt token the tokenizer has but the 262144-row embedding lacks (<image_soft_token>) is a 400
// too. The weights are random, so the text itself is not checked.
// Usage: FLARE_URL=http://127.0.0.1:PORT FLARE_API_KEY=KEY node tests/e2e/lib/gemma3_suite.mjs
import assert from "node:assert/strict";

import { Anthropic, OpenAI, anthropicClient, call, check, finish, openaiClient } from "../sdk_clients.mjs";

const openai = openaiClient();
const anthropic = anthropicClient();
const greedy = { temperature: 0 };
const alternation = "Conversation roles must alternate user/assistant/user/assistant/...";
const conversation = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say hi." },
];
const conversationPrompt = "<bos><start_of_turn>user\nYou are terse.\n\nSay hi.<end_of_turn>\n<start_of_turn>model\n";
const END_OF_TURN = 106;
const EOS = 1;
let model;

// An Anthropic message's text (no block at all when the model stopped at once).
const textOf = (message) => message.content.filter((block) => block.type === "text").map((block) => block.text).join("");

await check("models list", async () => {
  const page = await openai.models.list();
  assert.ok(page.data.length >= 1);
  model = page.data[0].id;
});
model ??= "tiny-gemma3";

await check("chat prompt is Gemma's turn format with one <bos>", async () => {
  const tokenized = await call("/tokenize", { body: { model, messages: conversation, return_token_strs: true } });
  assert.equal(tokenized.status, 200, tokenized.text);
  const { tokens, token_strs: strs } = tokenized.json;
  assert.equal(tokens[0], 2, "the prompt starts with <bos> (id 2)");
  assert.equal(tokens.filter((id) => id === 2).length, 1, "exactly one <bos>");
  assert.ok(strs.includes("<start_of_turn>") && strs.includes("<end_of_turn>"), JSON.stringify(strs));
  const detokenized = await call("/detokenize", { body: { model, tokens } });
  assert.equal(detokenized.status, 200, detokenized.text);
  assert.equal(detokenized.json.prompt, conversationPrompt);
});

let chatText;
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
});

await check("chat stream gives the same greedy text", async () => {
  const stream = await openai.chat.completions.create({
    model, messages: conversation, max_tokens: 16, stream: true, stream_options: { include_usage: true }, ...greedy,
  });
  let text = "";
  let usage;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) text += choice.delta?.content ?? "";
  }
  assert.equal(text, chatText);
  assert.ok(usage && usage.completion_tokens > 0);
});

await check("<end_of_turn> and <eos> stop generation", async () => {
  for (const id of [END_OF_TURN, EOS]) {
    const response = await openai.chat.completions.create({
      model, messages: conversation, max_tokens: 16, logit_bias: { [id]: 100 }, ...greedy,
    });
    const choice = response.choices[0];
    assert.equal(choice.finish_reason, "stop", `token ${id}: ${JSON.stringify(response)}`);
    assert.equal(choice.message.content, "", `token ${id}`);
    assert.equal(response.usage.completion_tokens, 1, `token ${id}`);
  }
});

await check("chat: roles that do not alternate are a 400 with the template's text", async () => {
  for (const messages of [
    [{ role: "user", content: "a" }, { role: "user", content: "b" }],
    [{ role: "assistant", content: "a" }, { role: "user", content: "b" }],
    [{ role: "system", content: "s" }, { role: "system", content: "t" }, { role: "user", content: "b" }],
  ]) {
    for (const stream of [false, true]) {
      await assert.rejects(openai.chat.completions.create({ model, messages, max_tokens: 4, stream }), (error) => {
        assert.ok(error instanceof OpenAI.BadRequestError, String(error));
        assert.equal(error.status, 400);
        assert.equal(error.type, "invalid_request_error");
        assert.equal(error.param, "messages");
        assert.ok(error.message.includes(alternation), error.message);
        return true;
      });
    }
  }
});

await check("anthropic message with system", async () => {
  const request = { model, system: "You are terse.", messages: [{ role: "user", content: "Say hi." }], max_tokens: 16, temperature: 0 };
  const message = await anthropic.messages.create(request);
  assert.equal(message.type, "message");
  assert.ok(message.content.every((block) => block.type === "text"), JSON.stringify(message.content));
  assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason), message.stop_reason);
  const tokenized = await call("/tokenize", { body: { model, messages: conversation } });
  // Anthropic's input_tokens leaves out prompt tokens read from the prefix cache (the chat request
  // above rendered the same prompt).
  const prompt_tokens = message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0);
  assert.equal(prompt_tokens, tokenized.json.count, "the system text went into the first user turn");
  const streamed = await anthropic.messages.stream(request).finalMessage();
  assert.equal(textOf(streamed), textOf(message));
  assert.equal(textOf(message), chatText, "the same prompt and greedy decoding as the chat API");
});

await check("anthropic: roles that do not alternate are a 400 in Anthropic's shape", async () => {
  for (const messages of [
    [{ role: "user", content: "a" }, { role: "user", content: "b" }],
    [{ role: "assistant", content: "a" }, { role: "user", content: "b" }],
  ]) {
    await assert.rejects(anthropic.messages.create({ model, messages, max_tokens: 4 }), (error) => {
      assert.ok(error instanceof Anthropic.BadRequestError, String(error));
      assert.equal(error.status, 400);
      assert.equal(error.error?.type, "error", JSON.stringify(error.error));
      assert.equal(error.error?.error?.type, "invalid_request_error");
      assert.ok(error.error?.error?.message.includes(alternation), JSON.stringify(error.error));
      return true;
    });
  }
});

await check("responses with instructions", async () => {
  const response = await openai.responses.create({ model, instructions: "You are terse.", input: "Say hi.", max_output_tokens: 16, ...greedy });
  assert.equal(response.status === "completed" || response.status === "incomplete", true, response.status);
  assert.equal(response.output_text, chatText, "instructions are the system turn");
  await assert.rejects(
    openai.responses.create({ model, input: [{ role: "user", content: "a" }, { role: "user", content: "b" }], max_output_tokens: 4 }),
    (error) => error instanceof OpenAI.BadRequestError && error.param === "input" && error.message.includes(alternation));
});

await check("completions with a raw prompt", async () => {
  const response = await openai.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, ...greedy });
  assert.equal(typeof response.choices[0].text, "string");
  assert.ok(response.usage.completion_tokens > 0);
});

// The tokenizer has 262145 tokens; google/gemma-3-1b-it's embedding (and this checkpoint's) has
// 262144 rows, so <image_soft_token> (262144) in a message is a token the model cannot read.
await check("a token past the model's vocabulary is a 400, and the server keeps serving", async () => {
  const chat = await call("/v1/chat/completions", {
    body: { model, messages: [{ role: "user", content: "look <image_soft_token> here" }], max_tokens: 4 },
  });
  assert.equal(chat.status, 400, chat.text);
  assert.equal(chat.json?.error?.type, "invalid_request_error", chat.text);
  const anthropicChat = await call("/v1/messages", {
    headers: { "anthropic-version": "2023-06-01" },
    body: { model, max_tokens: 4, stream: true, messages: [{ role: "user", content: "<image_soft_token>" }] },
  });
  assert.equal(anthropicChat.status, 400, anthropicChat.text);
  assert.equal(anthropicChat.json?.type, "error", anthropicChat.text);
  const ids = await call("/v1/completions", { body: { model, prompt: [2, 262144], max_tokens: 4 } });
  assert.equal(ids.status, 400, ids.text);
  const health = await call("/health", { method: "GET" });
  assert.equal(health.status, 200);
});

await check("server still serves and nothing is left running", async () => {
  const response = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 4, ...greedy });
  assert.equal(typeof response.choices[0].message.content, "string");
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
