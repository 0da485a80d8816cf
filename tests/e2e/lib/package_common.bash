# Shared setup for the package e2e tests (sourced, not a test itself): a temporary HOME, config
# and model cache so nothing touches the real home, helpers to export the tiny test checkpoint,
# read JSON fields, expect failures, and flip a byte in a file.
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding flare and ignition}
DATA=${FLARE_TEST_DATA:-$(pwd)/tests/data}
SOURCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-package.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export HOME=$WORK/home
mkdir -p "$HOME/.config/flare"
CONFIG=$HOME/.config/flare/config.toml
: >"$CONFIG"
CACHE=$WORK/cache
FLARE=$BIN/flare
IGNITION=$BIN/ignition
# A tiny checkpoint (random Qwen3 weights) with the demo model's tokenizer files beside it.
CHECKPOINT=$WORK/tiny-qwen3
mkdir -p "$CHECKPOINT"
cp "$DATA/models/qwen3-gqa2-hd128-tied/config.json" "$DATA/models/qwen3-gqa2-hd128-tied/model.safetensors" "$CHECKPOINT/"
cp "$SOURCE_ROOT/assets/demo-model/tokenizer.json" "$SOURCE_ROOT/assets/demo-model/tokenizer_config.json" "$CHECKPOINT/"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

step() { echo "== $*"; }

# export_entry: prints the published entry path (models/<key>/<version>).
export_entry() {
  "$IGNITION" export "$CHECKPOINT" --cpu --plain --model-cache "$CACHE" --config "$CONFIG" 2>"$WORK/export.log" ||
    { cat "$WORK/export.log" >&2; fail "ignition export failed"; }
}

# json_get FILE EXPRESSION: evaluates a JavaScript expression over the parsed JSON `j`.
json_get() {
  node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           const v = eval(process.argv[2]); console.log(typeof v === "object" ? JSON.stringify(v) : String(v));' "$1" "$2"
}

# expect_fail STATUS PATTERN COMMAND...: the command must exit with STATUS and print PATTERN.
expect_fail() {
  local want=$1 pattern=$2
  shift 2
  local status=0
  "$@" >"$WORK/out" 2>&1 || status=$?
  [[ $status == "$want" ]] || { cat "$WORK/out" >&2; fail "expected exit $want, got $status: $*"; }
  grep -q -- "$pattern" "$WORK/out" || { cat "$WORK/out" >&2; fail "expected '$pattern' from: $*"; }
}

# expect_output PATTERN COMMAND...: the command must succeed and print PATTERN.
expect_output() {
  local pattern=$1
  shift
  "$@" >"$WORK/out" 2>&1 || { cat "$WORK/out" >&2; fail "command failed: $*"; }
  grep -q -- "$pattern" "$WORK/out" || { cat "$WORK/out" >&2; fail "expected '$pattern' from: $*"; }
}

# flip_last_byte FILE: xors the file's last byte with 1 in place.
flip_last_byte() {
  local size byte
  size=$(stat -c %s "$1")
  byte=$(tail -c 1 "$1" | od -An -tu1 | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 1)))" | dd of="$1" bs=1 seek=$((size - 1)) conv=notrunc status=none
}
