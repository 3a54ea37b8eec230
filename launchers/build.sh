#!/usr/bin/env bash
# Configures and builds d500 into build/ (Release). Usage: launchers/build.sh [cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# Re-use an existing build tree with its own generator.
[ -f "$root/build/CMakeCache.txt" ] && gen=()
cmake -S "$root" -B "$root/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$root/build" -j "$(nproc)"
