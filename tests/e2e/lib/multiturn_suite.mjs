// 4-turn conversations against a running `flare run` of the demo model (tests/e2e/prefix_multiturn.sh):
// each turn sends the whole conversation so far (the assistant's answers as it gave them) plus a
// short new user message, greedy, and reads the prefix-cache usage: every turn after the first
// must report at least 95% of its prompt cached, through the OpenAI Chat Completions usage
// (`prompt_tokens_details.cached_tokens` of `prompt_tokens`) and the Anthropic Messages usage
// (`cache_read_input_tokens` of `input_tokens + cache_read_input_tokens`), and that cached part must
// be the whole previous turn (not only its whole 16-token pages). Prints each turn's share, and
// the share a cache of whole pages only would have had.
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
// A code-review assistant's instructions: the long, shared start real conversations have (about
// 300 tokens), so that a turn's new part (its user message and the template's turn markers, about
// 20 tokens) is a small share of the prompt, as in real chats.
const system = (name) =>
  `You are ${name}, a careful Python reviewer working inside a team's code-review tool. ` +
  "Answer with short, working code and one line of explanation. Prefer the standard library. " +
  "Name things clearly, keep functions small, handle errors explicitly, and never swallow exceptions. " +
  "When a question is ambiguous, state the assumption you make before the code. " +
  "Follow PEP 8: four spaces of indentation, lines of at most 99 characters, two blank lines between " +
  "top-level definitions, imports at the top of the file grouped as standard library, third party, then " +
  "local. Write docstrings for public functions in the imperative mood, with the arguments and the " +
  "return value described when they are not obvious from the names and type hints. " +
  "Raise ValueError for bad arguments and TypeError for arguments of the wrong type; do not return None " +
  "to signal an error. Do not use global state; pass what a function needs as arguments. Avoid clever " +
  "one-liners where a loop reads better. Use pathlib for paths, f-strings for formatting, dataclasses " +
  "for plain records, and enumerate and zip instead of index arithmetic. Close files with a with block. " +
  "Tests use pytest with plain assert statements and one behaviour per test, named after the behaviour. " +
  "Keep answers short: the reviewer reads many of them a day. ";
// What a prefix cache of whole 16-token pages only would have held of `cached` tokens.
const wholePages = (cached) => Math.floor(cached / 16) * 16;

const shares = (label, cached, prompt) => {
  const share = cached / prompt;
  const pct = (n) => `${((100 * n) / prompt).toFixed(1)}%`;
  console.log(`     ${label}: ${cached} of ${prompt} prompt tokens cached (${pct(cached)}; whole pages only: ` +
              `${pct(wholePages(cached))})`);
  return share;
};

// Turn t repeats turn t - 1's prompt and answer: all of it is cached but the answer's last token
// (sampled, never computed) and, at most, one more where the answer's text ends (a length-cut
// answer's last token may re-tokenize differently once the template's end marker follows it).
// A cache of whole pages would fall short of this by up to 15 tokens on most turns.
function expectWholeConversation(turn, cached, previous) {
  const repeated = previous.prompt + previous.answer;
  assert.ok(cached >= repeated - 2 && cached <= repeated - 1,
            `turn ${turn + 1}: ${cached} tokens cached of the ${repeated} the previous turn computed and sampled`);
}

await check("OpenAI chat: turns 2-4 find >= 95% of their prompt cached", async () => {
  let previous;
  const messages = [{ role: "system", content: system("Ada") }];
  for (let turn = 0; turn < questions.length; ++turn) {
    messages.push({ role: "user", content: questions[turn] });
    const completion = await openai.chat.completions.create({ model, messages, max_tokens: 200, temperature: 0 });
    const { prompt_tokens, prompt_tokens_details, completion_tokens } = completion.usage;
    const share = shares(`chat turn ${turn + 1}`, prompt_tokens_details.cached_tokens, prompt_tokens);
    if (turn > 0) {
      assert.ok(share >= MIN_SHARE, `turn ${turn + 1}: ${(100 * share).toFixed(1)}% cached`);
      expectWholeConversation(turn, prompt_tokens_details.cached_tokens, previous);
    }
    previous = { prompt: prompt_tokens, answer: completion_tokens };
    messages.push({ role: "assistant", content: completion.choices[0].message.content });
  }
});

await check("Anthropic messages: turns 2-4 find >= 95% of their prompt cached", async () => {
  let previous;
  const messages = [];
  for (let turn = 0; turn < questions.length; ++turn) {
    messages.push({ role: "user", content: questions[turn] });
    const message = await anthropic.messages.create({ model, system: system("Grace"), messages, max_tokens: 200,
                                                      temperature: 0 });
    const { input_tokens, cache_read_input_tokens, output_tokens } = message.usage;
    const share = shares(`messages turn ${turn + 1}`, cache_read_input_tokens, input_tokens + cache_read_input_tokens);
    if (turn > 0) {
      assert.ok(share >= MIN_SHARE, `turn ${turn + 1}: ${(100 * share).toFixed(1)}% cached`);
      expectWholeConversation(turn, cache_read_input_tokens, previous);
    }
    previous = { prompt: input_tokens + cache_read_input_tokens, answer: output_tokens };
    const text = message.content.filter((block) => block.type === "text").map((block) => block.text).join("");
    messages.push({ role: "assistant", content: text });
  }
});

finish();
