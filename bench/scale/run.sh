#!/usr/bin/env bash
# Report and export at scale: `cuflight report`, `report --html` and `export --perfetto` (protobuf
# and gzip'd JSON) on a generated collector log (bench/log_gen, make_log), each under
# /usr/bin/time: wall and CPU seconds, launches per second (wall, and per CPU second: what one
# core would do), peak resident memory, output size. With --baseline, the same commands from
# another cuflight binary (e.g. one built from an earlier commit) and the ratios.
#
#   bench/scale/run.sh --cuflight build/release/bin/cuflight --make-log build/release/bin/make_log \
#       [--launches 1000000] [--dir /tmp/cuflight-scale] [--baseline OLD_CUFLIGHT]
#       [--baseline-export-launches 100000] [--runs 3] [--plain] [--intern] [--timing POLICY]
#       [--cpus LIST]
#
# The log is made once per --launches in --dir and reused; --plain leaves its closed segments
# uncompressed (the collector compresses them with zstd: the default); --intern writes its launches
# as interned configurations and launch lines (make_log --intern; docs/protocol.md) instead of
# whole kernel lines; --timing writes the log under that CUFLIGHT_TIMING policy (make_log --timing:
# all, the default, every launch timed; sampled, the fleet's, timing windows and a kernel_time only
# for the launches made in one; off). The best of --runs runs is kept (the
# machine is shared: the fastest run is the least disturbed). A baseline export of a large log can
# need many GiB (the JSON was built in memory): --baseline-export-launches runs it on a smaller
# log of its own. --cpus runs every command under `taskset -c LIST` (e.g. --cpus 0: one core, the
# per-core figure without other cores' help).
set -euo pipefail

cuflight="" make_log="" baseline="" launches=1000000 dir="/tmp/cuflight-scale" runs=3 plain="" intern=""
timing="all"
baseline_export_launches=100000 cpus=""
while (($#)); do
  case "$1" in
    --cuflight) cuflight=$2; shift 2 ;;
    --make-log) make_log=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --launches) launches=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --baseline-export-launches) baseline_export_launches=$2; shift 2 ;;
    --plain) plain="--plain"; shift ;;
    --intern) intern="--intern"; shift ;;
    --timing) timing=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$cuflight" || -z "$make_log" ]]; then
  echo "usage: run.sh --cuflight CUFLIGHT --make-log MAKE_LOG [--launches N] [--dir DIR] [--baseline OLD] [--baseline-export-launches N] [--runs N] [--plain] [--intern] [--timing all|sampled|off] [--cpus LIST]" >&2
  exit 2
fi
[[ -x /usr/bin/time ]] || { echo "run.sh: needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }

mkdir -p "$dir"
log_for() {  # log_for N -> the directory of a generated log of N launches
  local n=$1 logdir="$dir/log-$1${plain:+-plain}${intern:+-intern}"
  [[ "$timing" == all ]] || logdir+="-$timing"  # the logs made before --timing keep their names
  if [[ ! -f "$logdir/.done" ]]; then
    rm -rf "$logdir"
    "$make_log" "$logdir" --launches "$n" --api-error-every 300000 --stall-every 200000 $plain $intern \
      --timing "$timing" >&2
    touch "$logdir/.done"
  fi
  echo "$logdir"
}

# measure NAME LAUNCHES OUTPUT -- COMMAND...: the best of $runs runs, one line of figures.
measure() {
  local name=$1 n=$2 output=$3
  shift 4
  local best_wall="" line=""
  for ((r = 0; r < runs; r++)); do
    rm -f "$output"
    /usr/bin/time -f "%e %U %S %M" -o "$dir/time.txt" ${cpus:+taskset -c "$cpus"} "$@" \
      >/dev/null 2>"$dir/stderr.txt" ||
      { echo "run.sh: $name failed:" >&2; cat "$dir/stderr.txt" >&2; return 1; }
    read -r wall user sys rss_kb <"$dir/time.txt"
    if [[ -z "$best_wall" ]] || awk "BEGIN{exit !($wall < $best_wall)}"; then
      best_wall=$wall
      local size="-"
      [[ -f "$output" ]] && size=$(awk -v b="$(stat -c %s "$output")" 'BEGIN{printf "%.1f MB", b/1048576}')
      line=$(awk -v name="$name" -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" -v m="$rss_kb" \
        -v size="$size" 'BEGIN{cpu=u+s; printf "%-34s %9d %8.2f %8.2f %12.0f %12.0f %9.0f  %s",
        name, n, w, cpu, n/w, n/cpu, m/1024, size}')
    fi
  done
  echo "$line"
  best[$name]=$best_wall
}

header() {
  printf "%-34s %9s %8s %8s %12s %12s %9s  %s\n" "command" "launches" "wall s" "cpu s" \
    "launches/s" "per cpu s" "RSS MiB" "output"
}

declare -A best
log=$(log_for "$launches")
echo "log: $log ($(du -sh "$log" | cut -f1) on disk, $(find "$log" -name '*.jsonl*' | wc -l) files)"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)${cpus:+; every command on CPUs $cpus (taskset)}"
echo
header
measure "report" "$launches" "" -- "$cuflight" report "$log"
measure "report --html" "$launches" "$dir/r.html" -- "$cuflight" report "$log" --html "$dir/r.html"
measure "export --perfetto t.pftrace" "$launches" "$dir/t.pftrace" -- \
  "$cuflight" export --perfetto "$dir/t.pftrace" "$log"
measure "export --perfetto t.json.gz" "$launches" "$dir/t.json.gz" -- \
  "$cuflight" export --perfetto "$dir/t.json.gz" "$log"
if [[ -n "$baseline" ]]; then
  echo
  echo "baseline: $baseline"
  header
  measure "baseline report" "$launches" "" -- "$baseline" report "$log"
  small=$(log_for "$baseline_export_launches")
  measure "baseline export (JSON)" "$baseline_export_launches" "$dir/b.json" -- \
    "$baseline" export --perfetto "$dir/b.json" "$small"
  measure "export --perfetto t.pftrace (same log)" "$baseline_export_launches" "$dir/t.pftrace" -- \
    "$cuflight" export --perfetto "$dir/t.pftrace" "$small"
  measure "export --perfetto t.json (same log)" "$baseline_export_launches" "$dir/t.json" -- \
    "$cuflight" export --perfetto "$dir/t.json" "$small"
  echo
  ratio() { awk -v a="$2" -v b="$3" -v what="$1" 'BEGIN{printf "%s: %.1fx less wall time\n", what, a/b}'; }
  ratio "report, $launches launches" "${best[baseline report]}" "${best[report]}"
  ratio "export, $baseline_export_launches launches, protobuf" "${best[baseline export (JSON)]}" \
    "${best[export --perfetto t.pftrace (same log)]}"
  ratio "export, $baseline_export_launches launches, JSON" "${best[baseline export (JSON)]}" \
    "${best[export --perfetto t.json (same log)]}"
fi
