#!/bin/sh
# Copies the shared libraries that cuflight's binaries load from outside the C/C++ runtime
# (fmt, spdlog and zstd are linked in; the metrics server is cuflight's own)
# into BUILD/lib/bundled, so that the build folder runs on a machine without those packages (the
# GPU machine). The binaries find that folder through their RPATH ($ORIGIN/../lib/bundled).
# usage: scripts/gpu_check/bundle_libs.sh [BUILD]   (default build/release)
set -eu
build=${1:-build/release}
[ -d "$build/bin" ] || { echo "bundle_libs.sh: no build folder at $build" >&2; exit 2; }
dest="$build/lib/bundled"
mkdir -p "$dest"
for f in "$build/bin/cuflight" "$build/bin/cuflight-collector" "$build/lib/libcuflight_inject.so"; do
  [ -e "$f" ] || continue
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcuda.so*)
      continue ;;
  esac
  cp -L "$lib" "$dest/"
  echo "bundled $(basename "$lib")"
done
