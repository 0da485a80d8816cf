#!/usr/bin/env bash
# GPU end to end of a Qwen3-MoE FP8 checkpoint (label gpu; skipped with status 77 where no NVIDIA
# GPU is visible, or where no FP8 checkpoint can be had): the tiny Qwen3-MoE fixture (8 experts, top
# 2) with every projection, experts included, quantized to F8_E4M3 in 32 x 32 blocks
# (tests/e2e/lib/fp8_checkpoint.mjs fp8-block32), exported for GPU 0 by ignition, whose package keeps
# the expert stacks as F8_E4M3 with their stacked scales; flare run loads it (the FP8 expert kernels
# keep them FP8 in device memory) and answers greedy completions of token-id prompts, alone and
# batched, twice the same.
#   FLARE_FP8_MOE_CHECKPOINT=DIR  the FP8 checkpoint (scripts/gpu-carry writes build-gpu-carry/fp8-qwen3moe);
#                                 without it the script writes one with node, where node exists.
set -euo pipefail
source "$(dirname "$0")/lib/gpu_serve.bash"
gpu_e2e_init gpu_moe_fp8_export_run.sh

checkpoint=${FLARE_FP8_MOE_CHECKPOINT:-build-gpu-carry/fp8-qwen3moe}
if [[ ! -f $checkpoint/config.json ]]; then
  if ! command -v node >/dev/null; then
    echo "gpu_moe_fp8_export_run.sh: no FP8 checkpoint at $checkpoint and no node to write one; skipped"
    exit 77
  fi
  checkpoint=$HOME/fp8-qwen3moe
  node tests/e2e/lib/fp8_checkpoint.mjs tests/data/models/qwen3moe-e8-top2-dense1 "$checkpoint" "$HOME/bf16" fp8-block32
  cp assets/demo-model/tokenizer.json assets/demo-model/tokenizer_config.json "$checkpoint/"
fi

"$BIN/ignition" export "$checkpoint" --gpus 0 >"$HOME/entry" 2>"$HOME/export.log" || { cat "$HOME/export.log"; fail "export"; }
cat "$HOME/export.log"
entry=$(cat "$HOME/entry")
"$BIN/flare" inspect "$entry" --all --json >"$HOME/inspect.json" || fail "inspect"
grep -q '"layers.0.experts.gate_up.scales"' "$HOME/inspect.json" || fail "the GPU package has no FP8 expert scales"
grep -q '"layers.0.experts.down.scales"' "$HOME/inspect.json" || fail "the GPU package has no FP8 down scales"

serve_package "$entry"

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

stop_server
echo "gpu_moe_fp8_export_run.sh: ok"
