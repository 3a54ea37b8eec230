#!/usr/bin/env bash
# The plain allreduce scheme's communication per step against level 0's bare MPI_Allreduce of
# the same bytes (LeNet-5's gradients, 246824 bytes) in the same job, on 2 ranks:
#   launchers/bench-allreduce-scheme.sh [RUNS] [STEPS]
# Each run plans and runs one job: the scheme trains LeNet-5 for STEPS steps (default 300),
# and the allreduce runs 300 times in four ways: back to back with separate buffers, and with
# `buffers = "in-place"` and/or `off_cache = "64M"` (in place on a refilled buffer, caches
# cooled in between: as inside a training step). Prints per run the medians (slowest rank) and
# the scheme's communication over each. Needs a built d500 (launchers/build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
d500=${D500:-$root/build/d500}
runs=${1:-3} steps=${2:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/c.toml" <<TOML
[campaign]
name = "allreduce-scheme"
repetitions = 300
warmups = 5
[fixed]
network = "lenet5"
dataset = "fashion-mnist"
batch = 64
steps = $steps
eval_interval_steps = 100000
eval_samples = 64
time_budget = 600
stop_at_target = false
optimizer = "momentum"
lr = 0.02
threads = 1
checkpoint_interval = 0
scheme = "allreduce"
bytes = 246824
[axes]
workload = ["distributed", "allreduce"]
backend = ["reference", "mpi"]
ranks_per_node = [2]
buffers = ["", "in-place"]
off_cache = ["", "64M"]
[[zip]]
axes = ["workload", "backend"]
TOML
for k in $(seq "$runs"); do
  rm -rf "$work/run"
  "$d500" plan "$work/c.toml" -o "$work/run" > /dev/null
  "$d500" run "$work/run" > /dev/null
  "$d500" report "$work/run" > /dev/null
  /usr/bin/python3 - "$work/run/results.json" "$k" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
comm, bare = None, {}
for p in d["points"]:
    if p["workload"] == "distributed":
        comm = p["phases"]["communication"]["median_s"]
    elif p["workload"] == "allreduce":
        c = p["canonical"]
        key = ("in-place" if "buffers=in-place" in c else "separate") + (", off_cache 64M" if "off_cache=64M" in c else ", back to back")
        bare[key] = p["median_s"]
print(f"run {sys.argv[2]}: scheme communication {comm * 1e6:.2f} us per step")
for key in sorted(bare):
    print(f"  bare MPI_Allreduce {key:32s} {bare[key] * 1e6:7.2f} us   scheme / bare {comm / bare[key] - 1:+.1%}")
PY
done
