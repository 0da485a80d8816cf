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

fp8_checkpoint "${FLARE_FP8_MOE_CHECKPOINT:-build-gpu-carry/fp8-qwen3moe}" qwen3moe-e8-top2-dense1 fp8-block32
export_and_inspect "$checkpoint"
grep -q '"layers.0.experts.gate_up.scales"' "$HOME/inspect.json" || fail "the GPU package has no FP8 expert scales"
grep -q '"layers.0.experts.down.scales"' "$HOME/inspect.json" || fail "the GPU package has no FP8 down scales"

serve_package "$entry"
greedy_completions_agree
stop_server
echo "gpu_moe_fp8_export_run.sh: ok"
