#!/usr/bin/env bash
# Benchmark of the analysis stage (prints figures; not a test): writes a synthetic campaign of
# SAMPLES samples (default 10 million) with d500-synth through the real writer, then times
# `d500 report` on it and reports its peak memory. With --files N instead: N results files (one
# job each, 2 points of 30 repetitions; a campaign of 10^4 jobs), the goal being `d500 report`
# over 10^4 files in under 60 s.
# Usage: launchers/bench-report.sh [SAMPLES] [DIR]
#        launchers/bench-report.sh --files N [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
files=0
if [ "${1:-}" = "--files" ]; then
  files=${2:?usage: bench-report.sh --files N [DIR]}
  shift 2
  samples=0
else
  samples=${1:-10000000}
  shift || true
fi
dir=${1:-$(mktemp -d /tmp/d500-bench-report.XXXXXX)}
mkdir -p "$dir/run/results"
if [ "$files" -gt 0 ]; then
  spec="$dir/files.toml"
  printf '[job]\nid = "job"\ncampaign = "bench-files"\nrepetitions = 30\nwarmups = 1\nfiles = %d\n' "$files" > "$spec"
  for backend in a b; do
    printf '[[point]]\nparams = { workload = "synthetic", backend = "%s", size = 1 }\nmedian_s = 0.001\nnoise = 0.1\nwork_flops = 1000000\n' "$backend" >> "$spec"
  done
  t0=$(date +%s.%N)
  "$root/build/d500-synth" "$spec" "$dir/run/results/job.h5"
  echo "wrote $files results files in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s ($(du -sh "$dir/run/results" | cut -f1))"
fi
# 2 jobs (1 and 2 ranks), 20 points each (2 backends x 10 sizes): a scaling series and a
# backend comparison for every size. Samples per job are split evenly.
reps=$(( samples / (20 * 3) ))
for ranks in 1 2; do
  [ "$samples" -gt 0 ] || break
  spec="$dir/job-$ranks.toml"
  {
    printf '[job]\nid = "job-%04d"\ncampaign = "bench"\nrepetitions = %d\nwarmups = 0\nseed = %d\n' "$ranks" "$reps" "$ranks"
    for size in 1 2 3 4 5 6 7 8 9 10; do
      for backend in a b; do
        median=$(awk -v s="$size" -v r="$ranks" -v b="$backend" 'BEGIN { printf "%.6f", 0.001 * s / r * (b == "b" ? 0.8 : 1) }')
        printf '[[point]]\nparams = { workload = "synthetic", backend = "%s", size = %d }\nmedian_s = %s\nnoise = 0.2\nwork_flops = 1000000\n' \
          "$backend" "$size" "$median"
      done
    done
  } > "$spec"
  mpirun --oversubscribe -np "$ranks" "$root/build/d500-synth" "$spec" "$dir/run/results/job-000$ranks.h5"
done
du -sh "$dir/run/results"
/usr/bin/python3 - "$root/build/d500" "$dir/run" <<'PY'
import resource, subprocess, sys, time
t0 = time.monotonic()
out = subprocess.run([sys.argv[1], "report", sys.argv[2]], capture_output=True, text=True)
secs = time.monotonic() - t0
if out.returncode != 0:
    sys.exit(out.stdout + out.stderr)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
import json
j = json.load(open(sys.argv[2] + "/results.json"))
n = sum(p["n"] * p["ranks"] for p in j["points"])
import glob
files = len(glob.glob(sys.argv[2] + "/results/*.h5"))
print(f"d500 report: {files:,} results files, {n:,} timed samples, {len(j['points'])} points, {len(j['comparisons'])} comparisons, "
      f"{len(j['scaling'])} scaling series: {secs:.1f} s, peak memory {peak:.0f} MiB")
PY
