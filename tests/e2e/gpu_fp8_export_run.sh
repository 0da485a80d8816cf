#!/usr/bin/env bash
# GPU end to end of an FP8 checkpoint (label gpu; skipped with status 77 where no NVIDIA GPU is
# visible, or where no FP8 checkpoint can be had): the tiny Qwen3 fixture quantized to F8_E4M3 with
# one scale per output channel (compressed-tensors, tests/e2e/lib/fp8_checkpoint.mjs), exported for
# GPU 0 by ignition, whose package keeps the projections as F8_E4M3 with their scales; flare run
# loads it compiling and tuning nothing (the package carries the FP8 kernels and their GEMM choices)
# and answers greedy completions of token-id prompts, twice the same.
#   FLARE_FP8_CHECKPOINT=DIR  the FP8 checkpoint (scripts/gpu-carry writes build-gpu-carry/fp8-qwen3);
#                             without it the script writes one with node, where node exists.
set -euo pipefail
BIN=${FLARE_BIN:-build}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_fp8_export_run.sh: no NVIDIA GPU visible; skipped"
  exit 77
fi
export HOME=$(mktemp -d)
server=
trap 'if [[ -n "$server" ]]; then kill -TERM "$server" 2>/dev/null || true; fi; rm -rf "$HOME"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

checkpoint=${FLARE_FP8_CHECKPOINT:-build-gpu-carry/fp8-qwen3}
if [[ ! -f $checkpoint/config.json ]]; then
  if ! command -v node >/dev/null; then
    echo "gpu_fp8_export_run.sh: no FP8 checkpoint at $checkpoint and no node to write one; skipped"
    exit 77
  fi
  checkpoint=$HOME/fp8-qwen3
  node tests/e2e/lib/fp8_checkpoint.mjs tests/data/models/qwen3-gqa2-hd128-tied "$checkpoint" "$HOME/bf16" ct-channel
  cp assets/demo-model/tokenizer.json assets/demo-model/tokenizer_config.json "$checkpoint/"
fi

"$BIN/ignition" export "$checkpoint" --gpus 0 >"$HOME/entry" 2>"$HOME/export.log" || { cat "$HOME/export.log"; fail "export"; }
cat "$HOME/export.log"
entry=$(cat "$HOME/entry")
"$BIN/flare" inspect "$entry" --all --json >"$HOME/inspect.json" || fail "inspect"
grep -q '"F8_E4M3"' "$HOME/inspect.json" || fail "the GPU package holds no F8_E4M3 tensor"
grep -q '"layers.0.qkv.scales"' "$HOME/inspect.json" || fail "the GPU package has no qkv scales"
grep -q 'fp8_linear' "$HOME/inspect.json" || fail "the GPU package carries no FP8 GEMM kernels"

fingerprint=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["keys"][0]["fingerprint"])' \
  "$HOME/.config/flare/development-publisher.json")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/flare" run "$entry" --port "$port" --kv-cache-limit concurrency \
  --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development 2>"$HOME/run.log" &
server=$!
for _ in $(seq 1 240); do
  if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
  kill -0 $server 2>/dev/null || { cat "$HOME/run.log"; fail "the server exited"; }
  sleep 0.25
done
cat "$HOME/run.log"
grep -qE "Load kernels.* [1-9][0-9]* kernel modules .* 0 compiled, 0 tuned" "$HOME/run.log" || fail "loading compiled or tuned"

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

kill -INT $server
wait $server || fail "the server did not stop cleanly"
server=
grep -q "While serving: 0 kernels compiled, 0 GEMM shapes tuned" "$HOME/run.log" || { cat "$HOME/run.log"; fail "serving compiled or tuned"; }
echo "gpu_fp8_export_run.sh: ok"
