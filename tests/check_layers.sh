#!/usr/bin/env bash
# Fails when a source file includes a header from a folder its layer may not use. The rules are
# the table between the "layers" markers in src/ARCHITECTURE.md (folder | may include), so the
# design note and this check cannot disagree. CUDA sources (.cu, .cuh) are read as C++ ones.
# Known hole: a bare include ("stats.hpp") is taken as beside the file, though analysis/ is on the
# include path (src/cli/main.cpp includes four analysis headers so). Tests and benchmarks
# (*_test.cpp, *_bench.cpp) are exempt: they may reach across layers to set things up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
doc="$root/src/ARCHITECTURE.md"
declare -A allowed
while IFS='|' read -r _ folder rules _; do
  folder=$(echo "$folder" | tr -d ' `')
  [ -z "$folder" ] || [ "$folder" = folder ] || [[ "$folder" == -* ]] && continue
  allowed[$folder]=" $(echo "$rules" | tr -d '`' | tr ',' ' ') "
done < <(sed -n '/<!-- layers: begin -->/,/<!-- layers: end -->/p' "$doc" | grep '^|')
[ ${#allowed[@]} -gt 5 ] || { echo "check_layers: no layer table found in $doc" >&2; exit 2; }

bad=0 checked=0
while IFS= read -r file; do
  rel=${file#"$root"/}
  case "$rel" in *_test.cpp|*_bench.cpp) continue ;; esac
  if [[ "$rel" == analysis/* ]]; then folder=analysis; else folder=$(echo "$rel" | cut -d/ -f2); fi
  [ -n "${allowed[$folder]+x}" ] || { echo "$rel: folder '$folder' is not in the layer table of src/ARCHITECTURE.md"; bad=1; continue; }
  while IFS= read -r inc; do
    target=${inc%%/*}
    [ "$target" = "$inc" ] && target=$folder   # "stats.hpp": beside the file
    checked=$((checked + 1))
    if [[ "${allowed[$folder]}" != *" $target "* ]]; then
      echo "$rel includes \"$inc\": layer '$folder' may include only:${allowed[$folder]}"
      bad=1
    fi
  done < <(grep -oE '^#include "[^"]+"' "$file" | sed -E 's/#include "(.*)"/\1/')
done < <(find "$root/src" "$root/analysis" -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.in' | sort)
if [ $bad -ne 0 ]; then echo "check_layers: FAILED (see src/ARCHITECTURE.md, Layers)"; exit 1; fi
echo "check_layers: $checked includes in ${#allowed[@]} layers keep the table of src/ARCHITECTURE.md"
