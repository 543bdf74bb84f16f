#!/usr/bin/env python3
"""CTest `registry_sync`: the registry against the pinned transformers release and llama.cpp facts.

Gets the pinned transformers wheel into the build folder, once (from PyPI's JSON API with urllib, else
`pip download`; checked by sha256),
then runs tools/registry_sync/registry_sync.py on it with posenc's `families --json`, the llama.cpp
facts and the leave-out list in this folder. Exit 77 (skipped) when the wheel cannot be had (PyPI out of
reach), unless POSENC_REQUIRE_DATA=1 (then 1). POSENC_TRANSFORMERS_WHEEL names a wheel or an unpacked
transformers tree to use instead (offline).

  run_registry_sync.py POSENC_CLI SOURCE_DIR WORK_DIR
"""

import hashlib
import os
import shutil
import subprocess
import sys

# The transformers release the registry is checked against (docs/MODEL_FAMILIES.md, "Keeping the
# registry in sync" says how to bump it).
TRANSFORMERS_VERSION = "5.25.0"
TRANSFORMERS_SHA256 = "8ca7a96cc329e5a053c9e770711e73d7bd9d77240ff62049fca6d253965cda52"
WHEEL = f"transformers-{TRANSFORMERS_VERSION}-py3-none-any.whl"


def skip(msg: str) -> int:
    if os.environ.get("POSENC_REQUIRE_DATA") == "1":
        print(f"FAIL (POSENC_REQUIRE_DATA=1): {msg}")
        return 1
    print(f"SKIP: {msg}")
    return 77


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pip_command():
    try:
        import pip  # noqa: F401

        return [sys.executable, "-m", "pip"]
    except ImportError:
        for name in ("pip3", "pip"):
            if shutil.which(name):
                return [shutil.which(name)]
    return None


def download_direct(work: str):
    """The wheel from PyPI's JSON API with urllib (Debian's python3 has no pip unless python3-pip is
    installed); None and the reason when PyPI does not answer."""
    import json
    import urllib.request

    api = f"https://pypi.org/pypi/transformers/{TRANSFORMERS_VERSION}/json"
    try:
        with urllib.request.urlopen(api, timeout=30) as r:
            info = json.load(r)
        url = next(u["url"] for u in info["urls"] if u["filename"] == WHEEL)
        tmp = os.path.join(work, WHEEL + ".part")
        with urllib.request.urlopen(url, timeout=120) as r, open(tmp, "wb") as f:
            shutil.copyfileobj(r, f)
        os.replace(tmp, os.path.join(work, WHEEL))
        return None
    except Exception as e:  # no network, no PyPI, an answer without the wheel
        return f"{api}: {e}"


def get_wheel(work: str):
    override = os.environ.get("POSENC_TRANSFORMERS_WHEEL")
    if override:
        return override, None
    path = os.path.join(work, WHEEL)
    if os.path.exists(path) and sha256(path) == TRANSFORMERS_SHA256:
        return path, None
    os.makedirs(work, exist_ok=True)
    why = download_direct(work)
    if why is None:
        return check_sha(path), None
    pip = pip_command()
    if pip is None:
        return None, f"cannot download transformers ({why}) and there is no pip"
    cmd = pip + ["download", f"transformers=={TRANSFORMERS_VERSION}", "--no-deps", "--only-binary=:all:",
                 "--disable-pip-version-check", "--timeout", "30", "-d", work]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return None, "pip download transformers timed out (PyPI unreachable?)"
    if r.returncode != 0 or not os.path.exists(path):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        return None, f"cannot download transformers ({why}); pip download failed too: {tail[0]}"
    return check_sha(path), None


def check_sha(path: str) -> str:
    got = sha256(path)
    if got != TRANSFORMERS_SHA256:
        os.remove(path)
        print(f"FAIL: {WHEEL} sha256 {got}, expected {TRANSFORMERS_SHA256}")
        sys.exit(1)
    return path


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    posenc, source, work = sys.argv[1:]
    wheel, why = get_wheel(work)
    if wheel is None:
        return skip(why)
    here = os.path.join(source, "tests", "registry_sync")
    cmd = [sys.executable, os.path.join(source, "tools", "registry_sync", "registry_sync.py"),
           "--transformers", wheel, "--posenc", posenc,
           "--leave-out", os.path.join(here, "leave_out.tsv"),
           "--llama-facts", os.path.join(here, "llama_cpp_rope_types.json"),
           "--gguf-table", os.path.join(source, "src", "config", "model_families.cpp"),
           "--json", os.path.join(work, "registry_sync.json")]
    sys.stdout.flush()
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
