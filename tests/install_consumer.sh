#!/usr/bin/env bash
# Installs the built posenc into a scratch prefix, then builds and runs examples/consumer against it
# with find_package(posenc): the installed headers, library and package config must be enough.
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/examples/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
test -x "$work/prefix/bin/posenc"
"$work/prefix/bin/posenc" --help >/dev/null
echo "find_package(posenc) consumer built and ran"
