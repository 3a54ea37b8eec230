#!/usr/bin/env bash
# The GPU yardsticks, on one GPU, in one call:
#   launchers/bench-gpu.sh [REPETITIONS] [CONV_BATCH]
# 1. d500's `cuda` GEMM at n = 4096 and 8192 in fp32, tf32, bf16 and fp16, and cuDNN's
#    convolutions of the ResNet-50 set (forward, backward data, backward filter; float32, and with
#    D500_BENCH_CONV_DTYPES in bf16 or fp16 too, through either API) at batch
#    CONV_BATCH (default 32), each with cuDNN's heuristic first choice and with the fastest cuDNN's
#    find timed (cudnn_algorithms = find), each through cuDNN's legacy calls and through its graph
#    API (cudnn_api = graph, rows marked "graph"): two campaigns planned, run and reported by d500
#    (REPETITIONS timed, default 50, after 5 warm-ups).
# 2. PyTorch on the same problems, read back from d500's results.json (torch.mm; conv2d and
#    aten.convolution_backward with cudnn.allow_tf32 = False, and cudnn.benchmark = False, i.e.
#    cuDNN's heuristics as d500 uses them, or True beside d500's find points), each repetition
#    between CUDA events, medians.
# 3. d500-bench-cuda: the same cuBLAS call as d500's GEMM in a bare loop (events, and the host's
#    clock around launch and wait), the yardstick of the harness's overhead.
# Prints, per problem: d500's device and host medians, PyTorch's, the bare loop's, and the ratios
# (d500 device / PyTorch; d500 host / bare host - 1, the harness's overhead). Needs a built d500
# with CUDA (launchers/build.sh, or ../shared/device's recipe), a visible GPU and Python with a
# CUDA PyTorch ($PYTHON, default python3). Keeps the run in $D500_BENCH_KEEP if set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${D500_BUILD:-$root/build}
d500=${D500:-$build/d500}
bare=${D500_BENCH_CUDA:-$build/d500-bench-cuda}
python=${PYTHON:-python3}
reps=${1:-50} batch=${2:-32}
work=${D500_BENCH_KEEP:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${D500_BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
"$d500" backends | grep -A3 '^  cuda:' | grep -q 'built, no CUDA device' && { "$d500" backends | grep -A3 '^  cuda:'; exit 1; }
head="[campaign]
name = \"gpu-yardsticks\"
repetitions = $reps
warmups = 5
[fixed]
backend = \"cuda\""
printf '%s\nworkload = "gemm"\n[axes]\nn = [4096, 8192]\ndtype = ["fp32", "tf32", "bf16", "fp16"]\n' "$head" > "$work/gemm.toml"
compare() {  # results.json: d500's points beside PyTorch's and the bare loop's
"$python" - "$1" "$work/bare.txt" "$reps" <<'PY'
import json, statistics, sys
import torch
import torch.nn.functional as F

bare_file, reps = sys.argv[2], int(sys.argv[3])
points = json.load(open(sys.argv[1]))["points"]
for p in points:  # the canonical text: "workload:backend key=value ..."
    p["params"] = {k: (int(v) if v.lstrip("-").isdigit() else v) for k, v in (t.split("=", 1) for t in p["canonical"].split()[1:])}
    if p["status"] != "complete":
        print("not complete:", p["canonical"], "-", p["status"], p["status_reason"])
points = [p for p in points if p["status"] == "complete"]
bare = {}
for line in open(bare_file):
    kv = dict(f.split("=") for f in line.split())
    bare[(int(kv["n"]), kv["dtype"])] = (float(kv["device_median_s"]), float(kv["host_median_s"]))
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = False
dev = torch.device("cuda")
print("GPU:", torch.cuda.get_device_name(0), "| PyTorch", torch.__version__, "| CUDA", torch.version.cuda,
      "| cuDNN", torch.backends.cudnn.version())

def timed(fn, warmups=5):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for r in range(warmups + reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if r >= warmups:
            out.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(out)

def param(p, k, default=None):
    return p["params"].get(k, default)

rows = []
for p in points:
    if p["workload"] == "gemm":
        n, dtype = param(p, "n"), param(p, "dtype", "fp32")
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        t = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        a = torch.randn(n, n, device=dev, dtype=t)
        b = torch.randn(n, n, device=dev, dtype=t)
        ref = timed(lambda: torch.mm(a, b))
        flops = 2.0 * n ** 3
        bd, bh = bare.get((n, dtype), (float("nan"), float("nan")))
        rows.append(("gemm n=%d %s" % (n, dtype), flops, p, ref, bd, bh))
    elif p["workload"] == "conv2d":
        g = {k: param(p, k) for k in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad", "dilation", "groups")}
        dtype = param(p, "dtype", "fp32")
        t = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        x = torch.randn(g["n"], g["c"], g["h"], g["w"], device=dev, dtype=t)
        w = torch.randn(g["k"], g["c"] // g["groups"], g["r"], g["s"], device=dev, dtype=t)
        conv = lambda: F.conv2d(x, w, None, g["stride"], g["pad"], g["dilation"], g["groups"])
        y = conv()
        dy = torch.randn_like(y)
        pass_ = param(p, "pass")
        found = param(p, "cudnn_algorithms") == "find"
        torch.backends.cudnn.benchmark = found  # PyTorch's own find, at its first call (a warm-up)
        mask = {"forward": None, "backward_data": [True, False, False], "backward_filter": [False, True, False]}[pass_]
        if mask is None:
            ref = timed(conv)
        else:
            ref = timed(lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [g["stride"]] * 2, [g["pad"]] * 2,
                                                                   [g["dilation"]] * 2, False, [0, 0], g["groups"], mask))
        flops = p["rate"] * 1e9 * p["median_s"]  # GFLOP/s of the host time, back to the work of one repetition
        torch.backends.cudnn.benchmark = False
        graph = " graph" if param(p, "cudnn_api") == "graph" else ""
        rows.append(("conv %s %s%s%s%s" % (param(p, "shape", "?"), pass_, " find" if found else "", graph, "" if dtype == "fp32" else " " + dtype),
                     flops, p, ref, float("nan"), float("nan")))

print("%-48s %11s %11s %11s %11s %11s %9s %9s" % ("problem", "d500 device", "d500 host", "PyTorch", "bare dev", "bare host",
                                                   "d500/PT", "overhead"))
worst_pt, worst_oh, worst_gap = 0.0, 0.0, 0.0
for name, flops, p, ref, bd, bh in rows:
    d = p.get("device", {}).get("median_s", float("nan"))
    h = p["median_s"]
    ratio = d / ref
    overhead = h / bh - 1 if bh == bh else float("nan")
    worst_pt = max(worst_pt, abs(ratio - 1))
    if overhead == overhead:
        worst_oh = max(worst_oh, abs(overhead))
        # The host time d500 adds around the kernel beyond the bare loop's (launch, events, wait),
        # whatever the kernel's own speed on each side.
        worst_gap = max(worst_gap, (h - d) - (bh - bd))
    rate = " %.4g TFLOP/s" % (flops / d / 1e12) if flops else ""
    share = p.get("device", {}).get("peak_fraction")
    if rate and share:
        rate += " (%.1f%% of peak)" % (100 * share)
    print("%-48s %9.4g ms %9.4g ms %9.4g ms %9.4g ms %9.4g ms %9.4f %8.2f%%%s" % (name, d * 1e3, h * 1e3, ref * 1e3, bd * 1e3, bh * 1e3,
                                                                               ratio, 100 * overhead if overhead == overhead else float("nan"), rate))
basis = sorted({p.get("device", {}).get("peak_basis", "") for _, _, p, _, _, _ in rows} - {""})
for b in basis:
    print("peak: " + b)
print("largest |d500 device / PyTorch - 1|: %.2f%%; largest |d500 host / bare host - 1|: %.2f%%" % (100 * worst_pt, 100 * worst_oh))
if worst_oh:
    print("largest host time d500 adds around a kernel beyond the bare loop's (host - device, d500's minus the bare loop's): %.1f us" % (1e6 * worst_gap))
PY
}
# D500_BENCH_ONLY=gemm (or conv) runs one campaign; D500_BENCH_CUDNN_APIS='"legacy"' leaves out the graph API. D500_BENCH_CONV_PASSES and D500_BENCH_CONV_SHAPES narrow the convolutions (TOML array items):
# validating a backward-filter pass on the whole batch in double on the CPU takes seconds a point.
# D500_BENCH_CONV_DTYPES='"fp32", "bf16"' adds the convolutions in 16-bit types (conv2d's dtype,
# through both cuDNN APIs), against PyTorch's conv2d on tensors of that type.
passes=${D500_BENCH_CONV_PASSES:-'"forward", "backward_data", "backward_filter"'}
shapes=${D500_BENCH_CONV_SHAPES:-'"resnet50/*"'}
apis=${D500_BENCH_CUDNN_APIS:-'"legacy", "graph"'}  # cuDNN's legacy calls and its graph API (cudnn_api)
dtypes=${D500_BENCH_CONV_DTYPES:-'"fp32"'}
printf '%s\nworkload = "conv2d"\nn = %d\n[axes]\npass = [%s]\nshape = [%s]\ncudnn_algorithms = ["heuristic", "find"]\ncudnn_api = [%s]\ndtype = [%s]\n' \
  "$head" "$batch" "$passes" "$shapes" "$apis" "$dtypes" > "$work/conv.toml"
: > "$work/bare.txt"
for n in 4096 8192; do
  for dtype in fp32 tf32 bf16 fp16; do "$bare" "$n" "$dtype" "$reps" 5 >> "$work/bare.txt"; done
done
# Each campaign is planned, run, reported and compared with PyTorch before the next starts, so
# that a time limit cutting the convolutions short leaves the GEMM figures printed.
for c in ${D500_BENCH_ONLY:-gemm conv}; do
  rm -rf "$work/$c"
  "$d500" plan "$work/$c.toml" -o "$work/$c" > "$work/$c-plan.log"
  "$d500" run "$work/$c" > "$work/$c-run.log" 2>&1 || { tail -20 "$work/$c-run.log"; exit 1; }
  "$d500" report "$work/$c" > /dev/null
  compare "$work/$c/results.json"
done
