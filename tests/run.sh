#!/usr/bin/env bash
# The second README command: installs what is missing, builds d500 with its tests, and runs
# the whole suite through CTest (unit tests, then integration tests with real mpirun ranks and a
# real single-node Slurm cluster) twice:
#   1. on the Debian build, which must have every optional library: D500_REQUIRE_BACKENDS and
#      D500_REQUIRE_SLURM make a library that silently went missing fail the suite;
#   2. on a build configured without oneDNN, LibTorch, libslurm and CUDA (as a GPU node's or a minimal
#      cluster's build would be), where the tests of what it lacks are skipped with the reason:
#      every unit test, and the integration tests whose outcome depends on which libraries the
#      build has (kMinimalIntegration below); the others run the same code either way and ran
#      in the first pass. D500_TEST_MINIMAL=all runs every test there too.
# Arguments go to both ctest runs (e.g. -R Store). D500_TEST_MINIMAL=0 skips the second run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash launchers/install-deps.sh --tests
bash launchers/build.sh -DD500_WITH_TESTS=ON

passed=0 failed=0 skipped=0 rc=0
run_suite() {  # build dir, required backends, whether libslurm is required, ctest args...
  local dir=$1 backends=$2 slurm=$3 log
  shift 3
  log=$(mktemp)
  echo "== d500 suite in $dir (required backends: $backends; libslurm required: $slurm)"
  (cd "$dir" && D500_REQUIRE_BACKENDS=$backends D500_REQUIRE_SLURM=$slurm D500_REQUIRE_BROWSER=1 \
     ctest --output-on-failure --timeout 900 -j 2 "$@") 2>&1 | tee "$log" || rc=1
  local total fail skip
  total=$(grep -oE 'tests failed out of [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  fail=$(grep -oE '[0-9]+ tests failed out of' "$log" | grep -oE '^[0-9]+' || echo 0)
  skip=$(grep -cE '\*\*\*Skipped|Skipped \*\*\*|  Skipped  ' "$log" || true)
  passed=$((passed + total - fail - skip)) failed=$((failed + fail)) skipped=$((skipped + skip))
  rm -f "$log"
}

run_suite build reference,blas,mpi,onednn,libtorch,libtorch-native,custom 1 "$@"
if [ "${D500_TEST_MINIMAL:-1}" != 0 ]; then
  gen=()
  command -v ninja >/dev/null && [ ! -f build-minimal/CMakeCache.txt ] && gen=(-G Ninja)
  cmake -S . -B build-minimal "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DD500_WITH_TESTS=ON \
    -DD500_WITHOUT_ONEDNN=ON -DD500_WITHOUT_LIBTORCH=ON -DD500_WITHOUT_SLURM=ON -DD500_WITHOUT_CUDA=ON >/dev/null
  cmake --build build-minimal -j "$(nproc)"
  if [ "${D500_TEST_MINIMAL:-1}" = all ]; then
    run_suite build-minimal reference,blas,mpi,custom 0 "$@"
  else
    # Backends listed or refused, modules loaded or missing, executors and optimizers on the
    # backends there are, shipped campaigns planned or refused, GPU tests skipped with the reason.
    kMinimalIntegration='^(EndToEnd\.(TwoRankCampaignFileAndReportAgree|ABackendsModule|AnInstalledD500|EveryShippedCampaign|OperatorsRunOnEveryBackend|UnderAnAddressSpaceLimit|ADryRunLoads)|Gpu\.|Conformance\.|Networks\.(TwoRanksRunEveryExecutor|EveryExportedBuiltIn)|Training\.(LibTorchsOptimizers|LeNetReaches)|Distributed\.LibTorchs)'
    run_suite build-minimal reference,blas,mpi,custom 0 -LE integration "$@"
    run_suite build-minimal reference,blas,mpi,custom 0 -L integration -R "$kMinimalIntegration" "$@"
  fi
fi
echo "suite: $passed passed, $failed failed, $skipped skipped"
exit $rc
