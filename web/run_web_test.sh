#!/bin/sh
# CTest's web_explorer: builds web/ with Emscripten into BUILD_DIR and tests the page in headless
# Chromium against the native CLI (web/test_explorer.py). Exit 77 (a skip) when Emscripten or
# Chromium is missing, naming the Debian packages.
#   web/run_web_test.sh BUILD_DIR POSENC_CLI DATA_DIR
set -eu
build="$1" cli="$2" data="$3"
src="$(cd "$(dirname "$0")" && pwd)"
for tool in emcmake chromium; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "web_explorer: $tool not found (Debian: emscripten chromium; scripts/deps.sh installs them): skipped"
    exit 77
  fi
done
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"  # Debian's emscripten tools' modules
start=$(date +%s)
emcmake cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2
echo "web_explorer: built in $(( $(date +%s) - start )) s"
exec python3 "$src/test_explorer.py" --page "$build/index.html" --cli "$cli" --data "$data" --out "$build/screenshots"
