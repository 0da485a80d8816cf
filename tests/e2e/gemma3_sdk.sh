# Gemma 3 from checkpoint to SDK clients on the CPU: writes a tiny random-weight Gemma3ForCausalLM
# checkpoint with the real Gemma 3 tokenizer and chat template (tests/e2e/lib/gemma3_checkpoint.mjs;
# the [262144, 32] embedding is made here, never committed), exports it with `ignition export --cpu`,
# serves it with `flare run` and drives it with the openai and @anthropic-ai/sdk clients
# (tests/e2e/lib/gemma3_suite.mjs: the Gemma prompt format, <end_of_turn> as a stop token, the
# template's role-order errors as 400s in each API's shape, a token past the model's vocabulary).
# Everything lives under a temporary HOME. Ends the server with SIGTERM and requires exit status 0.
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding flare and ignition}
DATA=${FLARE_TEST_DATA:-$(pwd)/tests/data}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-gemma3.XXXXXX")
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
CHECKPOINT=$WORK/tiny-gemma3

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

step "write a tiny random Gemma 3 checkpoint with the real tokenizer"
node "$HERE/lib/gemma3_checkpoint.mjs" "$CHECKPOINT" || fail "gemma3_checkpoint.mjs failed"
for file in tokenizer.json tokenizer_config.json; do
  xz -dc "$DATA/tokenizers/gemma3/$file.xz" >"$CHECKPOINT/$file" || fail "cannot decompress $file.xz"
done

step "ignition export --cpu"
entry=$("$BIN/ignition" export "$CHECKPOINT" --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
  { cat "$WORK/export.log" >&2; fail "ignition export of the Gemma 3 checkpoint failed"; }
[[ -d $entry ]] || fail "export printed '$entry', not a cache entry"
"$BIN/flare" inspect "$entry" --plain >"$WORK/inspect.txt" 2>&1 || { cat "$WORK/inspect.txt" >&2; fail "flare inspect failed"; }
grep -q "Gemma3ForCausalLM" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt" >&2; fail "inspect does not name Gemma3ForCausalLM"; }
"$BIN/flare" inspect "$entry" --plain --memory-map >"$WORK/memory.txt" 2>&1 || { cat "$WORK/memory.txt" >&2; fail "flare inspect --memory-map failed"; }
tr -s ' \n│' ' ' <"$WORK/memory.txt" | grep -q "sliding-window layers: two windows" ||
  { cat "$WORK/memory.txt" >&2; fail "inspect does not show the sliding-window pages a request keeps"; }
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
grep -q "pages for sliding-window layers" "$LOG" ||
  { cat "$LOG" >&2; fail "flare run did not set a page pool aside for the sliding-window layers"; }

step "Gemma 3 SDK suite"
FLARE_URL=http://127.0.0.1:$port FLARE_API_KEY=$api_key node "$HERE/lib/gemma3_suite.mjs" || fail "Gemma 3 SDK suite failed"
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
