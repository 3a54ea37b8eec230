#!/usr/bin/env bash
# The CTest `report_in_browser`: plans, runs and reports a small multi-workload campaign (the
# quickstart: GEMM over sizes and rank counts, an allreduce over sizes, a network in inference and
# training, weak-scaling series) with this build, then checks its report.html through the DOM in
# headless Chromium (check-report.sh). Without chromium it is skipped (exit 77) with the reason,
# unless D500_REQUIRE_BROWSER=1 (tests/run.sh sets it: install-deps.sh --tests installs chromium).
# Usage: tests/browser/report-in-browser.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  [ "${D500_REQUIRE_BROWSER:-0}" = 1 ] && { echo "chromium is required (D500_REQUIRE_BROWSER=1) but not on PATH"; exit 1; }
  echo "skipped: no chromium on PATH (install Debian's chromium to run this test)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run=$(mktemp -d)/run
trap 'rm -rf "$(dirname "$run")"' EXIT
sed -e 's/^repetitions = 15/repetitions = 8/' -e 's/^warmups = 3/warmups = 1/' "$here/../../campaigns/quickstart.toml" > "$(dirname "$run")/campaign.toml"
"$build/d500" plan "$(dirname "$run")/campaign.toml" -o "$run" > /dev/null
"$build/d500" run "$run" > /dev/null
"$build/d500" report "$run" > "$(dirname "$run")/console.txt"
# The terminal's report fits 120 columns (by display width: one column a character).
widest=$(LC_ALL=C.UTF-8 wc -L < "$(dirname "$run")/console.txt")
[ "$widest" -le 120 ] || { echo "the terminal report is $widest columns wide:"; cat "$(dirname "$run")/console.txt"; exit 1; }
bash "$here/check-report.sh" "$run/report.html"
