#!/usr/bin/env bash
# The README's Python quick start, as a new user runs it from a fresh checkout: a virtual environment,
# `pip install .` (scikit-build-core and pybind11 from PyPI, numpy at run time), the one-liner, the
# console script, and python -m posenc.plot with its demo numbers. Exit 77 (a skip) when PyPI cannot
# be reached, unless POSENC_REQUIRE_DATA=1 (CI), where that is a failure.
# Usage: wheel_quickstart.sh [python3]   (default: /usr/bin/python3, Debian's)
set -euo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
py="${1:-/usr/bin/python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! timeout 60 "$py" -m pip download --no-deps --quiet -d "$work/probe" scikit-build-core==0.10.7 >/dev/null 2>&1; then
  if [ "${POSENC_REQUIRE_DATA:-}" = 1 ]; then
    echo "wheel_quickstart: PyPI is unreachable and POSENC_REQUIRE_DATA=1" >&2; exit 1
  fi
  echo "wheel_quickstart: skipped: PyPI is unreachable (pip download scikit-build-core failed)"; exit 77
fi

cd "$work"
"$py" -m venv v
v/bin/pip install --quiet "$src"
want="$(sed -n 's/^project(posenc VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
got_py="$(v/bin/python -c 'import posenc; print(posenc.__version__)')"
got_cli="$(v/bin/posenc --version)"
echo "version: CMakeLists $want, posenc.__version__ $got_py, posenc --version '$got_cli'"
[ "$got_py" = "$want" ] && [ "$got_cli" = "posenc $want" ]
# The README's one-liner (numpy only: torch is not installed in this venv).
v/bin/python -c "import numpy as np, posenc; q = np.ones((4, 8, 64), np.float32); posenc.Rope({'model_type': 'llama', 'hidden_size': 512, 'num_attention_heads': 8, 'rope_theta': 10000.0, 'max_position_embeddings': 2048}).apply(q, np.arange(4)); print('rotated', q[1, 0, :2])"
v/bin/posenc demo >/dev/null
echo "posenc demo: ok"
if v/bin/pip install --quiet matplotlib; then
  v/bin/python -m posenc.plot --out plots --format png
  test -s plots/demo.txt && grep -q . plots/demo.txt
  echo "python -m posenc.plot: $(ls plots | wc -l) files, demo.txt $(wc -l < plots/demo.txt) lines"
fi
echo "wheel_quickstart: ok"
