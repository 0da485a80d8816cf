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
#       (or a folder holding hub-bench.tar.gz from --pack, unpacked into the work folder)
#   bench/hub_download/run.sh --pack BUILD_DIR DEST_DIR
#       writes DEST_DIR/hub-bench.tar.gz: both programs, stripped, and libcurl.so.4 with the libraries
#       it needs beyond glibc (libcurl/), for a machine with nothing built; run.sh uses that libcurl
#       only where the system has none (or LIBCURL_DIR=DIR names another folder).
set -euo pipefail

# pack_libcurl DIR: libcurl.so.4 and the libraries it needs beyond glibc.
pack_libcurl() {
  local lib dest=$1
  mkdir -p "$dest"
  lib=$(ldconfig -p | awk '/libcurl\.so\.4 /{print $NF; exit}')
  [[ -n $lib ]] || { echo "run.sh: no libcurl.so.4 here to pack" >&2; exit 1; }
  cp -L "$lib" "$dest/libcurl.so.4"
  ldd "$lib" | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r dep; do cp -L "$dep" "$dest/"; done
}

if [[ ${1:-} == --pack ]]; then
  # One archive for a machine with nothing built: the two programs, stripped, and libcurl/.
  build=${2:?usage: run.sh --pack BUILD_DIR DEST_DIR}
  dest=${3:?usage: run.sh --pack BUILD_DIR DEST_DIR}
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' EXIT
  for program in hub_download_bench bench_hub_server; do
    found=$(find "$build" -maxdepth 3 -type f -name "$program" -perm -u+x | head -n 1)
    [[ -n $found ]] || { echo "run.sh: build $program first (cmake --build $build --target $program)" >&2; exit 1; }
    strip -o "$staging/$program" "$found"
  done
  pack_libcurl "$staging/libcurl"
  mkdir -p "$dest"
  tar -czf "$dest/hub-bench.tar.gz" -C "$staging" .
  ls -la "$dest/hub-bench.tar.gz"
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
WORK=$(mktemp -d "${WORK_DIR:-${TMPDIR:-/tmp}}/flare-hub-bench.XXXXXX")
trap 'kill ${SERVER:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
if [[ -f $BIN_DIR/hub-bench.tar.gz ]]; then
  mkdir -p "$WORK/bin" && tar -xzf "$BIN_DIR/hub-bench.tar.gz" -C "$WORK/bin"
  BIN_DIR=$WORK/bin
fi
BENCH=$(find_binary hub_download_bench)
SERVER_BIN=$(find_binary bench_hub_server)
# libcurl is loaded at run time: the system's, else one packed beside the binaries (BIN_DIR/libcurl).
if [[ -z ${LIBCURL_DIR:-} ]] && ! ldconfig -p 2>/dev/null | grep -q 'libcurl\.so\.4 ' && [[ -f $BIN_DIR/libcurl/libcurl.so.4 ]]; then
  LIBCURL_DIR=$BIN_DIR/libcurl
fi
if [[ -n ${LIBCURL_DIR:-} ]]; then
  echo "libcurl: $LIBCURL_DIR/libcurl.so.4 (packed)"
  export LD_LIBRARY_PATH=$(cd "$LIBCURL_DIR" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
elif ! ldconfig -p 2>/dev/null | grep -q 'libcurl\.so\.4 '; then
  echo "run.sh: this machine has no libcurl.so.4; make BIN_DIR with --pack on a machine that has one" >&2
  exit 1
fi

mkdir -p "$WORK/repo"
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory, $(uname -r)"
echo "writing $SIZE of random bytes to $WORK/repo ..."
head -c "$SIZE" /dev/urandom >"$WORK/repo/model.safetensors"
"$SERVER_BIN" "$WORK/repo" bench/large "$WORK/ports" &
SERVER=$!
for _ in $(seq 3000); do [[ -s $WORK/ports ]] && break; sleep 0.1; done
[[ -s $WORK/ports ]] || { echo "run.sh: bench_hub_server did not start" >&2; exit 1; }
read -r api_port _ <"$WORK/ports"
"$BENCH" "http://127.0.0.1:$api_port" bench/large model.safetensors "$WORK/hub" "${CONNECTIONS[@]}"
ticks=$(awk '{print $14 + $15}' "/proc/$SERVER/stat")
echo "server CPU over every run (its start-up SHA-256 of the file included): $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", t/hz}') s"
