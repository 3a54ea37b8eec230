#!/usr/bin/env bash
# Overlap measured, not assumed: level 3's bucketed, overlapped allreduce against the plain one,
# training ResNet-18 (224x224 synthetic images, d500's executor on oneDNN, else the reference) on
# 2 and 4 ranks of this machine:
#   launchers/bench-overlap.sh [STEPS] [BATCH] [BUCKETS]
# STEPS timed steps per point (default 40, after 3 warm-ups), BATCH images per rank and step
# (default 4), BUCKETS the overlapped scheme's bucket sizes in bytes (default "1048576 4194304
# 26214400": 1, 4 and 25 MiB, PyTorch DDP's default being 25 MiB). Prints the report's overlap
# table: both step medians, the speedup with its BCa interval and the share of the plain
# scheme's communication + wait that overlapping hid, with its bootstrap interval. On a machine
# with fewer cores than 4 ranks, the 4-rank points are oversubscribed (the report flags them).
# D500_BACKEND picks the executor (default: d500's on oneDNN, else the reference). Needs a built
# d500 (launchers/build.sh); keeps the run in $D500_BENCH_KEEP if set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
d500=${D500:-$root/build/d500}
steps=${1:-40} batch=${2:-4} buckets=${3:-"1048576 4194304 26214400"}
work=${D500_BENCH_KEEP:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${D500_BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
backend=reference
"$d500" backends 2>/dev/null | grep -q '^  onednn:' && backend=onednn
backend=${D500_BACKEND:-$backend}  # e.g. libtorch-native: LibTorch's own executor, overlapped through autograd's hooks
bucket_list=$(printf '%s, ' $buckets)
cat > "$work/c.toml" <<TOML
[campaign]
name = "overlap"
repetitions = 1
warmups = 3
[fixed]
workload = "distributed"
network = "resnet18"
backend = "$backend"
dataset = "synthetic"
synthetic_samples = 4096
batch = $batch
steps = $((steps + 3))
eval_interval_steps = 0
eval_samples = $batch
checkpoint_interval = 0
optimizer = "momentum"
lr = 0.01
threads = 1
seed = 1
[axes]
ranks_per_node = [2, 4]
scheme = ["allreduce", "allreduce-overlap"]
bucket_bytes = [${bucket_list%, }]
TOML
rest=$(printf '%s, ' $buckets | cut -d, -f2- | sed 's/^ //; s/, $//')
# The plain scheme has no buckets: it runs once, under the first size.
[ -z "$rest" ] || printf '[[exclude]]\nscheme = "allreduce"\nbucket_bytes = [%s]\n' "$rest" >> "$work/c.toml"
rm -rf "$work/run"
"$d500" plan "$work/c.toml" -o "$work/run" > /dev/null
"$d500" run "$work/run" > "$work/run.log" 2>&1 || { tail -20 "$work/run.log"; exit 1; }
"$d500" report "$work/run" > /dev/null
/usr/bin/python3 - "$work/run/results.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
canon = {p["id"]: p["canonical"] for p in d["points"]}
pts = {p["id"]: p for p in d["points"]}
print("ResNet-18, %s; medians of the slowest rank's step; %s%% intervals" % (pts[d["overlap"][0]["plain_id"]]["backend"] if d["overlap"] else "?", round(d["confidence"] * 100)))
print("%-6s %-12s %-12s %-14s %-24s %-16s %s" % ("ranks", "bucket", "plain step", "overlap step", "speedup [CI]", "plain comm+wait", "hidden [CI]"))
for c in d["overlap"]:
    o = canon[c["overlap_id"]]
    bucket = int(o.split("bucket_bytes=")[1].split()[0])
    s = c["speedup"]
    ci = "[%.3f, %.3f]" % (s["lo"], s["hi"]) if s.get("lo") is not None else "[none]"
    h = c["hidden"]
    hci = "[%.0f%%, %.0f%%]" % (100 * h[1], 100 * h[2]) if h[1] is not None else "[none]"
    ranks = pts[c["overlap_id"]]["ranks"]
    flag = " (oversubscribed)" if pts[c["overlap_id"]].get("oversubscribed") else ""
    print("%-6s %-12s %-12s %-14s %-24s %-16s %s%s" % (ranks, "%.0f MiB" % (bucket / 2**20), "%.1f ms" % (1e3 * c["plain_step_s"]),
          "%.1f ms" % (1e3 * c["overlap_step_s"]), "%.3f %s" % (s["estimate"], ci), "%.1f ms" % (1e3 * c["plain_exposed_s"]),
          "%.0f%% %s" % (100 * h[0], hci), flag))
PY
