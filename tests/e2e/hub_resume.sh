# Interrupted and shared downloads against the local hub server: `kill -9` in the middle of a
# sharded checkpoint's parallel ranged transfer, then a second export that resumes from the
# finished chunks (no corrupt blob is ever published); a server ignoring Range (the file restarts
# as one stream); an expired CDN URL (403, located again); and two concurrent exports of one
# repository sharing its blobs (each byte range fetched once).
source "$(dirname "$0")/lib/hub_common.bash"
start_hub

# The demo checkpoint: three ~11 MiB shards behind an index, each fetched in 1 MiB ranges.
DEMO=$REPOS/demo
mkdir -p "$DEMO"
cp "$SOURCE_ROOT"/assets/demo-model/{config.json,generation_config.json,model.safetensors.index.json,tokenizer.json,tokenizer_config.json} \
  "$SOURCE_ROOT"/assets/demo-model/model-0000?-of-00003.safetensors "$DEMO/"
DEMO_COMMIT=$(new_commit)
demo_state() { write_state "{\"repos\":{$(repo_json test-org/demo "$DEMO_COMMIT" "$DEMO")},\"faults\":$1}"; }
PARTIAL=$HUB_CACHE/.flare-partial/models--test-org--demo

step "kill -9 during the parallel transfer"
demo_state '{"rate_bytes_per_s":500000}'
"$IGNITION" export test-org/demo --cpu --plain --model-cache "$CACHE" --config "$CONFIG" >"$WORK/killed.out" 2>&1 &
export_pid=$!
# chunk_finished: the record (a header line, then one 0/1 per chunk) of a file of several chunks
# shows a finished chunk; prints that file's etag.
chunk_finished() {
  local record bits
  for record in "$PARTIAL"/*.chunks; do
    [[ -f $record ]] || continue
    bits=$(tail -n 1 "$record" 2>/dev/null) || continue
    if ((${#bits} > 1)) && [[ $bits == *1* ]]; then
      basename "$record" .chunks
      return 0
    fi
  done
  return 1
}
etag=
for _ in $(seq 300); do
  etag=$(chunk_finished) && break
  sleep 0.05
done
[[ -n $etag ]] || { cat "$WORK/killed.out"; fail "no chunk finished before the kill"; }
kill -9 "$export_pid"
wait "$export_pid" 2>/dev/null || true
# The state the kill left: a file of several chunks, some finished, none published.
etag=$(chunk_finished) || fail "the interrupted download left no partial file with finished chunks"
check_cache_consistent
[[ ! -e $HUB_CACHE/models--test-org--demo/blobs/$etag ]] || fail "the interrupted blob is visible under blobs/"
done_chunks=$(tail -1 "$PARTIAL/$etag.chunks" | tr -cd 1 | wc -c)
((done_chunks > 0)) || fail "no finished chunk recorded"

step "the next export resumes from the finished chunks"
demo_state '{}'
log_mark
hub_export test-org/demo || { cat "$WORK/out" >&2; fail "the resumed export failed"; }
grep -q "resuming with" "$WORK/out" || { cat "$WORK/out"; fail "the export did not resume"; }
check_cache_consistent
shard_size=$(stat -L -c %s "$HUB_CACHE/models--test-org--demo/blobs/$etag")
n_ranges=$(log_since | grep '"port":"cdn"' | grep -c "cdn/$etag" || true)
n_chunks=$(( (shard_size + 1048575) / 1048576 ))
((n_ranges <= n_chunks - done_chunks)) || fail "$n_ranges ranges fetched for a shard of $n_chunks chunks, $done_chunks already done"
[[ -z $(ls -A "$PARTIAL") ]] || fail "partial files left after the resumed download"

step "a server ignoring Range: the file restarts as one stream"
rm -rf "$HUB_CACHE"
demo_state '{"ignore_range":true}'
hub_export test-org/demo || { cat "$WORK/out" >&2; fail "export from a server ignoring Range failed"; }
grep -q "ignored Range requests" "$WORK/out" || fail "the restart was not reported"
check_cache_consistent

step "an expired CDN URL (403) is located again"
rm -rf "$HUB_CACHE"
demo_state '{"expire_cdn":1}'
hub_export test-org/demo || { cat "$WORK/out" >&2; fail "export after an expired CDN URL failed"; }
check_cache_consistent

step "two concurrent exports share the blobs"
rm -rf "$HUB_CACHE"
TINY=$REPOS/tiny
mkdir -p "$TINY" && cp "$CHECKPOINT"/* "$TINY/"
TINY_COMMIT=$(new_commit)
write_state "{\"repos\":{$(repo_json test-org/tiny "$TINY_COMMIT" "$TINY")},\"faults\":{\"rate_bytes_per_s\":400000}}"
log_mark
"$IGNITION" export test-org/tiny --cpu --plain --model-cache "$CACHE" --config "$CONFIG" >"$WORK/first.out" 2>&1 &
first=$!
"$IGNITION" export test-org/tiny --cpu --plain --model-cache "$CACHE" --config "$CONFIG" >"$WORK/second.out" 2>&1 ||
  { cat "$WORK/second.out"; fail "the second concurrent export failed"; }
wait "$first" || { cat "$WORK/first.out"; fail "the first concurrent export failed"; }
grep -q "waiting for another process downloading" "$WORK/first.out" "$WORK/second.out" ||
  fail "neither export waited for the other's download"
duplicates=$(log_since | grep '"port":"cdn"' | grep '"method":"GET"' | sed 's/.*"path":"\([^"?]*\).*"range":\([^,]*\).*/\1 \2/' |
  sort | uniq -d)
[[ -z $duplicates ]] || fail "bytes fetched twice: $duplicates"
check_cache_consistent

echo "hub resume tests passed"
