#!/usr/bin/env bash
# Benchmark of `d500 status` on a campaign of many queued jobs (prints figures; not a test):
# starts a single-node test cluster of its own (launchers/test-cluster.sh, ports 16847/16848),
# takes its partition down so that nothing starts, plans JOBS one-point jobs (default 10^4),
# submits them (one shape: arrays of at most the controller's MaxArraySize - 1 tasks) and times
# `d500 submit`, then `d500 status` three times: its one libslurm query for all the run's jobs,
# the results files and the jobs' records. The goal: 10^4 queued jobs in under 2 s. Needs root.
# Usage: launchers/bench-status.sh [JOBS] [DIR]      (D500_BENCH_ARRAY=false: one submission a job)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-10000}
dir=${2:-$(mktemp -d /tmp/d500-bench-status.XXXXXX)}
cluster="$dir/cluster"
export D500_TEST_SLURMCTLD_PORT=16847 D500_TEST_SLURMD_PORT=16848
trap 'bash "$root/launchers/test-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true' EXIT
eval "$(bash "$root/launchers/test-cluster.sh" start "$cluster")"
scontrol update partitionname=debug state=down
{
  printf '[campaign]\nname = "bench-status"\nrepetitions = 10\ntemplate = "slurm"\npoints_per_job = 1\n'
  printf '[slurm]\ntime_limit = 1\narray = %s\n[fixed]\nworkload = "gemm"\nbackend = "reference"\nn = 8\n[axes]\n' "${D500_BENCH_ARRAY:-true}"
  printf 'seed = [%s]\n' "$(seq -s ', ' 1 "$jobs")"
} > "$dir/status.toml"
rm -rf "$dir/run"
"$root/build/d500" plan "$dir/status.toml" -o "$dir/run" > /dev/null
t0=$(date +%s.%N)
"$root/build/d500" submit "$dir/run" | tail -1
t1=$(date +%s.%N)
echo "d500 submit: $jobs jobs in $(wc -l < "$dir/run/slurm/submissions.tsv" | awk '{ print $1 - 1 }') submissions, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
for i in 1 2 3; do
  /usr/bin/time -f "d500 status: %e s, peak %M KiB" "$root/build/d500" status "$dir/run" > "$dir/status.out"
done
grep "^summary:" "$dir/status.out"
"$root/build/d500" cancel "$dir/run" | tail -1
echo "($(nproc) CPUs; array = ${D500_BENCH_ARRAY:-true}; $dir)"
