// End-to-end API suite against a running `flare run`, driven by the unchanged official SDKs
// (openai, @anthropic-ai/sdk) plus fetch for the non-SDK routes and malformed requests.
// Covers chat completions, completions, Anthropic messages, Responses, models, tokenize,
// error cases, and checks the server still serves afterwards with no request left running.
// Usage: FLARE_URL=http://127.0.0.1:PORT FLARE_API_KEY=KEY node tests/e2e/sdk_suite.mjs
import assert from "node:assert/strict";

import { Anthropic, OpenAI, anthropicClient, apiKey, baseUrl, call, check, finish, openaiClient } from "./sdk_clients.mjs";

const openai = openaiClient();
const anthropic = anthropicClient();
const userMessages = [
  { role: "system", content: "You write Python." },
  { role: "user", content: "def fibonacci(n):" },
];
const codePrompt = "import os\n\ndef read_lines(path):\n";
let model;

// Greedy output is deterministic: the same request gives the same text.
const greedy = { temperature: 0 };

// A stop string taken from the middle of `text` and the content expected before it.
function stopFrom(text) {
  for (let at = Math.floor(text.length / 3); at + 2 < text.length; at += 1) {
    const stop = text.slice(at, at + 2);
    if (stop.trim().length === 2) return { stop, before: text.slice(0, text.indexOf(stop)) };
  }
  return undefined;
}

await check("models list and card", async () => {
  const page = await openai.models.list();
  assert.ok(page.data.length >= 1);
  model = page.data[0].id;
  assert.equal(page.data[0].object, "model");
  const card = await openai.models.retrieve(model);
  assert.equal(card.id, model);
});
model ??= "demo";

let chatText;
await check("chat completion", async () => {
  const response = await openai.chat.completions.create({ model, messages: userMessages, max_tokens: 24, ...greedy });
  assert.equal(response.object, "chat.completion");
  assert.ok(response.id.startsWith("chatcmpl-"));
  assert.equal(response.model, model);
  assert.equal(response.choices.length, 1);
  const choice = response.choices[0];
  assert.equal(choice.message.role, "assistant");
  assert.equal(typeof choice.message.content, "string");
  assert.ok(["stop", "length"].includes(choice.finish_reason), choice.finish_reason);
  assert.ok(response.usage.prompt_tokens > 0);
  assert.ok(response.usage.completion_tokens > 0 && response.usage.completion_tokens <= 24);
  assert.equal(response.usage.total_tokens, response.usage.prompt_tokens + response.usage.completion_tokens);
  chatText = choice.message.content;
  assert.ok(chatText.length > 0, "empty completion");
});

await check("chat completion stream with include_usage", async () => {
  const stream = await openai.chat.completions.create({
    model, messages: userMessages, max_tokens: 24, stream: true, stream_options: { include_usage: true }, ...greedy,
  });
  let text = "";
  let finishReason;
  let usage;
  let nChunks = 0;
  for await (const chunk of stream) {
    nChunks += 1;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.delta?.content ?? "";
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
  }
  assert.ok(nChunks >= 2);
  assert.ok(["stop", "length"].includes(finishReason));
  assert.ok(usage && usage.completion_tokens > 0 && usage.prompt_tokens > 0);
  assert.equal(text, chatText, "streamed greedy text differs from the non-streamed one");
});

await check("chat n=2", async () => {
  const response = await openai.chat.completions.create({ model, messages: userMessages, max_tokens: 8, n: 2, temperature: 0.9, seed: 3 });
  assert.equal(response.choices.length, 2);
  assert.deepEqual(response.choices.map((c) => c.index).sort(), [0, 1]);
  for (const choice of response.choices) assert.equal(typeof choice.message.content, "string");
});

await check("chat logprobs and top_logprobs", async () => {
  const response = await openai.chat.completions.create({
    model, messages: userMessages, max_tokens: 6, logprobs: true, top_logprobs: 3, ...greedy,
  });
  const content = response.choices[0].logprobs.content;
  assert.equal(content.length, response.usage.completion_tokens);
  for (const entry of content) {
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs.length, 3);
    for (let i = 1; i < 3; i += 1) assert.ok(entry.top_logprobs[i - 1].logprob >= entry.top_logprobs[i].logprob);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-3, JSON.stringify(entry));
    assert.ok(Array.isArray(entry.bytes));
  }
});

await check("chat seed gives the same text twice", async () => {
  const request = { model, messages: userMessages, max_tokens: 24, temperature: 1.0, top_p: 1.0, seed: 1234 };
  const first = await openai.chat.completions.create(request);
  const second = await openai.chat.completions.create(request);
  assert.equal(first.choices[0].message.content, second.choices[0].message.content);
});

await check("chat stop string", async () => {
  const stop = stopFrom(chatText);
  assert.ok(stop, `no usable stop string in ${JSON.stringify(chatText)}`);
  const response = await openai.chat.completions.create({ model, messages: userMessages, max_tokens: 24, stop: [stop.stop], ...greedy });
  assert.equal(response.choices[0].finish_reason, "stop");
  assert.equal(response.choices[0].message.content, stop.before);
});

await check("chat max_tokens", async () => {
  const response = await openai.chat.completions.create({ model, messages: userMessages, max_tokens: 2, ...greedy });
  assert.ok(response.usage.completion_tokens <= 2);
  if (response.usage.completion_tokens === 2) assert.equal(response.choices[0].finish_reason, "length");
});

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

await check("chat with tools declared", async () => {
  const response = await openai.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weatherTool], tool_choice: "auto", max_tokens: 16,
  });
  const choice = response.choices[0];
  assert.ok(["stop", "length", "tool_calls"].includes(choice.finish_reason));
  assert.ok(typeof choice.message.content === "string" || Array.isArray(choice.message.tool_calls));
  const stream = await openai.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather in Paris?" }], tools: [weatherTool], max_tokens: 16, stream: true,
  });
  let sawFinish = false;
  for await (const chunk of stream) sawFinish ||= chunk.choices.some((c) => c.finish_reason);
  assert.ok(sawFinish);
});

await check("chat history with tool calls and results renders", async () => {
  const response = await openai.chat.completions.create({
    model,
    max_tokens: 4,
    tools: [weatherTool],
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "18 C, sunny" },
    ],
  });
  assert.equal(response.choices.length, 1);
});

// tool_choice "required" / named is enforced by constrained decoding: whatever the weights, the
// answer is one call of an allowed function with JSON-object arguments, streamed or not.
const timeTool = {
  type: "function",
  function: { name: "get_time", description: "Current time in a zone", parameters: { type: "object", properties: { zone: { type: "string" } } } },
};
const toolMessages = [{ role: "user", content: "Weather in Paris?" }];

function assertCall(name, argumentsText, allowed) {
  assert.ok(allowed.includes(name), `called ${name}`);
  const parsed = JSON.parse(argumentsText);
  assert.equal(typeof parsed, "object");
  assert.ok(parsed !== null && !Array.isArray(parsed), argumentsText);
}

await check("chat tool_choice required and named are enforced", async () => {
  for (const temperature of [0, 1]) {
    const response = await openai.chat.completions.create({
      model, messages: toolMessages, tools: [weatherTool, timeTool], tool_choice: "required", max_tokens: 48, temperature, seed: 7,
    });
    const choice = response.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.tool_calls.length, 1);
    assertCall(choice.message.tool_calls[0].function.name, choice.message.tool_calls[0].function.arguments, ["get_weather", "get_time"]);
  }
  const named = await openai.chat.completions.create({
    model, messages: toolMessages, tools: [weatherTool, timeTool], tool_choice: { type: "function", function: { name: "get_time" } },
    max_tokens: 40, n: 2, temperature: 1,
  });
  assert.equal(named.choices.length, 2);
  for (const choice of named.choices) {
    assert.equal(choice.finish_reason, "tool_calls");
    assertCall(choice.message.tool_calls[0].function.name, choice.message.tool_calls[0].function.arguments, ["get_time"]);
  }
  // Streaming: the deltas assemble one call; the finish chunk says tool_calls.
  const stream = await openai.chat.completions.create({
    model, messages: toolMessages, tools: [weatherTool, timeTool], tool_choice: { type: "function", function: { name: "get_weather" } },
    max_tokens: 40, temperature: 1, stream: true,
  });
  let name = "";
  let args = "";
  let finishReason;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      for (const call of choice.delta.tool_calls ?? []) {
        name += call.function?.name ?? "";
        args += call.function?.arguments ?? "";
      }
      finishReason ??= choice.finish_reason ?? undefined;
    }
  }
  assert.equal(finishReason, "tool_calls");
  assertCall(name, args, ["get_weather"]);
  // Too few tokens for any call is a 400 naming max_tokens.
  const tooShort = await call("/v1/chat/completions", {
    body: { model, messages: toolMessages, tools: [weatherTool], tool_choice: "required", max_tokens: 3 },
  });
  assert.equal(tooShort.status, 400, tooShort.text);
  assert.equal(tooShort.json.error.param, "max_tokens");
});

// The arguments follow the function's parameters schema: exactly its (all required) keys, each of
// its type, whatever the weights.
await check("chat named tool call arguments follow the parameters schema", async () => {
  const forecastTool = {
    type: "function",
    function: {
      name: "get_forecast",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string" }, days: { type: "integer" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] },
          hourly: { type: "boolean" }, where: { type: "object", properties: { lat: { type: "number" } }, required: ["lat"] },
        },
        required: ["city", "days", "unit", "hourly", "where"],
      },
    },
  };
  const response = await openai.chat.completions.create({
    model, messages: toolMessages, tools: [weatherTool, forecastTool], tool_choice: { type: "function", function: { name: "get_forecast" } },
    max_tokens: 120, n: 3, temperature: 1,
  });
  for (const choice of response.choices) {
    assert.equal(choice.finish_reason, "tool_calls");
    const text = choice.message.tool_calls[0].function.arguments;
    const args = JSON.parse(text);
    assert.deepEqual(Object.keys(args).sort(), ["city", "days", "hourly", "unit", "where"], text);
    assert.equal(typeof args.city, "string", text);
    assert.ok(Number.isInteger(args.days), text);
    assert.ok(["celsius", "fahrenheit"].includes(args.unit), text);
    assert.equal(typeof args.hourly, "boolean", text);
    assert.deepEqual(Object.keys(args.where), ["lat"], text);
    assert.equal(typeof args.where.lat, "number", text);
  }
});

await check("anthropic tool_choice any and tool are enforced", async () => {
  const anthropicTools = [weatherTool, timeTool].map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
  const message = await anthropic.messages.create({
    model, messages: toolMessages, tools: anthropicTools, tool_choice: { type: "any" }, max_tokens: 48, temperature: 1,
  });
  assert.equal(message.stop_reason, "tool_use");
  const block = message.content.find((b) => b.type === "tool_use");
  assert.ok(block, JSON.stringify(message.content));
  assert.ok(["get_weather", "get_time"].includes(block.name), block.name);
  assert.equal(typeof block.input, "object");
  const final = await anthropic.messages
    .stream({ model, messages: toolMessages, tools: anthropicTools, tool_choice: { type: "tool", name: "get_time" }, max_tokens: 40, temperature: 1 })
    .finalMessage();
  assert.equal(final.stop_reason, "tool_use");
  const streamed = final.content.find((b) => b.type === "tool_use");
  assert.equal(streamed?.name, "get_time", JSON.stringify(final.content));
  assert.equal(typeof streamed.input, "object");
});

await check("responses tool_choice required is enforced", async () => {
  const responseTools = [weatherTool, timeTool].map((t) => ({ type: "function", name: t.function.name, description: t.function.description, parameters: t.function.parameters }));
  const response = await openai.responses.create({
    model, input: "Weather in Paris?", tools: responseTools, tool_choice: "required", max_output_tokens: 48, temperature: 1,
  });
  const item = response.output.find((o) => o.type === "function_call");
  assert.ok(item, JSON.stringify(response.output));
  assertCall(item.name, item.arguments, ["get_weather", "get_time"]);
  const named = await openai.responses.create({
    model, input: "Weather in Paris?", tools: responseTools, tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 40,
  });
  const namedItem = named.output.find((o) => o.type === "function_call");
  assert.ok(namedItem, JSON.stringify(named.output));
  assertCall(namedItem.name, namedItem.arguments, ["get_weather"]);
});

let completionText;
await check("completion with a string prompt", async () => {
  const response = await openai.completions.create({ model, prompt: codePrompt, max_tokens: 16, ...greedy });
  assert.equal(response.object, "text_completion");
  completionText = response.choices[0].text;
  assert.ok(completionText.length > 0);
  assert.ok(["stop", "length"].includes(response.choices[0].finish_reason));
  assert.ok(response.usage.prompt_tokens > 0);
});

await check("completion with a token-id prompt", async () => {
  const tokenized = await call("/tokenize", { body: { model, prompt: codePrompt } });
  assert.equal(tokenized.status, 200, tokenized.text);
  const response = await openai.completions.create({ model, prompt: tokenized.json.tokens, max_tokens: 16, ...greedy });
  assert.equal(response.choices[0].text, completionText);
  assert.equal(response.usage.prompt_tokens, tokenized.json.count);
});

await check("completion echo and logprobs", async () => {
  const response = await openai.completions.create({ model, prompt: codePrompt, max_tokens: 4, echo: true, logprobs: 2, ...greedy });
  const choice = response.choices[0];
  assert.ok(choice.text.startsWith(codePrompt), JSON.stringify(choice.text));
  assert.equal(choice.logprobs.tokens.length, choice.logprobs.token_logprobs.length);
  assert.equal(choice.logprobs.tokens.length, choice.logprobs.text_offset.length);
  assert.ok(choice.logprobs.tokens.length >= response.usage.completion_tokens);
  const generated = choice.logprobs.top_logprobs.slice(-response.usage.completion_tokens);
  for (const top of generated) assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 2);
});

await check("completion stream", async () => {
  const stream = await openai.completions.create({ model, prompt: codePrompt, max_tokens: 16, stream: true, ...greedy });
  let text = "";
  let finishReason;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      text += choice.text;
      finishReason ??= choice.finish_reason ?? undefined;
    }
  }
  assert.equal(text, completionText);
  assert.ok(["stop", "length"].includes(finishReason));
});

let messageText;
await check("anthropic message with system", async () => {
  const message = await anthropic.messages.create({
    model, system: "You write Python.", messages: [{ role: "user", content: "def fibonacci(n):" }], max_tokens: 24, ...greedy,
  });
  assert.equal(message.type, "message");
  assert.equal(message.role, "assistant");
  assert.equal(message.content[0].type, "text");
  assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason), message.stop_reason);
  assert.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0);
  messageText = message.content[0].text;
});

await check("anthropic streaming event sequence", async () => {
  const stream = await anthropic.messages.create({
    model, system: "You write Python.", messages: [{ role: "user", content: "def fibonacci(n):" }], max_tokens: 24, stream: true, ...greedy,
  });
  const types = [];
  let text = "";
  for await (const event of stream) {
    if (event.type !== "ping") types.push(event.type);
    if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
  }
  assert.equal(types[0], "message_start");
  assert.equal(types.at(-1), "message_stop");
  assert.equal(types.at(-2), "message_delta");
  assert.equal(types[1], "content_block_start");
  assert.equal(types.at(-3), "content_block_stop");
  assert.ok(types.slice(2, -3).every((t) => t === "content_block_delta"), types.join(","));
  assert.equal(text, messageText);
  // The SDK's stream helper assembles the same message.
  const final = await anthropic.messages
    .stream({ model, system: "You write Python.", messages: [{ role: "user", content: "def fibonacci(n):" }], max_tokens: 24, ...greedy })
    .finalMessage();
  assert.equal(final.content[0].text, messageText);
});

await check("anthropic stop_sequences", async () => {
  const stop = stopFrom(messageText);
  assert.ok(stop, `no usable stop string in ${JSON.stringify(messageText)}`);
  const message = await anthropic.messages.create({
    model, system: "You write Python.", messages: [{ role: "user", content: "def fibonacci(n):" }], max_tokens: 24,
    stop_sequences: [stop.stop], ...greedy,
  });
  assert.equal(message.stop_reason, "stop_sequence");
  assert.equal(message.stop_sequence, stop.stop);
  assert.equal(message.content[0]?.text ?? "", stop.before);
});

await check("api key required (x-api-key and bearer)", async () => {
  if (!apiKey) return;
  await assert.rejects(anthropicClient("wrong-key").messages.create({ model, messages: [{ role: "user", content: "x" }], max_tokens: 2 }),
    (error) => error instanceof Anthropic.AuthenticationError && error.status === 401);
  await assert.rejects(openaiClient("wrong-key").models.list(), (error) => error instanceof OpenAI.AuthenticationError);
  const anonymous = await call("/v1/messages", { key: "", body: { model, messages: [{ role: "user", content: "x" }], max_tokens: 2 } });
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.json.type, "error");
  const viaHeader = await fetch(`${baseUrl}/v1/models`, { headers: { "x-api-key": apiKey } });
  assert.equal(viaHeader.status, 200);
});

let responseText;
await check("responses with a string input", async () => {
  const response = await openai.responses.create({ model, input: "def fibonacci(n):", max_output_tokens: 16, ...greedy });
  assert.equal(response.object, "response");
  assert.ok(["completed", "incomplete"].includes(response.status), response.status);
  responseText = response.output_text;
  assert.equal(typeof responseText, "string");
  assert.ok(response.usage.input_tokens > 0 && response.usage.output_tokens > 0);
});

await check("responses stream", async () => {
  const stream = await openai.responses.create({ model, input: "def fibonacci(n):", max_output_tokens: 16, stream: true, ...greedy });
  const types = [];
  let text = "";
  let final;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === "response.output_text.delta") text += event.delta;
    if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
  }
  assert.equal(types[0], "response.created");
  assert.ok(["response.completed", "response.incomplete"].includes(types.at(-1)), types.at(-1));
  assert.equal(text, responseText);
  assert.equal(final.output_text ?? final.output?.[0]?.content?.[0]?.text, responseText);
});

await check("tokenize and detokenize", async () => {
  const tokenized = await call("/tokenize", { body: { model, prompt: "héllo wörld 😀", return_token_strs: true } });
  assert.equal(tokenized.status, 200, tokenized.text);
  assert.equal(tokenized.json.count, tokenized.json.tokens.length);
  assert.equal(tokenized.json.token_strs.length, tokenized.json.count);
  const detokenized = await call("/detokenize", { body: { model, tokens: tokenized.json.tokens } });
  assert.equal(detokenized.status, 200, detokenized.text);
  assert.equal(detokenized.json.prompt, "héllo wörld 😀");
  const chat = await call("/tokenize", { body: { model, messages: [{ role: "user", content: "hi" }] } });
  assert.equal(chat.status, 200, chat.text);
  const rendered = await call("/detokenize", { body: { model, tokens: chat.json.tokens } });
  assert.ok(rendered.json.prompt.includes("hi"), rendered.text);
  const bad = await call("/detokenize", { body: { model, tokens: [-1] } });
  assert.equal(bad.status, 400);
});

await check("unknown model is a not-found error in the SDKs", async () => {
  await assert.rejects(openai.chat.completions.create({ model: "no-such-model", messages: userMessages, max_tokens: 2 }),
    (error) => error instanceof OpenAI.NotFoundError && error.status === 404);
  await assert.rejects(anthropic.messages.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }], max_tokens: 2 }),
    (error) => error instanceof Anthropic.NotFoundError);
});

await check("max_tokens 0 is a bad request", async () => {
  await assert.rejects(openai.chat.completions.create({ model, messages: userMessages, max_tokens: 0 }),
    (error) => error instanceof OpenAI.BadRequestError && error.status === 400);
  await assert.rejects(openai.completions.create({ model, prompt: "x", max_tokens: 0 }), (error) => error instanceof OpenAI.BadRequestError);
  await assert.rejects(anthropic.messages.create({ model, messages: [{ role: "user", content: "x" }], max_tokens: 0 }),
    (error) => error instanceof Anthropic.BadRequestError);
});

await check("malformed requests get JSON errors", async () => {
  for (const body of ['{"model": ', "[1, 2]", "null", '{"messages": "nope"}', "\u0000\u00ff"]) {
    const response = await call("/v1/chat/completions", { body });
    assert.equal(response.status, 400, `${JSON.stringify(body)} -> ${response.status} ${response.text}`);
    assert.ok(response.json?.error, response.text);
  }
  const anthropicBad = await call("/v1/messages", { body: "{bad", headers: { "x-api-key": apiKey } });
  assert.equal(anthropicBad.status, 400);
  assert.equal(anthropicBad.json.type, "error");
  const wrongMethod = await call("/v1/chat/completions", { method: "GET" });
  assert.equal(wrongMethod.status, 405);
  const unknownRoute = await call("/v1/nothing-here", { body: {} });
  assert.equal(unknownRoute.status, 404);
});

await check("client disconnect mid-stream", async () => {
  const controller = new AbortController();
  const stream = await openai.chat.completions.create(
    { model, messages: userMessages, max_tokens: 200, stream: true }, { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of stream) {
      n += chunk.choices.length;
      if (n >= 2) controller.abort();
    }
  } catch (error) {
    assert.ok(error instanceof OpenAI.APIUserAbortError || error.name === "AbortError", String(error));
  }
});

await check("server still serves and nothing is left running", async () => {
  const health = await fetch(`${baseUrl}/health`);
  assert.equal(health.status, 200);
  const response = await openai.chat.completions.create({ model, messages: userMessages, max_tokens: 2 });
  assert.equal(response.choices.length, 1);
  let running;
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
    const line = metrics.split("\n").find((l) => l.startsWith("flare_num_requests_running"));
    assert.ok(line, "no flare_num_requests_running in /metrics");
    running = Number(line.split(" ").at(-1));
    if (running === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(running, 0);
});

finish();
