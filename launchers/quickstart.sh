#!/usr/bin/env bash
# The first README command: installs what is missing, builds d500, runs the quickstart
# campaign locally with mpirun and ends with a report built from the HDF5 files it wrote.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash launchers/install-deps.sh
# The quickstart needs no test suite (install-deps.sh without --tests installs no GoogleTest):
# build without it, unless this build directory was already configured with tests.
if grep -qs '^D500_WITH_TESTS:BOOL=ON' build/CMakeCache.txt; then
  bash launchers/build.sh
else
  bash launchers/build.sh -DD500_WITH_TESTS=OFF
fi
run="runs/quickstart-$(date -u +%Y%m%d-%H%M%S)"
start=$(date +%s)
./build/d500 plan campaigns/quickstart.toml -o "$run"
./build/d500 run "$run"
./build/d500 report "$run"
echo "quickstart: plan, run and report took $(( $(date +%s) - start )) s; open $run/report.html"
