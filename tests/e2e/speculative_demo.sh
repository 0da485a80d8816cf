#!/usr/bin/env bash
# Speculative decoding end to end on the CPU: `ignition export demo` prepares the demo model with
# its trained draft (assets/demo-model/draft) in one package; `flare inspect` shows the
# speculation settings; three servers of that package (ordinary decoding with --mtp-draft-tokens 0,
# the learned draft, history drafts alone) must give identical answers (lib/speculative_suite.mjs)
# while the speculative ones count accepted drafts in /metrics. Also the flags' errors: draft counts
# beyond the package's, --no-mtp with other speculation flags, a draft with another vocabulary, and
# --history-drafts on a --no-mtp package. Everything lives under a temporary HOME.
set -euo pipefail
BIN=${FLARE_BIN:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${FLARE_TEST_DATA:-$HERE/../data}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-speculative.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
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
  for log in "$WORK"/server-*.log; do [[ -f $log ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }; done
  exit 1
}
step() { echo "== $*"; }
# expect STATUS PATTERN COMMAND...: the command exits with STATUS and its stderr matches PATTERN.
expect() {
  local status=$1 pattern=$2 got=0
  shift 2
  "$@" >"$WORK/out" 2>"$WORK/err" || got=$?
  [[ $got == "$status" ]] || { cat "$WORK/err" >&2; fail "$* exited $got, expected $status"; }
  grep -qE -- "$pattern" "$WORK/err" || { cat "$WORK/err" >&2; fail "$*: stderr lacks /$pattern/"; }
}

step "export errors"
expect 2 "--no-mtp excludes" "$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --no-mtp --mtp-draft-tokens 3
expect 2 "--mtp-draft-tokens must be from 0 to 15" "$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --mtp-draft-tokens 16
expect 2 "neither a checkpoint directory nor" "$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --draft-model no-such-draft
expect 5 "must share the target's tokenizer" "$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" \
  --draft-model "$DATA/models/qwen3-gqa2-hd128-tied"

step "ignition export demo (with its draft)"
entry=$("$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
  { cat "$WORK/export.log" >&2; fail "export failed"; }
"$BIN/flare" inspect "$entry" --plain >"$WORK/inspect.txt" 2>&1 || { cat "$WORK/inspect.txt" >&2; fail "inspect failed"; }
grep -q "speculation .*5 draft tokens" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt" >&2; fail "inspect lacks the speculation"; }
grep -q "draft model .*demo-model/draft" "$WORK/inspect.txt" || { cat "$WORK/inspect.txt" >&2; fail "inspect lacks the draft model"; }
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")
trust=(--dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development)

step "run errors"
expect 2 "verifies at most 5 draft tokens" "$BIN/flare" run "$entry" --plain --model-cache "$CACHE" "${trust[@]}" --mtp-draft-tokens 6
nomtp=$("$BIN/ignition" export demo --cpu --plain --no-mtp --model-cache "$WORK/cache-nomtp" --config "$CONFIG" 2>"$WORK/export2.log") ||
  { cat "$WORK/export2.log" >&2; fail "export --no-mtp failed"; }
expect 2 "exported with --no-mtp" "$BIN/flare" run "$nomtp" --plain --model-cache "$WORK/cache-nomtp" "${trust[@]}" --history-drafts

# serve NAME FLAGS...: starts flare run on a free port; prints the port.
serve() {
  local name=$1 port
  shift
  port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  "$BIN/flare" run "$entry" --port "$port" --plain --model-cache "$CACHE" --config "$CONFIG" "${trust[@]}" "$@" \
    >"$WORK/server-$name.log" 2>&1 &
  PIDS+=($!)
  echo "$port"
}
wait_ready() {
  local port=$1 name=$2
  for ((i = 0; i < 600; i++)); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "server $name never became ready"
}

step "three servers: ordinary, learned drafts, history drafts"
plain=$(serve plain --mtp-draft-tokens 0)
learned=$(serve learned)
history=$(serve history --history-drafts --mtp-draft-tokens 4)
wait_ready "$plain" plain
wait_ready "$learned" learned
wait_ready "$history" history
grep -q "speculation off" "$WORK/server-plain.log" || fail "the plain server's startup line"
grep -q "speculation up to 5 draft tokens (draft model" "$WORK/server-learned.log" || fail "the learned server's startup line"
grep -q "speculation up to 4 draft tokens (history, then the draft model" "$WORK/server-history.log" ||
  fail "the history server's startup line"

step "speculative suite"
node "$HERE/lib/speculative_suite.mjs" "http://127.0.0.1:$plain" "http://127.0.0.1:$learned" "http://127.0.0.1:$history" ||
  fail "speculative suite failed"
for pid in "${PIDS[@]}"; do kill -TERM "$pid"; done
for pid in "${PIDS[@]}"; do wait "$pid" || fail "a server exited non-zero after SIGTERM"; done
PIDS=()
echo "PASS"
