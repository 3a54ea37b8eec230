#!/usr/bin/env bash
# The second README command: installs what is missing, builds d500 with its tests, and runs
# the whole suite through CTest (unit tests, then integration tests with real mpirun ranks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash launchers/install-deps.sh --tests
bash launchers/build.sh -DD500_WITH_TESTS=ON
cd build
ctest --output-on-failure --timeout 900 "$@"
