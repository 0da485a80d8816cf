# Prepared packages from a Hugging Face repository (the local hub server): a package exported
# here, converted to the packed form and published at revision `cpu`; its directory form (the
# primary and its companion files, at the top level or in a folder) downloaded whole, verified and
# installed together, and a missing or corrupt companion installing nothing; `flare download` prints only
# the installed entry's path (progress on stderr), records its origin, transfers nothing for an
# unchanged commit, resolves --offline from the record alone, and refuses what it cannot choose;
# `flare run ORG/MODEL` downloads into an empty cache and serves it after the usual trust flow.
source "$(dirname "$0")/lib/hub_common.bash"
start_hub

step "export a package and publish its packed form"
entry=$(export_entry)
PUBLISHED=$REPOS/flare-package
mkdir -p "$PUBLISHED"
"$IGNITION" convert "$entry" --form packed --output "$PUBLISHED/model.safetensors" --config "$CONFIG" >/dev/null ||
  fail "ignition convert failed"
PKG_COMMIT=$(new_commit)
write_state "{\"repos\":{\"test-org/tiny-flare\":{\"refs\":{\"cpu\":\"$PKG_COMMIT\"},\"commits\":{\"$PKG_COMMIT\":\"$PUBLISHED\"}}}}"
FRESH_CACHE=$WORK/fresh-cache

step "flare download prints only the cached path"
log_mark
"$FLARE" download test-org/tiny-flare@cpu --model-cache "$FRESH_CACHE" --config "$CONFIG" --plain \
  >"$WORK/download.out" 2>"$WORK/download.err" || { cat "$WORK/download.err"; fail "flare download failed"; }
[[ $(wc -l <"$WORK/download.out") == 1 ]] || { cat "$WORK/download.out"; fail "stdout is not one line"; }
path=$(cat "$WORK/download.out")
[[ -d $path && $path == "$FRESH_CACHE"/models/* ]] || fail "'$path' is not an entry of the model cache"
grep -q "Download package" "$WORK/download.err" || fail "no progress on stderr"
log_since | grep '"port":"cdn"' | grep -q '"auth":true' && fail "a token reached the CDN"
origin=$(ls "$FRESH_CACHE"/origins/*.json)
[[ $(json_get "$origin" 'j.commit') == "$PKG_COMMIT" ]] || fail "the origin record lacks the commit"
[[ $(json_get "$origin" 'j.filename') == model.safetensors ]] || fail "the origin record lacks the filename"
[[ $(json_get "$origin" 'j.envelope_sha256.length') == 64 ]] || fail "the origin record lacks the envelope hash"
expect_output "signature verified" "$FLARE" inspect "$path"

step "an unchanged commit transfers nothing; --offline; the models download alias"
log_mark
again=$("$FLARE" models download test-org/tiny-flare --revision cpu --model-cache "$FRESH_CACHE" --config "$CONFIG" \
  --plain 2>"$WORK/again.err") || { cat "$WORK/again.err"; fail "second download failed"; }
[[ $again == "$path" ]] || fail "the second download gave another entry: $again"
grep -q "is unchanged" "$WORK/again.err" || fail "the unchanged commit was not reported"
log_since | grep -q -e '"port":"cdn"' -e '/tree/' && fail "an unchanged commit listed or transferred files"
offline=$("$FLARE" download test-org/tiny-flare@cpu --offline --model-cache "$FRESH_CACHE" --config "$CONFIG" 2>/dev/null) ||
  fail "--offline download failed"
[[ $offline == "$path" ]] || fail "--offline resolved another entry"
expect_fail 3 "has not been downloaded" "$FLARE" download test-org/tiny-flare@other --offline \
  --model-cache "$FRESH_CACHE" --config "$CONFIG"

step "errors: missing repository and revision, several packages, local paths"
expect_fail 3 "repository test-org/absent was not found" "$FLARE" download test-org/absent@cpu \
  --model-cache "$FRESH_CACHE" --config "$CONFIG"
expect_fail 3 "has no revision 'sm1000'" "$FLARE" download test-org/tiny-flare --revision sm1000 \
  --model-cache "$FRESH_CACHE" --config "$CONFIG"
cp "$PUBLISHED/model.safetensors" "$PUBLISHED/second.safetensors"
TWO_COMMIT=$(new_commit)
write_state "{\"repos\":{\"test-org/tiny-flare\":{\"refs\":{\"cpu\":\"$PKG_COMMIT\",\"two\":\"$TWO_COMMIT\"},\"commits\":{\"$PKG_COMMIT\":\"$PUBLISHED\",\"$TWO_COMMIT\":\"$PUBLISHED\"}}}}"
expect_fail 2 "choose one with --filename" "$FLARE" download test-org/tiny-flare@two --model-cache "$FRESH_CACHE" \
  --config "$CONFIG"
expect_fail 2 "apply to ORG/MODEL repositories only" "$FLARE" run "$path" --revision cpu --model-cache "$FRESH_CACHE" \
  --config "$CONFIG"

step "a directory-form package: the primary and every companion, verified and installed together"
SPLIT=$REPOS/flare-split
"$IGNITION" convert "$entry" --output "$SPLIT" --config "$CONFIG" >/dev/null || fail "ignition convert --output DIR failed"
mapfile -t companions < <(cd "$SPLIT" && find . -name '*.safetensors' ! -path ./model.safetensors | sed 's|^\./||' | sort)
((${#companions[@]} >= 2)) || fail "the directory form has no companions to download"
NESTED=$REPOS/flare-nested
mkdir -p "$NESTED" && cp -r "$SPLIT" "$NESTED/cpu-package"
BROKEN=$REPOS/flare-broken
cp -r "$SPLIT" "$BROKEN" && rm "$BROKEN/${companions[0]}"
CORRUPT=$REPOS/flare-corrupt
cp -r "$SPLIT" "$CORRUPT" && flip_last_byte "$CORRUPT/${companions[1]}"
SPLIT_COMMIT=$(new_commit) NESTED_COMMIT=$(new_commit) BROKEN_COMMIT=$(new_commit) CORRUPT_COMMIT=$(new_commit)
write_state "{\"page_size\":3,\"repos\":{\"test-org/tiny-flare\":{\"refs\":{\"cpu\":\"$PKG_COMMIT\",\"two\":\"$TWO_COMMIT\"},\"commits\":{\"$PKG_COMMIT\":\"$PUBLISHED\",\"$TWO_COMMIT\":\"$PUBLISHED\"}},\"test-org/tiny-split\":{\"refs\":{\"cpu\":\"$SPLIT_COMMIT\",\"nested\":\"$NESTED_COMMIT\",\"broken\":\"$BROKEN_COMMIT\",\"corrupt\":\"$CORRUPT_COMMIT\"},\"commits\":{\"$SPLIT_COMMIT\":\"$SPLIT\",\"$NESTED_COMMIT\":\"$NESTED\",\"$BROKEN_COMMIT\":\"$BROKEN\",\"$CORRUPT_COMMIT\":\"$CORRUPT\"}}}}"
SPLIT_CACHE=$WORK/split-cache
log_mark
"$FLARE" download test-org/tiny-split@cpu --model-cache "$SPLIT_CACHE" --config "$CONFIG" --plain \
  >"$WORK/split.out" 2>"$WORK/split.err" || { cat "$WORK/split.err"; fail "download of the directory form failed"; }
[[ $(wc -l <"$WORK/split.out") == 1 ]] || { cat "$WORK/split.out"; fail "stdout is not one line"; }
split_path=$(cat "$WORK/split.out")
grep -q "Download ${#companions[@]} companion files" "$WORK/split.err" || { cat "$WORK/split.err"; fail "no companion stage"; }
grep -q "Verify package" "$WORK/split.err" || { cat "$WORK/split.err"; fail "no verification stage"; }
for companion in "${companions[@]}"; do
  log_since | grep -q "/resolve/$SPLIT_COMMIT/$companion\"" || fail "$companion was not located on the hub"
  [[ -f $split_path/$companion && ! -L $split_path/$companion ]] || fail "$companion is not a file of the entry"
  cmp -s "$split_path/$companion" "$SPLIT/$companion" || fail "$companion differs from the published one"
done
log_since | grep '/tree/' | grep -q 'recursive=true' || fail "the file list was not recursive"
expect_output "signature verified" "$FLARE" inspect "$split_path"
HUB_CACHE=$SPLIT_CACHE/hub-transport check_cache_consistent

step "companions beside a primary in a folder (--filename); none without it"
NESTED_CACHE=$WORK/nested-cache
nested_path=$("$FLARE" download test-org/tiny-split@nested --filename cpu-package/model.safetensors \
  --model-cache "$NESTED_CACHE" --config "$CONFIG" 2>"$WORK/nested.err") || { cat "$WORK/nested.err"; fail "nested download failed"; }
cmp -s "$nested_path/${companions[0]}" "$SPLIT/${companions[0]}" || fail "the nested package's companion differs"
expect_fail 3 "holds no prepared package" "$FLARE" download test-org/tiny-split@nested --model-cache "$NESTED_CACHE" \
  --config "$CONFIG"

step "a missing or corrupt companion installs nothing"
BAD_CACHE=$WORK/bad-cache
expect_fail 3 "names 1 companion file the repository lacks (${companions[0]})" "$FLARE" download \
  test-org/tiny-split@broken --model-cache "$BAD_CACHE" --config "$CONFIG"
expect_fail 3 "failed verification, so nothing was installed" "$FLARE" download test-org/tiny-split@corrupt \
  --model-cache "$BAD_CACHE" --config "$CONFIG"
[[ -z $(ls -A "$BAD_CACHE/models" 2>/dev/null) ]] || fail "a failed download left an entry in the model cache"
[[ -z $(ls -A "$BAD_CACHE/refs" 2>/dev/null) ]] || fail "a failed download selected a default"
[[ -z $(ls -A "$BAD_CACHE/origins" 2>/dev/null) ]] || fail "a failed download recorded an origin"
HUB_CACHE=$BAD_CACHE/hub-transport check_cache_consistent
# Once the repository holds every file, a new attempt fetches only what no failed attempt kept: the
# transport cache holds every file that passed its hash (the corrupt-package attempt fetched the
# intact companions and its altered ${companions[1]}), so only the intact ${companions[1]} travels.
cp "$SPLIT/${companions[0]}" "$BROKEN/${companions[0]}"
log_mark
fixed=$("$FLARE" download test-org/tiny-split@broken --model-cache "$BAD_CACHE" --config "$CONFIG" 2>"$WORK/fixed.err") ||
  { cat "$WORK/fixed.err"; fail "the download after the repository was completed failed"; }
[[ $(log_since | grep -c '"port":"cdn"') == 1 ]] || { log_since; fail "files kept by the failed attempts were fetched again"; }
log_since | grep -q "/resolve/$BROKEN_COMMIT/${companions[1]}\"" || { log_since; fail "the transfer was not ${companions[1]}"; }
cmp -s "$fixed/${companions[0]}" "$SPLIT/${companions[0]}" || fail "the completed package's companion differs"

fingerprint=$(json_get "$HOME/.config/flare/development-publisher.json" 'j.keys[0].fingerprint')
# serve_once ARGS...: flare run ARGS until /health answers, then SIGTERM; its output in $WORK/run.log.
serve_once() {
  local port server
  port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  "$FLARE" run "$@" --port "$port" --plain --config "$CONFIG" --dangerously-approve-key "$fingerprint" \
    --dangerously-accept-publisher local-development >"$WORK/run.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$WORK/run.log"; fail "flare run $* exited before serving"; }
    sleep 0.1
  done
  curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null || { cat "$WORK/run.log"; fail "no /v1/models"; }
  kill -TERM "$server"
  wait "$server" || { cat "$WORK/run.log"; fail "flare run $* did not stop cleanly"; }
}

step "flare run ORG/MODEL downloads into an empty cache and serves"
RUN_CACHE=$WORK/run-cache
serve_once test-org/tiny-flare@two --filename model.safetensors --model-cache "$RUN_CACHE"
[[ -n $(ls "$RUN_CACHE"/models/*/*) ]] || fail "flare run did not install the package in the model cache"

step "flare run ORG/MODEL with a directory-form package"
SPLIT_RUN_CACHE=$WORK/split-run-cache
serve_once test-org/tiny-split@cpu --model-cache "$SPLIT_RUN_CACHE"
[[ -f $(ls -d "$SPLIT_RUN_CACHE"/models/*/*)/${companions[0]} ]] || fail "flare run did not install the companions"

step "flare run MODEL checks a downloaded model's recorded origin for updates"
model_key=$(basename "$(dirname "$path")")
sleep 1
newer=$(export_entry)
NEWER=$REPOS/flare-package-newer
mkdir -p "$NEWER"
"$IGNITION" convert "$newer" --form packed --output "$NEWER/model.safetensors" --config "$CONFIG" >/dev/null ||
  fail "ignition convert of the newer package failed"
NEW_COMMIT=$(new_commit)
write_state "{\"repos\":{\"test-org/tiny-flare\":{\"refs\":{\"cpu\":\"$NEW_COMMIT\"},\"commits\":{\"$NEW_COMMIT\":\"$NEWER\"}}}}"
serve_once "$model_key" --model-cache "$FRESH_CACHE"
grep -q "updated to $(basename "$newer")" "$WORK/run.log" || { cat "$WORK/run.log"; fail "the update was not acquired"; }
[[ $(cat "$FRESH_CACHE/refs/$model_key") == "$(basename "$newer")" ]] || fail "the default did not move to the update"
write_config "http://127.0.0.1:1"
serve_once "$model_key" --model-cache "$FRESH_CACHE"
grep -q "warning: checking test-org/tiny-flare@cpu for updates failed" "$WORK/run.log" ||
  { cat "$WORK/run.log"; fail "a failed update check was not reported"; }
[[ $(cat "$FRESH_CACHE/refs/$model_key") == "$(basename "$newer")" ]] || fail "a failed check changed the default"

echo "hub package tests passed"
