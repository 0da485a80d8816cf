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
source "$(dirname "$0")/lib/gpu_serve.bash"
gpu_e2e_init gpu_fp8_export_run.sh

fp8_checkpoint "${FLARE_FP8_CHECKPOINT:-build-gpu-carry/fp8-qwen3}" qwen3-gqa2-hd128-tied ct-channel
export_and_inspect "$checkpoint"
grep -q '"F8_E4M3"' "$HOME/inspect.json" || fail "the GPU package holds no F8_E4M3 tensor"
grep -q '"layers.0.qkv.scales"' "$HOME/inspect.json" || fail "the GPU package has no qkv scales"
grep -q 'fp8_linear' "$HOME/inspect.json" || fail "the GPU package carries no FP8 GEMM kernels"

serve_package "$entry"
greedy_completions_agree
stop_server
echo "gpu_fp8_export_run.sh: ok"
