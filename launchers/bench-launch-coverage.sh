#!/usr/bin/env bash
# Coverage of the replicated-launch interval (prints figures; not a test). With d500-synth,
# plants a between-launch variance (a log-normal factor per job and point, sigma LAUNCH_SIGMA)
# over within-launch noise (sigma 0.05), writes k launches (k separate jobs, so k independent
# factors) of POINTS points each, runs `d500 report`, and counts how often each interval covers
# the planted median (median_s = 10 ms; every factor has median 1):
#   - the launch interval (two-stage: t on the log launch medians), per point;
#   - each launch's own exact median CI (what a single launch would report), per launch;
#   - with a second backend of median 5 ms beside each point (its own launch factors), the
#     backend comparison across launches (paired by launch) and each launch's own comparison
#     (BCa within it): how often each covers the planted speedup of 2.
# Usage: launchers/bench-launch-coverage.sh [POINTS] [LAUNCH_SIGMA] [K ...]   (default 300 0.1 3 5 10)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
points=${1:-300}
sigma=${2:-0.1}
shift $(( $# > 2 ? 2 : $# )) || true
ks=("$@")
[ ${#ks[@]} -gt 0 ] || ks=(3 5 10)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for k in "${ks[@]}"; do
  dir=$(mktemp -d /tmp/d500-launch-coverage.XXXXXX)
  mkdir -p "$dir/run/results"
  for launch in $(seq 1 "$k"); do
    spec="$dir/launch-$launch.toml"
    {
      printf '[job]\nid = "job-%04d"\ncampaign = "coverage"\nrepetitions = 20\nwarmups = 0\nseed = 7\n' "$launch"
      for p in $(seq 1 "$points"); do
        printf '[[point]]\nparams = { workload = "synthetic", backend = "x", experiment = %d, launch = %d }\nmedian_s = 0.01\nnoise = 0.05\nlaunch_noise = %s\n' \
          "$p" "$launch" "$sigma"
        printf '[[point]]\nparams = { workload = "synthetic", backend = "y", experiment = %d, launch = %d }\nmedian_s = 0.005\nnoise = 0.05\nlaunch_noise = %s\n' \
          "$p" "$launch" "$sigma"
      done
    } > "$spec"
    mpirun --oversubscribe -np 1 "$root/build/d500-synth" "$spec" "$dir/run/results/job-$(printf %04d "$launch").h5"
  done
  "$root/build/d500" report "$dir/run" > /dev/null
  /usr/bin/python3 - "$dir/run/results.json" "$k" "$sigma" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k, sigma, truth = int(sys.argv[2]), sys.argv[3], 0.01
groups = [g for g in j["launches"] if "synthetic:x " in g["group"]]
cover = sum(1 for g in groups if g["ci_s"] and g["ci_s"][0] <= truth <= g["ci_s"][1])
within = [p for p in j["points"] if p.get("ci") and p["backend"] == "x"]
wcover = sum(1 for p in within if p["ci"][0] <= truth <= p["ci"][1])
share = sorted(g["between_share"] for g in groups)
print(f"k={k:2d} launches, launch sigma {sigma}, within sigma 0.05, 20 reps: launch interval covers "
      f"{cover}/{len(groups)} = {100 * cover / len(groups):.1f}%; one launch's own CI covers {wcover}/{len(within)} = "
      f"{100 * wcover / len(within):.1f}%; median between-launch share {share[len(share) // 2]:.2f}")
cmp = j["launch_comparisons"]
ccover = sum(1 for c in cmp if c["speedup"]["lo"] is not None and c["speedup"]["lo"] <= 2 <= c["speedup"]["hi"])
one = [c for c in j["comparisons"] if c["speedup"]["lo"] is not None]
ocover = sum(1 for c in one if c["speedup"]["lo"] <= 2 <= c["speedup"]["hi"])
print(f"      speedup 2 (x / y): the comparison across launches covers {ccover}/{len(cmp)} = {100 * ccover / len(cmp):.1f}%; "
      f"one launch's comparison covers {ocover}/{len(one)} = {100 * ocover / len(one):.1f}%")
PY
  rm -rf "$dir"
done
