#!/usr/bin/env bash
# For the engineers' GPU machine (../shared/device/README.md), which has CUDA, cuDNN, NCCL, Open
# MPI and PyTorch but none of Debian's libraries: builds d500 there with what .devdeps carries
# (`bash launchers/device-check.sh prepare`, below) and, when PyTorch
# is importable, against its CUDA LibTorch (libtorch-cuda; if that build fails, again without
# LibTorch); runs the GPU tests; runs the GPU yardsticks. From this machine, in one device call:
#   run(command="bash launchers/device-check.sh build test bench 20 32 train", carry=[".devdeps"])
# Steps: build, test, bench [REPETITIONS [CONV_BATCH]], train [NETWORK [BATCH]], profile [NETWORK
# [BATCH]], campaign (campaigns/gpu-frameworks.toml planned, run and reported as a user does, then
# PyTorch's own loop over the same network, batch and modes) (default: build test). Each step has a time limit (D500_STEP_LIMIT_S, default 240 s) so that one that hangs
# leaves the later ones their turn. Logs go to $OUT (the device tool brings back at most 8 files:
# this writes 7), else ./device-out. D500_CUDA_ARCHS: the GPUs to build for (default 90-real,
# the H100 and H200); D500_BUILD_TARGETS: only these ninja targets; D500_DEVICE_TORCH=0 builds without PyTorch's LibTorch (a shorter build).
# Before the first device call, on this machine (not the GPU's): `bash launchers/device-check.sh
# prepare` fills .devdeps with the shared script's packages plus libonnxifi (ONNX's CMake targets
# name its files; without it the device's configure fails) and unpack-debs.sh, and git-ignores it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "${1:-}" = prepare ]; then
  shared=${D500_SHARED_DEVICE:-$root/../shared/device}
  [ -f "$shared/fetch-debs.sh" ] || { echo "device-check.sh prepare: no $shared/fetch-debs.sh (set D500_SHARED_DEVICE)" >&2; exit 2; }
  grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo /.devdeps/ >> .git/info/exclude
  bash "$shared/fetch-debs.sh" .devdeps libonnxifi > /dev/null || exit 1
  cp "$shared/unpack-debs.sh" .devdeps/ || exit 1
  echo "device-check.sh prepare: $(ls .devdeps/*.deb | wc -l) packages in .devdeps; now, through the device tool:"
  echo '  run(command="bash launchers/device-check.sh build test", carry=[".devdeps"])'
  exit 0
fi
[ -f .devdeps/unpack-debs.sh ] || { echo "device-check.sh: no .devdeps/unpack-debs.sh: run 'bash launchers/device-check.sh prepare' on the build machine first" >&2; exit 2; }
out=${OUT:-$root/device-out}
mkdir -p "$out"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build test)
limit=${D500_STEP_LIMIT_S:-240}
eval "$(bash .devdeps/unpack-debs.sh .devdeps /tmp/dd)"
# D500_CUDNN_FROM_TORCH=1: d500 runs on PyTorch's own cuDNN (its pip package's libcudnn.so.9)
# instead of the machine's, so that a difference between d500's convolutions and PyTorch's can be
# told apart from a difference between the two cuDNN versions (`d500 backends` names the one run).
if [ "${D500_CUDNN_FROM_TORCH:-0}" = 1 ]; then
  cudnn_lib=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0] + "/lib")' 2>/dev/null)
  [ -d "$cudnn_lib" ] && export LD_LIBRARY_PATH="$cudnn_lib:$LD_LIBRARY_PATH" || echo "device-check.sh: PyTorch's cuDNN not found; the machine's is used" >&2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=$root/build-gpu
t0=$SECONDS
stamp() { echo "[device-check +$((SECONDS - t0)) s] $*"; }
# The optional NETWORK [BATCH] after step i (train, profile): net and nbatch (resnet50 and 128
# when absent), i moved past what was given. A step's name is never taken for a network.
network_and_batch() {
  net=resnet50 nbatch=128
  local a=${steps[$((i + 1))]:-}
  if [[ $a =~ ^[a-z][a-z0-9-]*$ && ! " build test bench train profile campaign " =~ " $a " ]]; then net=$a i=$((i + 1)); fi
  a=${steps[$((i + 1))]:-}
  if [[ $a =~ ^[0-9]+$ ]]; then nbatch=$a i=$((i + 1)); fi
}
configure_and_build() {  # extra cmake args...
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DD500_WITH_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${D500_CUDA_ARCHS:-90-real}" "$@" >> "$out/build.log" 2>&1 &&
    ninja -C "$build" -k 0 -j16 ${D500_BUILD_TARGETS:-} >> "$out/build.log" 2>&1
}
for ((i = 0; i < ${#steps[@]}; ++i)); do
  stamp "step ${steps[$i]}"
  case "${steps[$i]}" in
    build)
      { nvidia-smi; nvcc --version | tail -2; grep -m3 -E 'define CUDNN_(MAJOR|MINOR|PATCHLEVEL)' /usr/include/x86_64-linux-gnu/cudnn_version*.h
        python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'; } > "$out/info.txt" 2>&1
      torch_root=
      [ "${D500_DEVICE_TORCH:-1}" = 0 ] || torch_root=$(python3 -c 'import torch; print(torch.__path__[0])' 2>/dev/null || true)
      if ! configure_and_build ${torch_root:+-DD500_TORCH_ROOT="$torch_root" -DD500_WITHOUT_LIBTORCH=OFF} ${torch_root:--DD500_WITHOUT_LIBTORCH=ON}; then
        grep -m30 -B2 -A8 -E 'error|Error' "$out/build.log"
        [ -n "$torch_root" ] || exit 1
        stamp "the build against PyTorch's LibTorch failed (above); again without LibTorch"
        echo "==== again without LibTorch" >> "$out/build.log"

        configure_and_build -DD500_WITHOUT_LIBTORCH=ON || { grep -m30 -B2 -A8 -E 'error|Error' "$out/build.log"; exit 1; }
      fi
      "$build/d500" backends | tee -a "$out/info.txt"
      ;;
    test)
      # D500_GPU_TESTS narrows the integration tests (a gtest filter; the unit tests then do not run).
      timeout "$limit" "$build/d500_integration_tests" --gtest_filter="${D500_GPU_TESTS:-Gpu.*}" > "$out/gpu-tests.log" 2>&1
      echo "integration (${D500_GPU_TESTS:-Gpu.*}): exit $?"
      if [ -z "${D500_GPU_TESTS:-}" ]; then
        timeout "$limit" "$build/d500_unit_tests" --gtest_filter='Half*:PlanResources.Gpu*:Nvml.*:Executor.*' > "$out/unit-tests.log" 2>&1
        echo "unit (half, GPU plan warnings, NVML, the executor with cuda against the yardstick): exit $?"
      fi
      grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|Failure' -A3 "$out/gpu-tests.log" | head -80
      [ -n "${D500_GPU_TESTS:-}" ] || grep -E '^\[  (PASSED|FAILED) |Failure' -A3 "$out/unit-tests.log" | head -40
      ;;
    bench)
      reps=${steps[$((i + 1))]:-50}
      batch=${steps[$((i + 2))]:-32}
      [[ $reps =~ ^[0-9]+$ ]] && i=$((i + 1)) || reps=50
      [[ $batch =~ ^[0-9]+$ ]] && i=$((i + 1)) || batch=32
      D500_BUILD="$build" D500_BENCH_KEEP=/tmp/d500-bench timeout "$limit" bash launchers/bench-gpu.sh "$reps" "$batch" > "$out/bench-gpu.txt" 2>&1
      echo "bench-gpu.sh: exit $?"
      cat "$out/bench-gpu.txt"
      ;;
    train)
      network_and_batch
      D500_BUILD="$build" timeout "$limit" bash launchers/bench-gpu-train.sh "$net" "$nbatch" > "$out/bench-gpu-train.txt" 2>&1
      echo "bench-gpu-train.sh: exit $?"
      cat "$out/bench-gpu-train.txt"
      ;;
    profile)
      # Where a training step's time goes on the GPU: d500-bench-executor's per-operator and
      # slowest-step breakdown (device times between CUDA events around each node step), once per
      # D500_PROFILE_RUNS item (CUDNN_ALGORITHMS:MATH:CUDNN_API[:MEMORY_FORMAT], default find::),
      # validation skipped.
      network_and_batch
      for prun in ${D500_PROFILE_RUNS:-find::}; do
        IFS=: read -r palgos pmath papi playout <<< "$prun"
        echo "== $net batch $nbatch training on cuda: cudnn_algorithms=${palgos:-default} math=${pmath:-fp32} cudnn_api=${papi:-legacy} memory_format=${playout:-nchw}" >> "$out/profile.txt"
        D500_VALIDATE=0 D500_CUDNN_ALGORITHMS=$palgos D500_MATH=$pmath D500_CUDNN_API=$papi D500_MEMORY_FORMAT=$playout timeout "$limit" \
          mpirun -np 1 --map-by "slot:PE=$(nproc)" --bind-to core "$build/d500-bench-executor" "$net" "$nbatch" cuda training 1 2 5 >> "$out/profile.txt" 2>&1
        echo "profile ($prun): exit $?"
      done
      cat "$out/profile.txt"
      ;;
    campaign)
      # The GPU campaign as a user runs it, its report's text and files to $out, then PyTorch's
      # loop on the campaign's network and batch in the same modes (bench-gpu-train.sh's part 2).
      camp=/tmp/d500-gpu-frameworks
      rm -rf "$camp"
      { "$build/d500" plan campaigns/gpu-frameworks.toml -o "$camp" &&
        timeout "$limit" "$build/d500" run "$camp"; } > "$out/campaign.txt" 2>&1
      echo "d500 plan and run campaigns/gpu-frameworks.toml: exit $?"
      "$build/d500" report "$camp" >> "$out/campaign.txt" 2>&1
      cp "$camp/report.md" "$out/campaign-report.md" 2>/dev/null
      D500_BENCH_TRAIN_RUNS=none D500_BUILD="$build" timeout "$limit" bash launchers/bench-gpu-train.sh resnet20-cifar 256 20 2 >> "$out/campaign.txt" 2>&1
      echo "PyTorch's loop beside it: exit $?"
      tail -60 "$out/campaign.txt"
      ;;
    *)
      echo "device-check.sh: unknown step '${steps[$i]}' (build, test, bench [REPETITIONS [CONV_BATCH]], train [NETWORK [BATCH]], profile [NETWORK [BATCH]], campaign)" >&2
      exit 2
      ;;
  esac
done
stamp done
