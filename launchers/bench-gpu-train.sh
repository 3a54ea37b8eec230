#!/usr/bin/env bash
# Training throughput on one GPU, against PyTorch in the same call:
#   launchers/bench-gpu-train.sh [NETWORK] [BATCH] [STEPS] [ROUNDS]   (default resnet50 128 10 2)
# 1. d500's `train` workload (d500-bench-train, validation skipped: the double-precision
#    yardstick of ResNet-50 at batch 128 would take the host far longer than the run) with SGD
#    momentum, as a framework's loop runs a step on a GPU (the passes and the optimizer enqueued
#    without waits between them, one wait at the step's end while the host makes the next batch
#    and copies it to the device beside the step): on `cuda` (d500's executor: cuBLAS, cuDNN
#    through its graph API with the algorithms cuDNN's find times fastest, d500's fused device
#    optimizer) in fp32 (strict float32), tf32 and bf16 (convolutions and matrix products in
#    bfloat16 with float32 sums, every tensor kept in float32), tf32 and bf16 channels_last
#    (activations NHWC) and tf32 with the step recorded as a CUDA Graph, each with cuda's default
#    fusion = "add_relu" (a run's seventh field "off" runs each residual join as its two nodes:
#    D500_BENCH_TRAIN_RUNS="cuda:find:tf32:graph cuda:find:tf32:graph:::off" measures what joining
#    them gains), and bf16 channels_last with each normalisation joined to its ReLU too
#    (fusion = "add_relu+bn_relu": cuDNN's one call for the two where it takes them), and, when built against a CUDA
#    LibTorch, on `libtorch-cuda` (LibTorch's operators and autograd, cudnn.benchmark, SGD as
#    torch.optim runs it on a GPU: foreach) in fp32, tf32 and bf16 autocast, NCHW and
#    channels_last; each a median step over STEPS x ROUNDS steps, each round's first left out,
#    and images per second, with its phases (the device's times between events on its stream).
# 2. PyTorch's own training step of the same architecture (written out in torch.nn below;
#    torchvision is not needed; resnet50 or resnet20-cifar) at the same batch, one batch kept on
#    the device: fp32 with TF32 off and cudnn.benchmark, PyTorch's defaults (TF32 convolutions),
#    tf32 with cudnn.benchmark, NCHW and channels_last, bf16 autocast with cudnn.benchmark, NCHW
#    and channels_last (D500_BENCH_TORCH_RUNS names others: fp32-det, fp32, bf16); CUDA events
#    around each step, medians.
# 3. Each libtorch-cuda run against PyTorch's in the same mode (the harness's cost), and each
#    cuda run against it (d500's executor against PyTorch's: images/s and their ratio).
# Needs a d500 built with CUDA and cuDNN, a visible GPU, mpirun, and Python with a CUDA PyTorch
# ($PYTHON, default python3) for part 2.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${D500_BUILD:-$root/build}
python=${PYTHON:-python3}
network=${1:-resnet50} batch=${2:-128} steps=${3:-10} rounds=${4:-2}
[ -x "$build/d500-bench-train" ] || { echo "bench-gpu-train.sh: no $build/d500-bench-train (build d500 first, or set D500_BUILD)" >&2; exit 2; }
# The one rank gets every core, as d500's local launcher gives a lone rank (templates/local.sh.in:
# nproc / ranks of them): Open MPI alone would bind it to one core, and the data phase, which
# makes a batch on the rank's cores, would be measured on one.
mpirun=(mpirun -np 1 --map-by "slot:PE=$(nproc)" --bind-to core)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
# D500_BENCH_TRAIN_RUNS narrows part 1: BACKEND:CUDNN_ALGORITHMS:MATH:CUDNN_API[:MEMORY_FORMAT[:CUDA_GRAPH[:FUSION]]]
# items (empty: the default; none: no part 1; CUDA_GRAPH "step": cuda's step recorded once and
# replayed; FUSION cuda's fusion: add_relu, off, bn_relu or add_relu+bn_relu), separated by spaces. D500_BENCH_TORCH_RUNS narrows part 2 to the
# named PyTorch runs (see the table in the Python below), separated by spaces.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=${D500_BENCH_TRAIN_RUNS:-cuda:find::graph cuda:find:tf32:graph cuda:find:tf32:graph::step cuda:find:tf32:graph:channels_last cuda:find:bf16:graph cuda:find:bf16:graph:channels_last cuda:find:bf16:graph:channels_last::add_relu+bn_relu libtorch-cuda:find:: libtorch-cuda:find:tf32: libtorch-cuda:find:tf32::channels_last libtorch-cuda:find:bf16: libtorch-cuda:find:bf16::channels_last}
[ "$runs" = none ] && runs=  # PyTorch's part alone
for run in $runs; do
  [[ $run =~ ^[a-z0-9-]+:[a-z]*:[a-z0-9]*:[a-z]*(:[a-z_]*(:[a-z]*(:[a-z_+]*)?)?)?$ ]] || { echo "D500_BENCH_TRAIN_RUNS: '$run' is not BACKEND:CUDNN_ALGORITHMS:MATH:CUDNN_API[:MEMORY_FORMAT[:CUDA_GRAPH[:FUSION]]]" >&2; exit 2; }
  IFS=: read -r backend algos math api layout graph fusion <<< "$run"
  echo "== d500 on $backend (cudnn_algorithms = ${algos:-default}, math = ${math:-fp32}${api:+, cudnn_api = $api}${layout:+, memory_format = $layout}${graph:+, cuda_graph = $graph}${fusion:+, fusion = $fusion})"
  D500_BACKEND=$backend D500_CUDNN_ALGORITHMS=$algos D500_MATH=$math D500_CUDNN_API=$api D500_MEMORY_FORMAT=$layout \
    D500_CUDA_GRAPH=$graph D500_FUSION=$fusion "${mpirun[@]}" "$build/d500-bench-train" "$network" "$batch" "$steps" "$rounds" 0 d500 2>&1 |
    grep -E '^(network|  |d500-bench-train:|terminate|  what)' | tee "$tmp/d500-$backend-$algos-$math-$api-$layout-$graph-$fusion.txt"
done
case "$network" in resnet50 | resnet20-cifar) ;; *) exit 0 ;; esac
echo "== PyTorch $network (torch.nn, d500's architecture written out), batch $batch"
"$python" - "$batch" "$steps" "$rounds" "$network" <<'PY' | tee "$tmp/torch.txt"
import statistics, sys
import torch
import torch.nn as nn

batch, steps, rounds = (int(a) for a in sys.argv[1:4])
network = sys.argv[4]
dev = torch.device("cuda")

class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.short is None else self.short(x)))

def resnet50(classes=1000):
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)

class Basic(nn.Module):  # d500's resnet20-cifar block: projection shortcuts
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.short is None else self.short(x)))

def resnet20(classes=10):
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)]
    cin = 16
    for width in (16, 32, 64):
        for k in range(3):
            layers.append(Basic(cin, width, 2 if k == 0 and width != 16 else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)

make_model, side, classes = (resnet50, 224, 1000) if network == "resnet50" else (resnet20, 32, 10)
print("GPU:", torch.cuda.get_device_name(0), "| PyTorch", torch.__version__, "| CUDA", torch.version.cuda, "| cuDNN", torch.backends.cudnn.version())
x = torch.randn(batch, 3, side, side, device=dev)
y = torch.randint(0, classes, (batch,), device=dev)
import os
# name: (cudnn.allow_tf32, matmul.allow_tf32, autocast bf16, cudnn.deterministic, cudnn.benchmark, channels_last)
runs = {
    "fp32-det": ("fp32, TF32 off, deterministic (d500's arithmetic)", False, False, False, True, False, False),
    "fp32": ("fp32, TF32 off", False, False, False, False, False, False),
    "fp32-find": ("fp32, TF32 off, cudnn.benchmark (cuDNN's find)", False, False, False, False, True, False),
    "defaults": ("fp32, PyTorch's defaults (TF32 convolutions)", True, False, False, False, False, False),
    "tf32-find": ("tf32 (cuDNN and matmul), cudnn.benchmark", True, True, False, False, True, False),
    "tf32-find-cl": ("tf32, cudnn.benchmark, channels_last", True, True, False, False, True, True),
    "bf16": ("bf16 autocast", True, False, True, False, False, False),
    "bf16-find": ("bf16 autocast, cudnn.benchmark", True, False, True, False, True, False),
    "bf16-find-cl": ("bf16 autocast, cudnn.benchmark, channels_last", True, False, True, False, True, True),
}
chosen = os.environ.get("D500_BENCH_TORCH_RUNS", "fp32-find defaults tf32-find tf32-find-cl bf16-find bf16-find-cl").split()
for key in chosen:
    name, tf32, mm_tf32, autocast, det, bench, cl = runs[key]
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = mm_tf32
    torch.backends.cudnn.benchmark = bench
    torch.backends.cudnn.deterministic = det
    fmt = torch.channels_last if cl else torch.contiguous_format
    model = make_model().to(dev, memory_format=fmt)
    x = x.contiguous(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(rounds):
        for s in range(steps):
            start.record()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            stop.record()
            stop.synchronize()
            if s > 0:
                times.append(start.elapsed_time(stop) * 1e-3)
    m = statistics.median(times)
    print("  %-52s %8.2f ms a step, %7.1f images/s (median of %d steps) [%s]" % (name, m * 1e3, batch / m, len(times), key))
    del model, opt
    torch.cuda.empty_cache()
PY
# Each d500 run against PyTorch's loop in the same mode, from the two parts' figures: for
# libtorch-cuda the harness's cost over the same framework, for cuda d500's own executor against
# PyTorch's (the issue's table: images/s and their ratio). The whole step, and without d500's
# data phase, which PyTorch's loop, reusing one batch, does not have.
against_torch() {  # BACKEND (cuda or libtorch-cuda): its runs' files, paired by mode
  local f key algos math api layout graph fusion torch_ms whole bare
  for f in "$tmp"/d500-"$1"-*.txt; do
    [ -f "$f" ] || continue
    IFS=- read -r algos math api layout graph fusion <<< "$(basename "$f" .txt | sed "s/^d500-$1-//")"
    key=fp32; [ -n "$math" ] && key=$math
    case "$algos" in deterministic | "") [ "$key" = fp32 ] && key=fp32-det || key=$key-det ;; find) key=$key-find ;; esac
    [ "$layout" = channels_last ] && key=$key-cl
    torch_ms=$(grep -F "[$key]" "$tmp/torch.txt" | grep -oE '[0-9.]+ ms a step' | grep -oE '^[0-9.]+')
    whole=$(grep -m1 "d500's train workload:.*images/s" "$f" | grep -oE '[0-9.]+ ms a step' | grep -oE '^[0-9.]+')
    bare=$(grep -m1 "without its data phase" "$f" | grep -oE '[0-9.]+ ms a step' | grep -oE '^[0-9.]+')
    if [ -z "$torch_ms" ] || [ -z "$whole" ]; then echo "  ${math:-fp32} ${algos:-deterministic} ${layout:-nchw}${graph:+ $graph}${fusion:+ fusion $fusion}: no PyTorch run [$key] to pair with"; continue; fi
    awk -v k="$key${api:+ $api}${graph:+ $graph}${fusion:+ fusion $fusion}" -v t="$torch_ms" -v w="$whole" -v b="$bare" -v n="$batch" 'BEGIN {
      printf "  %-26s PyTorch %7.2f ms (%6.0f images/s); d500 whole step %7.2f ms (%6.0f images/s, %.3f of PyTorch)",
        k, t, n * 1000 / t, w, n * 1000 / w, t / w
      if (b != "") printf ", without its data phase %7.2f ms (%.3f)", b, t / b
      printf "\n" }'
  done
}
echo "== libtorch-cuda against PyTorch, the same mode (the harness's cost: the target is 0.99 of PyTorch's images/s or more)"
against_torch libtorch-cuda
echo "== d500's executor (cuda) against PyTorch, the same mode (issue 48's goal: 1.00 or more)"
against_torch cuda
