#!/usr/bin/env bash
# Fails when a source file includes a header from a folder its layer may not use. The rules are
# the table between the "layers" markers in src/ARCHITECTURE.md (folder | may include), so the
# design note and this check cannot disagree. CUDA sources (.cu, .cuh) are read as C++ ones; a
# bare include ("stats.hpp") must name a file beside the includer (one the compiler finds through
# an include path would reach its folder unnamed). Tests (*_test.cpp) are exempt: they may reach
# across layers to set things up; benchmark programs live in bench/, outside src/ and its layers.
# Then workloads/ must name no backend: a string literal in its code (comments aside) that is a
# backend's name (CMakeLists.txt's d500_backend calls) fails, unless tests/backend-names-allowed.txt
# lists the file and a text of the line (or of the three above it), with why (an entry that matches nothing fails too: the
# list only shrinks). A backend's settings and flags (backends/registry.hpp) say what it takes.
#   tests/check_layers.sh              checks this tree
#   tests/check_layers.sh --self-test  plants each hole the check closes in a scratch tree (with
#                                      this tree's layer table) and fails unless each is refused
set -euo pipefail
if [ "${1:-}" = --self-test ]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  mkdir -p "$scratch/src/store" "$scratch/src/backends/cuda" "$scratch/src/analysis" "$scratch/tests"
  cp "$here/src/ARCHITECTURE.md" "$scratch/src/"
  cp "$0" "$scratch/tests/check_layers.sh"
  touch "$scratch/src/analysis/summary.hpp"
  echo '#include "summary.hpp"' > "$scratch/src/store/reader.cpp"             # bare, not beside: analysis unnamed
  echo '#include "analysis/summary.hpp"' > "$scratch/src/store/writer.cpp"    # upward, named
  echo '#include "workloads/registry.hpp"' > "$scratch/src/backends/cuda/k.cu"  # upward, in a CUDA source
  echo '#include "store/reader.hpp"' > "$scratch/src/backends/cuda/k_test.cpp"  # a test: exempt
  echo '#include "workloads/registry.hpp"' > "$scratch/src/store/s_bench.cpp"  # a benchmark inside src/: not exempt
  mkdir -p "$scratch/src/workloads/level0"
  printf 'd500_backend(reference BUILT ON)\nd500_backend(cuda BUILT ${X})\n' > "$scratch/CMakeLists.txt"
  printf 'int f(const std::string& b) {\n  // on "cuda" a comment may say so\n  return b == "cuda";\n}\n' > "$scratch/src/workloads/level0/op.cpp"
  printf 'src/workloads/level0/gone.cpp\tnothing\tstale\n' > "$scratch/tests/backend-names-allowed.txt"
  out=$(bash "$scratch/tests/check_layers.sh" 2>&1) && { echo "check_layers self-test: the planted holes passed"; exit 1; }
  for want in 'src/store/reader.cpp includes "summary.hpp", which is not beside it' \
              'src/store/writer.cpp includes "analysis/summary.hpp": layer '"'"'store'"'" \
              'src/backends/cuda/k.cu includes "workloads/registry.hpp": layer '"'"'backends'"'" \
              'src/store/s_bench.cpp includes "workloads/registry.hpp": layer '"'"'store'"'" \
              'src/workloads/level0/op.cpp:3 names backend "cuda"' \
              'tests/backend-names-allowed.txt: src/workloads/level0/gone.cpp "nothing" matches no line'; do
    grep -qF "$want" <<< "$out" || { echo "check_layers self-test: not refused: $want"; echo "$out"; exit 1; }
  done
  ! grep -q k_test.cpp <<< "$out" || { echo "check_layers self-test: a test file was checked"; exit 1; }
  grep -q 'op.cpp:2' <<< "$out" && { echo "check_layers self-test: a comment was checked"; exit 1; }
  echo "check_layers self-test: every planted hole refused"
  exit 0
fi
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
  case "$rel" in *_test.cpp) continue ;; esac
  folder=$(echo "$rel" | cut -d/ -f2)
  [ -n "${allowed[$folder]+x}" ] || { echo "$rel: folder '$folder' is not in the layer table of src/ARCHITECTURE.md"; bad=1; continue; }
  while IFS= read -r inc; do
    target=${inc%%/*}
    checked=$((checked + 1))
    if [ "$target" = "$inc" ]; then
      # "stats.hpp" must be beside the file: any other one the compiler finds through an include
      # path would let a layer reach a folder without naming it.
      if [ ! -f "$(dirname "$file")/$inc" ]; then
        echo "$rel includes \"$inc\", which is not beside it: name its folder (\"<folder>/$inc\") so the layer rules see it"
        bad=1
        continue
      fi
      target=$folder
    fi
    if [[ "${allowed[$folder]}" != *" $target "* ]]; then
      echo "$rel includes \"$inc\": layer '$folder' may include only:${allowed[$folder]}"
      bad=1
    fi
  done < <(grep -oE '^#include "[^"]+"' "$file" | sed -E 's/#include "(.*)"/\1/')
done < <(find "$root/src" -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.in' | sort)

# workloads/ names no backend (but what tests/backend-names-allowed.txt lists, with why).
mapfile -t backends < <(grep -oE '^d500_backend\([a-z0-9-]+' "$root/CMakeLists.txt" | sed 's/d500_backend(//')
[ ${#backends[@]} -gt 1 ] || { echo "check_layers: no d500_backend calls found in $root/CMakeLists.txt" >&2; exit 2; }
allow="$root/tests/backend-names-allowed.txt"
names=$(IFS='|'; echo "${backends[*]}")
named=$(find "$root/src/workloads" -name '*.cpp' -o -name '*.hpp' | grep -vE '_(test|bench)\.cpp$' | sort |
  while IFS= read -r file; do
    sed -E 's://.*$::' "$file" | grep -nE "\"($names)\"" | sed "s|^|${file#"$root"/}:|" || true
  done)
used=()
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  file=${hit%%:*} rest=${hit#*:} line=${rest%%:*} code=${rest#*:}
  # The entry's text may be on the line or up to three lines above it (one statement, formatted).
  context=$(sed -n "$((line > 3 ? line - 3 : 1)),${line}p" "$root/$file")
  ok=0
  if [ -f "$allow" ]; then
    while IFS=$'\t' read -r afile atext _; do
      [[ -z "$afile" || "$afile" == \#* ]] && continue
      if [ "$afile" = "$file" ] && [[ "$context" == *"$atext"* ]]; then ok=1; used+=("$afile $atext"); fi
    done < "$allow"
  fi
  if [ $ok = 0 ]; then
    echo "$file:$line names backend $(grep -oE "\"($names)\"" <<< "$code" | head -1) in its code: a workload takes what a backend declares (its settings and flags, backends/registry.hpp), never its name"
    bad=1
  fi
done <<< "$named"
if [ -f "$allow" ]; then
  while IFS=$'\t' read -r afile atext _; do
    [[ -z "$afile" || "$afile" == \#* ]] && continue
    if ! printf '%s\n' "${used[@]}" | grep -qxF "$afile $atext"; then
      echo "tests/backend-names-allowed.txt: $afile \"$atext\" matches no line any more: delete the entry"
      bad=1
    fi
  done < "$allow"
fi
if [ $bad -ne 0 ]; then echo "check_layers: FAILED (see src/ARCHITECTURE.md, Layers)"; exit 1; fi
echo "check_layers: $checked includes in ${#allowed[@]} layers keep the table of src/ARCHITECTURE.md;" \
     "workloads/ names no backend but the ${#used[@]} uses tests/backend-names-allowed.txt explains"
