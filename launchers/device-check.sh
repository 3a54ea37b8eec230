#!/usr/bin/env bash
# For the engineers' GPU machine (../shared/device/README.md), which has CUDA, cuDNN, NCCL, Open
# MPI and PyTorch but none of Debian's libraries: builds d500 there with what .devdeps carries
# (../shared/device/fetch-debs.sh .devdeps, plus unpack-debs.sh copied into it) and, when PyTorch
# is importable, against its CUDA LibTorch (libtorch-cuda); runs the GPU tests; runs the GPU
# yardsticks. From this machine, one device call per step (each under its 10-minute limit):
#   run(command="bash launchers/device-check.sh build test", carry=[".devdeps"])
#   run(command="bash launchers/device-check.sh bench", carry=[".devdeps"])
#   run(command="bash launchers/device-check.sh train", carry=[".devdeps"])
# Steps: build, test, bench [REPETITIONS [CONV_BATCH]], train [NETWORK [BATCH]] (default: build
# test). Logs go to $OUT
# (the device tool brings them back), else ./device-out.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/device-out}
mkdir -p "$out"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build test)
eval "$(bash .devdeps/unpack-debs.sh .devdeps /tmp/dd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=$root/build-gpu
for ((i = 0; i < ${#steps[@]}; ++i)); do
  case "${steps[$i]}" in
    build)
      nvidia-smi > "$out/nvidia-smi.txt" 2>&1
      torch_root=$(python3 -c 'import torch; print(torch.__path__[0])' 2>/dev/null || true)
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DD500_WITH_TESTS=ON \
        ${torch_root:+-DD500_TORCH_ROOT="$torch_root"} > "$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
      ninja -C "$build" -j16 > "$out/build.log" 2>&1 || { grep -m20 -A5 'error' "$out/build.log"; exit 1; }
      "$build/d500" backends | tee "$out/backends.txt"
      ;;
    test)
      "$build/d500_integration_tests" --gtest_filter='Gpu.*' > "$out/gpu-tests.log" 2>&1
      echo "integration (Gpu.*): exit $?"
      "$build/d500_unit_tests" --gtest_filter='Half*:PlanResources.Gpu*:Executor.*' > "$out/unit-tests.log" 2>&1
      echo "unit (half, GPU plan warnings, the executor with cuda against the yardstick): exit $?"
      grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure' -A3 "$out/gpu-tests.log" | head -60
      grep -E '^\[  (PASSED|FAILED) |Failure' -A3 "$out/unit-tests.log" | head -40
      ;;
    bench)
      reps=${steps[$((i + 1))]:-50}
      batch=${steps[$((i + 2))]:-32}
      [[ $reps =~ ^[0-9]+$ ]] && i=$((i + 1)) || reps=50
      [[ $batch =~ ^[0-9]+$ ]] && i=$((i + 1)) || batch=32
      D500_BUILD="$build" D500_BENCH_KEEP="$out/bench" bash launchers/bench-gpu.sh "$reps" "$batch" 2>&1 | tee "$out/bench-gpu.txt"
      ;;
    train)
      net=${steps[$((i + 1))]:-resnet50}
      tbatch=${steps[$((i + 2))]:-128}
      [[ $net =~ ^[a-z][a-z0-9-]*$ && $net != build && $net != test && $net != bench ]] && i=$((i + 1)) || net=resnet50
      [[ $tbatch =~ ^[0-9]+$ ]] && i=$((i + 1)) || tbatch=128
      D500_BUILD="$build" bash launchers/bench-gpu-train.sh "$net" "$tbatch" 2>&1 | tee "$out/bench-gpu-train.txt"
      ;;
    *)
      echo "device-check.sh: unknown step '${steps[$i]}' (build, test, bench [REPETITIONS [CONV_BATCH]], train [NETWORK [BATCH]])" >&2
      exit 2
      ;;
  esac
done
