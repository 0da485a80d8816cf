# FP8 checkpoints through `ignition export` on the CPU: the tiny test checkpoint's projections
# quantized to F8_E4M3 (HF's fp8 layout with block scales, compressed-tensors with channel scales)
# export their projection matrices as F8_E4M3 with scales (`flare inspect --all --json`), in layer
# payloads smaller than those of a BF16 checkpoint of the values they encode; the embedding payload,
# unquantized in both, is byte for byte the same.
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
  "$FLARE" inspect "${entries[0]}" --all --json >"$WORK/inspect.json" || fail "$layout: inspect of the FP8 export failed"
  grep -q '"F8_E4M3"' "$WORK/inspect.json" || fail "$layout: the FP8 export holds no F8_E4M3 tensor"
  grep -q '"layers.0.qkv.scales"' "$WORK/inspect.json" || fail "$layout: the FP8 export has no qkv scales"
  cmp "${entries[0]}/weights/embedding.safetensors" "${entries[1]}/weights/embedding.safetensors" ||
    fail "$layout: the embedding payload differs from the BF16 export"
  for file in "${entries[1]}"/weights/layer-*; do
    fp8_size=$(stat -c %s "${entries[0]}/weights/$(basename "$file")")
    bf16_size=$(stat -c %s "$file")
    ((fp8_size < bf16_size)) || fail "$layout: $(basename "$file") is $fp8_size bytes in FP8, $bf16_size in BF16"
  done
  echo "$layout: FP8 layer payloads smaller, embedding identical"
done
