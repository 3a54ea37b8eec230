#!/usr/bin/env bash
# Every C, C++ and CUDA file git tracks is as clang-format writes it (.clang-format at the root, 120 columns).
# Lists the files that are not and how to fix them; `--fix` formats them in place; `--self-test`
# plants a misformatted file beside a formatted one in a scratch tree and expects only it named.
#   tests/check_format.sh [--fix | --self-test]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fmt=$(command -v clang-format || command -v clang-format-14 || true)
[ -n "$fmt" ] || { echo "check_format: needs clang-format (Debian: apt-get install clang-format;" \
                        "launchers/install-deps.sh --tests installs it)" >&2; exit 2; }
if [ "${1:-}" = "--self-test" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  mkdir -p "$scratch/tests" "$scratch/src"
  cp "$0" "$scratch/tests/check_format.sh"
  cp "$root/.clang-format" "$scratch/"
  printf 'int fine(int x) { return x + 1; }\n' >"$scratch/src/fine.cpp"
  printf 'int  bad( int x ){return x+1;}\n' >"$scratch/src/bad.cpp"
  (cd "$scratch" && git init -q . && git add -A)
  out=$(bash "$scratch/tests/check_format.sh" 2>&1) && { echo "check_format self-test: a misformatted file passed"; exit 1; }
  grep -qx "not formatted: src/bad.cpp" <<<"$out" || { echo "check_format self-test: src/bad.cpp not named:"; echo "$out"; exit 1; }
  ! grep -q "fine.cpp" <<<"$out" || { echo "check_format self-test: a formatted file was named"; exit 1; }
  echo "check_format self-test: the misformatted file, and only it, refused"
  exit 0
fi
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.c' '*.h')
else  # a source tree without git: every such file under the project's folders
  mapfile -t files < <(find src include tests bench -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.c' -o -name '*.h' | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$fmt" -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi
# One clang-format process for every file (262 starts cost a third of the time): it names each
# file that differs in its warnings, "FILE:LINE:COL: error: code should be clang-formatted".
bad=()
if ! out=$("$fmt" --dry-run --Werror "${files[@]}" 2>&1 >/dev/null); then
  mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
  if [ ${#bad[@]} -eq 0 ]; then
    echo "check_format: clang-format failed without naming a file:"
    echo "$out" | head -20
    exit 1
  fi
fi
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted: %s\n' "${bad[@]}"
  echo "check_format: ${#bad[@]} of ${#files[@]} files differ from clang-format's output ($($fmt --version | head -1));" \
       "run tests/check_format.sh --fix (or clang-format -i FILE)"
  exit 1
fi
echo "check_format: ${#files[@]} files as clang-format writes them"
