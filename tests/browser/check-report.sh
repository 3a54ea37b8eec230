#!/usr/bin/env bash
# Renders a d500 report.html in headless Chromium (Debian's `chromium`) with
# tests/browser/report_check.js appended, and prints the verdict the script left in the DOM.
# Exit 0 when every check passed. Usage: tests/browser/check-report.sh REPORT.html
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
html=$1
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "no chromium on PATH (launchers/install-deps.sh --tests installs it)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{ cat "$html"; printf '<script>\n'; cat "$here/report_check.js"; printf '</script>\n'; } > "$tmp/page.html"
# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --window-size=1400,1000 \
  --user-data-dir="$tmp/profile" --virtual-time-budget=5000 --dump-dom "file://$tmp/page.html" 2>"$tmp/err" > "$tmp/dom" || {
  echo "chromium failed:"; tail -5 "$tmp/err"; exit 1; }
verdict=$(sed -n '/<pre id="d500-check">/,/<\/pre>/p' "$tmp/dom" | sed -e 's/<[^>]*>//g' -e 's/&quot;/"/g' -e 's/&amp;/\&/g')
[ -n "$verdict" ] || { echo "the check left no verdict in the page"; exit 1; }
echo "$verdict"
case "$verdict" in "D500-CHECK ok"*) exit 0 ;; *) exit 1 ;; esac
