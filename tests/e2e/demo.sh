#!/usr/bin/env bash
# The README's demo path, non-interactively: scripts/demo --once exports the built-in demo model,
# serves it on the CPU backend and sends a completion and a chat request; both answers must be
# text from the model, not errors. Runs with a fresh HOME so it starts from nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
export HOME=$(mktemp -d)
trap 'rm -rf "$HOME"' EXIT
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
log="$HOME/demo.log"
if ! BUILD_DIR="${FLARE_BIN:-build}" scripts/demo --once --port "$port" >"$log" 2>&1; then
  cat "$log"
  echo "demo.sh: scripts/demo failed" >&2
  exit 1
fi
node - "$log" <<'JS'
const text = require("fs").readFileSync(process.argv[2], "utf8");
const answers = text.split("\n").filter((line) => line.startsWith("{"));
if (answers.length !== 2) throw new Error(`expected two JSON answers, got ${answers.length}:\n${text}`);
const completion = JSON.parse(answers[0]);
const chat = JSON.parse(answers[1]);
if (completion.error || chat.error) throw new Error(`an answer is an error:\n${text}`);
const completionText = completion.choices[0].text;
const chatText = chat.choices[0].message.content;
for (const [name, value] of [["completion", completionText], ["chat", chatText]]) {
  if (typeof value !== "string" || value.trim().length < 10) throw new Error(`${name} answer is not text: ${JSON.stringify(value)}`);
}
if (completion.usage.completion_tokens < 1) throw new Error("no tokens generated");
console.log("completion:", JSON.stringify(completionText.slice(0, 80)));
console.log("chat:", JSON.stringify(chatText.slice(0, 80)));
JS
