#!/usr/bin/env sh
# Installs the Debian packages posenc needs that are not installed yet (uses sudo when not root).
set -eu
packages="cmake ninja-build g++ libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev nlohmann-json3-dev
libcli11-dev libfmt-dev python3 python3-numpy
pybind11-dev python3-pybind11 python3-pytest python3-matplotlib python3-torch emscripten chromium"
missing=""
for p in $packages; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
