#!/usr/bin/env bash
# docs/campaign-reference.md is `d500 workloads --markdown`: the keys of every workload as the
# planner checks them (workloads' parameter tables, backends' settings). Fails, with the
# difference and the command that regenerates it, when the two differ, so that the reference
# cannot drift from the code.
#   tests/check_campaign_reference.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
d500=${1:?usage: check_campaign_reference.sh BUILD_DIR}/d500
[ -x "$d500" ] || { echo "check_campaign_reference: no $d500" >&2; exit 2; }
if ! out=$(diff -u "$root/docs/campaign-reference.md" <("$d500" workloads --markdown)); then
  echo "$out" | head -40
  echo "check_campaign_reference: docs/campaign-reference.md differs from 'd500 workloads --markdown' (above:"
  echo "  - the file, + the code); regenerate it: build/d500 workloads --markdown > docs/campaign-reference.md"
  exit 1
fi
echo "check_campaign_reference: docs/campaign-reference.md is d500 workloads --markdown ($(wc -l < "$root/docs/campaign-reference.md") lines)"
