#!/usr/bin/env bash
# Benchmark of planning (prints figures; not a test): plans GEMM campaigns of 10^4, 10^5 and
# 10^6 points (m x n x k sizes x seeds, 10^4 points per job) into fresh run directories and
# reports, per size, the wall time and peak memory from /usr/bin/time -v, and the files and
# bytes written. The goal (issue 15): 10^6 points planned and written in under 5 s, under 1 GB.
# Usage: launchers/bench-plan.sh [DIR]     (DIR: where campaigns and runs go; default a temp dir)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d /tmp/d500-bench-plan.XXXXXX)}
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "bench-plan: needs /usr/bin/time (Debian package 'time')" >&2; exit 1; }
sizes='8, 16, 32, 48, 64, 96, 128, 192, 256, 384'
printf '%-8s %9s %12s %7s %10s\n' points wall_s peak_MiB files written
for seeds in 10 100 1000; do
  points=$(( 1000 * seeds ))
  campaign="$dir/plan-$points.toml"
  {
    printf '[campaign]\nname = "plan-%d"\nrepetitions = 10\npoints_per_job = 10000\n' "$points"
    printf '[fixed]\nworkload = "gemm"\nbackend = "reference"\n[axes]\n'
    printf 'm = [%s]\nn = [%s]\nk = [%s]\n' "$sizes" "$sizes" "$sizes"
    printf 'seed = [%s]\n' "$(seq -s ', ' 1 "$seeds")"
  } > "$campaign"
  run="$dir/run-$points"
  rm -rf "$run"
  sync
  /usr/bin/time -v -o "$dir/time-$points.txt" "$root/build/d500" plan "$campaign" -o "$run" > "$dir/plan-$points.out"
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + t[i]; print s }' "$dir/time-$points.txt")
  peak=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$dir/time-$points.txt")
  files=$(find "$run" -type f | wc -l)
  bytes=$(du -sh "$run" | cut -f1)
  printf '%-8s %9s %12s %7s %10s\n' "$points" "$wall" "$peak" "$files" "$bytes"
  grep -q "^campaign plan-$points .*: $points points" "$dir/plan-$points.out" || { echo "bench-plan: expected $points points" >&2; exit 1; }
done
echo "(d500 $("$root/build/d500" version | cut -d' ' -f2-); $(nproc) CPUs; campaigns and runs in $dir)"
