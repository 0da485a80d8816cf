# Qwen3-MoE from checkpoint to SDK clients on the CPU: writes a tiny random-weight
# Qwen3MoeForCausalLM checkpoint with the real Qwen3 tokenizer and chat template
# (tests/e2e/lib/qwen3moe_checkpoint.mjs: 8 experts, 2 a token, a dense layer between two expert
# layers; the [151936, 32] embedding and output head are made here, never committed), exports it
# with `ignition export --cpu`, checks `flare inspect`'s Weights summary (active parameters, the
# experts, decode reads; text and --json), serves it with `flare run` and drives it with the openai
# and @anthropic-ai/sdk clients (tests/e2e/lib/qwen3moe_suite.mjs: Qwen's ChatML prompt format,
# <|im_end|> as a stop token, greedy text the same streamed or not and alone or batched with other
# requests, malformed requests as 400s in each API's shape).
# Everything lives under a temporary HOME. Ends the server with SIGTERM and requires exit status 0.
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding flare and ignition}
DATA=${FLARE_TEST_DATA:-$(pwd)/tests/data}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-qwen3moe.XXXXXX")
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME=$WORK/home
mkdir -p "$HOME/.config/flare"
CONFIG=$HOME/.config/flare/config.toml
: >"$CONFIG"
CACHE=$WORK/cache
LOG=$WORK/server.log
CHECKPOINT=$WORK/tiny-qwen3moe

fail() {
  echo "FAIL: $*" >&2
  if [[ -f $LOG ]]; then
    echo "--- server log (last 40 lines)" >&2
    tail -n 40 "$LOG" >&2
  fi
  exit 1
}
step() { echo "== $*"; }

[[ -d $HERE/../node/node_modules/openai ]] || fail "tests/node/node_modules is missing: run scripts/setup (npm ci)"

step "write a tiny random Qwen3-MoE checkpoint with the real tokenizer"
node "$HERE/lib/qwen3moe_checkpoint.mjs" "$CHECKPOINT" || fail "qwen3moe_checkpoint.mjs failed"
xz -dc "$DATA/tokenizers/qwen3/tokenizer.json.xz" >"$CHECKPOINT/tokenizer.json" || fail "cannot decompress tokenizer.json.xz"
cp "$DATA/tokenizers/qwen3/tokenizer_config.json" "$CHECKPOINT/" || fail "cannot copy tokenizer_config.json"

step "ignition export --cpu"
entry=$("$BIN/ignition" export "$CHECKPOINT" --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
  { cat "$WORK/export.log" >&2; fail "ignition export of the Qwen3-MoE checkpoint failed"; }
[[ -d $entry ]] || fail "export printed '$entry', not a cache entry"
"$BIN/flare" inspect "$entry" --plain >"$WORK/inspect.txt" 2>&1 || { cat "$WORK/inspect.txt" >&2; fail "flare inspect failed"; }
grep -q "Qwen3MoeForCausalLM" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt" >&2; fail "inspect does not name Qwen3MoeForCausalLM"; }
# The Weights box: "parameters  9.8M (9.8M active: 2 of 8 experts a token)", "stored  19 MiB (...),
# experts 96 KiB", "decode reads  9 MiB a token (dense weights, the experts it activates, ...)".
for pattern in "─ Weights ─" "parameters .* active: 2 of 8 experts a token)" "stored .*, experts [0-9]" \
  "decode reads .* a token (dense weights, the experts it activates"; do
  grep -q -- "$pattern" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt" >&2; fail "inspect lacks '$pattern'"; }
done
"$BIN/flare" inspect "$entry" --json >"$WORK/inspect.json" 2>"$WORK/inspect-json.err" ||
  { cat "$WORK/inspect-json.err" >&2; fail "flare inspect --json failed"; }
node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
         const w = p.weights, problems = [];
         if (p.model?.architecture !== "Qwen3MoeForCausalLM") problems.push(`architecture ${p.model?.architecture}`);
         if (!w) { console.error("no weights object"); process.exit(1); }
         if (w.experts !== 8) problems.push(`experts ${w.experts}`);
         if (w.experts_per_token !== 2) problems.push(`experts_per_token ${w.experts_per_token}`);
         if (!(w.active_parameters > 0 && w.active_parameters < w.parameters)) problems.push("active_parameters not below parameters");
         if (!(w.decode_weight_bytes > 0 && w.decode_weight_bytes < w.stored_bytes)) problems.push("decode_weight_bytes not below stored_bytes");
         // 2 expert layers x 8 experts x (gate, up, down) of [32, 32] BF16.
         if (w.expert_bytes !== 2 * 8 * 3 * 32 * 32 * 2) problems.push(`expert_bytes ${w.expert_bytes}`);
         // Active: all but the 6 experts of each expert layer a token leaves out.
         if (w.parameters - w.active_parameters !== 2 * 6 * 3 * 32 * 32) problems.push("inactive parameters");
         if (problems.length) { console.error(problems.join("; "), JSON.stringify(w)); process.exit(1); }' \
  "$WORK/inspect.json" || fail "flare inspect --json weights"
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")
[[ $fingerprint =~ ^[0-9a-f]{64}$ ]] || fail "development key fingerprint '$fingerprint'"

step "start flare run"
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
api_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$api_key" >"$WORK/api-key"
chmod 600 "$WORK/api-key"
"$BIN/flare" run "$entry" --port "$port" --plain --model-cache "$CACHE" --config "$CONFIG" \
  --api-key-file "$WORK/api-key" \
  --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development >"$LOG" 2>&1 &
SERVER_PID=$!
for ((i = 0; i < 600; i++)); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || fail "flare run exited before serving"
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/health" >/dev/null || fail "no /health after 60 s"
echo "serving on port $port after $((i / 10)).$((i % 10)) s"

step "Qwen3-MoE SDK suite"
FLARE_URL=http://127.0.0.1:$port FLARE_API_KEY=$api_key node "$HERE/lib/qwen3moe_suite.mjs" || fail "Qwen3-MoE SDK suite failed"
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died during the suite"

step "SIGTERM"
kill -TERM "$SERVER_PID"
status=0
for ((i = 0; i < 300; i++)); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$SERVER_PID" 2>/dev/null && fail "flare run still running 30 s after SIGTERM"
wait "$SERVER_PID" || status=$?
SERVER_PID=
[[ $status == 0 ]] || fail "flare run exited with status $status after SIGTERM"
echo "PASS"
