#!/usr/bin/env bash
# GPU end to end (label gpu; skipped with status 77 where no NVIDIA GPU is visible): ignition export
# of the built-in demo model for the GPU, flare run of the published sm_NN package, a greedy
# completion and a chat answer, and proof that loading and serving compiled and tuned nothing
# (the package carries the kernels and the GEMM table). A second export reuses the kernel cache.
set -euo pipefail
source "$(dirname "$0")/lib/gpu_serve.bash"
gpu_e2e_init gpu_export_run.sh

start=$(date +%s.%N)
"$BIN/ignition" export demo --gpus 0 >"$HOME/entry" 2>"$HOME/export.log" || { cat "$HOME/export.log"; fail "export"; }
cat "$HOME/export.log"
grep -qE "Select GPUs\. .*GPU 0" "$HOME/export.log" || fail "the export did not select GPU 0"
grep -qE "Compile forwards.*[ (][1-9][0-9]* compiled" "$HOME/export.log" || fail "a first export compiled no kernels"
entry=$(cat "$HOME/entry")
echo "export took $(elapsed "$start") s; entry $entry"
# The demo's GPU package carries its trained draft model: its kernels, GEMM shapes and decode
# graphs are prepared beside the target's. Verify rounds are timed against decode steps at export,
# recorded in the manifest and shown by inspect.
grep -qE "Capture graphs.* [1-9][0-9]* draft-model decode graphs" "$HOME/export.log" || fail "no draft-model graphs"
grep -qE "Capture graphs.*a verify round of 1 row x [0-9]+ tokens costs [0-9.]+x a decode step" "$HOME/export.log" \
  || fail "the export did not time its verify rounds"
"$BIN/flare" inspect "$entry" >"$HOME/inspect.txt" || fail "inspect"
grep -q "verify costs" "$HOME/inspect.txt" || { cat "$HOME/inspect.txt"; fail "inspect shows no verify costs"; }
"$BIN/flare" inspect --json "$entry" >"$HOME/inspect.json" || fail "inspect --json"
json 'sorted({(s["rows"], s["tokens_per_row"]) for s in d["speculation"]["measured_steps"] if s["milliseconds"] > 0})[:3]' \
  <"$HOME/inspect.json"
[[ $(json 'sum(1 for s in d["speculation"]["measured_steps"] if s["rows"] == 1 and s["milliseconds"] > 0)' \
   <"$HOME/inspect.json") -ge 2 ]] || fail "the package records no decode and verify times at one row"

# A second export finds every kernel in the kernel cache and every GEMM shape tuned.
"$BIN/ignition" export demo --gpus 0 >/dev/null 2>"$HOME/export2.log" || { cat "$HOME/export2.log"; fail "second export"; }
grep -qE "Compile forwards.*[ (]0 compiled" "$HOME/export2.log" || { cat "$HOME/export2.log"; fail "the second export compiled kernels again"; }
grep -qE "Tune kernels.* 0 GEMM shapes timed" "$HOME/export2.log" || { cat "$HOME/export2.log"; fail "the second export tuned again"; }

serve_package "$entry"
grep -q "with the draft model" "$HOME/run.log" || fail "flare run did not load the package's draft model"
grep -qE "speculation up to [0-9]+ draft tokens \(draft model" "$HOME/run.log" || fail "flare run does not speculate with the draft"

first=$(date +%s.%N)
curl -sf "http://127.0.0.1:$port/v1/completions" -H 'content-type: application/json' \
  -d '{"model": "demo", "prompt": "def fibonacci(n):", "max_tokens": 48, "temperature": 0}' >"$HOME/completion.json" \
  || fail "completion request"
echo "first request answered in $(elapsed "$first") s (server ready in $ready s)"
json 'd["choices"][0]["text"]' <"$HOME/completion.json"
[[ $(json 'd["usage"]["completion_tokens"]' <"$HOME/completion.json") -ge 1 ]] || fail "no tokens generated"
curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"model": "demo", "messages": [{"role": "user", "content": "Write a function that adds two numbers."}], "max_tokens": 64}' \
  >"$HOME/chat.json" || fail "chat request"
json 'd["choices"][0]["message"]["content"]' <"$HOME/chat.json"

# Speculation is visible in the metrics: rounds verified, drafts accepted.
curl -sf "http://127.0.0.1:$port/metrics" >"$HOME/metrics.txt" || fail "metrics"
grep -E "^flare_spec_decode_(verify_rounds|accepted_tokens)_total" "$HOME/metrics.txt" || fail "no speculation metrics"
awk '/^flare_spec_decode_verify_rounds_total/ {exit !($2 > 0)}' "$HOME/metrics.txt" || fail "no verify round ran"

stop_server
echo "gpu_export_run.sh: ok"
