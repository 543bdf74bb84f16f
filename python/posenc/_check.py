"""Holding an engine's RoPE to posenc's reference from Python: `check` and `diff`, the CLI's `posenc
check` and `posenc diff` (docs/CHECKING.md) returning their report as objects.

The report is the library's (RopeCheckReportJson / RopeCheckReportText in src/model), the very
JSON `posenc check --json` prints: `CheckReport.json` is that dict, and its fields are read from it.
The dump is read in place: numpy arrays and torch CPU tensors (float32, float16, bfloat16; numpy
float64 too), contiguous or strided, are described (pointer, dtype, shape, strides) and converted once
in C++; int32 / int64 positions are read in place too (other integer types through an int64 copy).

Example::

    import numpy as np, posenc
    r = posenc.check("config.json", before=q, after=q_rot, positions=np.arange(16))
    if not r.passed:
        print(r.diagnosis[0].id, r.diagnosis[0].detail)   # e.g. pairing, "interleaved pairs instead of half"

Model descriptions are a config dict (as config.json holds it, either spelling), or a path: a
config.json, a GGUF, a Hugging Face folder, a safetensors file with a config beside it. Errors: bad
input is a ValueError with posenc's one-line message (the CLI's, whose flag names it keeps: `--layer`
is `layer=`); a missing or corrupt file an OSError; an argument of the wrong type a TypeError.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from . import _posenc, _tensors
from ._scheme import _config_json

CAUSE_IDS: Tuple[str, ...] = tuple(_posenc.rope_cause_ids()) + ("not_explained",)
"""The stable cause ids a diagnosis names, in the library's tie-break order (rope_check.hpp)."""


@dataclass(frozen=True)
class Cause:
    """One cause that explains a failing dump: the reference re-computed with this fault matches it."""
    id: str  # one of CAUSE_IDS
    detail: str
    max_error_over_tolerance: float


@dataclass(frozen=True)
class WorstElement:
    """The dump's element farthest from the reference, relative to its tolerance (None: no such axis)."""
    token: Optional[int]
    position: Optional[int]
    head: Optional[int]
    pair: Optional[int]
    dim: Optional[int]
    got: float
    want: float
    error: float
    tolerance: float


@dataclass(frozen=True)
class CheckReport:
    """`posenc check --json` as an object; `json` is that dict, `text` what the CLI prints without --json."""
    verdict: str  # "pass" or "fail"
    target: str
    form: str  # rotated, cos_sin or inv_freq
    tolerance: str  # the rule applied, in words
    seq_len: int
    elements: int
    elements_over_tolerance: int
    max_error_over_tolerance: float
    worst: WorstElement
    diagnosis: Tuple[Cause, ...]  # best first; empty when it passes
    error_first_position: Optional[int]  # not_explained: where the error starts
    error_pairs: Tuple[int, ...]  # not_explained: the pairs with an element over
    json: Dict[str, Any]
    text: str

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def cause(self) -> Optional[str]:
        """The best cause's id, None when the dump passes."""
        return self.diagnosis[0].id if self.diagnosis else None

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Difference:
    """One difference between two descriptions, for a run of layers (None: the whole model)."""
    field: str
    a: str
    b: str
    affects: bool
    text: str
    layers: Optional[Tuple[int, int]]
    site: Optional[str]


@dataclass(frozen=True)
class DiffReport:
    """`posenc diff --json` as an object; `cost` is its cost dict (largest angle difference, first
    positions past float32 rounding and past 1e-3 rad)."""
    equivalent: bool
    a: str
    b: str
    seq_len: int
    summary: str
    differences: Tuple[Difference, ...]
    cost: Dict[str, Any]
    json: Dict[str, Any]
    text: str

    def __bool__(self) -> bool:
        return self.equivalent

    def __str__(self) -> str:
        return self.text


def _model_arg(model: Any, name: str) -> Tuple[str, str]:
    """(path or source name, config text or "") of a model description argument."""
    if isinstance(model, Mapping):
        return f"{name} (dict)", _config_json(model, name)
    if isinstance(model, (str, os.PathLike)):
        return _tensors.path_arg(model, name), ""
    raise TypeError(f"{name}: {type(model).__name__} is not a config dict or a path (config.json, GGUF, model folder)")


def _values(x: Any, name: str) -> Optional[tuple]:
    """The descriptor of a dump tensor, None for None: numpy float64 directly (the CLI reads float64
    .npy too), else as _tensors.describe gives it (float32, float16, bfloat16; no copy)."""
    if x is None:
        return None
    if isinstance(x, np.ndarray) and x.dtype == np.float64:
        if not x.dtype.isnative:
            raise ValueError(f"{name}: array is not in native byte order")
        ptr = int(x.__array_interface__["data"][0])
        _tensors.check_in_owner(x, ptr, name)
        return ptr, "float64", tuple(x.shape), tuple(s // 8 for s in x.strides)
    return _tensors.describe(x, name, writable=False)


def _positions(x: Any) -> tuple:
    """The descriptor of integer positions: int32 / int64 in native order read in place (any strides),
    other integer types as an int64 copy."""
    a = _tensors.int_array(x, "positions")
    if not (a.dtype in (np.int32, np.int64) and a.dtype.isnative and all(s % a.itemsize == 0 for s in a.strides)):
        a = _tensors.to_int64(a, "positions")
    ptr = int(a.__array_interface__["data"][0])
    _tensors.check_in_owner(a, ptr, "positions")
    return ptr, "int32" if a.dtype == np.int32 else "int64", tuple(a.shape), tuple(s // a.itemsize for s in a.strides)


def _dtype_arg(dtype: Any) -> str:
    if dtype is None:
        return ""
    text = str(dtype).replace("torch.", "")
    names = {"float32": "float32", "f32": "float32", "float16": "float16", "f16": "float16", "half": "float16",
             "bfloat16": "bfloat16", "bf16": "bfloat16"}
    if text not in names:
        raise ValueError(f"dtype: {_tensors.quote(dtype)} is not float32, float16 or bfloat16")
    return names[text]


def check(model: Any, before: Any = None, after: Any = None, positions: Any = None, *, cos: Any = None,
          sin: Any = None, inv_freq: Any = None, order: str = "tokens-first", dtype: Any = None,
          seq_len: Optional[int] = None, layer: Optional[int] = None, layer_type: Optional[str] = None,
          site: Optional[str] = None, assume_layout: Optional[str] = None) -> CheckReport:
    """`posenc check`: an engine's dump of one layer's RoPE against the model's reference.

    One dump form: rotated `before`/`after` ([T, H, D], or [H, T, D] with order="heads-first"; [T, D]
    one head; D the head size or the rotary window alone) with `positions` ([T], or [C, T] for
    multi-axis RoPE); `cos`/`sin` caches ([T, R] or [T, R/2]; positions optional, row i is position i
    without); or `inv_freq` ([R/2]). `dtype` is the engine's dtype when the values are stored wider (a
    bfloat16 engine's dump saved as float32: numpy has no bfloat16); by default the values' own.
    `layer`, `layer_type`, `site` select what the dump is of (default: the first RoPE layer, its only
    site). Returns the report; it raises only on bad input (ValueError naming it)."""
    if order not in ("tokens-first", "heads-first"):
        raise ValueError(f"order: {_tensors.quote(order)} is not tokens-first or heads-first")
    path, text = _model_arg(model, "model")
    pos_desc = None if positions is None else _positions(positions)
    js, txt = _posenc.check_rope(
        path, text, assume_layout or "", -1 if layer is None else _tensors.int_arg(layer, "layer", 0),
        layer_type or "", site or "", _values(before, "before"), _values(after, "after"), pos_desc,
        _values(cos, "cos"), _values(sin, "sin"), _values(inv_freq, "inv_freq"), order == "heads-first",
        _dtype_arg(dtype), 0 if seq_len is None else _tensors.int_arg(seq_len, "seq_len", 1))
    j = json.loads(js)
    w = j["worst"]
    return CheckReport(
        verdict=j["verdict"], target=j["target"], form=j["form"], tolerance=j["tolerance"], seq_len=j["seq_len"],
        elements=j["elements"], elements_over_tolerance=j["elements_over_tolerance"],
        max_error_over_tolerance=j["max_error_over_tolerance"],
        worst=WorstElement(**{k: w[k] for k in ("token", "position", "head", "pair", "dim", "got", "want", "error",
                                                 "tolerance")}),
        diagnosis=tuple(Cause(c["cause"], c["detail"], c["max_error_over_tolerance"]) for c in j["diagnosis"]),
        error_first_position=j.get("error_first_position"), error_pairs=tuple(j.get("error_pairs", ())),
        json=j, text=txt)


def diff(a: Any, b: Any, *, seq_len: Optional[int] = None, strict_pairing: bool = False,
         assume_layout: Optional[str] = None) -> DiffReport:
    """`posenc diff`: do descriptions `a` and `b` (config dicts or paths) induce the same positional
    computation, layer by layer and site by site? The report says what differs and from which
    position it matters; `bool(report)` is its equivalence."""
    pa, ta = _model_arg(a, "a")
    pb, tb = _model_arg(b, "b")
    js, txt = _posenc.diff_rope(pa, ta, pb, tb, 0 if seq_len is None else _tensors.int_arg(seq_len, "seq_len", 1),
                                bool(strict_pairing), assume_layout or "")
    j = json.loads(js)
    diffs = tuple(Difference(d["field"], d["a"], d["b"], d["affects"], d["text"],
                             tuple(d["layers"]) if "layers" in d else None, d.get("site"))
                  for d in j["differences"])
    return DiffReport(equivalent=j["equivalent"], a=j["a"], b=j["b"], seq_len=j["seq_len"], summary=j["summary"],
                      differences=diffs, cost=j["cost"], json=j, text=txt)
