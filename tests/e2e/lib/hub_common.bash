# Shared setup for the hub download tests (sourced): the package test setup, a local hub server
# (lib/hub_server.mjs) on loopback ports with its state file and request log, a configuration
# pointing [hub] endpoint and [paths] hub_cache at them, and checks of the hub cache.
source "$(dirname "${BASH_SOURCE[0]}")/package_common.bash"

HUB_CACHE=$WORK/hub
STATE=$WORK/hub-state.json
HUB_LOG=$WORK/hub-requests.log
REPOS=$WORK/repos
mkdir -p "$HUB_CACHE" "$REPOS"
: >"$HUB_LOG"

# new_commit: a fresh 40-hex commit id.
new_commit() { head -c 32 /dev/urandom | sha1sum | cut -c1-40; }

# write_state JSON: replaces the server's state (read again on every request).
write_state() {
  printf '%s\n' "$1" >"$STATE.tmp"
  mv "$STATE.tmp" "$STATE"
}

start_hub() {
  [[ -f $STATE ]] || write_state '{"repos":{}}'
  node "$(dirname "${BASH_SOURCE[0]}")/hub_server.mjs" "$STATE" "$HUB_LOG" "$WORK/hub-ports" &
  HUB_PID=$!
  trap 'kill $HUB_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
  for _ in $(seq 100); do [[ -s $WORK/hub-ports ]] && break; sleep 0.1; done
  [[ -s $WORK/hub-ports ]] || fail "the hub server did not start"
  read -r API_PORT CDN_PORT <"$WORK/hub-ports"
  ENDPOINT=http://127.0.0.1:$API_PORT
  write_config "$ENDPOINT"
}

# write_config ENDPOINT [EXTRA_TOML]
write_config() {
  printf '[paths]\nhub_cache = "%s"\n[hub]\nendpoint = "%s"\n%s\n' "$HUB_CACHE" "$1" "${2:-}" >"$CONFIG"
}

# hub_export SELECTOR [FLAGS...]: ignition export into the test model cache; output in $WORK/out.
hub_export() {
  "$IGNITION" export "$@" --cpu --plain --model-cache "$CACHE" --config "$CONFIG" >"$WORK/out" 2>&1
}

# log_mark / log_since: the request log lines after a mark.
log_mark() { LOG_MARK=$(wc -l <"$HUB_LOG"); }
log_since() { tail -n +"$((LOG_MARK + 1))" "$HUB_LOG"; }

# check_cache_consistent: every blob's name is its content id (sha256 or git blob sha1), no
# partial file sits under blobs/ or snapshots/, and every snapshot link resolves to a blob.
check_cache_consistent() {
  local blob name sum
  shopt -s nullglob
  for blob in "$HUB_CACHE"/models--*/blobs/*; do
    name=$(basename "$blob")
    if [[ ${#name} == 64 ]]; then
      sum=$(sha256sum "$blob" | cut -c1-64)
    elif [[ ${#name} == 40 ]]; then
      sum=$( { printf 'blob %s\0' "$(stat -c %s "$blob")"; cat "$blob"; } | sha1sum | cut -c1-40)
    else
      fail "unexpected file under blobs/: $blob"
    fi
    [[ $sum == "$name" ]] || fail "blob $blob does not hold what its name promises ($sum)"
  done
  local link
  for link in $(find "$HUB_CACHE" -path '*/snapshots/*' \( -type l -o -type f \)); do
    [[ -L $link ]] || fail "snapshot entry $link is not a link"
    [[ -f $link ]] || fail "snapshot link $link points at no blob"
  done
  shopt -u nullglob
}

# repo_json NAME COMMIT DIR [EXTRA]: one repository entry with main at COMMIT.
repo_json() {
  printf '"%s":{"refs":{"main":"%s"},"commits":{"%s":"%s"}%s}' "$1" "$2" "$2" "$3" "${4:-}"
}
