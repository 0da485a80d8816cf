# Structured outputs end to end. 1) Random walks through the token masks over the real Qwen3 and
# Llama 3 vocabularies for the whole corpus in tests/data/structured (unit_grammar's CorpusWalk
# tests), every text validated by independent checkers (ajv for JSON Schema, JavaScript RegExp).
# 2) The demo model served by `flare run` (CPU) with every structured-output request field,
# through the openai SDK's chat.completions.parse / responses.parse (lib/structured_suite.mjs).
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding flare, ignition and unit_grammar}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-structured.XXXXXX")
SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [[ -f $WORK/server.log ]] && tail -n 40 "$WORK/server.log" >&2
  exit 1
}
step() { echo "== $*"; }
[[ -d $HERE/../node/node_modules/ajv ]] || fail "tests/node/node_modules/ajv is missing: run scripts/setup (npm ci)"

step "random walks over the corpus (Qwen3, Llama 3 vocabularies)"
FLARE_GRAMMAR_WALKS=$WORK/walks.jsonl "$BIN/tests/unit_grammar" --gtest_filter='CorpusWalk.*' >"$WORK/walks.log" 2>&1 ||
  { tail -n 60 "$WORK/walks.log" >&2; fail "the corpus walks failed"; }
node "$HERE/lib/structured_validate.mjs" "$WORK/walks.jsonl" || fail "a constrained text does not validate"

export HOME=$WORK/home
mkdir -p "$HOME/.config/flare"
CONFIG=$HOME/.config/flare/config.toml
: >"$CONFIG"
CACHE=$WORK/cache
step "export and serve the demo model"
"$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --config "$CONFIG" >/dev/null 2>"$WORK/export.log" ||
  { cat "$WORK/export.log" >&2; fail "ignition export demo failed"; }
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
api_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$api_key" >"$WORK/api-key"
chmod 600 "$WORK/api-key"
"$BIN/flare" run demo --port "$port" --plain --model-cache "$CACHE" --config "$CONFIG" --api-key-file "$WORK/api-key" \
  --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for ((i = 0; i < 600; i++)); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || fail "flare run exited before serving"
  sleep 0.1
done
export FLARE_URL=http://127.0.0.1:$port FLARE_API_KEY=$api_key
step "structured outputs through the openai SDK"
node "$HERE/lib/structured_suite.mjs" || fail "structured outputs suite failed"
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "flare run exited with status $? after SIGTERM"
SERVER_PID=
echo "PASS"
