"""The `posenc` CLI beside the package: where it is, and the console script a wheel installs.

A wheel (`pip install .`) carries the CLI binary at posenc/_bin/posenc; its `posenc` console script
runs it with the same arguments. `path()` is what Python code that runs the CLI asks (POSENC_CLI
first, then that binary, then PATH)."""
from __future__ import annotations

import os
import shutil
import sys
from typing import Optional

BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "posenc")


def path() -> Optional[str]:
    """The posenc executable: $POSENC_CLI, else the wheel's own, else `posenc` on PATH (None if none)."""
    env = os.environ.get("POSENC_CLI")
    if env:
        return env
    if os.access(BUNDLED, os.X_OK):
        return BUNDLED
    return shutil.which("posenc")


def main() -> None:
    """The console script: exec the bundled CLI with this process's arguments."""
    if not os.access(BUNDLED, os.X_OK):
        sys.stderr.write(f"posenc: the CLI is not installed with this package (no {BUNDLED}); "
                         "build it with CMake (README)\n")
        raise SystemExit(2)
    os.execv(BUNDLED, [BUNDLED] + sys.argv[1:])


def export_default() -> None:
    """Sets POSENC_CLI to the wheel's own CLI when it is unset and the wheel has one (posenc.plot and
    anything else that runs the CLI then find it without PATH)."""
    if "POSENC_CLI" not in os.environ and os.access(BUNDLED, os.X_OK):
        os.environ["POSENC_CLI"] = BUNDLED
