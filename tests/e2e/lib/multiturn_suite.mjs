// 4-turn conversations against a running `flare run` of the demo model (tests/e2e/prefix_multiturn.sh):
// each turn sends the whole conversation so far (the assistant's answers as it gave them) plus a
// short new user message, greedy, and reads the prefix-cache usage: every turn after the first
// must report at least 95% of its prompt cached, through the OpenAI Chat Completions usage
// (`prompt_tokens_details.cached_tokens` of `prompt_tokens`) and the Anthropic Messages usage
// (`cache_read_input_tokens` of `input_tokens + cache_read_input_tokens`). Prints each turn's share.
// Usage: FLARE_URL=http://127.0.0.1:PORT node tests/e2e/lib/multiturn_suite.mjs
import assert from "node:assert/strict";

import { anthropicClient, check, finish, openaiClient } from "../sdk_clients.mjs";

const openai = openaiClient();
const anthropic = anthropicClient();
const model = (await openai.models.list()).data[0].id;
const MIN_SHARE = 0.95;
const questions = [
  "Write a function that parses a CSV line into fields.",
  "Now handle quoted fields.",
  "Add type hints.",
  "Write a test for it.",
];
// A code-review assistant's instructions: the long, shared start real conversations have.
const system = (name) =>
  `You are ${name}, a careful Python reviewer. Answer with short, working code and one line of explanation. ` +
  "Prefer the standard library. Name things clearly, keep functions small, handle errors explicitly, and " +
  "never swallow exceptions. When a question is ambiguous, state the assumption you make. ";

const shares = (label, cached, prompt) => {
  const share = cached / prompt;
  console.log(`     ${label}: ${cached} of ${prompt} prompt tokens cached (${(100 * share).toFixed(1)}%)`);
  return share;
};

await check("OpenAI chat: turns 2-4 find >= 95% of their prompt cached", async () => {
  const messages = [{ role: "system", content: system("Ada") }];
  for (let turn = 0; turn < questions.length; ++turn) {
    messages.push({ role: "user", content: questions[turn] });
    const completion = await openai.chat.completions.create({ model, messages, max_tokens: 160, temperature: 0 });
    const { prompt_tokens, prompt_tokens_details } = completion.usage;
    const share = shares(`chat turn ${turn + 1}`, prompt_tokens_details.cached_tokens, prompt_tokens);
    if (turn > 0) assert.ok(share >= MIN_SHARE, `turn ${turn + 1}: ${(100 * share).toFixed(1)}% cached`);
    messages.push({ role: "assistant", content: completion.choices[0].message.content });
  }
});

await check("Anthropic messages: turns 2-4 find >= 95% of their prompt cached", async () => {
  const messages = [];
  for (let turn = 0; turn < questions.length; ++turn) {
    messages.push({ role: "user", content: questions[turn] });
    const message = await anthropic.messages.create({ model, system: system("Grace"), messages, max_tokens: 160,
                                                      temperature: 0 });
    const { input_tokens, cache_read_input_tokens } = message.usage;
    const share = shares(`messages turn ${turn + 1}`, cache_read_input_tokens, input_tokens + cache_read_input_tokens);
    if (turn > 0) assert.ok(share >= MIN_SHARE, `turn ${turn + 1}: ${(100 * share).toFixed(1)}% cached`);
    const text = message.content.filter((block) => block.type === "text").map((block) => block.text).join("");
    messages.push({ role: "assistant", content: text });
  }
});

finish();
