"""Absolute and relative schemes: sinusoidal tables, ALiBi, T5 buckets, Shaw's clipping."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from . import _posenc, _tensors

# ---- absolute and relative schemes ------------------------------------------------------------


def sinusoidal_table(positions: Any, d_model: int, layout: str = "interleaved", base: float = 10000.0) -> np.ndarray:
    """Vaswani et al.'s sinusoidal positions [T, d_model] float32: layout "interleaved" (sin at even
    dims: Vaswani, XLM) or "concat" ([sin | cos]: fairseq, Marian)."""
    p = _tensors.ids_arg(positions, "positions")
    d_model = _tensors.int_arg(d_model, "d_model")
    _tensors.check_built_size("positions x d_model", (p.shape[0], d_model))
    return _posenc.sinusoidal_table(p, d_model, layout, float(base))


def alibi_slopes(num_heads: int, variant: str = "bloom", bias_max: float = 8.0) -> np.ndarray:
    """ALiBi head slopes (float64) by BLOOM's or MPT's rule."""
    return _posenc.alibi_slopes(_tensors.int_arg(num_heads, "num_heads"), variant, float(bias_max))


def alibi_bias(slopes: Any, query_length: int, key_length: int, query_offset: int = 0) -> np.ndarray:
    """-slope * (i - j) as float32 [heads, Tq, Tk], query i at position query_offset + i."""
    s = _tensors.float_row(slopes, "slopes")
    q_len, k_len, q_off = _lengths(query_length, key_length, query_offset)
    _tensors.check_built_size("heads x query_length x key_length", (s.shape[0], q_len, k_len))
    return _posenc.alibi_bias(s.tolist(), q_len, k_len, q_off)


def _lengths(query_length: Any, key_length: Any, query_offset: Any) -> Tuple[int, int, int]:
    """query_length and key_length >= 0 and |query_offset| <= 2^62: every query position and
    relative distance is then an int64 (none overflows)."""
    return (_tensors.int_arg(query_length, "query_length", 0, 1 << 62), _tensors.int_arg(key_length, "key_length", 0, 1 << 62),
            _tensors.int_arg(query_offset, "query_offset", -(1 << 62), 1 << 62))


def t5_buckets(relative_positions: Any, *, bidirectional: bool = True, num_buckets: int = 32,
               max_distance: int = 128) -> np.ndarray:
    """T5's bucket of each relative position (key - query), as HF's _relative_position_bucket."""
    return _posenc.t5_buckets(_tensors.ids_arg(relative_positions, "relative_positions"), bool(bidirectional),
                              _tensors.int_arg(num_buckets, "num_buckets"), _tensors.int_arg(max_distance, "max_distance"))


def t5_bias(table: Any, query_length: int, key_length: int, *, query_offset: int = 0, bidirectional: bool = True,
            num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """T5's learned bias table[bucket(j - i), h] as float32 [heads, Tq, Tk]; table [num_buckets, heads]."""
    if _tensors.is_torch(table):
        if table.device.type != "cpu":
            raise ValueError(f"table: tensor is on device {table.device}; posenc runs on CPU tensors only")
        table = table.detach().numpy()
    t = np.asarray(table)
    if t.dtype != np.float32:
        raise ValueError(f"table: dtype {t.dtype} is not float32")
    if t.ndim != 2:
        raise ValueError(f"table: shape {list(t.shape)} is not [num_buckets, heads]")
    q_len, k_len, q_off = _lengths(query_length, key_length, query_offset)
    _tensors.check_built_size("table", t.shape)
    _tensors.check_built_size("heads x query_length x key_length", (t.shape[1], q_len, k_len))
    return _posenc.t5_bias(np.ascontiguousarray(t), q_len, k_len, q_off, bool(bidirectional),
                           _tensors.int_arg(num_buckets, "num_buckets"), _tensors.int_arg(max_distance, "max_distance"))


def shaw_indices(query_length: int, key_length: int, max_relative_position: int, *, query_offset: int = 0) -> np.ndarray:
    """Shaw et al.'s table row clip(j - i, -k, k) + k for every (query, key): int64 [Tq, Tk]."""
    q_len, k_len, q_off = _lengths(query_length, key_length, query_offset)
    k = _tensors.int_arg(max_relative_position, "max_relative_position", 0, 1 << 62)
    _tensors.check_built_size("query_length x key_length", (q_len, k_len))
    return _posenc.shaw_indices(q_len, k_len, q_off, k)
