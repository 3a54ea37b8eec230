#!/usr/bin/env bash
# No function over 120 lines (ARCHITECTURE.md, "Named stages"): Universal Ctags finds every C++
# and CUDA function definition in src/, tests/ and bench/ with the line it ends on.
# Each function over the limit is listed. One named in tests/long-functions.txt (debt carried
# from before the check, with the length it had) passes while it does not grow; any other fails,
# as does an entry that grew or no longer exists (then shorten or delete the entry: the list
# only shrinks).
#   tests/check_function_length.sh [--limit N] [--self-test]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
limit=120
self_test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --limit) limit=$2; shift 2 ;;
    --self-test) self_test=1; shift ;;
    *) echo "usage: $0 [--limit N] [--self-test]" >&2; exit 2 ;;
  esac
done
command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q 'Universal Ctags' || {
  echo "check_function_length: needs Universal Ctags (Debian: apt-get install universal-ctags;" \
       "launchers/install-deps.sh --tests installs it)" >&2
  exit 2
}

# Lines "LENGTH PATH:LINE NAME" of every function over the limit under the folders given.
long_functions() {  # root, folders...
  local base=$1
  shift
  # A lambda is counted in the function around it (ctags names it __anon...); a GoogleTest body
  # is named by its suite and test: TEST(Suite,Name).
  (cd "$base" && ctags -f - --fields=+neS --kinds-C++=f --languages=C++ --langmap=C++:+.cu.cuh -R "$@" 2>/dev/null) |
    awk -F'\t' -v limit="$limit" '$1 !~ /^__anon/ {
      l = 0; e = 0; sig = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) l = substr($i, 6)
        if ($i ~ /^end:/) e = substr($i, 5)
        if ($i ~ /^signature:/) sig = substr($i, 11)
      }
      name = $1
      if (name ~ /^TEST(_F|_P)?$/) { gsub(/[ ]/, "", sig); name = name sig }
      if (e > 0 && e - l + 1 > limit) print e - l + 1, $2 ":" l, name
    }' | sort -k2,2
}

# Compares the long functions with the list of debt; prints offenders; returns 1 on any failure.
judge() {  # long-functions output, debt list file
  awk -v debt="$2" '
    BEGIN {
      while ((getline line < debt) > 0) {
        if (line ~ /^#/ || line ~ /^[ \t]*$/) continue
        split(line, f, /[ \t]+/)          # PATH NAME MAX
        key = f[1] " " f[2]; max[key] = f[3]; seen[key] = 0
      }
    }
    {
      n = $1; split($2, p, ":"); key = p[1] " " $3
      if (key in max) {
        seen[key] = 1
        if (n > max[key] + 0) { printf "GREW     %4d lines  %s %s (listed at %d: shorten it)\n", n, $2, $3, max[key]; bad = 1 }
        else printf "debt     %4d lines  %s %s\n", n, $2, $3
      } else { printf "TOO LONG %4d lines  %s %s\n", n, $2, $3; bad = 1 }
    }
    END {
      for (k in seen) if (!seen[k]) { printf "GONE     %s: no longer over the limit; delete its line from the list\n", k; bad = 1 }
      exit bad
    }' <<<"$1"
}

if [ "$self_test" = 1 ]; then
  # Plants a long function, a listed one that grew and a stale entry: each must fail by name.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src"
  {
    echo "int planted() {"
    for i in $(seq 1 130); do echo "  int v$i = $i;"; done
    echo "  return 0;"
    echo "}"
    echo "int listed() {"
    for i in $(seq 1 125); do echo "  int w$i = $i;"; done
    echo "  return 0;"
    echo "}"
    echo "int short_one() { return 1; }"
  } >"$tmp/src/planted.cpp"
  printf 'src/planted.cpp listed 123\nsrc/gone.cpp vanished 200\n' >"$tmp/debt.txt"
  out=$(judge "$(long_functions "$tmp" src)" "$tmp/debt.txt") && { echo "self-test: the planted holes passed" >&2; exit 1; }
  for want in "TOO LONG  133 lines  src/planted.cpp:1 planted" "GREW      128 lines  src/planted.cpp:134 listed" \
              "GONE     src/gone.cpp vanished"; do
    grep -qF "$want" <<<"$out" || { echo "self-test: expected '$want' in:" >&2; echo "$out" >&2; exit 1; }
  done
  grep -q "short_one" <<<"$out" && { echo "self-test: a short function was listed" >&2; exit 1; }
  echo "self-test: a long function, a listed one that grew and a stale entry each fail by name"
  exit 0
fi

folders=()
for d in src tests bench; do [ -d "$root/$d" ] && folders+=("$d"); done
found=$(long_functions "$root" "${folders[@]}")
if out=$(judge "$found" "$root/tests/long-functions.txt"); then status=0; else status=1; fi
[ -n "$out" ] && echo "$out"
debt=$(grep -c '^debt' <<<"$out" || true)
echo "functions over $limit lines: $(grep -c . <<<"$found" || true) ($debt listed as debt in tests/long-functions.txt)"
exit $status
