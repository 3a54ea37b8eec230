#!/usr/bin/env bash
# The first README command: installs what is missing, builds d500, runs the quickstart
# campaign locally with mpirun and ends with a report built from the HDF5 files it wrote.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash launchers/install-deps.sh
bash launchers/build.sh
run="runs/quickstart-$(date -u +%Y%m%d-%H%M%S)"
start=$(date +%s)
./build/d500 plan campaigns/quickstart.toml -o "$run"
./build/d500 run "$run"
./build/d500 report "$run"
echo "quickstart: plan, run and report took $(( $(date +%s) - start )) s; open $run/report.html"
