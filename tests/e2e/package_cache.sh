# `ignition export` into a temporary model cache, then `flare models list/--json/select/remove/gc`,
# `flare inspect` (text, --json, --all, --unverified, selectors) and `flare trust revoke`.
source "$(dirname "$0")/lib/package_common.bash"

step "export twice (two versions of one model)"
first=$(export_entry)
sleep 1
second=$(export_entry)
[[ -d $first && -d $second && $first != "$second" ]] || fail "export did not publish two entries: $first $second"
model=$(basename "$(dirname "$first")")
v1=$(basename "$first")
v2=$(basename "$second")
key=$HOME/.config/flare/development-signing-key.pem
[[ -f $key && $(stat -c %a "$key") == 600 ]] || fail "development key missing or not owner-only"
[[ -f $HOME/.config/flare/development-publisher.json ]] || fail "development profile missing"

step "models list"
expect_output "$model" "$FLARE" models list --model-cache "$CACHE"
grep -q "$v1" "$WORK/out" && grep -q "$v2" "$WORK/out" || fail "list misses a version"
grep "$v2" "$WORK/out" | grep -q "(default)" || fail "the latest export is not the default"
"$FLARE" models list "$model" --json --model-cache "$CACHE" >"$WORK/list.json"
[[ $(json_get "$WORK/list.json" 'j.entries.length') == 2 ]] || fail "list --json entries"
[[ $(json_get "$WORK/list.json" 'j.entries.filter(e => e.selected)[0].version') == "$v2" ]] || fail "selected"
[[ $(json_get "$WORK/list.json" 'j.entries[0].logical_bytes > 0') == true ]] || fail "logical bytes"
[[ $(json_get "$WORK/list.json" 'j.metadata_verified') == false ]] || fail "metadata_verified"
expect_fail 2 "not in the model cache" "$FLARE" models list no-such-model --model-cache "$CACHE"

step "inspect (text, json, all, unverified)"
expect_output "signature verified" "$FLARE" inspect "$model" --model-cache "$CACHE"
for section in Model Publisher Serving Execution local-development "$v2"; do
  grep -q -- "$section" "$WORK/out" || fail "inspect summary misses $section"
done
grep -q "Stored payloads" "$WORK/out" && fail "summary shows the memory map"
grep -q "█" "$WORK/out" || fail "no banner rendering of the served name"
"$FLARE" inspect "$model@$v1" --json --model-cache "$CACHE" >"$WORK/inspect.json"
[[ $(json_get "$WORK/inspect.json" 'j.verified') == true ]] || fail "json verified"
[[ $(json_get "$WORK/inspect.json" 'j.version') == "$v1" ]] || fail "json version"
[[ $(json_get "$WORK/inspect.json" 'j.publisher.namespace') == local-development ]] || fail "json namespace"
[[ $(json_get "$WORK/inspect.json" 'j.memory_map === undefined') == true ]] || fail "summary json has details"
expect_output "Prepared tensors" "$FLARE" inspect "$first" --all
width=$(LC_ALL=C.UTF-8 wc -L <"$WORK/out")
[[ $width == 80 ]] || fail "redirected inspect output is $width columns wide, not 80"
grep -q $'\x1b\[' "$WORK/out" && fail "redirected output is styled"
for section in "Stored payloads" Graphs Frontend tokenizer.json Package Checkpoint; do
  grep -q -- "$section" "$WORK/out" || fail "inspect --all misses $section"
done
"$FLARE" inspect "$first" --all --json >"$WORK/all.json"
[[ $(json_get "$WORK/all.json" 'j.memory_map.tensor_count > 0') == true ]] || fail "tensor count"
[[ $(json_get "$WORK/all.json" 'j.frontend.assets.some(a => a.name === "frontend/tokenizer.json")') == true ]] ||
  fail "frontend assets"
[[ $(json_get "$WORK/all.json" 'typeof j.contract') == object ]] || fail "contract"
expect_output "UNVERIFIED" "$FLARE" inspect "$first" --unverified
expect_output "signature verified" "$FLARE" models inspect "$model@$v2" --model-cache "$CACHE" --graphs
"$FLARE" inspect "$first" --unverified --json >"$WORK/unverified.json"
[[ $(json_get "$WORK/unverified.json" 'j.verified') == false ]] || fail "unverified json"
expect_fail 2 "cannot be combined" "$FLARE" inspect "$first" --unverified --publisher-keys "$WORK/x.json"
expect_fail 2 "no TP4 deployment" "$FLARE" inspect "$first" --tensor-parallel 4
expect_fail 2 "no rank 3" "$FLARE" inspect "$first" --rank 3
expect_output "rank" "$FLARE" inspect "$first" --rank 0 --graphs
expect_fail 2 "" "$FLARE" inspect "$model@nonexistent" --model-cache "$CACHE"
# Without the development profile the signer cannot be verified.
mv "$HOME/.config/flare/development-publisher.json" "$WORK/dev-profile.json"
expect_fail 1 "no verification key" "$FLARE" inspect "$first"
expect_output "signature verified" "$FLARE" inspect "$first" --publisher-keys "$WORK/dev-profile.json"
mv "$WORK/dev-profile.json" "$HOME/.config/flare/development-publisher.json"

step "trust store: remembered acceptance and revoke"
fingerprint=$(json_get "$HOME/.config/flare/development-publisher.json" 'j.keys[0].fingerprint')
public_key=$(json_get "$HOME/.config/flare/development-publisher.json" 'j.keys[0].public_key')
cat >"$WORK/trust.toml" <<TOML
[[keys]]
fingerprint = "$fingerprint"
namespace = "local-development"
public_key = "$public_key"
identity = "unattended"
accepted_at = "2026-01-01T00:00:00Z"
TOML
expect_output "publisher accepted" "$FLARE" inspect "$first" --trust-store "$WORK/trust.toml"
expect_output "Revoked key $fingerprint" "$FLARE" trust revoke "$fingerprint" --trust-store "$WORK/trust.toml"
expect_output "not yet accepted" "$FLARE" inspect "$first" --trust-store "$WORK/trust.toml"
expect_fail 2 "not in the trust store" "$FLARE" trust revoke "$fingerprint" --trust-store "$WORK/trust.toml"

step "select, remove, gc"
expect_output "Selected" "$FLARE" models select "$model@$v1" --model-cache "$CACHE"
"$FLARE" models list "$model" --json --model-cache "$CACHE" >"$WORK/list.json"
[[ $(json_get "$WORK/list.json" 'j.entries.filter(e => e.selected)[0].version') == "$v1" ]] || fail "select"
expect_fail 2 "" "$FLARE" models select "$model@nonexistent" --model-cache "$CACHE"
expect_fail 2 "" "$FLARE" models select "$model" --model-cache "$CACHE"
expect_fail 2 "default" "$FLARE" models remove "$model@$v1" --model-cache "$CACHE"
expect_output "Removed" "$FLARE" models remove "$model@$v1" --clear-default --model-cache "$CACHE"
[[ ! -e $first ]] || fail "removed entry still present"
expect_output "Removed" "$FLARE" models remove "$model@$v2" --model-cache "$CACHE"
"$FLARE" models gc --json --model-cache "$CACHE" >"$WORK/gc.json"
[[ $(json_get "$WORK/gc.json" 'j.objects_removed > 0 && j.reclaimed_bytes > 0') == true ]] || fail "gc reclaimed nothing"
[[ -z $(ls -A "$CACHE/blobs") ]] || fail "blobs left after gc"
expect_output "reclaimed" "$FLARE" models gc --model-cache "$CACHE"
echo "package_cache: ok"
