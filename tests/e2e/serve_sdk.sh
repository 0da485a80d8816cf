# Serves the built-in demo model with `flare run` (CPU) and drives it with the real npm clients:
# tests/e2e/sdk_suite.mjs (every API through the openai and @anthropic-ai/sdk packages, error
# cases, metrics afterwards) and tests/e2e/sdk_load.mjs (200 concurrent short streams, fails
# on any error). Everything lives under a temporary HOME: config, signing key, trust store, cache.
# Ends the server with SIGTERM and requires exit status 0.
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding flare and ignition}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-serve.XXXXXX")
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
[[ -d $entry ]] || fail "export printed '$entry', not a cache entry"
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")
[[ $fingerprint =~ ^[0-9a-f]{64}$ ]] || fail "development key fingerprint '$fingerprint'"

step "start flare run"
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
api_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$api_key" >"$WORK/api-key"
chmod 600 "$WORK/api-key"
"$BIN/flare" run demo --port "$port" --plain --model-cache "$CACHE" --config "$CONFIG" \
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

export FLARE_URL=http://127.0.0.1:$port FLARE_API_KEY=$api_key

step "SDK suite"
node "$HERE/sdk_suite.mjs" || fail "SDK suite failed"

# All 200 at once: beyond the server's connection cap, clients wait in the listen backlog.
step "load: 200 concurrent streaming requests"
node "$HERE/sdk_load.mjs" 200 8 200 || fail "load test failed"
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died under load"
curl -fsS "http://127.0.0.1:$port/health" >/dev/null || fail "no /health after the load test"
for ((i = 0; i < 50; i++)); do
  running=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^flare_num_requests_running/ {print $NF}')
  [[ $running == 0 ]] && break
  sleep 0.1
done
[[ $running == 0 ]] || fail "/metrics shows $running requests running after the load test"

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
