#!/usr/bin/env bash
# `ignition debug-serve demo`: prepares and serves the demo model from one process on the CPU
# (--host/--port, --history-drafts), answers a completion, leaves nothing in the model cache and
# removes its temporary package when SIGTERM ends it. Also the recipe help: `ignition --help` lists
# every recipe, `ignition export demo --help` shows the demo recipe's defaults and limits.
set -euo pipefail
BIN=${FLARE_BIN:-build}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-debug-serve.XXXXXX")
SERVER=""
cleanup() {
  [[ -n $SERVER ]] && kill -KILL "$SERVER" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME=$WORK/home
mkdir -p "$HOME/.config/flare"
STAGING=$HOME/.cache/flare/packages/staging
fail() {
  echo "FAIL: $*" >&2
  [[ -f $WORK/server.log ]] && tail -n 30 "$WORK/server.log" >&2
  exit 1
}
step() { echo "== $*"; }

step "recipe help"
"$BIN/ignition" --help >"$WORK/help.txt" 2>&1 || fail "ignition --help failed"
for alias in demo llama-3.1-8b qwen3-8b gemma-3-1b mixtral-8x7b; do
  grep -q "$alias" "$WORK/help.txt" || { cat "$WORK/help.txt" >&2; fail "ignition --help lacks $alias"; }
done
grep -q "meta-llama/Llama-3.1-8B-Instruct@" "$WORK/help.txt" || fail "ignition --help lacks a checkpoint"
"$BIN/ignition" export demo --help >"$WORK/export-help.txt" 2>&1 || fail "ignition export demo --help failed"
grep -q "Recipe demo (flare-demo-coder)" "$WORK/export-help.txt" || { cat "$WORK/export-help.txt" >&2; fail "no recipe section"; }
grep -qE "draft tokens +5 default, 15 maximum" "$WORK/export-help.txt" || fail "no draft counts"
grep -q -- "--max-concurrency" "$WORK/export-help.txt" || fail "the flags are gone from export help"
"$BIN/ignition" debug-serve --help >"$WORK/debug-help.txt" 2>&1 || fail "debug-serve --help failed"
grep -q -- "--history-drafts" "$WORK/debug-help.txt" || fail "debug-serve --help lacks --history-drafts"
grep -q -- "--port" "$WORK/debug-help.txt" || fail "debug-serve --help lacks --port"

step "ignition debug-serve demo"
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
"$BIN/ignition" debug-serve demo --cpu --plain --host 127.0.0.1 --port "$port" --history-drafts >"$WORK/server.log" 2>&1 &
SERVER=$!
for ((i = 0; i < 600; i++)); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || fail "debug-serve exited"
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "def fibonacci(n):", "max_tokens": 16, "temperature": 0}' >"$WORK/completion.json" || fail "completion failed"
grep -q '"completion_tokens":16' "$WORK/completion.json" || { cat "$WORK/completion.json" >&2; fail "no 16 tokens"; }
grep -q "history" "$WORK/server.log" || fail "--history-drafts did not reach the server"
ls "$STAGING"/export-*/cache/models/*/* >/dev/null 2>&1 || fail "no private package in a staging tree while serving"
kill -TERM "$SERVER"
wait "$SERVER" || fail "debug-serve exited non-zero after SIGTERM"
SERVER=""
grep -q "Stopped\." "$WORK/server.log" || fail "no Stopped. line"
[[ -z $(ls -A "$STAGING") ]] || { ls -la "$STAGING" >&2; fail "the staging tree was left behind"; }
[[ ! -d $HOME/.cache/flare/packages/models ]] || [[ -z $(ls "$HOME/.cache/flare/packages/models") ]] ||
  fail "debug-serve published into the model cache"
echo "PASS"
