"""How numpy arrays and torch CPU tensors become posenc views, without copies.

posenc's kernels take a [tokens, heads, head_dim] view with element strides (HeadsView in
include/posenc/core/array.hpp). A 3-d array [T, H, D] (order "thd") or [H, T, D] ("htd") is one view;
a 4-d array [B, H, S, D] (order "bhsd", Hugging Face's q and k, which may be a transposed view of
[B, S, H, D]) or [B, S, H, D] ("bshd") is one view per batch element. The data pointer and strides are
read from the object itself (numpy: __array_interface__ and .strides; torch: data_ptr() and stride()),
so posenc reads and writes the caller's memory. Anything that does not fit raises ValueError naming
the argument; nothing is ever copied behind the caller's back.
"""
from __future__ import annotations

import operator
import sys
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

View = Tuple[int, str, int, int, int, int, int]

_NUMPY_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16"}
_ORDERS = {3: ("thd", "htd"), 4: ("bhsd", "bshd")}


_TORCH: Any = False  # the torch module once looked up (None: not installed); False: not yet
_TORCH_TENSOR: Any = ()  # torch.Tensor once looked up; () matches nothing in isinstance
_TORCH_DTYPE_NAMES: dict = {}


def _torch():
    """torch, imported on first use (it is optional: numpy works without it), or None."""
    global _TORCH, _TORCH_TENSOR, _TORCH_DTYPE_NAMES
    if _TORCH is False:
        try:
            import torch  # noqa: PLC0415
        except ImportError:
            torch = None
        if torch is not None:
            _TORCH_TENSOR = torch.Tensor
            _TORCH_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
            from . import _posenc  # noqa: PLC0415 (the C++ readers compare torch's types by identity)
            _posenc.register_torch_types(torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                         torch.uint8, torch.int8, torch.Tensor)
        _TORCH = torch
    return _TORCH


def is_torch(x: Any) -> bool:
    """Whether x is a torch tensor. Never imports torch: until something else has imported it, no
    object can be one (numpy-only callers do not pay torch's import)."""
    if _TORCH is False:
        if "torch" not in sys.modules:
            return False
        _torch()
    return isinstance(x, _TORCH_TENSOR)


def _torch_dtype_name(torch, dtype) -> Optional[str]:
    return _TORCH_DTYPE_NAMES.get(dtype)


_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
                   11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}


def from_dlpack(x: Any, name: str) -> Any:
    """An object speaking DLPack (__dlpack__ / __dlpack_device__) that is neither a numpy array nor a
    torch tensor, as a torch tensor (or, without torch, a numpy array) over the same memory, no copy;
    ValueError naming the device when it is not the CPU."""
    try:
        dev = x.__dlpack_device__()
        dev_type, dev_id = int(dev[0]), int(dev[1])
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{name}: __dlpack_device__() failed ({e})") from None
    if dev_type != 1:
        raise ValueError(f"{name}: DLPack tensor is on device {_DLPACK_DEVICES.get(dev_type, f'type {dev_type}')}:{dev_id}; "
                         "posenc runs on CPU tensors only")
    torch = _torch() if "torch" in sys.modules else None  # (numpy-only callers: no torch import)
    try:
        if torch is not None:
            import torch.utils.dlpack  # noqa: PLC0415
            return torch.utils.dlpack.from_dlpack(x)
        return np.from_dlpack(x)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"{name}: DLPack import failed ({e})") from None


def as_tensor(x: Any, name: str) -> Any:
    """x itself if it is a numpy array or torch tensor; a zero-copy torch/numpy view of a DLPack object."""
    if isinstance(x, np.ndarray) or is_torch(x):
        return x
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return from_dlpack(x, name)
    return x


def describe(x: Any, name: str, writable: bool) -> Tuple[int, str, Tuple[int, ...], Tuple[int, ...]]:
    """(data pointer, posenc dtype, shape, element strides) of a numpy array or torch CPU tensor (or a
    DLPack CPU tensor, viewed without a copy)."""
    if not isinstance(x, np.ndarray) and not is_torch(x) and hasattr(x, "__dlpack__"):
        x = as_tensor(x, name)
    if is_torch(x):
        torch = _torch()
        if x.device.type != "cpu":
            raise ValueError(f"{name}: tensor is on device {x.device}; posenc runs on CPU tensors only")
        dt = _torch_dtype_name(torch, x.dtype)
        if dt is None:
            raise ValueError(f"{name}: dtype {x.dtype} is not float32, float16 or bfloat16")
        if x.layout != torch.strided:
            raise ValueError(f"{name}: tensor has no dense memory (layout {x.layout}); posenc needs a strided CPU tensor")
        if writable and x.requires_grad and torch.is_grad_enabled():
            raise ValueError(f"{name}: tensor requires grad; posenc writes it outside autograd "
                             "(use torch.no_grad() or detach it)")
        return x.data_ptr(), dt, tuple(x.shape), tuple(x.stride())
    if isinstance(x, np.ndarray):
        dt = _NUMPY_DTYPES.get(x.dtype)
        if dt is None:
            raise ValueError(f"{name}: dtype {x.dtype} is not float32 or float16 "
                             "(numpy has no bfloat16: pass a torch tensor)")
        if writable and not x.flags.writeable:
            raise ValueError(f"{name}: array is read-only")
        if not x.dtype.isnative:
            raise ValueError(f"{name}: array is not in native byte order")
        item = x.itemsize
        if any(s % item for s in x.strides):
            raise ValueError(f"{name}: strides {x.strides} (bytes) are not multiples of the element size {item}")
        ptr = int(x.__array_interface__["data"][0])
        check_in_owner(x, ptr, name)
        return ptr, dt, tuple(x.shape), tuple(s // item for s in x.strides)
    raise ValueError(f"{name}: {type(x).__name__} is not a numpy array or a torch tensor")


def byte_range(ptr: int, shape: Sequence[int], strides: Sequence[int], item: int) -> Tuple[int, int]:
    """[first byte, one past the last byte] that a strided array touches (strides in elements, any
    sign); (ptr, ptr) when it has no elements."""
    if any(int(n) == 0 for n in shape):
        return ptr, ptr
    lo = hi = 0
    for n, st in zip(shape, strides):
        if st < 0:
            lo += (int(n) - 1) * st
        else:
            hi += (int(n) - 1) * st
    return ptr + lo * item, ptr + (hi + 1) * item


def _buffer_extent(o: Any) -> Optional[Tuple[int, int]]:
    """[first byte, one past the last] of an object exporting a contiguous buffer, else None."""
    try:
        with memoryview(o) as m:
            if not m.contiguous:
                return None
            if m.nbytes == 0:
                return 0, 0
            a = np.frombuffer(m.cast("B"), np.uint8)
            a0 = int(a.__array_interface__["data"][0])
            del a
            return a0, a0 + m.nbytes
    except (TypeError, ValueError, BufferError):
        return None


def owner_extent(x: np.ndarray) -> Optional[Tuple[int, int]]:
    """[first byte, one past the last] of the memory a numpy array's data lives in, from the object at
    the end of its .base chain (through as_strided's wrapper and memoryviews): an ndarray that owns its
    data, or any object exporting a buffer (bytearray, bytes, mmap, array.array: np.frombuffer's
    source), or a torch tensor's storage (tensor.numpy()); for another owner (a DLPack capsule), the
    contiguous ndarray wrapping it directly, as that library declared it. None when nothing along the chain states an extent."""
    chain: List[Any] = [x]
    while len(chain) < 100000:
        o = chain[-1]
        nxt = o.obj if isinstance(o, memoryview) else getattr(o, "base", None)
        if nxt is None or nxt is o:
            break
        chain.append(nxt)
    last = chain[-1]
    if isinstance(last, np.ndarray):
        o0 = int(last.__array_interface__["data"][0])
        return o0, o0 + last.nbytes
    ext = _buffer_extent(last)
    if ext is not None:
        return ext
    if is_torch(last):  # tensor.numpy(): the tensor's storage
        try:
            st = last.untyped_storage()
        except AttributeError:  # (torch < 2.0)
            st = last.storage().untyped()
        return int(st.data_ptr()), int(st.data_ptr()) + int(st.nbytes())
    wrap = chain[-2]
    if isinstance(wrap, np.ndarray) and (wrap.flags.c_contiguous or wrap.flags.f_contiguous):
        o0 = int(wrap.__array_interface__["data"][0])
        return o0, o0 + wrap.nbytes
    return None


def check_in_owner(x: np.ndarray, ptr: int, name: str) -> None:
    """Refuses a numpy view whose strides reach outside the memory of whatever owns it
    (np.lib.stride_tricks.as_strided makes such views; posenc would read or write past the buffer):
    an ndarray, a bytearray / mmap / any buffer-protocol object (np.frombuffer), or memory another
    library declared (owner_extent)."""
    if x.base is None:
        return  # (x owns its memory: its shape and strides are numpy's own)
    item = x.itemsize
    lo, hi = byte_range(ptr, x.shape, [st // item for st in x.strides], item)
    if lo >= hi:
        return
    ext = owner_extent(x)
    if ext is None:
        raise ValueError(f"{name}: a view of memory whose extent posenc cannot find (base {type(x.base).__name__}); "
                         "pass an array that owns its memory or views a buffer")
    if lo < ext[0] or hi > ext[1]:
        raise ValueError(f"{name}: shape {list(x.shape)} and strides {list(x.strides)} (bytes) reach outside the "
                         f"{ext[1] - ext[0]} bytes of the memory it views")


def check_view_sizes(shape: Sequence[int], strides: Sequence[int], name: str) -> None:
    """Refuses a tensor that claims more elements than any memory holds (a huge extent on a stride-0
    or overlapping axis): the element count must fit int64 and every distinct element needs memory,
    so an extent of n with stride 0 is refused as overlapping before anything is sized from it."""
    for n, st in zip(shape, strides):
        if int(n) > 1 and st == 0:
            raise ValueError(f"{name}: an axis of extent {int(n)} has stride 0 (its elements overlap; "
                             f"shape {list(shape)}, strides {list(strides)})")


def heads_views(x: Any, name: str, order: Optional[str], writable: bool = True,
                fold: bool = True) -> Tuple[List[View], int, int]:
    """Per batch element, the view of `x`; also the token count and the head_dim. With `fold`, a batch
    whose elements line up as more tokens of one view (one token each, as in decode, or token-major
    elements back to back) is one view of batch * seq tokens (one kernel call instead of batch).
    The library plans it (posenc::PlanHeads); this reads the object."""
    from . import _posenc  # noqa: PLC0415
    desc = describe(x, name, writable)
    views, tokens, head_dim, _ = _posenc.plan_heads(desc, order or "", name, fold)
    return views, tokens, head_dim


def batch_of(x: Any, order: Optional[str]) -> int:
    """The batch size of a 4-d x (1 for 3-d)."""
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) != 4:
        return 1
    return shape[(order or "bhsd").index("b")]


def same_layout(x: Any, out: Any, name: str = "out") -> None:
    if not isinstance(out, np.ndarray) and not is_torch(out):
        raise ValueError(f"{name}: {type(out).__name__} is not a numpy array or a torch tensor")
    if is_torch(x) != is_torch(out):
        raise ValueError(f"{name}: a {type(out).__name__}, the input a {type(x).__name__}")
    if tuple(x.shape) != tuple(out.shape):
        raise ValueError(f"{name}: shape {list(out.shape)} differs from the input's {list(x.shape)}")
    if x.dtype != out.dtype:
        raise ValueError(f"{name}: dtype {out.dtype} differs from the input's {x.dtype}")


def position_rows(positions: Any, batch: int, tokens: int, name: str = "positions",
                  views: int = 0) -> List[np.ndarray]:
    """Positions as one contiguous int64 row per batch element ([S] shared by all, or [B, S]), or, when
    the batch was folded into `views` = 1 view, one row of batch * tokens."""
    p = int_array(positions, name)
    if p.ndim == 0:
        p = p.reshape(1)
    if p.ndim == 1:
        rows = [p] * batch
    elif p.ndim == 2 and p.shape[0] in (1, batch):
        rows = [p[0]] * batch if p.shape[0] == 1 else [p[b] for b in range(batch)]
    else:
        raise ValueError(f"{name}: shape {list(p.shape)} is not [tokens] or [batch, tokens] for batch {batch}")
    for r in rows[:1]:
        if r.shape[0] != tokens:
            raise ValueError(f"{name}: {r.shape[0]} positions for {tokens} tokens")
    # a few integers per token, converted (shapes checked first: nothing is sized from a bad one)
    if views == 1 and batch > 1:
        return [to_int64(np.concatenate(rows), name)]
    return [to_int64(r, name) for r in rows]


def view_span(v: View) -> Tuple[int, int]:
    """[first byte, one past the last byte] of a view; empty for a view with no elements."""
    ptr, dt, t, h, d, ts, hs = v
    return byte_range(ptr, (t, h, d), (ts, hs, 1), 4 if dt == "float32" else 2)


def check_spans_apart(a: Sequence[Tuple[int, int]], b: Sequence[Tuple[int, int]], name: str, other: str,
                      verb: str = "overlaps") -> None:
    """Refuses memory `name` (byte spans `a`) that shares a byte with `other` (spans `b`)."""
    for a0, a1 in a:
        for b0, b1 in b:
            if a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1:
                raise ValueError(f"{name}: {verb} {other}")


def views_apart(a: View, b: View) -> bool:
    """Whether two views share no element: their byte spans are apart, or (views of one fused row
    buffer, as split_qkv gives) both take disjoint slices of the same rows. One rule for the
    extension's checks and these: _posenc.descs_apart."""
    from . import _posenc  # noqa: PLC0415 (the extension; this module is imported before it is needed)
    return _posenc.descs_apart((a[0], a[1], (a[2], a[3], a[4]), (a[5], a[6], 1)),
                               (b[0], b[1], (b[2], b[3], b[4]), (b[5], b[6], 1)))


def check_views_apart(a: Sequence[View], b: Sequence[View], name: str, other: str) -> None:
    """Refuses views `b` sharing an element with any of `a` (`name`: b's argument)."""
    for va in a:
        for vb in b:
            if not views_apart(va, vb):
                raise ValueError(f"{name}: overlaps {other}")


def check_no_partial_overlap(a: Sequence[View], b: Sequence[View], name: str, other: str = "the input",
                             allow_same: bool = True) -> None:
    """Refuses `b` (an out, or k beside q) sharing memory with `a` without being it exactly (or at all,
    when not allow_same)."""
    for va in a:
        for vb in b:
            if va == vb and allow_same:
                continue
            check_views_apart([va], [vb], name, f"{other} without being it")


CACHE_TYPES = ("float32", "float16", "bfloat16", "q8_0", "float8_e4m3fn", "float8_e5m2")
_BYTE_CACHE_TYPES = ("q8_0", "float8_e4m3fn", "float8_e5m2")


def cache_memory(x: Any, name: str, kv_heads: int, head_dim: int, cache_type: Optional[str] = None,
                 heads_axis: bool = True) -> Tuple[int, int, str, int, int]:
    """(data pointer, bytes, cache type, layers, slots) of a KV-cache tensor: [layers, slots, kv_heads,
    head_dim] or [slots, kv_heads, head_dim] in float32 / float16 / bfloat16 (or torch's float8_e4m3fn /
    float8_e5m2), or a uint8 tensor holding the codes of a byte cache: Q8_0 blocks [layers, slots,
    row_bytes] or [slots, row_bytes] (row_bytes = kv_heads * head_dim / 32 * 34; a uint8 tensor's
    default), or float8 codes shaped as the float caches (cache_type "float8_e4m3fn" / "float8_e5m2").
    `cache_type`, when given, must agree with the tensor's dtype. Without `heads_axis` (an MLA cache: one
    row per slot) the float shapes are [layers, slots, head_dim] or [slots, head_dim]. Contiguous and
    writable; anything else is a ValueError naming it (nothing is copied)."""
    if cache_type is not None and cache_type not in CACHE_TYPES:
        raise ValueError(f"cache_type: {cache_type!r} is not one of {', '.join(CACHE_TYPES)}")
    if not isinstance(x, np.ndarray) and not is_torch(x) and hasattr(x, "__dlpack__"):
        x = as_tensor(x, name)
    if not isinstance(x, np.ndarray) and not is_torch(x):
        raise ValueError(f"{name}: {type(x).__name__} is not a numpy array or a torch tensor")
    shape = tuple(int(s) for s in x.shape)
    if is_torch(x):
        torch = _torch()
        if x.device.type != "cpu":
            raise ValueError(f"{name}: tensor is on device {x.device}; posenc runs on CPU tensors only")
        if x.requires_grad and torch.is_grad_enabled():
            raise ValueError(f"{name}: tensor requires grad; posenc writes it outside autograd "
                             "(use torch.no_grad() or detach it)")
        if not x.is_contiguous():
            raise ValueError(f"{name}: tensor is not contiguous (strides {list(x.stride())})")
        q8 = x.dtype in (torch.uint8, torch.int8)
        dt = "q8_0" if q8 else _torch_dtype_name(torch, x.dtype)
        if dt is None and x.dtype in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
            dt = str(x.dtype).replace("torch.", "")
        ptr, nbytes = x.data_ptr(), x.numel() * x.element_size()
    elif isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise ValueError(f"{name}: array is not C-contiguous")
        if not x.flags.writeable:
            raise ValueError(f"{name}: array is read-only")
        q8 = x.dtype in (np.dtype(np.uint8), np.dtype(np.int8))
        dt = "q8_0" if q8 else _NUMPY_DTYPES.get(x.dtype)
        ptr, nbytes = int(x.__array_interface__["data"][0]), x.nbytes
    else:
        raise ValueError(f"{name}: {type(x).__name__} is not a numpy array or a torch tensor")
    if dt is None:
        raise ValueError(f"{name}: dtype {x.dtype} is not float32, float16, bfloat16 or uint8 (q8_0 blocks or "
                         "float8 codes)")
    if cache_type is not None and cache_type != dt:
        if not (q8 and cache_type in _BYTE_CACHE_TYPES):
            raise ValueError(f"{name}: a {x.dtype} tensor cannot hold a {cache_type} cache"
                             + (" (uint8 holds q8_0 or float8 codes)" if q8 or cache_type in _BYTE_CACHE_TYPES else ""))
        dt = cache_type
    if dt == "q8_0":
        row = kv_heads * head_dim // 32 * 34 if (kv_heads * head_dim) % 32 == 0 else -1
        if row < 0:
            raise ValueError(f"{name}: q8_0 needs kv_heads * head_dim a multiple of 32, got {kv_heads} * {head_dim}")
        if len(shape) not in (2, 3) or shape[-1] != row:
            raise ValueError(f"{name}: shape {list(shape)} is not [layers, slots, {row}] or [slots, {row}] "
                             f"(q8_0 rows of {kv_heads} x {head_dim})")
        layers, slots = (shape[0], shape[1]) if len(shape) == 3 else (1, shape[0])
    elif not heads_axis:
        if len(shape) not in (2, 3) or shape[-1] != head_dim:
            raise ValueError(f"{name}: shape {list(shape)} is not [layers, slots, {head_dim}] or [slots, {head_dim}]")
        layers, slots = (shape[0], shape[1]) if len(shape) == 3 else (1, shape[0])
    else:
        if len(shape) not in (3, 4) or shape[-2:] != (kv_heads, head_dim):
            raise ValueError(f"{name}: shape {list(shape)} is not [layers, slots, {kv_heads}, {head_dim}] "
                             f"or [slots, {kv_heads}, {head_dim}]")
        layers, slots = (shape[0], shape[1]) if len(shape) == 4 else (1, shape[0])
    return ptr, nbytes, dt, layers, slots


def cache_scale(x: Any, name: str) -> list:
    """A float8 cache's scale as the library takes it: [] for None (1), one float, or a 1-D sequence
    (per head); the values' checks (count, finite, > 0) are the library's and name `name`."""
    if x is None:
        return []
    a = _numbers(x, name, False)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: {a.dtype} is not a number or numbers")
    if a.ndim > 1:
        raise ValueError(f"{name}: shape {list(a.shape)} is not a number or [kv_heads]")
    return [float(v) for v in a.reshape(-1)]


INT64_MAX = (1 << 63) - 1


def _numbers(x: Any, name: str, integers: bool) -> np.ndarray:
    """x (a torch CPU tensor, numpy array or nested list) as a numpy array; ValueError naming `name`
    for a tensor off the CPU or what numpy cannot make an array of (a ragged list). A bfloat16 tensor,
    which numpy has no dtype for, is widened to float32 (exact) where numbers are wanted and refused
    by its dtype where integers are (its .numpy() raised an unnamed TypeError)."""
    what = "integers" if integers else "numbers"
    if is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{name}: tensor is on device {x.device}; posenc runs on CPU tensors only")
        x = x.detach()
        if x.dtype == _torch().bfloat16:
            if integers:
                raise ValueError(f"{name}: dtype {x.dtype} is not an integer type")
            x = x.float()
        x = x.numpy()
    try:
        return np.asarray(x)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{name}: not an array of {what} ({str(e).splitlines()[0][:80]})") from None


def int_array(x: Any, name: str) -> np.ndarray:
    """An integer numpy array or torch tensor as a numpy array (ids, positions, slots); ValueError for
    any other dtype, a ragged nested list, or a tensor off the CPU."""
    a = _numbers(x, name, integers=True)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name}: dtype {a.dtype} is not an integer type")
    return a


def to_int64(a: np.ndarray, name: str) -> np.ndarray:
    """A contiguous int64 copy (or a itself) of an integer array; ValueError for a uint64 value past
    int64 (it would wrap to a negative number)."""
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size:
        big = np.flatnonzero(a.reshape(-1) > INT64_MAX)
        if big.size:
            i = int(big[0])
            raise ValueError(f"{name}: value {int(a.reshape(-1)[i])} at index {i} is beyond int64")
    return np.ascontiguousarray(a, dtype=np.int64)


def int64_row(x: Any, name: str, length: int) -> np.ndarray:
    """A contiguous int64 copy of a 1-d integer array or tensor of `length` values (positions, slots)."""
    a = int_array(x, name)
    a = a.reshape(-1) if a.ndim != 1 and a.size == length else a
    if a.ndim != 1 or a.shape[0] != length:
        raise ValueError(f"{name}: shape {list(a.shape)} is not [{length}]")
    return to_int64(a, name)


def int_arg(x: Any, name: str, lo: int = -INT64_MAX - 1, hi: int = INT64_MAX) -> int:
    """An integer argument (a Python or numpy integer, not a bool, float or string) in [lo, hi]:
    TypeError or ValueError naming it, never a silent truncation (int(1.5)) or a cast error."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: {x!r} is a bool, not an integer")
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{name}: {x!r} ({type(x).__name__}) is not an integer") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name}: {v} is outside [{lo}, {hi}]")
    return v


def float_row(x: Any, name: str) -> np.ndarray:
    """A 1-d float64 copy of real, finite numbers (a scalar is one value)."""
    a = _numbers(x, name, integers=False)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: dtype {a.dtype} is not a real number type")
    if a.ndim > 1:
        raise ValueError(f"{name}: shape {list(a.shape)} is not 1-d")
    a = a.reshape(-1).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise ValueError(f"{name}: value {a[bad[0]]} at index {int(bad[0])} is not finite")
    return a


MAX_BUILT_ELEMENTS = 1 << 28


def check_built_size(name: str, dims: Sequence[int], limit: int = MAX_BUILT_ELEMENTS) -> None:
    """Refuses, before anything is allocated, a table posenc would build whole (a bias [H, Tq, Tk],
    a sinusoidal table) of more than `limit` elements (2^28: 1 GiB of float32)."""
    n = 1
    for d in dims:
        n *= max(int(d), 0)
    if n > limit:
        raise ValueError(f"{name}: {' x '.join(str(int(d)) for d in dims)} = {n} elements is more than posenc "
                         f"builds at once (2^{limit.bit_length() - 1})")


def quote(v: Any, cap: int = 80) -> str:
    """repr(v) for a message: one line, at most `cap` characters (a huge or multi-line value is cut and
    its length said)."""
    r = repr(v)
    if len(r) > cap:
        r = f"{r[:cap]}... ({len(r)} characters)"
    return r


def cap(text: str, limit: int = 120) -> str:
    """A key path or name for a message, as it is when short (control characters escaped: one line);
    cut, with its length, when long."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def path_arg(x: Any, name: str) -> str:
    """A path argument (str, bytes or os.PathLike) as str: TypeError for anything else, ValueError for a
    path holding a NUL (the C library would open the path before it: another file)."""
    import os  # noqa: PLC0415
    try:
        p = os.fspath(x)
    except TypeError:
        raise TypeError(f"{name}: {quote(x)} ({type(x).__name__}) is not a path (str, bytes or os.PathLike)") from None
    if isinstance(p, bytes):
        try:
            p = os.fsdecode(p)
        except UnicodeDecodeError:
            raise ValueError(f"{name}: {quote(p)} is not decodable with the file system encoding") from None
    if "\0" in p:
        raise ValueError(f"{name}: {quote(p)} holds a NUL character at index {p.index(chr(0))}")
    return p


def real_arg(x: Any, name: str) -> float:
    """A real number argument (not a string or bool): TypeError naming it otherwise."""
    if isinstance(x, (bool, np.bool_, str, bytes)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: {quote(x)} ({type(x).__name__}) is not a number")
    return float(x)


def ids_arg(ids: Any, name: str = "ids") -> np.ndarray:
    """Integers (ids, positions) as a contiguous 1-d int64 array."""
    return to_int64(int_array(ids, name).reshape(-1), name)
