"""Threads, the SIMD target, and the golden runner (the CLI's): process-wide settings and tools."""
from __future__ import annotations

from typing import Optional, Tuple

from . import _cli, _posenc, _tensors
from ._scheme import PathLike

def set_num_threads(n: int) -> int:
    """Threads for posenc's kernels called from Python (n <= 0: posenc's default pool, whose size is
    the CPU count or POSENC_NUM_THREADS; at most 1024: each is an OS thread, started now). Results are
    bit-identical for every thread count. Returns the number of threads running: fewer than n when the
    OS refused some (a thread or address-space limit), which a RuntimeWarning then says, with the
    pool's reason; the pool runs with the threads it has."""
    running, why = _posenc.set_num_threads(_tensors.int_arg(n, "n", -(1 << 31), _posenc.MAX_THREADS))
    if why:
        import warnings  # noqa: PLC0415
        warnings.warn(f"set_num_threads({n}): {why}", RuntimeWarning, stacklevel=2)
    return running


def num_threads() -> int:
    """The number of threads posenc's kernels use now."""
    return _posenc.num_threads()


def simd_target() -> str:
    """The SIMD target posenc's run-time dispatch picked on this CPU (AVX2, AVX3, ...)."""
    return _posenc.simd_target()


def golden(folder: PathLike, *, cli: Optional[PathLike] = None) -> Tuple[int, str]:
    """Runs every golden case under `folder` through the CLI's `posenc golden` (the runner lives in the
    CLI, not the library). Returns (exit code, output). `cli`: the posenc executable (default: the
    POSENC_CLI environment variable, else `posenc` on PATH)."""
    import subprocess  # noqa: PLC0415
    exe = _tensors.path_arg(cli, "cli") if cli is not None else _cli.path()
    if not exe:
        raise OSError("posenc golden: no CLI found (set POSENC_CLI or put posenc on PATH)")
    r = subprocess.run([exe, "golden", _tensors.path_arg(folder, "folder")], capture_output=True, text=True, check=False)
    return r.returncode, r.stdout + r.stderr
