#!/usr/bin/env bash
# The live dashboard of `flare run` on a real terminal: the demo package served inside a detached
# tmux pane, read back with capture-pane. After the loading stages the pane shows the dashboard;
# requests move its counters (served, an error by status, tokens/s, TTFT); a resize redraws the
# boxes at the new width; Ctrl-C drains, gives the screen back (the loading lines are visible
# again, the dashboard is gone) and the server exits 0. Everything lives under a temporary HOME
# and a private tmux socket.
set -euo pipefail
BIN=${FLARE_BIN:-build}
command -v tmux >/dev/null || { echo "dashboard_tmux.sh: tmux is not installed (scripts/setup installs it)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-dashboard.XXXXXX")
SOCKET="flare-e2e-$$"
export LANG=C.UTF-8 LC_ALL=C.UTF-8
tmux_() { tmux -u -L "$SOCKET" -f /dev/null "$@"; }
# width TEXT: display columns (code points: the dashboard's text is all narrow), trailing blanks dropped.
width() { node -e 'process.stdout.write(String([...process.argv[1].replace(/ +$/, "")].length))' "$1"; }
cleanup() {
  tmux_ kill-server 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export HOME=$WORK/home
mkdir -p "$HOME/.config/flare"
CONFIG=$HOME/.config/flare/config.toml
: >"$CONFIG"
CACHE=$WORK/cache
BIN=$(cd "$BIN" && pwd)
fail() {
  echo "FAIL: $*" >&2
  echo "--- the pane:" >&2
  tmux_ capture-pane -p -J -t flare >&2 2>/dev/null || true
  exit 1
}
step() { echo "== $*"; }
# wait_for PATTERN: until the pane shows PATTERN (extended regex), 30 s at most.
wait_for() {
  for ((i = 0; i < 300; i++)); do
    tmux_ capture-pane -p -t flare 2>/dev/null | grep -qE -- "$1" && return 0
    sleep 0.1
  done
  fail "the pane never showed /$1/"
}

step "ignition export demo"
entry=$("$BIN/ignition" export demo --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
  { cat "$WORK/export.log" >&2; fail "export failed"; }
fingerprint=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                       process.stdout.write(p.keys[0].fingerprint)' "$HOME/.config/flare/development-publisher.json")
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')

step "flare run in a 100 x 40 tmux pane"
printf '%s\n' "#!/usr/bin/env bash" \
  "export HOME='$HOME' TERM=xterm-256color" \
  "'$BIN/flare' run '$entry' --port $port --model-cache '$CACHE' --config '$CONFIG' --dangerously-approve-key $fingerprint --dangerously-accept-publisher local-development" \
  "echo \"flare exited \$?\"" \
  "sleep 60" >"$WORK/serve.sh"
tmux_ new-session -d -s flare -x 100 -y 40 "bash '$WORK/serve.sh'"
wait_for "Requests"
curl -fsS "http://127.0.0.1:$port/health" >/dev/null || fail "/health does not answer"
screen=$(tmux_ capture-pane -p -t flare)
grep -q "✦ flare  " <<<"$screen" || fail "no header line"
grep -q "http://127.0.0.1:$port" <<<"$screen" || fail "the header lacks the URL"
grep -qE "running +0 of [0-9]+, 0 queued" <<<"$screen" || fail "no idle request counts"
grep -q "Loading\|Verify package" <<<"$screen" && fail "the loading lines are still on the dashboard's screen"

step "requests move the counters"
for i in 1 2; do
  curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "def fibonacci(n):", "max_tokens": 24, "temperature": 0}' >"$WORK/completion-$i.json" ||
    fail "completion $i failed"
done
status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/no-such-route")
[[ $status == 404 ]] || fail "expected a 404, got $status"
wait_for "served +2 ok"
wait_for "404 ×1"
wait_for "TTFT +p50 [0-9.]+ (ms|s) "
wait_for "generated +[0-9.,]+ tokens/s"
wait_for "KV pages +[0-9,]+ used, [0-9,]+ backed, [0-9,]+ reserved"
screen=$(tmux_ capture-pane -p -t flare)
grep -qE "generated +0 tokens/s" <<<"$screen" && fail "no generated tokens counted"
top=$(grep -m1 "Requests" <<<"$screen")
[[ $(width "$top") == 100 ]] || fail "the box is not 100 columns wide: '$top'"

step "a resize redraws at the new width"
tmux_ resize-window -t flare -x 72 -y 30
for ((i = 0; i < 50; i++)); do
  top=$(tmux_ capture-pane -p -t flare | grep -m1 "Requests" || true)
  [[ $(width "$top") == 72 ]] && break
  sleep 0.1
done
[[ $(width "$top") == 72 ]] || fail "after the resize the box is not 72 columns: '$top'"
tmux_ capture-pane -p -t flare >"$WORK/screen.txt"
cat "$WORK/screen.txt"

step "Ctrl-C drains and gives the terminal back"
tmux_ send-keys -t flare C-c
wait_for "flare exited 0"
screen=$(tmux_ capture-pane -p -J -t flare)  # -J: the long startup line may have wrapped
grep -q "Serving .* ready in" <<<"$screen" || fail "the startup lines did not come back"
grep -q "Stopped\." <<<"$screen" || fail "no Stopped. line"
grep -q "┌─ Requests" <<<"$screen" && fail "the dashboard is still on the screen"
echo "PASS"
