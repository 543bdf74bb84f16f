#!/usr/bin/env bash
# clang-tidy with the repository's .clang-tidy on the library, CLI and bench sources a change touches:
# the .cpp files that differ from the merge base with main (a changed header brings the .cpp of the
# same name), or, without git history or with nothing changed, a fixed list that covers every layer.
# Any warning fails (.clang-tidy: WarningsAsErrors). Needs BUILD/compile_commands.json.
# Usage: .ci/clang_tidy.sh [BUILD]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)

fixed="src/core/status.cpp src/core/parallel.cpp src/math/relative.cpp src/io/npy.cpp
src/kernels/rope/rope_ref.cpp src/kernels/embedding/embedding_ref.cpp src/config/layer_schedule.cpp
src/model/layout_detect.cpp"

changed=""
if git rev-parse --git-dir >/dev/null 2>&1; then
  for ref in origin/main main; do
    if git rev-parse --verify -q "$ref^{commit}" >/dev/null; then
      base=$(git merge-base HEAD "$ref")
      for f in $(git diff --name-only --diff-filter=d "$base" -- src tools bench include); do
        case "$f" in
          *.cpp) changed="$changed $f" ;;
          *.hpp) for c in src/*/"$(basename "${f%.hpp}").cpp" src/kernels/*/"$(basename "${f%.hpp}").cpp" \
                          "${f%.hpp}.cpp"; do
                   [ -f "$c" ] && changed="$changed $c"
                 done ;;
        esac
      done
      break
    fi
  done
fi
# Only files the build compiles (compile_commands.json names them).
files=""
for f in $(echo "${changed:-$fixed}" | tr ' ' '\n' | sort -u); do
  if grep -q "\"file\": \".*/$f\"" "$build/compile_commands.json"; then files="$files $f"; fi
done
if [ -z "$files" ]; then
  echo "clang-tidy: no compiled source changed"
  exit 0
fi
echo "clang-tidy ($tidy) on:$files"
"$tidy" -p "$build" --quiet $files
