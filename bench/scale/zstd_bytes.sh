#!/usr/bin/env bash
# zstd log bytes per launch: the closed, zstd-compressed segments of a log directory (as the
# collector's segment worker or make_log leaves them), their bytes on disk divided by the launches
# they hold (`kernel` lines and `launch` lines; kernel_config descriptions are not launches), with
# the line mix. The active file (plain) is left out.
#
#   bench/scale/zstd_bytes.sh LOG_DIR
set -euo pipefail
dir=${1:?usage: zstd_bytes.sh LOG_DIR}
command -v zstdcat >/dev/null || { echo "zstd_bytes.sh: needs zstdcat (Debian: apt-get install zstd)" >&2; exit 2; }
mapfile -t segments < <(find "$dir" -name '*.jsonl.zst' | sort)
((${#segments[@]})) || { echo "zstd_bytes.sh: no *.jsonl.zst under $dir" >&2; exit 2; }
bytes=$(stat -c %s "${segments[@]}" | awk '{s += $1} END {print s}')
zstdcat "${segments[@]}" | awk -v files="${#segments[@]}" -v bytes="$bytes" '
  { t = substr($0, 10, 14); sub(/".*/, "", t); n[t]++; plain += length($0) + 1 }
  END {
    launches = ("kernel" in n ? n["kernel"] : 0) + ("launch" in n ? n["launch"] : 0)
    printf "%d segments, %d bytes zstd (%d plain), %d launches: %.2f bytes per launch (%.0f plain)\n",
      files, bytes, plain, launches, bytes / launches, plain / launches
    for (t in n) printf "  %-12s %10d lines\n", t, n[t]
  }'
