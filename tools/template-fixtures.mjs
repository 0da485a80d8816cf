// Renders the chat templates (tests/data/templates/*.tokenizer_config.json) over the
// conversation suite, and every template snippet, with @huggingface/jinja -- the reference the
// C++ interpreter must match byte for byte -- and writes tests/data/templates/expected.json.
// Run: node tools/template-fixtures.mjs   (after `npm ci --ignore-scripts` in tests/node)
// Variables passed are those transformers' apply_chat_template passes: messages, tools (when
// given), add_generation_prompt, bos_token/eos_token (when set), plus extra keyword arguments.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { Template } = await import(join(root, "tests/node/node_modules/@huggingface/jinja/dist/index.js"));
const dataDir = join(root, "tests/data/templates");
const load = (name) => JSON.parse(readFileSync(join(dataDir, name), "utf8"));

function tokenText(token) {
  if (typeof token === "string") return token;
  if (token && typeof token === "object" && typeof token.content === "string") return token.content;
  return undefined;
}

function render(source, context) {
  try {
    return { output: new Template(source).render(context) };
  } catch (error) {
    return { error: String(error.message ?? error) };
  }
}

const models = ["qwen3", "llama3", "deepseek_v3", "gemma3", "demo"];
const conversations = load("conversations.json");
const expected = { conversations: {}, snippets: {} };
for (const model of models) {
  const config = load(`${model}.tokenizer_config.json`);
  const bos = tokenText(config.bos_token);
  const eos = tokenText(config.eos_token);
  expected.conversations[model] = {};
  for (const conversation of conversations) {
    const context = { messages: conversation.messages };
    if (conversation.tools) context.tools = conversation.tools;
    context.add_generation_prompt = conversation.add_generation_prompt;
    if (bos !== undefined) context.bos_token = bos;
    if (eos !== undefined) context.eos_token = eos;
    Object.assign(context, conversation.kwargs ?? {});
    expected.conversations[model][conversation.name] = render(config.chat_template, structuredClone(context));
  }
}
for (const snippet of load("snippets.json")) {
  expected.snippets[snippet.name] = render(snippet.template, structuredClone(snippet.context));
}
writeFileSync(join(dataDir, "expected.json"), JSON.stringify(expected, null, 1) + "\n");
console.log(`wrote ${join(dataDir, "expected.json")}`);
