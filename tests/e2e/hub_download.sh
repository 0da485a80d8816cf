# `ignition export ORG/NAME[@REV]` against a local hub server (lib/hub_server.mjs): a fresh
# download into the hub cache layout, a second export that transfers nothing, a moved branch that
# fetches only the changed file, offline success and failure, a --draft-model repository
# downloaded like the target (offline, missing and cached), an unreachable hub with and without
# a cached snapshot, missing repositories, revisions and files, gated repositories with and
# without a token (never sent to the CDN), 429 with Retry-After, a connection dropped mid-body,
# a body failing its hash, and a full disk (declared sizes beyond the free space, and writes
# refused by a file-size limit), none of which publishes a partial file.
source "$(dirname "$0")/lib/hub_common.bash"
start_hub

REPO_A=$REPOS/tiny-a
mkdir -p "$REPO_A"
cp "$CHECKPOINT"/* "$REPO_A/"
COMMIT_A=$(new_commit)
write_state "{\"page_size\":2,\"repos\":{$(repo_json test-org/tiny "$COMMIT_A" "$REPO_A")}}"
REPO_DIR=$HUB_CACHE/models--test-org--tiny

step "fresh download (tree pages linked by Link headers; LFS files through the CDN port)"
log_mark
hub_export test-org/tiny || { cat "$WORK/out" >&2; fail "export of test-org/tiny failed"; }
grep -q "Download checkpoint" "$WORK/out" || fail "no Download checkpoint stage"
grep -q "model.safetensors 741 KiB" "$WORK/out" || { cat "$WORK/out"; fail "no per-file line"; }
grep -q "Download checkpoint.*OK.*4 files" "$WORK/out" || { cat "$WORK/out"; fail "no result line"; }
[[ $(cat "$REPO_DIR/refs/main") == "$COMMIT_A" ]] || fail "refs/main does not hold the commit"
[[ $(readlink "$REPO_DIR/snapshots/$COMMIT_A/model.safetensors") == ../../blobs/$(sha256sum "$REPO_A/model.safetensors" | cut -c1-64) ]] ||
  fail "the snapshot link is not relative to the blob named by its SHA-256"
cmp -s "$REPO_DIR/snapshots/$COMMIT_A/config.json" "$REPO_A/config.json" || fail "config.json differs"
check_cache_consistent
[[ $(log_since | grep -c '/tree/') -ge 2 ]] || fail "the tree listing did not follow its next page"
log_since | grep '"port":"cdn"' | grep -q '"auth":true' && fail "a request to the CDN carried a token"
[[ -z $(ls -A "$HUB_CACHE/.flare-partial/models--test-org--tiny") ]] || fail "partial files left behind"

step "a second export transfers nothing"
log_mark
hub_export test-org/tiny || { cat "$WORK/out" >&2; fail "second export failed"; }
log_since | grep -q -e '/resolve/' -e '"port":"cdn"' && fail "a cached file was requested again"
grep -q "0 files, 0 B; 4 already in the hub cache" "$WORK/out" || { cat "$WORK/out"; fail "second export result"; }

step "a moved branch downloads only the changed file"
REPO_B=$REPOS/tiny-b
cp -r "$REPO_A" "$REPO_B"
printf '{"bos_token_id": 1, "eos_token_id": 2}\n' >"$REPO_B/generation_config.json"
COMMIT_B=$(new_commit)
write_state "{\"page_size\":2,\"repos\":{\"test-org/tiny\":{\"refs\":{\"main\":\"$COMMIT_B\"},\"commits\":{\"$COMMIT_A\":\"$REPO_A\",\"$COMMIT_B\":\"$REPO_B\"}}}}"
log_mark
hub_export test-org/tiny || { cat "$WORK/out" >&2; fail "export after the branch moved failed"; }
[[ $(cat "$REPO_DIR/refs/main") == "$COMMIT_B" ]] || fail "refs/main did not move"
[[ $(log_since | grep '"method":"GET"' | grep -c '/resolve/') == 1 ]] || { log_since; fail "not exactly one file fetched"; }
log_since | grep '/resolve/' | grep -q generation_config.json || fail "the changed file was not the one fetched"
[[ -L $REPO_DIR/snapshots/$COMMIT_B/model.safetensors ]] || fail "the unchanged weights are not linked into the new snapshot"
check_cache_consistent

step "an exact commit already cached needs no network; --offline"
log_mark
hub_export "test-org/tiny@$COMMIT_A" || { cat "$WORK/out" >&2; fail "export at a cached commit failed"; }
[[ -z $(log_since) ]] || fail "a cached commit contacted the hub"
hub_export test-org/tiny --offline || { cat "$WORK/out" >&2; fail "--offline export failed"; }
[[ -z $(log_since) ]] || fail "--offline contacted the hub"
expect_fail 3 "missing refs/main" "$IGNITION" export test-org/other --offline --cpu --plain --config "$CONFIG" \
  --model-cache "$CACHE"
mv "$REPO_DIR/blobs/$(sha256sum "$REPO_A/model.safetensors" | cut -c1-64)" "$WORK/held-blob"
expect_fail 3 "missing model.safetensors" "$IGNITION" export test-org/tiny --offline --cpu --plain --config "$CONFIG" \
  --model-cache "$CACHE"
mv "$WORK/held-blob" "$REPO_DIR/blobs/$(sha256sum "$REPO_A/model.safetensors" | cut -c1-64)"

step "--draft-model ORG/NAME downloads the draft's checkpoint like the target's"
REPO_DRAFT=$REPOS/tiny-draft
cp -r "$REPO_A" "$REPO_DRAFT"
DRAFT_COMMIT=$(new_commit)
write_state "{\"page_size\":2,\"repos\":{\"test-org/tiny\":{\"refs\":{\"main\":\"$COMMIT_B\"},\"commits\":{\"$COMMIT_A\":\"$REPO_A\",\"$COMMIT_B\":\"$REPO_B\"}},$(repo_json test-org/tiny-draft "$DRAFT_COMMIT" "$REPO_DRAFT")}}"
log_mark
expect_fail 3 "test-org/tiny-draft@main is not complete in the hub cache" "$IGNITION" export "$CHECKPOINT" \
  --draft-model test-org/tiny-draft --offline --cpu --plain --config "$CONFIG" --model-cache "$CACHE"
[[ -z $(log_since) ]] || fail "--offline contacted the hub for the draft"
expect_fail 3 "repository test-org/absent-draft was not found" "$IGNITION" export "$CHECKPOINT" \
  --draft-model test-org/absent-draft --cpu --plain --config "$CONFIG" --model-cache "$CACHE"
log_mark
hub_export "$CHECKPOINT" --draft-model test-org/tiny-draft || { cat "$WORK/out" >&2; fail "export with a hub draft failed"; }
grep -q "Download checkpoint.*OK.*4 files" "$WORK/out" || { cat "$WORK/out"; fail "the draft had no Download checkpoint stage"; }
[[ $(cat "$HUB_CACHE/models--test-org--tiny-draft/refs/main") == "$DRAFT_COMMIT" ]] || fail "the draft's ref was not written"
log_since | grep '"port":"cdn"' | grep -q GET || fail "the draft's weights were not transferred"
draft_entry=$(grep "^$CACHE/models/" "$WORK/out" | tail -n 1)
expect_output "test-org/tiny-draft@$DRAFT_COMMIT" "$FLARE" inspect "$draft_entry" --json
log_mark
hub_export "$CHECKPOINT" --draft-model test-org/tiny-draft --offline || { cat "$WORK/out" >&2; fail "--offline export with the cached draft failed"; }
[[ -z $(log_since) ]] || fail "--offline contacted the hub"
check_cache_consistent

step "an unreachable hub: the cached snapshot serves with a warning; nothing cached fails"
closed_port=$( (node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})') )
write_config "http://127.0.0.1:$closed_port"
hub_export test-org/tiny || { cat "$WORK/out" >&2; fail "export with an unreachable hub and a cached snapshot failed"; }
grep -q "warning: cannot reach" "$WORK/out" || fail "no warning about the unreachable hub"
expect_fail 3 "cannot reach http://127.0.0.1:$closed_port for test-org/absent" "$IGNITION" export test-org/absent \
  --cpu --plain --config "$CONFIG" --model-cache "$CACHE"
write_config "$ENDPOINT"

step "missing repository, revision and file"
expect_fail 3 "repository test-org/absent was not found on $ENDPOINT" "$IGNITION" export test-org/absent --cpu --plain \
  --config "$CONFIG" --model-cache "$CACHE"
expect_fail 3 "has no revision 'nope'" "$IGNITION" export test-org/tiny@nope --cpu --plain --config "$CONFIG" \
  --model-cache "$CACHE"
REPO_BARE=$REPOS/bare
mkdir -p "$REPO_BARE" && cp "$REPO_A/config.json" "$REPO_BARE/"
COMMIT_BARE=$(new_commit)
write_state "{\"repos\":{$(repo_json test-org/tiny "$COMMIT_B" "$REPO_B"),$(repo_json test-org/bare "$COMMIT_BARE" "$REPO_BARE")}}"
expect_fail 3 "test-org/bare@main has neither model.safetensors" "$IGNITION" export test-org/bare --cpu --plain \
  --config "$CONFIG" --model-cache "$CACHE"

step "a gated repository: license message without a token, refused token, accepted token"
GATED_COMMIT=$(new_commit)
write_state "{\"repos\":{$(repo_json test-org/gated "$GATED_COMMIT" "$REPO_A" ',"gated":true,"tokens":["hf_testtoken"]')}}"
expect_fail 3 "accept the license at $ENDPOINT/test-org/gated, then pass --token-file" "$IGNITION" export \
  test-org/gated --cpu --plain --config "$CONFIG" --model-cache "$CACHE"
printf 'hf_wrongtoken\n' >"$WORK/wrong-token"
expect_fail 3 "has no access yet" "$IGNITION" export test-org/gated --token-file "$WORK/wrong-token" --cpu --plain \
  --config "$CONFIG" --model-cache "$CACHE"
printf 'hf_bad token\n' >"$WORK/bad-token"
expect_fail 2 "characters a Hub token cannot have" "$IGNITION" export test-org/gated --token-file "$WORK/bad-token" \
  --cpu --plain --config "$CONFIG" --model-cache "$CACHE"
printf '  hf_testtoken\n\n' >"$WORK/token"
log_mark
write_config "$ENDPOINT" "token_file = \"$WORK/token\""
hub_export test-org/gated || { cat "$WORK/out" >&2; fail "export with the [hub] token_file failed"; }
log_since | grep '"port":"api"' | grep -q '"auth":true' || fail "the token was not sent to the hub"
log_since | grep -q '"port":"cdn"' || fail "no CDN transfer happened"
log_since | grep '"port":"cdn"' | grep -q '"auth":true' && fail "the token was sent to the CDN host"
write_config "$ENDPOINT"
check_cache_consistent

# A fresh repository (a new name and commit, so nothing of it is cached) for the fault cases.
fresh_repo() {
  FRESH=$REPOS/fresh-$1
  cp -r "$REPO_A" "$FRESH"
  FRESH_COMMIT=$(new_commit)
}

step "429 with Retry-After, then success"
fresh_repo retry
write_state "{\"repos\":{$(repo_json test-org/retry "$FRESH_COMMIT" "$FRESH")},\"faults\":{\"status\":{\"code\":429,\"count\":2,\"retry_after\":\"1\",\"match\":\"/revision/\"}}}"
log_mark
start_time=$SECONDS
hub_export test-org/retry || { cat "$WORK/out" >&2; fail "export through 429 answers failed"; }
[[ $(log_since | grep -c '/revision/') == 3 ]] || fail "expected two refused revision requests and one answered"
((SECONDS - start_time >= 2)) || fail "Retry-After was not honoured"

step "a connection dropped mid-body resumes with a Range request"
rm -rf "$HUB_CACHE"
write_state "{\"repos\":{$(repo_json test-org/retry "$FRESH_COMMIT" "$FRESH")},\"faults\":{\"drop_after_bytes\":100000,\"drop_count\":2}}"
log_mark
hub_export test-org/retry || { cat "$WORK/out" >&2; fail "export through dropped connections failed"; }
log_since | grep '"port":"cdn"' | grep -q '"range":"bytes=100000-' || { log_since; fail "no resume from byte 100000"; }
grep -q "retrying from byte 100000" "$WORK/out" || fail "the retry was not reported"
check_cache_consistent

step "a body failing its hash is never published"
rm -rf "$HUB_CACHE"
write_state "{\"repos\":{$(repo_json test-org/retry "$FRESH_COMMIT" "$FRESH")},\"faults\":{\"corrupt\":[\"model.safetensors\"]}}"
expect_fail 3 "model.safetensors of test-org/retry failed its SHA-256 check" "$IGNITION" export test-org/retry --cpu \
  --plain --config "$CONFIG" --model-cache "$CACHE"
[[ ! -e $HUB_CACHE/models--test-org--retry/blobs/$(sha256sum "$FRESH/model.safetensors" | cut -c1-64) ]] ||
  fail "the corrupt body was published"
[[ -z $(ls -A "$HUB_CACHE/.flare-partial/models--test-org--retry") ]] || fail "the corrupt partial file was kept"
check_cache_consistent

step "not enough disk: a capacity error naming the bytes, before any transfer"
rm -rf "$HUB_CACHE"
write_state "{\"repos\":{$(repo_json test-org/retry "$FRESH_COMMIT" "$FRESH")},\"faults\":{\"inflate\":{\"model.safetensors\":1000000000000000}}}"
log_mark
expect_fail 4 "bytes) to download 4 files of test-org/retry" "$IGNITION" export test-org/retry --cpu \
  --plain --config "$CONFIG" --model-cache "$CACHE"
grep -q "bytes) free there" "$WORK/out" || { cat "$WORK/out"; fail "the free bytes are not named"; }
log_since | grep -q '"port":"cdn"' && fail "a transfer started despite the capacity error"

step "the disk fills during the transfer (a file-size limit): exit 4, nothing partial published"
rm -rf "$HUB_CACHE"
write_state "{\"repos\":{$(repo_json test-org/retry "$FRESH_COMMIT" "$FRESH")}}"
status=0
(ulimit -f 600 && exec "$IGNITION" export test-org/retry --cpu --plain --config "$CONFIG" --model-cache "$CACHE") \
  >"$WORK/out" 2>&1 || status=$?
[[ $status == 4 ]] || { cat "$WORK/out"; fail "expected exit 4 on a full disk, got $status"; }
grep -q "filled while downloading model.safetensors" "$WORK/out" || { cat "$WORK/out"; fail "no disk-full message"; }
[[ ! -e $HUB_CACHE/models--test-org--retry/snapshots/$FRESH_COMMIT/model.safetensors ]] ||
  fail "a partial weights file is visible in the snapshot"
check_cache_consistent
hub_export test-org/retry || { cat "$WORK/out" >&2; fail "export after the disk had room again failed"; }
check_cache_consistent

echo "hub download tests passed"
