# FP8 checkpoints through `ignition export` on the CPU: the tiny test checkpoint's projections
# quantized to F8_E4M3 (HF's fp8 layout with block scales, compressed-tensors with channel scales)
# export to the same weight payloads, byte for byte, as a BF16 checkpoint of the values they encode.
source "$(dirname "$0")/lib/package_common.bash"

for layout in fp8-block ct-channel; do
  step "$layout"
  node "$SOURCE_ROOT/tests/e2e/lib/fp8_checkpoint.mjs" "$CHECKPOINT" "$WORK/$layout-fp8" "$WORK/$layout-bf16" "$layout"
  grep -q '"quantization_config"' "$WORK/$layout-fp8/config.json" || fail "$layout: no quantization config written"
  entries=()
  for kind in fp8 bf16; do
    dir=$WORK/$layout-$kind
    cp "$CHECKPOINT/tokenizer.json" "$CHECKPOINT/tokenizer_config.json" "$dir/"
    entry=$("$IGNITION" export "$dir" --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log") ||
      { cat "$WORK/export.log" >&2; fail "$layout: export of the $kind checkpoint failed"; }
    entries+=("$entry")
  done
  n_payloads=0
  for file in "${entries[1]}"/weights/*; do
    cmp "$file" "${entries[0]}/weights/$(basename "$file")" || fail "$layout: $(basename "$file") differs from the BF16 export"
    n_payloads=$((n_payloads + 1))
  done
  ((n_payloads > 0)) || fail "$layout: the BF16 export has no weight payloads"
  echo "$layout: $n_payloads weight payloads identical"
done
