#!/usr/bin/env bash
# Hub download benchmark, one command, building nothing: a file of random bytes (SIZE, default
# 4G) served on loopback by bench_hub_server (C++, no Node.js needed) and downloaded by
# hub_download_bench exactly as `ignition export` fetches a shard: once per connection count
# (default "8 16 1": parallel ranges, then one stream), each timed end to end (transfer, SHA-256
# check, fsync, publish), with the client's CPU time per GB; then the SHA-256 check alone per GB,
# and the server's CPU time.
#
#   bench/hub_download/run.sh BIN_DIR [SIZE] [CONNECTIONS...]
#       BIN_DIR: the build directory (or any folder) holding hub_download_bench and bench_hub_server
#       WORK_DIR=/path   where the file and the scratch hub cache go (default: a folder under /tmp)
#   bench/hub_download/run.sh --pack-libcurl DIR
#       copies libcurl.so.4 and the libraries it needs beyond glibc into DIR, for a machine that has
#       no libcurl (the programs load it at run time); carry DIR there and set LIBCURL_DIR=DIR.
set -euo pipefail

if [[ ${1:-} == --pack-libcurl ]]; then
  dest=${2:?usage: run.sh --pack-libcurl DIR}
  mkdir -p "$dest"
  lib=$(ldconfig -p | awk '/libcurl\.so\.4 /{print $NF; exit}')
  [[ -n $lib ]] || { echo "run.sh: no libcurl.so.4 here to pack" >&2; exit 1; }
  cp -L "$lib" "$dest/libcurl.so.4"
  ldd "$lib" | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r dep; do cp -L "$dep" "$dest/"; done
  du -sh "$dest"
  exit 0
fi

BIN_DIR=${1:?usage: run.sh BIN_DIR [SIZE] [CONNECTIONS...]}
SIZE=${2:-4G}
shift $(($# >= 2 ? 2 : 1))
CONNECTIONS=("$@")
((${#CONNECTIONS[@]})) || CONNECTIONS=(8 16 1)
find_binary() {
  local found
  found=$(find "$BIN_DIR" -maxdepth 3 -type f -name "$1" -perm -u+x | head -n 1)
  [[ -n $found ]] || { echo "run.sh: $1 is not under $BIN_DIR (build it: cmake --build build --target $1)" >&2; exit 1; }
  echo "$found"
}
BENCH=$(find_binary hub_download_bench)
SERVER_BIN=$(find_binary bench_hub_server)
if [[ -n ${LIBCURL_DIR:-} ]]; then export LD_LIBRARY_PATH=$LIBCURL_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi
if [[ -z ${LIBCURL_DIR:-} ]] && ! ldconfig -p 2>/dev/null | grep -q 'libcurl\.so\.4 '; then
  echo "run.sh: this machine has no libcurl.so.4; pack one elsewhere with --pack-libcurl DIR and set LIBCURL_DIR" >&2
  exit 1
fi

WORK=$(mktemp -d "${WORK_DIR:-${TMPDIR:-/tmp}}/flare-hub-bench.XXXXXX")
trap 'kill ${SERVER:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/repo"
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory, $(uname -r)"
echo "writing $SIZE of random bytes to $WORK/repo ..."
head -c "$SIZE" /dev/urandom >"$WORK/repo/model.safetensors"
"$SERVER_BIN" "$WORK/repo" bench/large "$WORK/ports" &
SERVER=$!
for _ in $(seq 600); do [[ -s $WORK/ports ]] && break; sleep 0.1; done
[[ -s $WORK/ports ]] || { echo "run.sh: bench_hub_server did not start" >&2; exit 1; }
read -r api_port _ <"$WORK/ports"
"$BENCH" "http://127.0.0.1:$api_port" bench/large model.safetensors "$WORK/hub" "${CONNECTIONS[@]}"
ticks=$(awk '{print $14 + $15}' "/proc/$SERVER/stat")
echo "server CPU over every run (its start-up SHA-256 of the file included): $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", t/hz}') s"
