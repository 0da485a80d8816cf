// The gpt-oss end-to-end checks (tests/e2e/gptoss_sdk.sh) against a running `flare run` of the tiny
// random-weight GptOssForCausalLM checkpoint with the o200k tokenizer, through the unchanged openai
// and @anthropic-ai/sdk clients plus fetch: the harmony prompt each request renders (read back
// through /tokenize and /detokenize: system line with the reasoning effort, developer instructions
// and tools, assistant tool calls and tool results), reasoning_effort accepted as low/medium/high and
// refused otherwise in each API's shape, greedy output the same streamed or not in the chat,
// Responses and Anthropic APIs (reasoning, content and tool calls alike), <|return|>, <|call|> and
// <|endoftext|> stopping generation, tool_choice required and named forcing a call whose arguments
// follow the schema (ajv), and conversations harmony cannot express as 400s. The weights
// are random, so the text itself is not checked.
// Usage: FLARE_URL=http://127.0.0.1:PORT FLARE_API_KEY=KEY node tests/e2e/lib/gptoss_suite.mjs
import assert from "node:assert/strict";

import { Anthropic, OpenAI, anthropicClient, call, check, finish, openaiClient } from "../sdk_clients.mjs";
import { makeAjv } from "./structured_validate.mjs";

const openai = openaiClient();
const anthropic = anthropicClient();
const greedy = { temperature: 0 };
const RETURN = 200002;
const CALL = 200012;
const ENDOFTEXT = 199999;
const START = 200006;
const END = 200007;
const MESSAGE = 200008;
const conversation = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say hi." },
];
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const system = (effort, date) =>
  "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n" +
  `Knowledge cutoff: 2024-06\nCurrent date: ${date}\n\nReasoning: ${effort}\n\n` +
  "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
const timeTool = {
  type: "function",
  function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } } } },
};
const ajv = makeAjv();
let model;

// The prompt a chat request renders, as text with its special tokens.
async function rendered(body) {
  const tokenized = await call("/tokenize", { body: { model, ...body } });
  assert.equal(tokenized.status, 200, tokenized.text);
  const detokenized = await call("/detokenize", { body: { model, tokens: tokenized.json.tokens } });
  assert.equal(detokenized.status, 200, detokenized.text);
  return { text: detokenized.json.prompt, tokens: tokenized.json.tokens };
}

// A chat stream's content, reasoning and tool calls put back together, and its finish reason.
async function readChatStream(stream) {
  const out = { content: "", reasoning: "", toolCalls: [], finishReason: undefined, usage: undefined };
  for await (const chunk of stream) {
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      out.content += choice.delta?.content ?? "";
      out.reasoning += choice.delta?.reasoning_content ?? "";
      for (const call of choice.delta?.tool_calls ?? []) {
        out.toolCalls[call.index] ??= { name: "", arguments: "" };
        out.toolCalls[call.index].name += call.function?.name ?? "";
        out.toolCalls[call.index].arguments += call.function?.arguments ?? "";
      }
      if (choice.finish_reason) out.finishReason = choice.finish_reason;
    }
  }
  return out;
}

const today = new Date().toISOString().slice(0, 10);

await check("models list", async () => {
  const page = await openai.models.list();
  const ids = page.data.map((card) => card.id);
  assert.ok(ids.includes("tiny-gptoss"), JSON.stringify(ids));
  model = ids[0];
});
model ??= "tiny-gptoss";

await check("chat prompt is harmony: system with the effort, developer instructions, generation prompt", async () => {
  const { text, tokens } = await rendered({ messages: conversation, reasoning_effort: "high",
                                            chat_template_kwargs: { current_date: "2025-08-05" } });
  assert.equal(text, system("high", "2025-08-05") + "<|end|><|start|>developer<|message|># Instructions\n\nYou are terse.<|end|>" +
                     "<|start|>user<|message|>Say hi.<|end|><|start|>assistant");
  assert.equal(tokens[0], START, "no BOS: the prompt opens with <|start|>");
  assert.equal(tokens.filter((id) => id === START).length, 4);
  assert.equal(tokens.filter((id) => id === END).length, 3);
  assert.equal(tokens.filter((id) => id === MESSAGE).length, 3);
  // Without a date the server writes today's (UTC), as gpt-oss's own template does.
  const plain = await rendered({ messages: conversation });
  assert.ok(plain.text.startsWith(system("medium", today)), plain.text);
});

await check("tools, tool calls and tool results render as harmony messages", async () => {
  const messages = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null, reasoning_content: "Use the tool.",
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
    { role: "tool", tool_call_id: "call_1", content: '{"sunny":true}' },
  ];
  const { text } = await rendered({ messages, tools: [weatherTool], chat_template_kwargs: { current_date: "2025-08-05" } });
  const want = [
    "\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>",
    "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Weather for a city.\n" +
      "type get_weather = (_: {\ncity: string,\n}) => any;\n\n} // namespace functions<|end|>",
    "<|start|>user<|message|>Weather in Paris?<|end|>",
    "<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|>",
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
    '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"sunny":true}<|end|><|start|>assistant',
  ];
  let at = 0;
  for (const part of want) {
    const found = text.indexOf(part, at);
    assert.ok(found >= 0, `missing, in order: ${JSON.stringify(part)}\nin ${JSON.stringify(text)}`);
    at = found + part.length;
  }
});

await check("reasoning_effort low, medium and high each select their system line", async () => {
  for (const effort of ["low", "medium", "high"]) {
    const { text } = await rendered({ messages: conversation, reasoning_effort: effort });
    assert.ok(text.includes(`\n\nReasoning: ${effort}\n\n`), `${effort}: ${text}`);
    const response = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 2, reasoning_effort: effort, ...greedy });
    assert.equal(response.usage.prompt_tokens, (await rendered({ messages: conversation, reasoning_effort: effort })).tokens.length);
    const answer = await openai.responses.create({ model, input: "Say hi.", reasoning: { effort }, max_output_tokens: 2, ...greedy });
    assert.ok(["completed", "incomplete"].includes(answer.status), answer.status);
  }
});

await check("bad reasoning efforts are 400s naming the field", async () => {
  await assert.rejects(openai.chat.completions.create({ model, messages: conversation, max_tokens: 2, reasoning_effort: "extreme" }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.param, "reasoning_effort", JSON.stringify(error.error));
    assert.match(error.message, /'low', 'medium', 'high'/);
    return true;
  });
  await assert.rejects(openai.responses.create({ model, input: "Say hi.", reasoning: { effort: "minimal" }, max_output_tokens: 2 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.param, "reasoning.effort", JSON.stringify(error.error));
    return true;
  });
  const kwargs = await call("/v1/chat/completions", { body: { model, messages: conversation, chat_template_kwargs: { reasoning_effort: 7 } } });
  assert.equal(kwargs.status, 400, kwargs.text);
  assert.equal(kwargs.json?.error?.param, "chat_template_kwargs.reasoning_effort", kwargs.text);
});

let chat;
await check("chat completion, greedy, the same twice", async () => {
  const request = { model, messages: conversation, tools: [weatherTool], max_tokens: 24, ...greedy };
  const response = await openai.chat.completions.create(request);
  const choice = response.choices[0];
  assert.equal(choice.message.role, "assistant");
  assert.ok(["stop", "length", "tool_calls"].includes(choice.finish_reason), choice.finish_reason);
  assert.ok(response.usage.completion_tokens > 0 && response.usage.completion_tokens <= 24);
  const prompt = await rendered({ messages: conversation, tools: [weatherTool] });
  assert.equal(response.usage.prompt_tokens, prompt.tokens.length, "the prompt is the harmony rendering");
  for (const text of [choice.message.content ?? "", choice.message.reasoning_content ?? ""]) {
    assert.ok(!/<\|(start|end|message|channel|return|call|constrain)\|>/.test(text), `a harmony token reached the client: ${text}`);
  }
  chat = {
    content: choice.message.content ?? "", reasoning: choice.message.reasoning_content ?? "",
    toolCalls: (choice.message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
    finishReason: choice.finish_reason,
  };
  const again = await openai.chat.completions.create(request);
  assert.equal(again.choices[0].message.content ?? "", chat.content, "greedy decoding repeats");
});

await check("chat stream gives the same reasoning, content, tool calls and finish", async () => {
  const stream = await openai.chat.completions.create({
    model, messages: conversation, tools: [weatherTool], max_tokens: 24, stream: true, stream_options: { include_usage: true }, ...greedy,
  });
  const streamed = await readChatStream(stream);
  assert.equal(streamed.content, chat.content);
  assert.equal(streamed.reasoning, chat.reasoning);
  assert.deepEqual(streamed.toolCalls, chat.toolCalls);
  assert.equal(streamed.finishReason, chat.finishReason);
  assert.ok(streamed.usage && streamed.usage.completion_tokens > 0);
});

// Biasing harmony's own tokens up makes the random model write a soup of headers, channels and
// recipients (greedy, so the same soup every time): whatever it is, the streamed events must add up
// to the non-streamed message and no harmony token may reach the client.
await check("harmony-token soup parses the same streamed or not, and never leaks", async () => {
  const bias = {};
  for (const id of [START, END, MESSAGE, 200005, 200003]) bias[id] = 40;
  for (const word of ["analysis", "final", "commentary", " to=functions.get_weather", "assistant", "{\"city\":\"Paris\"}"]) {
    const tokenized = await call("/tokenize", { body: { model, prompt: word } });
    for (const id of tokenized.json.tokens) bias[id] = 40;
  }
  const request = { model, messages: conversation, tools: [weatherTool], max_tokens: 48, logit_bias: bias, ...greedy };
  const response = await openai.chat.completions.create(request);
  const message = response.choices[0].message;
  const streamed = await readChatStream(await openai.chat.completions.create({ ...request, stream: true }));
  assert.equal(streamed.content, message.content ?? "");
  assert.equal(streamed.reasoning, message.reasoning_content ?? "");
  assert.deepEqual(streamed.toolCalls, (message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })));
  assert.equal(streamed.finishReason, response.choices[0].finish_reason);
  for (const text of [message.content ?? "", message.reasoning_content ?? ""]) {
    assert.ok(!/<\|(start|end|message|channel|constrain)\|>/.test(text), `a harmony token reached the client: ${text}`);
  }
  // The same prompt and bias as raw text: the soup really holds harmony's special tokens.
  const prompt = await rendered({ messages: conversation, tools: [weatherTool] });
  const raw = await call("/v1/completions", { body: { model, prompt: prompt.tokens, max_tokens: 48, logit_bias: bias,
                                                      skip_special_tokens: false, ...greedy } });
  assert.equal(raw.status, 200, raw.text);
  console.log(`     soup: ${JSON.stringify(raw.json.choices[0].text)} -> ${JSON.stringify({ content: message.content, reasoning: message.reasoning_content, calls: message.tool_calls?.length ?? 0 })}`);
  assert.match(raw.json.choices[0].text, /<\|(start|end|message|channel)\|>/, "the bias made no harmony token");
});

await check("<|return|>, <|call|> and <|endoftext|> stop generation", async () => {
  for (const id of [RETURN, CALL, ENDOFTEXT]) {
    const response = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 16, logit_bias: { [id]: 100 }, ...greedy });
    const choice = response.choices[0];
    assert.equal(choice.finish_reason, "stop", `token ${id}: ${JSON.stringify(response)}`);
    assert.equal(choice.message.content ?? "", "", `token ${id}`);
    assert.equal(response.usage.completion_tokens, 1, `token ${id}`);
  }
});

await check("responses: the same prompt as the chat, streamed like not", async () => {
  const request = { model, instructions: "You are terse.", input: "Say hi.", max_output_tokens: 24, ...greedy };
  const response = await openai.responses.create(request);
  assert.ok(["completed", "incomplete"].includes(response.status), response.status);
  const plain = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 24, ...greedy });
  assert.equal(response.output_text, plain.choices[0].message.content ?? "", "instructions are the developer message");
  const reasoning = response.output.filter((item) => item.type === "reasoning").map((item) => item.content?.[0]?.text ?? "").join("");
  assert.equal(reasoning, plain.choices[0].message.reasoning_content ?? "");
  const stream = await openai.responses.create({ ...request, stream: true });
  let final;
  for await (const event of stream) if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
  assert.ok(final, "no final response event");
  assert.equal(final.output_text ?? final.output.filter((i) => i.type === "message").map((i) => i.content.map((c) => c.text).join("")).join(""),
               response.output_text);
});

await check("anthropic messages: system as instructions, thinking and text the same streamed", async () => {
  const request = { model, system: "You are terse.", messages: [{ role: "user", content: "Say hi." }], max_tokens: 24, temperature: 0 };
  const message = await anthropic.messages.create(request);
  assert.equal(message.type, "message");
  assert.ok(["end_turn", "max_tokens", "tool_use"].includes(message.stop_reason), message.stop_reason);
  const prompt = await rendered({ messages: conversation });
  assert.equal(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0), prompt.tokens.length);
  const streamed = await anthropic.messages.stream(request).finalMessage();
  const blocks = (m, type, key) => m.content.filter((b) => b.type === type).map((b) => b[key]).join("");
  assert.equal(blocks(streamed, "text", "text"), blocks(message, "text", "text"));
  assert.equal(blocks(streamed, "thinking", "thinking"), blocks(message, "thinking", "thinking"));
  assert.equal(streamed.stop_reason, message.stop_reason);
  const plain = await openai.chat.completions.create({ model, messages: conversation, max_tokens: 24, ...greedy });
  assert.equal(blocks(message, "text", "text"), plain.choices[0].message.content ?? "");
});

// The random weights would never write a call; the grammar makes them, and the arguments must
// follow the tool's schema (checked by ajv), on every API, sampled at temperature 1 and greedy.
await check("tool_choice required and named force a valid harmony call on every API", async () => {
  const validate = ajv.compile(weatherTool.function.parameters);
  const assertArguments = (value, context) => assert.ok(validate(value), `${context}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`);
  const named = { type: "function", function: { name: "get_weather" } };
  for (const [toolChoice, sampling] of [["required", { temperature: 1, seed: 3 }], [named, greedy]]) {
    const request = { model, messages: conversation, tools: [weatherTool, timeTool], tool_choice: toolChoice, max_tokens: 48, ...sampling };
    const response = await openai.chat.completions.create(request);
    const choice = response.choices[0];
    assert.equal(choice.finish_reason, "tool_calls", JSON.stringify(choice));
    assert.equal(choice.message.tool_calls.length, 1, JSON.stringify(choice.message));
    const call = choice.message.tool_calls[0].function;
    assert.ok(["get_weather", "get_time"].includes(call.name), call.name);
    if (toolChoice === named) assert.equal(call.name, "get_weather");
    if (call.name === "get_weather") assertArguments(JSON.parse(call.arguments), "chat");
    else assert.equal(typeof JSON.parse(call.arguments), "object");
    const streamed = await readChatStream(await openai.chat.completions.create({ ...request, stream: true }));
    assert.deepEqual(streamed.toolCalls, [{ name: call.name, arguments: call.arguments }], "streamed the same call");
    assert.equal(streamed.finishReason, "tool_calls");
  }
  const responses = await openai.responses.create({
    model, input: "Weather in Paris?", max_output_tokens: 48, temperature: 1,
    tools: [{ type: "function", name: "get_weather", parameters: weatherTool.function.parameters }],
    tool_choice: "required",
  });
  const item = responses.output.find((entry) => entry.type === "function_call");
  assert.ok(item, JSON.stringify(responses.output));
  assert.equal(item.name, "get_weather");
  assertArguments(JSON.parse(item.arguments), "responses");
  const message = await anthropic.messages.create({
    model, max_tokens: 48, messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: [{ name: "get_weather", input_schema: weatherTool.function.parameters }], tool_choice: { type: "tool", name: "get_weather" },
  });
  assert.equal(message.stop_reason, "tool_use", JSON.stringify(message));
  const use = message.content.find((block) => block.type === "tool_use");
  assert.equal(use?.name, "get_weather", JSON.stringify(message.content));
  assertArguments(use.input, "anthropic");
});

await check("conversations harmony cannot express are 400s in each API's shape", async () => {
  const orphan = [{ role: "user", content: "hi" }, { role: "tool", tool_call_id: "nope", content: "r" }];
  await assert.rejects(openai.chat.completions.create({ model, messages: orphan, max_tokens: 2 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.param, "messages");
    assert.match(error.message, /answers no tool call/);
    return true;
  });
  const unanswered = [
    { role: "user", content: "hi" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{}" } }] },
    { role: "user", content: "and?" },
  ];
  await assert.rejects(openai.chat.completions.create({ model, messages: unanswered, tools: [weatherTool], max_tokens: 2 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.match(error.message, /has no tool result/);
    return true;
  });
  await assert.rejects(openai.chat.completions.create({ model, messages: [{ role: "wizard", content: "hi" }], max_tokens: 2 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.param, "messages[0].role");
    return true;
  });
  await assert.rejects(openai.responses.create({ model, input: [{ type: "function_call_output", call_id: "x", output: "r" }] }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.param, "input");
    return true;
  });
  await assert.rejects(anthropic.messages.create({
    model, max_tokens: 4, messages: [
      { role: "user", content: "hi" },
      { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "get_weather", input: {} }] },
      { role: "user", content: "and?" },
    ],
  }), (error) => {
    assert.ok(error instanceof Anthropic.BadRequestError, String(error));
    assert.equal(error.error?.type, "error", JSON.stringify(error.error));
    assert.match(error.message, /has no tool result/);
    return true;
  });
  // A forced call that max_tokens cannot hold.
  await assert.rejects(openai.chat.completions.create({ model, messages: conversation, tools: [weatherTool], tool_choice: "required", max_tokens: 4 }), (error) => {
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.param, "max_tokens");
    return true;
  });
  const broken = await call("/v1/chat/completions", { body: '{"model": "x", "messages": [' });
  assert.equal(broken.status, 400, broken.text);
});

await check("server still serves and nothing is left running", async () => {
  const response = await openai.chat.completions.create({ model, messages: conversation, tools: [weatherTool], max_tokens: 24, ...greedy });
  assert.equal(response.choices[0].message.content ?? "", chat.content);
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
