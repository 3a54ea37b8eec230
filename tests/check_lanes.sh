#!/usr/bin/env bash
# The suite's tests carry the properties CMakeLists.txt gives them: the lanes (RESOURCE_LOCK) that
# keep two tests of one kind apart, and the minimal variant's D500_REQUIRE_BACKENDS. Reads what
# CTest will run (`ctest --show-only=json-v1`) and fails, naming the tests, where
#   - a test of the minimal variant lacks D500_REQUIRE_BACKENDS in its ENVIRONMENT;
#   - an integration test that starts MPI jobs, or a Slurm test, holds no lane.
# gtest_discover_tests (CMake 3.25) flattens its PROPERTIES into one list, so a value holding a
# semicolon shifts every property after it: LABELS "minimal;integration" made `integration`,
# `cpu` and `100` property names (which CTest drops), and the minimal variant's integration tests
# ran without their lock and required backends until 2026-12-06, which both rules catch.
#   tests/check_lanes.sh BUILD_DIR SINGLE_PROCESS_FILTER   (CTest `lanes`)
#   tests/check_lanes.sh --self-test      (each rule refuses what it must)
set -euo pipefail

check() {  # JSON file of `ctest --show-only=json-v1`, the single-process tests' filter
  /usr/bin/python3 - "$1" "${2:-}" <<'PY'
import json, sys

# Integration tests that start no MPI job (CMakeLists.txt's D500_SINGLE_PROCESS_TESTS, a gtest
# filter of "Suite.*" and "Suite.Name*" patterns, passed in): no lane.
UNLOCKED = tuple(p.rstrip("*") for p in sys.argv[2].split(":") if p)

tests = json.load(open(sys.argv[1]))["tests"]
bad = []
for t in tests:
    name = t["name"]
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = props.get("ENVIRONMENT", [])
    if name.startswith("minimal/") and not any(e.startswith("D500_REQUIRE_BACKENDS=") for e in env):
        bad.append(f"{name}: no D500_REQUIRE_BACKENDS in its ENVIRONMENT")
    command = " ".join(t.get("command") or [])
    bare = name.split("/", 1)[-1]
    mpi_jobs = "d500_integration_tests" in command and not bare.startswith(UNLOCKED)
    if (mpi_jobs or "d500_slurm_tests" in command) and not props.get("RESOURCE_LOCK"):
        bad.append(f"{name}: starts MPI or Slurm jobs and holds no lane (RESOURCE_LOCK)")
for b in bad:
    print("check_lanes: " + b)
if bad:
    print(f"check_lanes: {len(bad)} problem(s) in {len(tests)} tests (CMakeLists.txt sets these properties)")
    sys.exit(1)
locks = sorted({l for t in tests for p in t.get("properties", []) if p["name"] == "RESOURCE_LOCK" for l in p["value"]})
print(f"check_lanes: {len(tests)} tests, each MPI and Slurm test in a lane ({', '.join(locks)}), each minimal one with its required backends")
PY
}

if [ "${1:-}" = "--self-test" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  fails=0
  expect() {  # what it plants, the JSON, the words the refusal must hold
    if out=$(check <(echo "$2") "Conformance.*" 2>&1) || ! grep -q "$3" <<<"$out"; then
      echo "check_lanes --self-test: did not refuse $1: $out"; fails=$((fails + 1))
    fi
  }
  lock='{"name": "RESOURCE_LOCK", "value": ["cpu-a"]}'
  expect "a minimal test without its required backends" \
    '{"tests": [{"name": "minimal/T.A", "command": ["d500_unit_tests"], "properties": [{"name": "LABELS", "value": ["minimal"]}]}]}' \
    "no D500_REQUIRE_BACKENDS"
  expect "an MPI test without a lane" \
    '{"tests": [{"name": "Training.Two", "command": ["/b/d500_integration_tests", "--gtest_filter=Training.Two"], "properties": []}]}' \
    "holds no lane"
  expect "a Slurm test without a lane" \
    '{"tests": [{"name": "Slurm.X", "command": ["/b/d500_slurm_tests"], "properties": [{"name": "TIMEOUT", "value": 600}]}]}' \
    "holds no lane"
  if ! out=$(check <(echo '{"tests": [{"name": "Conformance.X", "command": ["/b/d500_integration_tests"], "properties": [{"name": "TIMEOUT", "value": 600}]}, {"name": "Training.Two", "command": ["/b/d500_integration_tests"], "properties": ['"$lock"']}]}') "Conformance.*" 2>&1); then
    echo "check_lanes --self-test: refused sound properties: $out"; fails=$((fails + 1))
  fi
  [ "$fails" -eq 0 ] && echo "check_lanes --self-test: each rule refuses what it must, and passes what is sound"
  exit $((fails > 0))
fi

build=${1:?usage: check_lanes.sh BUILD_DIR SINGLE_PROCESS_FILTER | --self-test}
single=${2:?usage: check_lanes.sh BUILD_DIR SINGLE_PROCESS_FILTER (D500_SINGLE_PROCESS_TESTS of CMakeLists.txt)}
json=$(mktemp)
trap 'rm -f "$json"' EXIT
(cd "$build" && ctest --show-only=json-v1) > "$json"
check "$json" "$single"
