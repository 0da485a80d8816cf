#!/usr/bin/env bash
# `ignition bench` and cuda_forward_bench without a usable GPU: exit 1 with a message saying so
# (CUDA_VISIBLE_DEVICES is emptied, so this holds on GPU machines too), while bad arguments and
# unknown models are still usage errors (exit 2) caught before any GPU is looked for.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${FLARE_BIN:-build}
export HOME=$(mktemp -d)
trap 'rm -rf "$HOME"' EXIT

expect() {  # expect STATUS TEXT COMMAND...: the command exits STATUS and its stderr contains TEXT
  local status=$1 text=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -ne $status || "$err" != *"$text"* ]]; then
    echo "bench_without_gpu.sh: '$*' exited $rc (expected $status) with: $err" >&2
    exit 1
  fi
  echo "ok: $* -> $rc"
}

export CUDA_VISIBLE_DEVICES=
expect 1 "no usable GPU" "$BIN/ignition" bench llama-3.1-8b
expect 1 "no usable GPU" "$BIN/ignition" bench qwen3-8b --batches 1 --prefill 0
expect 2 "unknown model 'no-such-model'" "$BIN/ignition" bench no-such-model
expect 2 "--batches: 4 is listed twice" "$BIN/ignition" bench llama-3.1-8b --batches 4,4
expect 2 "one GPU" "$BIN/ignition" bench llama-3.1-8b --gpus 0,1
expect 1 "no usable GPU" "$BIN/ignition" bench llama-3.1-8b --no-stream-gemm --dependent-launch all --gemm-race-log
expect 2 "'sometimes' is not a launch mode" "$BIN/ignition" bench llama-3.1-8b --dependent-launch sometimes
if [[ -x "$BIN/bench/cuda_forward_bench" ]]; then
  expect 1 "no usable GPU" "$BIN/bench/cuda_forward_bench" --shape qwen3-8b
  expect 2 "is neither a known shape" "$BIN/bench/cuda_forward_bench" --shape no-such-shape
  expect 2 "'fp16' is not a KV dtype" "$BIN/bench/cuda_forward_bench" --kv-dtype fp16
  expect 1 "no usable GPU" "$BIN/bench/cuda_forward_bench" --no-stream-gemm --dependent-launch off --gemm-race-log
  expect 2 "'1' is not a launch mode" "$BIN/bench/cuda_forward_bench" --dependent-launch 1
fi
