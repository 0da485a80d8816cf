# Shared by the GPU end-to-end scripts (tests/e2e/gpu_*.sh), sourced after `set -euo pipefail`:
# skips with status 77 where no NVIDIA GPU is visible, gives the script a private HOME (removed at
# exit, with any server still running), and serves a published package with `flare run`.
#   gpu_e2e_init NAME       the skip and the HOME; NAME prefixes the skip message
#   serve_package ENTRY     starts flare run on a free port ($port, pid $server), waits until it is
#                           healthy ($ready: the seconds that took) and checks that loading compiled
#                           and tuned nothing
#   stop_server             SIGINT, a clean exit, and nothing compiled or tuned while serving
BIN=${FLARE_BIN:-build}
server=
fail() { echo "FAIL: $*" >&2; exit 1; }
elapsed() { python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.2f}')" "$1"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

gpu_e2e_init() {
  script=$1  # named in skip messages
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "$1: no NVIDIA GPU visible; skipped"
    exit 77
  fi
  export HOME=$(mktemp -d)
  trap 'if [[ -n "$server" ]]; then kill -TERM "$server" 2>/dev/null || true; fi; rm -rf "$HOME"' EXIT
}

serve_package() {
  local entry=$1 fingerprint start
  fingerprint=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["keys"][0]["fingerprint"])' \
    "$HOME/.config/flare/development-publisher.json")
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  start=$(date +%s.%N)
  "$BIN/flare" run "$entry" --port "$port" --kv-cache-limit concurrency \
    --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development 2>"$HOME/run.log" &
  server=$!
  for _ in $(seq 1 240); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
    kill -0 $server 2>/dev/null || { cat "$HOME/run.log"; fail "the server exited"; }
    sleep 0.25
  done
  ready=$(elapsed "$start")
  cat "$HOME/run.log"
  grep -qE "Load kernels.* [1-9][0-9]* kernel modules .* 0 compiled, 0 tuned" "$HOME/run.log" || fail "loading compiled or tuned"
}

stop_server() {
  kill -INT $server
  wait $server || fail "the server did not stop cleanly"
  server=
  grep -q "While serving: 0 kernels compiled, 0 GEMM shapes tuned" "$HOME/run.log" ||
    { cat "$HOME/run.log"; fail "serving compiled or tuned"; }
}

# fp8_checkpoint CARRIED FIXTURE LAYOUT: sets `checkpoint` to the FP8 checkpoint scripts/gpu-carry
# wrote at CARRIED, or writes one with node from tests/data/models/FIXTURE in LAYOUT
# (tests/e2e/lib/fp8_checkpoint.mjs); skips (status 77) where neither can be had.
fp8_checkpoint() {
  local carried=$1 fixture=$2 layout=$3
  checkpoint=$carried
  if [[ -f $checkpoint/config.json ]]; then return; fi
  if ! command -v node >/dev/null; then
    echo "$script: no FP8 checkpoint at $checkpoint and no node to write one; skipped"
    exit 77
  fi
  checkpoint=$HOME/$(basename "$carried")
  node tests/e2e/lib/fp8_checkpoint.mjs "tests/data/models/$fixture" "$checkpoint" "$HOME/bf16" "$layout"
  cp assets/demo-model/tokenizer.json assets/demo-model/tokenizer_config.json "$checkpoint/"
}

# export_and_inspect CHECKPOINT: exports it for GPU 0, sets `entry`, writes $HOME/inspect.json.
export_and_inspect() {
  "$BIN/ignition" export "$1" --gpus 0 >"$HOME/entry" 2>"$HOME/export.log" || { cat "$HOME/export.log"; fail "export"; }
  cat "$HOME/export.log"
  entry=$(cat "$HOME/entry")
  "$BIN/flare" inspect "$entry" --all --json >"$HOME/inspect.json" || fail "inspect"
}

# greedy_completions_agree: on the running server, a greedy completion of a token-id prompt, the
# same prompt beside another in one request, and the first again, which must answer the same.
greedy_completions_agree() {
  local model first again batch
  model=$(curl -sf "http://127.0.0.1:$port/v1/models" | json 'd["data"][0]["id"]') || fail "models request"
  complete() {
    curl -sf "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
      -d "{\"model\": \"$model\", \"prompt\": [$1], \"max_tokens\": 24, \"temperature\": 0}"
  }
  first=$(complete "5, 17, 42, 99, 3, 250, 7") || fail "completion request"
  echo "$first" | json 'd["choices"][0]["text"]'
  [[ $(echo "$first" | json 'd["usage"]["completion_tokens"]') -ge 1 ]] || fail "no tokens generated"
  batch=$(curl -sf "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
    -d "{\"model\": \"$model\", \"prompt\": [[5, 17, 42, 99, 3, 250, 7], [1, 2, 3]], \"max_tokens\": 24, \"temperature\": 0}") ||
    fail "batched completion request"
  again=$(complete "5, 17, 42, 99, 3, 250, 7") || fail "second completion request"
  [[ $(echo "$first" | json 'd["choices"][0]["text"]') == $(echo "$again" | json 'd["choices"][0]["text"]') ]] ||
    fail "the same greedy request answered differently"
  echo "$batch" | json '[c["text"] for c in d["choices"]]'
}
