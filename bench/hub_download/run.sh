#!/usr/bin/env bash
# Hub download benchmark: a SIZE file of random bytes (default 1G) served by the local test hub
# (tests/e2e/lib/hub_server.mjs) on loopback, downloaded with 1 and 8 connections by
# hub_download_bench, which also reports the SHA-256 check's CPU time per GB.
#   BUILD_DIR=build SIZE=4G bench/hub_download/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
SIZE=${SIZE:-1G}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/flare-hub-bench.XXXXXX")
trap 'kill ${SERVER:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/repo"
head -c "$SIZE" /dev/urandom >"$WORK/repo/model.safetensors"
commit=$(head -c 32 /dev/urandom | sha1sum | cut -c1-40)
printf '{"repos":{"bench/large":{"refs":{"main":"%s"},"commits":{"%s":"%s"}}}}\n' "$commit" "$commit" "$WORK/repo" >"$WORK/state.json"
node tests/e2e/lib/hub_server.mjs "$WORK/state.json" /dev/null "$WORK/ports" &
SERVER=$!
for _ in $(seq 100); do [[ -s $WORK/ports ]] && break; sleep 0.1; done
read -r api_port _ <"$WORK/ports"
"$BUILD_DIR/bench/hub_download_bench" "http://127.0.0.1:$api_port" bench/large model.safetensors "$WORK/hub" "$@"
