#!/bin/sh
# Builds posenc for the browser (Emscripten, Debian's `emscripten`) into build-web/ and opens the
# explorer. Works offline: the page is build-web/index.html, one folder, no server or network needed.
#   web/explore.sh            build, then open the page (or print where it is, without a display)
#   web/explore.sh --build    build only
set -eu
cd "$(dirname "$0")/.."
if ! command -v emcmake >/dev/null 2>&1; then
  echo "web/explore.sh: Emscripten not found: install Debian's emscripten (apt-get install emscripten)" >&2
  exit 2
fi
# Debian's emscripten runs its JavaScript tools with node and finds their modules (acorn) under
# /usr/share/nodejs; say so for a node that is not Debian's.
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
emcmake cmake -S web -B build-web -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-web -j"$(nproc)"
page="$(pwd)/build-web/index.html"
if [ "${1:-}" != "--build" ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && command -v xdg-open >/dev/null 2>&1; then
  xdg-open "$page"
else
  echo "The explorer: file://$page"
fi
