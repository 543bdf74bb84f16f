"""Hugging Face drop-in: posenc's RoPE behind the signature of transformers' `apply_rotary_pos_emb`.

Switch a model over in one line (its modeling module looks the function up at call time)::

    import transformers.models.llama.modeling_llama as modeling
    modeling.apply_rotary_pos_emb = posenc.hf.drop_in(posenc.Rope(model.config.to_dict()))

Given Hugging Face's own cos and sin (as every HF model passes them), the drop-in returns exactly the q
and k of HF's formula, `q * cos + rotate_half(q) * sin` (rotate_every_two for the interleaved
families; partial rotary: the first cos.shape[-1] dims rotated, the rest passed through), bit for bit,
in float32, float16 and bfloat16: one pass of posenc's kernel (kernels/rope_cos_sin.hpp) over the
caller's cos/sin rows, each product and the sum rounded to the tensor's dtype as torch rounds them.
cos/sin must have q's dtype (HF casts them so); another dtype raises ValueError, as torch would
promote the result.

With position_ids only (no cos/sin), or with from_cos_sin=False, posenc computes cos and sin itself
from the positions (within each golden case's tolerance of HF, not HF's bits); with cos/sin and
from_cos_sin=False and no position_ids, the positions are read back from HF's cos/sin (the angle of
the slowest pair, rounded to an integer position, then every pair checked against posenc's own
cos/sin at that position: a cos/sin that this config does not give at any integer position raises
ValueError instead of rotating by the wrong angles).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple

import numpy as np

from . import _posenc, _tensors

_TORCH_DTYPES: dict = {}


def _desc(x: Any, name: str, writable: bool = False) -> Tuple[int, str, Any, Any]:
    """(data pointer, dtype, shape, element strides) of a torch CPU tensor or numpy array, for
    _posenc.apply_cos_sin_qk; the few attribute reads this costs are the drop-in's per-call Python work.
    writable: an output the call writes (numpy: not read-only; torch: not requiring grad)."""
    if _TORCH_DTYPES and type(x) is _TORCH_DTYPES["Tensor"] or _tensors.is_torch(x):
        if not _TORCH_DTYPES:
            _register_torch()
        if not x.is_cpu:  # (is_cpu: a seventh of x.device.type's cost)
            raise ValueError(f"{name}: tensor is on device {x.device}; posenc runs on CPU tensors only")
        dt = _TORCH_DTYPES.get(x.dtype)
        if dt is None:
            raise ValueError(f"{name}: dtype {x.dtype} is not float32, float16 or bfloat16")
        if x.is_sparse:
            raise ValueError(f"{name}: tensor has no dense memory (layout {x.layout}); posenc needs a strided CPU tensor")
        if writable:
            if x.requires_grad and _TORCH_DTYPES["grad_enabled"]():
                raise ValueError(f"{name}: tensor requires grad; posenc writes it outside autograd "
                                 "(use torch.no_grad() or detach it)")
            _tensors.check_view_sizes(x.shape, x.stride(), name)
        return x.data_ptr(), dt, x.shape, x.stride()
    ptr, dt, shape, strides = _tensors.describe(x, name, writable)
    if any(st < 0 for st in strides):
        raise ValueError(f"{name}: negative strides {list(strides)}")
    if writable:  # an output element written twice: refused by name (an input may repeat elements)
        _tensors.check_view_sizes(shape, strides, name)
    return ptr, dt, shape, strides


def _register_torch() -> None:
    import torch  # noqa: PLC0415
    _TORCH_DTYPES.update({torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                          "Tensor": torch.Tensor, "grad_enabled": torch.is_grad_enabled})
    _tensors._torch()  # (registers torch's types with the extension)


def _refuse_grad(x: Any, name: str) -> None:
    if x.requires_grad and _TORCH_DTYPES["grad_enabled"]():
        raise ValueError(f"{name}: tensor requires grad, and posenc's drop-in has no backward; call it under "
                         "torch.no_grad() or torch.inference_mode(), or pass tensors that do not require grad")


def _to_numpy64(x: Any, name: str) -> np.ndarray:
    if _tensors.is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{name}: tensor is on device {x.device}; posenc runs on CPU tensors only")
        if x.is_complex():
            raise ValueError(f"{name}: dtype {x.dtype} is not a real floating type")
        a = x.detach().double().numpy()
    else:
        a = np.asarray(x)
        if a.dtype.kind not in "fiu":
            raise ValueError(f"{name}: dtype {a.dtype} is not a real floating type")
        a = a.astype(np.float64)
    if a.size and not np.isfinite(a).all():
        raise ValueError(f"{name}: holds non-finite values (no position gives them)")
    return a


def _empty_like(x: Any) -> Any:
    if _tensors.is_torch(x):
        import torch  # noqa: PLC0415
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty_like(x, order="C")


def _storage_ulp(x: Any) -> float:
    name = str(getattr(x, "dtype", "float32"))
    if "bfloat16" in name:
        return 2.0 ** -8
    if "float16" in name:
        return 2.0 ** -11
    return 0.0


def recover_positions(rope: Any, cos: Any, sin: Any) -> np.ndarray:
    """The integer positions [batch, seq] whose cos/sin (HF's layout: [batch, seq, rotary_dim], pair j
    at column j for half pairing, 2j for interleaved) `rope` gives; ValueError if there are none."""
    c, s = _to_numpy64(cos, "cos"), _to_numpy64(sin, "sin")
    if c.shape != s.shape:
        raise ValueError(f"sin: shape {list(s.shape)} differs from cos's {list(c.shape)}")
    if c.ndim == 2:
        c, s = c[None], s[None]
    scheme = rope.scheme
    pairs = scheme.rotary_dim // 2
    if c.ndim != 3 or c.shape[-1] != scheme.rotary_dim:
        raise ValueError(f"cos: shape {list(c.shape)} is not [batch, seq, {scheme.rotary_dim}] (rotary_dim)")
    if c.size == 0:
        return np.zeros(c.shape[:2], np.int64)
    cols = np.arange(pairs) * (2 if scheme.pairing == "interleaved" else 1)
    c, s = c[..., cols], s[..., cols]

    def solve(seq_len: Optional[int]) -> np.ndarray:
        # The slowest pair's angle gives the position modulo its wavelength (longer than any context);
        # each faster pair then refines it (its angle, unwrapped around the estimate so far), so float16
        # and bfloat16 cos/sin, whose angles are only good to ~2^-8 rad, still give exact integers.
        w = rope.frequencies(seq_len).inv_freq
        live = np.nonzero(w > 0)[0]
        if live.size == 0:
            raise ValueError("cos: no rotating pair to read positions from")
        live = live[np.argsort(w[live], kind="stable")]
        angle = np.arctan2(s, c)
        est = np.mod(angle[..., live[0]], 2 * math.pi) / w[live[0]]
        for j in live[1:]:
            d = np.mod(angle[..., j] - est * w[j] + math.pi, 2 * math.pi) - math.pi
            est = est + d / w[j]
        est = np.rint(est)
        if not np.all((est >= 0) & (est < 2.0 ** 31)):  # (past RoPE's positions: no config gives them)
            raise ValueError("cos/sin: the angles give positions outside [0, 2^31); pass position_ids")
        return est.astype(np.int64)

    p = solve(None)
    if rope._dynamic:  # dynamic NTK, LongRoPE: frequencies at HF's seq_len = max position + 1
        p = solve(int(p.max()) + 1)
    rows = [np.ascontiguousarray(r) for r in p]
    scaling = rope.frequencies(int(p.max()) + 1).attention_scaling if rope._dynamic else rope.attention_scaling
    tol = abs(scaling) * (4e-6 + 4.0 * (int(p.max()) + 1) * 2.0 ** -24 + 2.0 * _storage_ulp(cos))
    for b, r in enumerate(rows):
        want_c, want_s = rope.cos_sin(r)
        err = max(np.max(np.abs(want_c - c[b]), initial=0.0), np.max(np.abs(want_s - s[b]), initial=0.0))
        if not err <= tol:
            raise ValueError(f"cos/sin: batch element {b} matches no integer positions of this config "
                             f"(max |difference| {err:.3g} > {tol:.3g}); pass position_ids")
    return np.stack(rows) if rows else p


REUSE_FROM_BYTES = 1 << 20


def _dense_strides(shape: Any, stride: Any) -> bool:
    """Whether strides lay `shape` out densely with no overlap (some permutation of contiguous)."""
    want = 1
    for st, n in sorted(zip(stride, shape)):
        if n == 1:
            continue
        if st != want:
            return False
        want *= n
    return True


def _torch_empty_like(x: Any, name: str) -> Any:
    """torch.empty_like(x) (x's strides when x is dense, as HF's q * cos keeps them); from 1 MiB up in
    memory reused from earlier outputs (_posenc.output_buffer: no page faults of fresh pages). An
    output that cannot be allocated (an expanded x claiming terabytes) is a ValueError naming x."""
    import torch  # noqa: PLC0415
    size = x.element_size() * x.numel()
    if size < REUSE_FROM_BYTES:
        return torch.empty_like(x)
    try:
        return _reused_like(torch, x, size)
    except (MemoryError, RuntimeError) as e:
        raise ValueError(f"{name}: its output of shape {list(x.shape)} ({size} bytes) cannot be allocated "
                         f"({str(e).splitlines()[0][:60]})") from None


def _reused_like(torch: Any, x: Any, size: int) -> Any:
    shape, stride = x.shape, x.stride()
    if not _dense_strides(shape, stride):
        shape_c = list(shape)
        stride, acc = [0] * len(shape_c), 1
        for i in range(len(shape_c) - 1, -1, -1):
            stride[i], acc = acc, acc * shape_c[i]
    buf = torch.from_numpy(_posenc.output_buffer(size))
    return buf.view(x.dtype).as_strided(shape, stride)


def clear_output_cache() -> None:
    """Frees the memory kept for reuse by the drop-in's large outputs (at most 16 buffers, 1 GiB)."""
    _posenc.output_cache_clear()


def apply_cos_sin(q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: int = 1,
                  pairing: str = "half", out: Optional[Tuple[Any, Any]] = None) -> Tuple[Any, Any]:
    """HF's formula on HF's own cos/sin, bit for bit: new (q_embed, k_embed) of q's and k's dtype and
    memory layout (torch.empty_like / np.empty_like), written in one pass with the GIL released.
    q, k: [batch, heads, seq, head_dim] (unsqueeze_dim=1) or [batch, seq, heads, head_dim] (2), any
    strides with a contiguous head_dim (k may have fewer heads); cos, sin: [batch or 1, seq,
    rotary_dim] or [seq, rotary_dim] in q's dtype; pairing "half" (rotate_half) or "interleaved"
    (rotate_every_two). out: (q_out, k_out) to write instead of new tensors (same shapes and dtypes,
    disjoint from q and k or exactly them; out=(q, k) rotates in place, also when q and k are views
    of one fused QKV projection output, whose rows they share without sharing an element)."""
    if unsqueeze_dim not in (1, 2) or type(unsqueeze_dim) is bool:
        raise ValueError(f"unsqueeze_dim: {unsqueeze_dim!r} (expected 1: [batch, heads, seq, dim], or 2: [batch, seq, heads, dim])")
    tensor = _TORCH_DTYPES.get("Tensor")
    if tensor is None and _tensors.is_torch(q):
        _register_torch()
        tensor = _TORCH_DTYPES["Tensor"]
    if out is None and type(q) is tensor and type(k) is tensor and type(cos) is tensor and type(sin) is tensor:
        # torch tensors, the model's case: descriptors read in C++ (_posenc.apply_cos_sin_torch)
        _refuse_grad(q, "q")
        _refuse_grad(k, "k")
        _refuse_grad(cos, "cos")  # (HF's q * cos carries cos's gradient too)
        _refuse_grad(sin, "sin")
        q_out, k_out = _torch_empty_like(q, "q"), _torch_empty_like(k, "k")
        _posenc.apply_cos_sin_torch(pairing, q, k, q_out, k_out, cos, sin, unsqueeze_dim)
        return q_out, k_out
    if type(q) is not tensor:  # DLPack objects: zero-copy torch/numpy views
        q, k, cos, sin = (_tensors.as_tensor(x, n) for x, n in ((q, "q"), (k, "k"), (cos, "cos"), (sin, "sin")))
    qd, kd, cd, sd = _desc(q, "q"), _desc(k, "k"), _desc(cos, "cos"), _desc(sin, "sin")
    for x, n in ((q, "q"), (k, "k"), (cos, "cos"), (sin, "sin")):
        if type(x) is _TORCH_DTYPES.get("Tensor", ()):
            _refuse_grad(x, n)
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ValueError(f"out: {type(out).__name__} is not a pair (q_out, k_out)")
        q_out, k_out = (_tensors.as_tensor(x, n) for x, n in zip(out, ("q_out", "k_out")))
    elif isinstance(q, np.ndarray):
        q_out, k_out = np.empty_like(q), np.empty_like(k)
    else:
        q_out, k_out = _torch_empty_like(q, "q"), _torch_empty_like(k, "k")
    qod, kod = _desc(q_out, "q_out", out is not None), _desc(k_out, "k_out", out is not None)
    # (the outputs apart from each other, cos/sin and the inputs: checked in C++, CheckCosSinOutputs)
    _posenc.apply_cos_sin_qk(pairing, qd, kd, qod, kod, cd, sd, unsqueeze_dim)
    return q_out, k_out


def _shape(x: Any) -> list:
    return [int(n) for n in getattr(x, "shape", ())]


def cos_sin_per_token(q: Any, cos: Any, sin: Any, position_ids: Any, unsqueeze_dim: int = 1) -> Tuple[Any, Any]:
    """cos and sin as one row per token ([batch or 1, seq, rotary_dim]) under the calling convention
    their shapes name, or ValueError naming the shapes when no convention computes exactly that:

    - per token, [batch or 1, seq, rotary_dim] (transformers >= 4.38: position_ids, if given, are
      unused, as there), or [1, rotary_dim] for one token (unsqueeze_dim 1): returned as they are;
      other 2-d cos without position_ids is refused (cos.unsqueeze(dim) broadcasts it across heads);
    - a table [kv_len, rotary_dim] (transformers 4.34-4.37 and remote-code models) or [1, 1, kv_len,
      rotary_dim] (up to 4.33, squeezed first) with position_ids [batch or 1, seq] (or [1] for one
      token): cos[position_ids] as that code indexes it; an id outside [0, kv_len) is refused (torch
      would wrap a negative one to the table's end)."""
    if unsqueeze_dim not in (1, 2) or type(unsqueeze_dim) is bool:
        raise ValueError(f"unsqueeze_dim: {unsqueeze_dim!r} (expected 1: [batch, heads, seq, dim], or 2: [batch, seq, heads, dim])")
    q, cos, sin = (_tensors.as_tensor(x, n) for x, n in ((q, "q"), (cos, "cos"), (sin, "sin")))
    cs, ss, qs = _shape(cos), _shape(sin), _shape(q)
    if cs != ss:
        raise ValueError(f"sin: shape {ss} differs from cos's {cs}")
    if len(cs) == 3:
        return cos, sin
    if position_ids is None:
        if len(cs) == 2 and cs[0] == 1 and unsqueeze_dim == 1:
            return cos, sin  # ([1, R] unsqueezed is [1, 1, R]: one row for the one token)
        raise ValueError(f"cos: shape {cs} without position_ids is not per token [batch or 1, seq, rotary_dim] for q {qs} "
                         f"(cos.unsqueeze({unsqueeze_dim}) would not broadcast one row per token; pass cos[None], or "
                         "position_ids to index it as a table)")
    p = _tensors.int_array(position_ids, "position_ids")
    ps = list(p.shape)
    if len(cs) == 4 and cs[:2] == [1, 1] and unsqueeze_dim == 1:
        cos, sin = cos[0, 0], sin[0, 0]  # (transformers <= 4.33: cos.squeeze(1).squeeze(0); no unsqueeze_dim then)
    elif len(cs) != 2:
        raise ValueError(f"cos: shape {cs} with position_ids {ps} is neither per token [batch, seq, rotary_dim] nor a "
                         f"table [kv_len, rotary_dim] or [1, 1, kv_len, rotary_dim] (that one with unsqueeze_dim 1; "
                         f"q {qs}, unsqueeze_dim {unsqueeze_dim})")
    seq = qs[1 + unsqueeze_dim % 2] if len(qs) == 4 else -1  # (unsqueeze_dim 1: [B, H, S, D]; 2: [B, S, H, D])
    if p.ndim == 1 and ps == [1] and seq == 1 and unsqueeze_dim == 1:
        p = p.reshape(1, 1)  # cos[ids] is [1, R], unsqueezed [1, 1, R]: every row at that position
    if len(qs) != 4 or p.ndim != 2 or p.shape[1] != seq or p.shape[0] not in (1, qs[0]):
        raise ValueError(f"position_ids: shape {ps} does not index the cos table {cs} as one row per token of q "
                         f"{qs} (expected [batch or 1, seq]; unsqueeze_dim {unsqueeze_dim})")
    rows = int(_shape(cos)[0])
    if p.size:
        lo, hi = int(p.min()), int(p.max())
        if lo < 0 or hi >= rows:
            bad = lo if lo < 0 else hi
            at = [int(i) for i in np.argwhere(p == bad)[0]]
            raise ValueError(f"position_ids: {bad} at {at} is outside the cos table's rows [0, {rows}) (cos {cs})")
    ids = _tensors.to_int64(p, "position_ids")
    if _tensors.is_torch(cos):
        import torch  # noqa: PLC0415 (cos is a torch tensor: torch is loaded)
        t = torch.from_numpy(ids)
        return cos[t], sin[t]
    return np.asarray(cos)[ids], np.asarray(sin)[ids]


def apply_rotary_pos_emb(rope: Any, q: Any, k: Any, cos: Any = None, sin: Any = None, position_ids: Any = None,
                         unsqueeze_dim: int = 1, from_cos_sin: bool = True) -> Tuple[Any, Any]:
    """HF's apply_rotary_pos_emb computed by `rope` (a posenc.Rope): new (q_embed, k_embed). Given
    cos and sin (and from_cos_sin, the default), HF's bits from HF's cos/sin (apply_cos_sin), per token
    or as a table indexed by position_ids (cos_sin_per_token); else posenc's own angles at
    position_ids (or at the positions read back from cos/sin)."""
    if from_cos_sin and cos is not None and sin is not None:
        cos, sin = cos_sin_per_token(q, cos, sin, position_ids, unsqueeze_dim)
        return apply_cos_sin(q, k, cos, sin, unsqueeze_dim, rope.scheme.pairing)
    q, k = _tensors.as_tensor(q, "q"), _tensors.as_tensor(k, "k")
    if unsqueeze_dim not in (1, 2) or type(unsqueeze_dim) is bool:
        raise ValueError(f"unsqueeze_dim: {unsqueeze_dim} (expected 1: [batch, heads, seq, dim], or 2: [batch, seq, heads, dim])")
    order = "bhsd" if unsqueeze_dim == 1 else "bshd"
    for name, x in (("q", q), ("k", k)):
        if len(getattr(x, "shape", ())) != 4:
            raise ValueError(f"{name}: shape {list(getattr(x, 'shape', ()))} is not 4-d ({order})")
    if position_ids is None:
        if cos is None or sin is None:
            raise ValueError("position_ids: none given, and no cos/sin to read the positions from")
        position_ids = recover_positions(rope, cos, sin)
    q_out, k_out = _empty_like(q), _empty_like(k)
    rope.apply(q, position_ids, out=q_out, order=order)
    rope.apply(k, position_ids, out=k_out, order=order)
    return q_out, k_out


def drop_in(rope: Any, from_cos_sin: bool = True) -> Callable[..., Tuple[Any, Any]]:
    """A function with HF's signature, `(q, k, cos, sin, position_ids=None, unsqueeze_dim=1)`, bound
    to `rope`: assign it to a modeling module's apply_rotary_pos_emb. from_cos_sin=False: posenc's
    own angles even when HF's cos/sin are given (see the module docstring)."""
    pairing = rope.scheme.pairing

    def apply_rotary_pos_emb_posenc(q, k, cos=None, sin=None, position_ids=None, unsqueeze_dim=1):
        if from_cos_sin and cos is not None and sin is not None:
            if position_ids is not None or len(getattr(cos, "shape", ())) != 3:
                cos, sin = cos_sin_per_token(q, cos, sin, position_ids, unsqueeze_dim)
            return apply_cos_sin(q, k, cos, sin, unsqueeze_dim, pairing)
        return apply_rotary_pos_emb(rope, q, k, cos, sin, position_ids, unsqueeze_dim, False)
    apply_rotary_pos_emb_posenc.__doc__ = apply_rotary_pos_emb.__doc__
    return apply_rotary_pos_emb_posenc
