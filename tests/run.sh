#!/usr/bin/env bash
# The second README command: installs what is missing, builds d500 with its tests, and runs
# the whole suite through CTest (unit tests, then integration tests with real mpirun ranks and a
# real single-node Slurm cluster), in one ctest run holding two builds' tests:
#   - the Debian build's, which must have every optional library: D500_REQUIRE_BACKENDS and
#     D500_REQUIRE_SLURM make a library that silently went missing fail the suite;
#   - the minimal variant's (build/minimal/, label `minimal`): the same objects linked without
#     oneDNN, LibTorch, libslurm and CUDA, as a GPU node's or a minimal cluster's build would be,
#     running the tests whose outcome depends on which libraries a build has; the tests of what it
#     lacks are skipped with the reason, and it must have exactly the backends that need nothing
#     optional (its tests set D500_REQUIRE_BACKENDS themselves). The CMake side of such a build
#     (-DD500_WITHOUT_...=ON) is configured too.
# D500_TEST_MINIMAL=build also makes that build for real (build-minimal/, a second compilation,
# file by file, without unity batches: a file that does not include what it uses fails there) and
# runs every test there; D500_TEST_MINIMAL=0 leaves the minimal variant's tests out.
# Arguments go to ctest (e.g. -R Store).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash launchers/install-deps.sh --tests
bash launchers/build.sh -DD500_WITH_TESTS=ON

# The suite runs up to five tests at once on a CI machine of two cores, and many of them start
# mpirun jobs of 2-4 ranks. A rank waiting in MPI spins by default (Open MPI yields only when its own
# job oversubscribes the node, and each job alone does not), so the waiting ranks of one test took
# the CPU from the working ranks of the others: three kill-and-resume tests, 36 s one after another
# here, took 43 s side by side spinning and 28 s yielding. Benchmarks and campaigns keep the default.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}

passed=0 failed=0 skipped=0 rc=0
run_suite() {  # build dir, required backends, whether libslurm is required, ctest args...
  local dir=$1 backends=$2 slurm=$3 log
  shift 3
  log=$(mktemp)
  echo "== d500 suite in $dir (required backends: $backends; libslurm required: $slurm)"
  (cd "$dir" && D500_REQUIRE_BACKENDS=$backends D500_REQUIRE_SLURM=$slurm D500_REQUIRE_BROWSER=1 \
     ctest --output-on-failure --timeout 900 -j 5 "$@") 2>&1 | tee "$log" || rc=1
  local total fail skip
  total=$(grep -oE 'tests failed out of [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  fail=$(grep -oE '[0-9]+ tests failed out of' "$log" | grep -oE '^[0-9]+' || echo 0)
  skip=$(grep -cE '\*\*\*Skipped|Skipped \*\*\*|  Skipped  ' "$log" || true)
  passed=$((passed + total - fail - skip)) failed=$((failed + fail)) skipped=$((skipped + skip))
  rm -f "$log"
}

without=(-DD500_WITHOUT_ONEDNN=ON -DD500_WITHOUT_LIBTORCH=ON -DD500_WITHOUT_SLURM=ON -DD500_WITHOUT_CUDA=ON)
all=reference,blas,mpi,onednn,libtorch,libtorch-native,custom
case "${D500_TEST_MINIMAL:-1}" in
  0)
    run_suite build $all 1 -LE minimal "$@" ;;
  build)
    run_suite build $all 1 "$@"
    gen=()
    command -v ninja >/dev/null && [ ! -f build-minimal/CMakeCache.txt ] && gen=(-G Ninja)
    cmake -S . -B build-minimal "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DD500_WITH_TESTS=ON -DD500_UNITY_BUILD=OFF "${without[@]}" >/dev/null
    cmake --build build-minimal -j "$(nproc)"
    run_suite build-minimal reference,blas,mpi,custom 0 "$@" ;;
  *)
    # A build configured without the optional libraries must configure and list them as missing
    # (the CMake side of it; its code is the minimal variant's, whose tests run below).
    echo "== configuring a build without the optional libraries (build-minimal-configure/)"
    rm -rf build-minimal-configure
    if ! cmake -S . -B build-minimal-configure -DD500_WITH_TESTS=ON "${without[@]}" >/dev/null ||
       ! grep -q 'add_missing("onednn"' build-minimal-configure/generated/backends_builtin.cpp; then
      echo "FAILED: a build without the optional libraries does not configure, or still lists oneDNN as built"
      rc=1 failed=$((failed + 1))
    fi
    rm -rf build-minimal-configure
    run_suite build $all 1 "$@" ;;
esac
echo "suite: $passed passed, $failed failed, $skipped skipped"
exit $rc
