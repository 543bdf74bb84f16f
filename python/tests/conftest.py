"""Shared fixtures: the shared data folder (POSENC_DATA_DIR, default ../shared beside the checkout) and
the CLI (POSENC_CLI). Missing data is a skip that names the folder, or a failure when
POSENC_REQUIRE_DATA=1 (CI)."""
import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("POSENC_DATA_DIR") or ROOT.parent / "shared")
REQUIRE = os.environ.get("POSENC_REQUIRE_DATA") == "1"


def need(path: pathlib.Path, what: str) -> pathlib.Path:
    if not path.exists():
        msg = f"{what} not found at {path} (set POSENC_DATA_DIR)"
        if REQUIRE:
            pytest.fail(msg + " and POSENC_REQUIRE_DATA=1")
        pytest.skip(msg)
    return path


def golden_cases(family: str, schemes):
    """(name, folder) of every golden case of `family` whose scheme is in `schemes` (collected at import)."""
    folder = DATA / "golden" / family
    if not folder.is_dir():
        return []
    out = []
    for d in sorted(folder.iterdir()):
        f = d / "case.json"
        if f.is_file() and json.loads(f.read_text()).get("scheme") in schemes:
            out.append(d)
    return out


@pytest.fixture
def data_dir() -> pathlib.Path:
    return need(DATA, "shared data folder")


@pytest.fixture
def cli() -> str:
    exe = os.environ.get("POSENC_CLI")
    if not exe or not os.path.exists(exe):
        if REQUIRE:
            pytest.fail("POSENC_CLI is not set to the posenc executable")
        pytest.skip("POSENC_CLI is not set to the posenc executable")
    return exe
