#!/usr/bin/env bash
# ignition export and flare run at their edges: exit codes and messages for usage, capacity and
# preparation errors, weight reuse on a second export, --no-weights, and flare run refusing bad
# flags before it loads anything. Uses a fresh HOME and the built-in demo model.
set -euo pipefail
BIN=${FLARE_BIN:-build}
export HOME=$(mktemp -d)
trap 'rm -rf "$HOME"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect STATUS PATTERN COMMAND...: runs COMMAND, checks its exit status and that stderr matches.
expect() {
  local status=$1 pattern=$2
  shift 2
  set +e
  "$@" >"$HOME/out" 2>"$HOME/err"
  local got=$?
  set -e
  [[ $got == "$status" ]] || { cat "$HOME/err"; fail "$* exited $got, expected $status"; }
  grep -qE -- "$pattern" "$HOME/err" || { cat "$HOME/err"; fail "$*: stderr lacks /$pattern/"; }
}

# Usage errors (exit 2).
expect 2 "unknown model 'demoo' \(did you mean 'demo'\?\)" "$BIN/ignition" export demoo
expect 2 "no model given" "$BIN/ignition" export
expect 2 "multiple of 64" "$BIN/ignition" export demo --prefill-chunk-size 100
expect 2 "max-concurrency" "$BIN/ignition" export demo --max-concurrency 100000
expect 2 "invalid --gpus" "$BIN/ignition" export demo --gpus 3-1
expect 2 "unknown command 'exprot' \(did you mean 'export'\?\)" "$BIN/ignition" exprot demo
printf '[server]\nprot = 1\n' >"$HOME/bad.toml"
expect 2 "did you mean 'port'" "$BIN/ignition" export demo --config "$HOME/bad.toml"
expect 2 "does not exist" "$BIN/ignition" export demo --config "$HOME/missing.toml"

# Help never reads the configuration, even a broken one.
"$BIN/ignition" export --config "$HOME/bad.toml" --help >/dev/null || fail "help read the configuration"
"$BIN/flare" help run >/dev/null || fail "flare help run"

# A capacity error in the spec's section 6 form (exit 4): a reserve larger than the host's memory.
printf '[memory]\nreserve = "100000G"\n' >"$HOME/reserve.toml"
expect 4 "^error: needs .* weights \+ " "$BIN/ignition" export demo --config "$HOME/reserve.toml"
grep -qE "= [0-9.]+ GiB;$" "$HOME/err" || { cat "$HOME/err"; fail "no requirement total"; }
grep -qE "^       has .* free − .* headroom − .* reserve = .*\.$" "$HOME/err" || { cat "$HOME/err"; fail "no availability line"; }
grep -qE "^       Options: " "$HOME/err" || { cat "$HOME/err"; fail "no options line"; }

# --no-weights needs the exact weight payloads in the cache (exit 5 on a fresh cache).
expect 5 "not in the cache" "$BIN/ignition" export demo --no-weights

# --reuse-weights needs a cached default version (exit 5 on a fresh cache) and excludes --no-weights.
expect 5 "no cached default version" "$BIN/ignition" export demo --reuse-weights
expect 2 "cannot be combined" "$BIN/ignition" export demo --reuse-weights --no-weights

# A first export publishes; a second reuses every weight payload; --no-weights then succeeds.
"$BIN/ignition" export demo >"$HOME/entry1" 2>"$HOME/log1" || { cat "$HOME/log1"; fail "first export"; }
grep -q "0 already cached" "$HOME/log1" || fail "first export reused weights it cannot have had"
"$BIN/ignition" export demo >"$HOME/entry2" 2>"$HOME/log2" || { cat "$HOME/log2"; fail "second export"; }
# 12: the demo model's 9 layer groups and its draft's 3 (draft/...).
grep -qE "12 payloads, .*, 12 already cached" "$HOME/log2" || { cat "$HOME/log2"; fail "second export did not reuse weights"; }
"$BIN/ignition" export demo --no-weights >/dev/null 2>&1 || fail "--no-weights after an export"
[[ -d $(cat "$HOME/entry2") ]] || fail "the printed entry path does not exist"
# --reuse-weights takes the default version's payloads without reading the checkpoint's tensors,
# and publishes the same weight hashes.
"$BIN/ignition" export demo --reuse-weights >"$HOME/entry3" 2>"$HOME/log3" || { cat "$HOME/log3"; fail "--reuse-weights"; }
grep -qE "weights from flare-demo-coder@.* \(--reuse-weights" "$HOME/log3" || { cat "$HOME/log3"; fail "no reuse line"; }
for payload in "$(cat "$HOME/entry2")"/weights/*.safetensors; do
  same="$(cat "$HOME/entry3")/weights/$(basename "$payload")"
  [[ "$payload" -ef "$same" ]] || fail "--reuse-weights published a different $(basename "$payload") (not the same blob)"
done

# flare run refuses bad requests before loading anything.
fingerprint=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).keys[0].fingerprint)' \
  "$HOME/.config/flare/development-publisher.json")
approve=(--dangerously-approve-key "$fingerprint" --dangerously-accept-publisher local-development)
expect 2 "exceeds the package's prepared capacity" "$BIN/flare" run demo --max-concurrency 999 "${approve[@]}"
expect 2 "approval flags do not name" "$BIN/flare" run demo --port 0 --trust-store "$HOME/fresh-trust.toml" \
  --dangerously-approve-key "$fingerprint" --dangerously-accept-publisher someone-else
expect 2 "invalid --memory-limit" "$BIN/flare" run demo --memory-limit 1e999
expect 2 "kv-cache-limit" "$BIN/flare" run demo --kv-cache-limit everything
expect 2 "must be given together" "$BIN/flare" run demo --dangerously-accept-publisher local-development
expect 2 "neither a package path nor a model" "$BIN/flare" run nosuchmodel
# Without a terminal and without approval, a first use is refused rather than trusted.
set +e
"$BIN/flare" run demo --port 0 --trust-store "$HOME/fresh-trust.toml" </dev/null >"$HOME/out" 2>"$HOME/err"
status=$?
set -e
[[ $status != 0 ]] || fail "flare run trusted a new publisher without approval"
echo "ok"
