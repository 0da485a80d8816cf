# The gpt-oss (o200k_harmony) tokenizer against js-tiktoken: builds the Hugging Face
# tokenizer.json from js-tiktoken's o200k_base ranks (tools/o200k-tokenizer.mjs; ~12 MB, never
# committed), writes js-tiktoken's ids for the tokenizer corpus, the random corpus and
# tests/data/tokenizers/o200k_cases.json (tests/e2e/lib/o200k_reference.mjs), then runs the
# O200kTokenizerTest unit tests on them, and the harmony tool-call walks over the same vocabulary
# (unit_server's *O200k tests). Fails if those tests skip or do not all run.
set -euo pipefail

BIN=${FLARE_BIN:?FLARE_BIN must name the build directory holding tests/unit_text}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-e2e-o200k.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ -d $ROOT/tests/node/node_modules/js-tiktoken ]] || fail "tests/node/node_modules lacks js-tiktoken: run scripts/setup (npm ci)"
[[ -x $BIN/tests/unit_text ]] || fail "$BIN/tests/unit_text is not built"
[[ -x $BIN/tests/unit_server ]] || fail "$BIN/tests/unit_server is not built"
node "$ROOT/tools/o200k-tokenizer.mjs" "$WORK" || fail "o200k-tokenizer.mjs failed"
node "$HERE/lib/o200k_reference.mjs" "$WORK" || fail "o200k_reference.mjs failed"
FLARE_O200K_DIR=$WORK "$BIN/tests/unit_text" --gtest_filter='O200kTokenizerTest.*' --gtest_brief=0 >"$WORK/unit.log" 2>&1 ||
  { cat "$WORK/unit.log" >&2; fail "O200kTokenizerTest failed"; }
cat "$WORK/unit.log"
grep -q "SKIPPED" "$WORK/unit.log" && fail "O200kTokenizerTest skipped"
grep -q "\[  PASSED  \] 3 tests" "$WORK/unit.log" || fail "O200kTokenizerTest did not run its 3 tests"
FLARE_O200K_DIR=$WORK "$BIN/tests/unit_server" --gtest_filter='*O200k.*' --gtest_brief=0 >"$WORK/server.log" 2>&1 ||
  { cat "$WORK/server.log" >&2; fail "unit_server's o200k tests failed"; }
cat "$WORK/server.log"
grep -q "SKIPPED" "$WORK/server.log" && fail "unit_server's o200k tests skipped"
grep -q "\[  PASSED  \] 2 tests" "$WORK/server.log" || fail "unit_server did not run its 2 o200k tests"
echo "PASS"
