#!/usr/bin/env python3
"""CTest's entry to the pytest suite: `run_pytest.py TESTS_DIR`.

`run_pytest.py --missing WHAT`: the build could not make the module (no pybind11). Missing pytest,
numpy or torch, or that: exit 77 (CTest: skipped), or 1 under POSENC_REQUIRE_DATA=1. Otherwise
runs `python -m pytest TESTS_DIR -q` with this interpreter and prints pytest's summary line last.
"""
import importlib
import os
import subprocess
import sys

missing = []
if len(sys.argv) == 3 and sys.argv[1] == "--missing":  # the build found no pybind11: no module to test
    missing.append(sys.argv[2])
for mod in ("pytest", "numpy", "torch"):
    try:
        importlib.import_module(mod)
    except ImportError:
        missing.append(mod)
if missing:
    msg = f"python tests: missing for {sys.executable}: {', '.join(missing)} (Debian: scripts/deps.sh)"
    print(msg)
    sys.exit(1 if os.environ.get("POSENC_REQUIRE_DATA") == "1" else 77)

r = subprocess.run([sys.executable, "-m", "pytest", sys.argv[1], "-q", "-rs", "-p", "no:cacheprovider"],
                   capture_output=True, text=True, check=False)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
lines = [l for l in r.stdout.splitlines() if l.strip()]
print("pytest summary:", lines[-1] if lines else "(no output)")
sys.exit(r.returncode)
