#!/usr/bin/env bash
# bench/serve against the demo model on the CPU, CI-sized (a smoke test: nothing is timed). Closed
# loop at two concurrencies with token-id prompts and ignore_eos (every request must produce exactly
# its max_tokens), an open loop at a Poisson rate with length ranges and a shared prefix (the
# prefix cache must report cached prompt tokens), multi-turn chat, and a wrong model name counted
# as errors by status with exit status 1.
set -euo pipefail
BIN=${FLARE_BIN:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH="$HERE/../../bench/serve/serve_bench.mjs"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-serve-bench.XXXXXX")
SERVER=""
cleanup() {
  [[ -n $SERVER ]] && kill -KILL "$SERVER" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME=$WORK/home
mkdir -p "$HOME/.config/flare"
CONFIG=$HOME/.config/flare/config.toml
: >"$CONFIG"
CACHE=$WORK/cache
fail() {
  echo "FAIL: $*" >&2
  [[ -f $WORK/server.log ]] && tail -n 20 "$WORK/server.log" >&2
  exit 1
}
step() { echo "== $*"; }
# check FILE EXPRESSION: a JavaScript expression over the results `j` must be true.
check() {
  node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           if (!eval(process.argv[2])) { console.error(JSON.stringify(j.runs, null, 1)); process.exit(1); }' "$1" "$2" ||
    fail "$1: $2"
}

step "export and serve the demo model"
entry=$("$BIN/ignition" export demo --cpu --plain --no-mtp --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
  { cat "$WORK/export.log" >&2; fail "export failed"; }
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
"$BIN/flare" run "$entry" --port "$port" --plain --model-cache "$CACHE" --config "$CONFIG" \
  --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development >"$WORK/server.log" 2>&1 &
SERVER=$!
for ((i = 0; i < 300; i++)); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.1
done
url="http://127.0.0.1:$port"

step "closed loop, token prompts, ignore_eos"
node "$BENCH" --url "$url" --concurrency 1,4 --requests 8 --prompt-tokens 24 --output-tokens 6 --ignore-eos \
  --token-prompts --vocab-size 8192 --no-progress --json "$WORK/closed.json" || fail "closed loop failed"
check "$WORK/closed.json" 'j.runs.length === 2 && j.runs.every((r) => r.n_ok === 8 && r.n_errors === 0)'
check "$WORK/closed.json" 'j.runs.every((r) => r.output_tokens === 48 && r.prompt_tokens === 8 * 24 && r.n_short_outputs === 0)'
check "$WORK/closed.json" 'j.runs.every((r) => r.output_throughput > 0 && r.total_throughput > r.output_throughput)'
check "$WORK/closed.json" 'j.runs.every((r) => r.ttft_ms.p50 > 0 && r.ttft_ms.p99 >= r.ttft_ms.p50 && r.itl_ms.n === 8 * 5 && r.e2e_ms.p50 >= r.ttft_ms.p50)'

step "open loop, length ranges, shared prefix"
node "$BENCH" --url "$url" --rate 50 --requests 8 --prompt-tokens 40-60 --prefix-tokens 32 --output-tokens 2-4 \
  --ignore-eos --token-prompts --vocab-size 8192 --no-progress --json "$WORK/open.json" || fail "open loop failed"
check "$WORK/open.json" 'j.runs[0].mode === "open" && j.runs[0].rate === 50 && j.runs[0].n_ok === 8'
check "$WORK/open.json" 'j.runs[0].prompt_tokens >= 8 * 40 && j.runs[0].prompt_tokens <= 8 * 60'
check "$WORK/open.json" 'j.runs[0].output_tokens >= 16 && j.runs[0].output_tokens <= 32 && j.runs[0].n_short_outputs === 0'
check "$WORK/open.json" 'j.runs[0].cached_prompt_tokens >= 16 * 7'  # later requests find whole pages of the prefix

step "multi-turn chat"
node "$BENCH" --url "$url" --api chat --turns 3 --concurrency 2 --requests 6 --prompt-tokens 12 --output-tokens 4 \
  --ignore-eos --no-progress --json "$WORK/chat.json" || fail "multi-turn failed"
check "$WORK/chat.json" 'j.runs[0].n_ok === 6 && j.runs[0].output_tokens === 24 && j.runs[0].cached_prompt_tokens > 0'

step "errors are counted"
status=0
node "$BENCH" --url "$url" --model no-such-model --requests 3 --no-progress --json "$WORK/errors.json" >"$WORK/errors.txt" 2>&1 ||
  status=$?
[[ $status == 1 ]] || { cat "$WORK/errors.txt" >&2; fail "a run with no success must exit 1, got $status"; }
check "$WORK/errors.json" 'j.runs[0].n_errors === 3 && Object.keys(j.runs[0].errors)[0].startsWith("HTTP 404")'
grep -q "3 x HTTP 404" "$WORK/errors.txt" || { cat "$WORK/errors.txt" >&2; fail "the table lacks the errors"; }
status=0
node "$BENCH" --url "$url" --concurrency 2 --rate 3 >"$WORK/usage.txt" 2>&1 || status=$?
[[ $status == 2 ]] || fail "--concurrency with --rate must be a usage error, got $status"

kill -TERM "$SERVER"
wait "$SERVER" || fail "the server exited non-zero after SIGTERM"
SERVER=""
echo "PASS"
