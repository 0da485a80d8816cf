# Multi-turn prefix reuse over HTTP (issue 27): the demo model served by `flare run` (CPU), a
# 4-turn conversation through the OpenAI Chat Completions API and another through the Anthropic
# Messages API (tests/e2e/lib/multiturn_suite.mjs). Every turn after the first must find at least
# 95% of its prompt in the prefix cache, as the usage fields report it (`cached_tokens`,
# `cache_read_input_tokens`): the previous turn's checkpoints end mid-page, and their partial pages
# are kept. Everything lives under a temporary HOME. Ends the server with SIGTERM.
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding flare and ignition}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-multiturn.XXXXXX")
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

step "export the demo model"
entry=$("$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
  { cat "$WORK/export.log" >&2; fail "ignition export demo failed"; }
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")

step "start flare run"
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
"$BIN/flare" run demo --port "$port" --plain --model-cache "$CACHE" --config "$CONFIG" \
  --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development >"$LOG" 2>&1 &
SERVER_PID=$!
for ((i = 0; i < 600; i++)); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || fail "flare run exited before serving"
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/health" >/dev/null || fail "no /health after 60 s"

step "4-turn conversations"
FLARE_URL=http://127.0.0.1:$port node "$HERE/lib/multiturn_suite.mjs" || fail "multi-turn suite failed"

step "SIGTERM"
kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=
[[ $status == 0 ]] || fail "flare run exited with status $status after SIGTERM"
echo "PASS"
