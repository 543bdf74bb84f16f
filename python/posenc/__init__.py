"""posenc from Python: token embeddings and positions for decoder-only transformers.

The same library as the C++ API and the `posenc` CLI (one CMake project; this package calls the
compiled module `posenc._posenc`, a translation of include/posenc/posenc.hpp). numpy arrays and
torch CPU tensors (float32, float16, bfloat16) are rotated in place or into `out`, contiguous or
strided, never copied; the GIL is released while kernels run.

Example::

    import numpy as np, posenc
    rope = posenc.Rope("config.json")               # or a dict, a .gguf, a model folder
    q = np.random.randn(16, 32, 128).astype(np.float32)   # [tokens, heads, head_dim]
    rope.apply(q, positions=np.arange(16))           # in place

Errors: posenc's C++ Status becomes ValueError (invalid argument, out of range), OSError (a file
missing or corrupt), NotImplementedError (a valid but unsupported feature), with posenc's message.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _posenc
from . import _tensors
from . import hf  # noqa: F401  (posenc.hf.drop_in)

__all__ = [
    "Scheme", "Frequencies", "LayerSchedule", "Rope", "Model", "load_scheme", "set_num_threads", "num_threads", "simd_target",
    "sinusoidal_table", "alibi_slopes", "alibi_bias", "t5_buckets", "t5_bias", "shaw_indices", "golden",
    "text_vision_positions", "vision_patch_positions", "split_qkv",
]

PathLike = Union[str, "os.PathLike[str]"]
ConfigSource = Union[PathLike, Mapping[str, Any], "Scheme"]


def set_num_threads(n: int) -> None:
    """Threads for posenc's kernels called from Python (n <= 0: posenc's default pool, whose size is
    the CPU count or POSENC_NUM_THREADS; at most 1024: each is an OS thread, started now). Results are
    bit-identical for every thread count."""
    _posenc.set_num_threads(_tensors.int_arg(n, "n", -(1 << 31), _MAX_THREADS))


_MAX_THREADS = 1024


def num_threads() -> int:
    """The number of threads posenc's kernels use now."""
    return _posenc.num_threads()


def simd_target() -> str:
    """The SIMD target posenc's run-time dispatch picked on this CPU (AVX2, AVX3, ...)."""
    return _posenc.simd_target()


# ---- schemes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frequencies:
    """Per-pair angular frequencies (radians per position, float64) and the factor on cos and sin."""
    inv_freq: np.ndarray
    attention_scaling: float


@dataclass(frozen=True)
class LayerSchedule:
    """rope[i]: layer i applies RoPE (else NoPE); temperature[i]: its queries get the temperature."""
    rope: List[bool]
    rule: str
    temperature: List[bool]


def _config_json(config: Mapping[str, Any], what: str) -> str:
    """A config dict as JSON text for the C++ parser: numpy scalars and 1-d arrays become numbers and
    lists (as a config computed in Python holds them); any other value, or a key that is not a
    string, is a ValueError naming its key path (json's own TypeError names neither)."""
    def plain(v: Any, path: str) -> Any:
        if v is None or isinstance(v, (str, bool, int, float)):
            return v
        if isinstance(v, np.generic) and v.dtype.kind in "biuf":
            return v.item()
        if isinstance(v, np.ndarray) and v.dtype.kind in "biuf" and v.ndim <= 1:
            return v.tolist()
        if isinstance(v, Mapping):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise ValueError(f"{what}: key {k!r} in {path or 'the top level'} is not a string")
                out[k] = plain(x, f"{path}.{k}" if path else k)
            return out
        if isinstance(v, (list, tuple)):
            return [plain(x, f"{path}[{i}]") for i, x in enumerate(v)]
        raise ValueError(f"{what}: {path or 'the value'}: {type(v).__name__} is not a JSON value (a number, string, "
                         "bool, None, list or dict)")
    return json.dumps(plain(config, ""))


class Scheme:
    """A model's positional scheme (posenc's PositionScheme): its kind and, for RoPE, the pair layout,
    rotary window, base and scaling. Build one with `load_scheme` or the `from_*` constructors; its
    repr shows what `posenc inspect` shows."""

    def __init__(self, native: "_posenc.Scheme"):
        self._s = native

    # constructors
    @staticmethod
    def from_config(config: Union[PathLike, Mapping[str, Any]], *, layer_type: str = "",
                    model_type: Optional[str] = None, assume_layout: str = "") -> "Scheme":
        """A Hugging Face config.json (a path or a dict), in either spelling (rope_scaling or
        rope_parameters). `model_type` fills in a dict's missing model_type (it fixes the pairing of
        families such as gptj, cohere, glm4). `assume_layout` ("half" or "interleaved") states the pair
        layout of a model_type posenc does not know (`posenc families` lists those it does); without it
        such a config raises ValueError naming the model_type. Known families ignore it."""
        if isinstance(config, Mapping):
            c = dict(config)
            if model_type is not None and "model_type" not in c:
                c["model_type"] = model_type
            return Scheme(_posenc.Scheme.from_hf_json(_config_json(c, "config"), "config dict", layer_type, assume_layout))
        return Scheme(_posenc.Scheme.from_hf_config(os.fspath(config), layer_type, assume_layout))

    @staticmethod
    def from_gguf(path: PathLike, *, allow_default_freq_base: bool = True) -> "Scheme":
        """A GGUF file's metadata, with llama.cpp's per-architecture pairing."""
        return Scheme(_posenc.Scheme.from_gguf(os.fspath(path), allow_default_freq_base))

    @staticmethod
    def from_model(path: PathLike, *, allow_default_freq_base: bool = True, layer_type: str = "",
                   assume_layout: str = "") -> "Scheme":
        """Any model posenc opens: a GGUF file, a Hugging Face folder, safetensors with config.json
        (`assume_layout` as for from_config)."""
        return Scheme(_posenc.Scheme.from_model(os.fspath(path), allow_default_freq_base, layer_type, assume_layout))

    @staticmethod
    def from_ggml(params: Mapping[str, Any], head_dim: int) -> "Scheme":
        """ggml_rope_ext's parameters (n_dims, mode, freq_base, freq_scale, ext_factor, ...)."""
        return Scheme(_posenc.Scheme.from_rope_json(_config_json(dict(params), "params"), _tensors.int_arg(head_dim, "head_dim"),
                                                     "ggml params"))

    # what it is
    kind = property(lambda self: self._s.kind, doc="rope, learned, sinusoidal, alibi, t5_bucket or none")
    model_type = property(lambda self: self._s.model_type)
    num_heads = property(lambda self: self._s.num_heads)
    num_kv_heads = property(lambda self: self._s.num_kv_heads)
    hidden_size = property(lambda self: self._s.hidden_size)
    pairing = property(lambda self: self._s.pairing, doc="half (GPT-NeoX, HF Llama) or interleaved (GPT-J, Meta Llama)")
    head_dim = property(lambda self: self._s.head_dim)
    rotary_start = property(lambda self: self._s.rotary_start)
    rotary_dim = property(lambda self: self._s.rotary_dim)
    base = property(lambda self: self._s.base, doc="rope_theta")
    max_position_embeddings = property(lambda self: self._s.rope_max_position_embeddings or self._s.max_position_embeddings)
    scaling = property(lambda self: self._s.scaling, doc="the scaling's type and parameters, as a dict")
    multi_axis = property(lambda self: self._s.multi_axis, doc="M-RoPE sections (dict), or None for 1-D RoPE")
    source = property(lambda self: self._s.source)
    notes = property(lambda self: list(self._s.notes) + [n for n in self._s.rope_notes if n not in self._s.notes])
    alibi_variant = property(lambda self: self._s.alibi_variant)
    alibi_bias_max = property(lambda self: self._s.alibi_bias_max)
    t5_num_buckets = property(lambda self: self._s.t5_num_buckets)
    t5_max_distance = property(lambda self: self._s.t5_max_distance)
    t5_bidirectional = property(lambda self: self._s.t5_bidirectional)

    def with_pairing(self, pairing: str) -> "Scheme":
        """The same scheme with another pair layout (half or interleaved)."""
        return Scheme(self._s.with_pairing(pairing))

    def _seq_len(self, seq_len: Optional[int]) -> int:
        return _tensors.int_arg(seq_len, "seq_len") if seq_len is not None else int(self.max_position_embeddings)

    def frequencies(self, seq_len: Optional[int] = None) -> Frequencies:
        """Frequencies for a sequence of `seq_len` tokens (largest position + 1; default
        max_position_embeddings); only dynamic NTK and LongRoPE depend on it."""
        inv, scaling = self._s.frequencies(self._seq_len(seq_len))
        return Frequencies(inv, scaling)

    def unscaled_frequencies(self) -> np.ndarray:
        """base^(-2i/R): what the regimes are measured against."""
        return self._s.unscaled_frequencies()

    def pair_regimes(self, seq_len: Optional[int] = None) -> List[str]:
        """Per pair: extrapolated, interpolated, blended, scaled or unrotated."""
        return list(self._s.pair_regimes(self._seq_len(seq_len)))

    def pairs(self, seq_len: Optional[int] = None) -> List[Dict[str, Any]]:
        """Per RoPE pair what `posenc inspect --json` lists: pair, dims, frequency, wavelength
        (2*pi/frequency in tokens; None when unrotated), divisor (unscaled / scaled frequency; absent
        when unrotated) and regime."""
        f = self.frequencies(seq_len)
        plain = self.unscaled_frequencies()
        regimes = self.pair_regimes(seq_len)
        half, s, r = self.pairing == "half", self.rotary_start, self.rotary_dim
        out = []
        for i, w in enumerate(f.inv_freq.tolist()):
            p: Dict[str, Any] = {"pair": i, "dims": [s + i, s + i + r // 2] if half else [s + 2 * i, s + 2 * i + 1],
                                 "frequency": w, "wavelength": 2.0 * math.pi / w if w > 0 else None}
            if w > 0 and i < len(plain):
                p["divisor"] = float(plain[i]) / w
            p["regime"] = regimes[i]
            out.append(p)
        return out

    def nominal_factor(self) -> float:
        """The factor the scaling aims at (the 'interpolated' mark)."""
        return self._s.nominal_factor()

    def layer_schedule(self) -> "LayerSchedule":
        """Per decoder layer, whether it applies RoPE (Llama 4's no_rope_layers / interval, Cohere2's
        sliding layers, otherwise every layer) and whether its queries get Llama 4's temperature."""
        rope, rule, temperature = self._s.layer_schedule()
        return LayerSchedule(list(rope), rule, list(temperature))

    @property
    def attn_temperature(self) -> Dict[str, Any]:
        """The query temperature: tuning, floor_scale, attn_scale, offset (1: Llama 4, 0: Ministral 3) and
        every_layer (False: NoPE layers only, as Llama 4)."""
        return self._s.attn_temperature

    def attn_temperature_scales(self, positions: Any, *, exact: bool = False) -> np.ndarray:
        """1 + attn_scale * ln(1 + floor((p + offset) / floor_scale)) per position: float32 as HF computes
        it, or float64 (exact)."""
        return self._s.attn_temperature_scales(_ids(positions, "positions"), bool(exact))

    def multi_axis_plan(self, seq_len: Optional[int] = None) -> Tuple[np.ndarray, float, np.ndarray, int]:
        """M-RoPE: (inv_freq, attention_scaling, pair_component, num_components)."""
        return self._s.multi_axis_plan(self._seq_len(seq_len))

    def __repr__(self) -> str:
        lines = [f"source: {self.source or '(none)'}", f"scheme: {self.kind}"]
        if self.model_type:
            lines.append(f"model_type: {self.model_type}")
        for key in ("num_heads", "num_kv_heads", "hidden_size"):
            if getattr(self, key):
                lines.append(f"{key}: {getattr(self, key)}")
        if self.kind == "rope":
            lines += [f"spelling: {self._s.rope_spelling}", f"layout: {self.pairing}", f"head_dim: {self.head_dim}",
                      f"rotary_start: {self.rotary_start}", f"rotary_dim: {self.rotary_dim}", f"base: {self.base:g}"]
            if self.max_position_embeddings:
                lines.append(f"max_position_embeddings: {self.max_position_embeddings}")
            sc = self.scaling
            lines.append(f"scaling: {sc['type']}")
            for key in _SCALING_KEYS.get(sc["type"], ()):
                if sc.get(key) is not None and sc.get(key) != []:
                    lines.append(f"  {key}: {sc[key]}")
            if self.multi_axis:
                lines.append(f"multi_axis: {self.multi_axis}")
            try:
                f = self.frequencies()
                lines.append(f"seq_len: {self.max_position_embeddings} (max_position_embeddings)")
                lines.append(f"attention_scaling: {f.attention_scaling:.10g}")
                table = [f"{'pair':>5} {'dims':>11} {'frequency':>16} {'wavelength':>16} {'divisor':>10}  regime"]
                for p in self.pairs():
                    wl = "inf" if p["wavelength"] is None else f"{p['wavelength']:.6g}"
                    dv = f"{p['divisor']:.6g}" if "divisor" in p else "-"
                    dims = f"({p['dims'][0]},{p['dims'][1]})"
                    table.append(f"{p['pair']:5d} {dims:>11} {p['frequency']:16.9e} {wl:>16} {dv:>10}  {p['regime']}")
            except ValueError as e:  # a config that needs a sequence length posenc cannot guess
                lines.append(f"frequencies: {e}")
                table = []
        elif self.kind == "alibi":
            lines.append(f"alibi_variant: {self.alibi_variant}")
        elif self.kind == "t5_bucket":
            lines += [f"num_buckets: {self.t5_num_buckets}", f"max_distance: {self.t5_max_distance}",
                      f"bidirectional: {self.t5_bidirectional}"]
        for n in self.notes:
            lines.append(f"note: {n}")
        if self.kind == "rope":
            lines += table
        return "\n".join(lines)


# The parameters each scaling reads (what `posenc inspect` lists under "scaling").
_SCALING_KEYS = {
    "linear": ("factor",), "ntk": ("factor",), "dynamic": ("factor",),
    "yarn": ("beta_fast", "beta_slow", "factor", "original_max_position_embeddings", "truncate", "attention_factor",
             "mscale", "mscale_all_dim"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "longrope": ("factor", "original_max_position_embeddings", "attention_factor", "short_factor", "long_factor"),
    "proportional": ("factor", "partial_rotary_factor"),
    "ggml": ("freq_scale", "ext_factor", "attn_factor", "beta_fast", "beta_slow", "original_max_position_embeddings",
             "freq_factors"),
}


def load_scheme(source: ConfigSource, *, layer_type: str = "", allow_default_freq_base: bool = True,
                model_type: Optional[str] = None, assume_layout: str = "") -> Scheme:
    """A scheme from a dict (Hugging Face config), a config.json path, a .gguf file or a model folder
    (or a .safetensors / llama2.c file posenc opens). A Scheme is returned as it is. `assume_layout`
    ("half" or "interleaved") states the pair layout of a model_type posenc does not know."""
    if isinstance(source, Scheme):
        return source
    if isinstance(source, Mapping):
        return Scheme.from_config(source, layer_type=layer_type, model_type=model_type, assume_layout=assume_layout)
    path = os.fspath(source)
    if path.endswith(".gguf"):
        return Scheme.from_gguf(path, allow_default_freq_base=allow_default_freq_base)
    if path.endswith(".json"):
        return Scheme.from_config(path, layer_type=layer_type, assume_layout=assume_layout)
    return Scheme.from_model(path, allow_default_freq_base=allow_default_freq_base, layer_type=layer_type,
                             assume_layout=assume_layout)


# ---- RoPE ------------------------------------------------------------------------------------------

_MAX_TABLE_BYTES = 1 << 30


class Rope:
    """RoPE for one model: frequencies, a cos/sin table built once, and the kernels.

    `precision`: "reference" (float32 angles, as PyTorch and ggml compute them) or "exact" (float64
    angles, rounded once). `seq_len`: the sequence length for dynamic NTK and LongRoPE (default: each
    call's largest position + 1, as Hugging Face does); other scalings ignore it. `max_positions`: rows
    of the table (default max_position_embeddings, at most 32768: 16 MiB for 64 pairs); positions past
    it are computed on the fly from the same frequencies and precision (the same numbers in reference
    precision, within one float32 ulp of cos/sin in exact precision).
    """

    def __init__(self, scheme: ConfigSource, *, precision: str = "reference", seq_len: Optional[int] = None,
                 max_positions: Optional[int] = None, pairing: Optional[str] = None, **load_options: Any):
        self.scheme = load_scheme(scheme, **load_options)
        if pairing is not None:
            self.scheme = self.scheme.with_pairing(pairing)
        if self.scheme.kind != "rope":
            raise ValueError(f"{self.scheme.source or 'config'}: the scheme is {self.scheme.kind}, not rope")
        self.precision = precision
        if seq_len is not None:
            seq_len = _tensors.int_arg(seq_len, "seq_len", 0)
        self._fixed_seq_len = seq_len
        self._dynamic = self.scheme.scaling["type"] in ("dynamic", "longrope") and seq_len is None
        if max_positions is None:
            max_positions = min(int(self.scheme.max_position_embeddings or 0), 1 << 15)
        self._max_positions = _tensors.int_arg(max_positions, "max_positions", 0)
        table_bytes = self._max_positions * max(int(self.scheme.rotary_dim) // 2, 1) * 8
        if table_bytes > _MAX_TABLE_BYTES:  # cos and sin float32 per pair and position
            raise ValueError(f"max_positions: {self._max_positions} rows of {self.scheme.rotary_dim // 2} pairs is a "
                             f"{table_bytes} byte table, more than {_MAX_TABLE_BYTES} (later positions are computed "
                             "on the fly: a smaller table loses nothing)")
        self._tables: Dict[Tuple[float, ...], Any] = {}
        self._schedule: Optional[LayerSchedule] = None
        self._table = None if self._dynamic else self._build(self._fixed_seq_len or self.scheme.max_position_embeddings or 1)

    def _build(self, seq_len: int):
        f = self.scheme.frequencies(seq_len)
        key = (f.attention_scaling, *f.inv_freq.tolist())
        t = self._tables.get(key)
        if t is None:
            n = 0 if self._dynamic else self._max_positions
            t = _posenc.RopeTable.build(f.inv_freq.tolist(), f.attention_scaling, n, self.precision)
            if len(self._tables) > 8:
                self._tables.clear()
            self._tables[key] = t
        return t

    def _table_for(self, rows: Sequence[np.ndarray]):
        if self._table is not None:
            return self._table
        seq_len = max((int(r.max()) + 1 for r in rows if r.size), default=1)
        return self._build(seq_len)

    # what it computes
    def frequencies(self, seq_len: Optional[int] = None) -> Frequencies:
        """inv_freq and attention_scaling (at `seq_len`, for the schemes that depend on it)."""
        return self.scheme.frequencies(seq_len if seq_len is not None else self._fixed_seq_len)

    @property
    def inv_freq(self) -> np.ndarray:
        return self.frequencies().inv_freq

    @property
    def attention_scaling(self) -> float:
        return self.frequencies().attention_scaling

    def cos_sin(self, positions: Any) -> Tuple[np.ndarray, np.ndarray]:
        """float32 cos and sin [T, rotary_dim/2] of each position (times attention_scaling), exactly
        the numbers the kernels rotate with."""
        p = _tensors.int_array(positions, "positions")
        rows = _tensors.position_rows(p, 1, int(p.shape[-1]) if p.ndim else 1)
        return self._table_for(rows).cos_sin(rows[0])

    def _layout(self) -> Tuple[str, int, int, int]:
        s = self.scheme  # (read once per scheme object: each field is a call into the extension)
        cached = self.__dict__.get("_layout_of")
        if cached is None or cached[0] is not s:
            cached = (s, (s.pairing, s.head_dim, s.rotary_start, s.rotary_dim))
            self.__dict__["_layout_of"] = cached
        return cached[1]

    @staticmethod
    def _views_in_out(x: Any, positions: Any, out: Any, order: Optional[str]):
        views, tokens, _ = _tensors.heads_views(x, "x", order)
        batch = _tensors.batch_of(x, order)
        out_views: List[Any] = []
        if out is not None:
            _tensors.same_layout(x, out)
            out_views, _, _ = _tensors.heads_views(out, "out", order)
            if len(out_views) != len(views):  # folded one way and not the other: one view per element
                views, _, _ = _tensors.heads_views(x, "x", order, fold=False)
                out_views, _, _ = _tensors.heads_views(out, "out", order, fold=False)
            _tensors.check_no_partial_overlap(views, out_views, "out")
        rows = _tensors.position_rows(positions, batch, tokens, views=len(views))
        return views, rows, out_views

    def apply(self, x: Any, positions: Any, *, out: Any = None, order: Optional[str] = None,
              direction: str = "forward") -> Any:
        """Rotates queries or keys `x` at `positions`, in place (out=None) or into `out` (same shape and
        dtype; may be `x`). Returns the rotated tensor.

        x: [tokens, heads, head_dim] (order "thd", default for 3-d) or [heads, tokens, head_dim]
        ("htd"); [batch, heads, seq, head_dim] (order "bhsd", default for 4-d: Hugging Face's q and k,
        possibly a transposed view) or [batch, seq, heads, head_dim] ("bshd"). positions: [tokens], or
        [batch, seq] for 4-d x (KV-cache offsets, left padding: any non-negative positions).
        direction "backward" rotates by -angle (the gradient). Objects speaking DLPack are used
        without copies (and a torch/numpy view of the same memory is returned).
        """
        x, out = _tensors.as_tensor(x, "x"), None if out is None else _tensors.as_tensor(out, "out")
        views, rows, out_views = self._views_in_out(x, positions, out, order)
        _posenc.apply_rope(self._table_for(rows), *self._layout(), views, out_views, rows, direction, "x")
        return x if out is None else out

    def apply_reference(self, x: Any, positions: Any, *, out: Any = None, order: Optional[str] = None,
                        direction: str = "forward") -> Any:
        """The scalar reference kernel (float64 rotation, one rounding), same contract as `apply`."""
        x, out = _tensors.as_tensor(x, "x"), None if out is None else _tensors.as_tensor(out, "out")
        views, rows, out_views = self._views_in_out(x, positions, out, order)
        _posenc.apply_rope(self._table_for(rows), *self._layout(), views, out_views, rows, direction, "x", True)
        return x if out is None else out

    def apply_qk(self, q: Any, k: Any, positions: Any, *, order: Optional[str] = None,
                 direction: str = "forward") -> Tuple[Any, Any]:
        """Rotates q and k in place at the same positions (k may have fewer heads: grouped-query
        attention). Shapes and orders as `apply`."""
        q, k = _tensors.as_tensor(q, "q"), _tensors.as_tensor(k, "k")
        qv, tokens, _ = _tensors.heads_views(q, "q", order)
        kv, ktokens, _ = _tensors.heads_views(k, "k", order)
        batch = _tensors.batch_of(q, order)
        if ktokens != tokens or _tensors.batch_of(k, order) != batch or len(k.shape) != len(q.shape):
            raise ValueError(f"k: shape {list(k.shape)} does not match q's {list(q.shape)} in batch and tokens")
        if len(kv) != len(qv):  # folded one way and not the other: one view per element
            qv, _, _ = _tensors.heads_views(q, "q", order, fold=False)
            kv, _, _ = _tensors.heads_views(k, "k", order, fold=False)
        _tensors.check_no_partial_overlap(qv, kv, "k", "q", allow_same=False)
        rows = _tensors.position_rows(positions, batch, tokens, views=len(qv))
        _posenc.apply_rope_qk(self._table_for(rows), *self._layout(), qv, kv, rows, direction)
        return q, k

    def apply_kv_cache(self, q: Any, k: Any, v: Any, positions: Any, slots: Any, k_cache: Any, v_cache: Any, *,
                       q_out: Any = None, layer: int = 0, reference: bool = False) -> Any:
        """RoPE fused with the KV-cache write, one pass per token (posenc's ApplyRopeKvCache), as an
        engine runs it after its QKV projection: q_out[t] = RoPE(q[t]); k_cache[layer, slots[t]] =
        RoPE(k[t]) and v_cache[layer, slots[t]] = v[t], converted to the cache's type (nearest even;
        Q8_0 blocks as ggml's quantize_row_q8_0). Bit for bit `apply` on q and k followed by the copy.

        q: [T, heads, head_dim], k and v: [T, kv_heads, head_dim], one dtype (views of a fused
        projection output: `posenc.split_qkv`). positions, slots: [T] integers (a slot is a cache row:
        contiguous, paged or scattered alike); positions are 1-D, which for an M-RoPE model is its text
        tokens' rotation (t = h = w); image tokens' (t, h, w) rows go through `apply_multi_axis`. Caches: [layers, slots, kv_heads, head_dim] (or without
        layers) in float32 / float16 / bfloat16, or uint8 [layers, slots, kv_heads * head_dim / 32 * 34]
        for Q8_0; both of one kind. q_out: a [T, heads, head_dim] tensor of q's dtype (q itself for in
        place), allocated like q when None. Returns q_out. A slot outside the cache or written twice, a
        shape, dtype or overlap that does not fit: ValueError naming it, nothing written."""
        q, k, v = (_tensors.as_tensor(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v")))
        if q_out is None:
            q_out = q.new_empty(q.shape) if _tensors.is_torch(q) else np.empty_like(q)
        q_out = _tensors.as_tensor(q_out, "q_out")
        views = []
        for t, n in ((q, "q"), (k, "k"), (v, "v"), (q_out, "q_out")):
            if not isinstance(t, np.ndarray) and not _tensors.is_torch(t):
                raise ValueError(f"{n}: {type(t).__name__} is not a numpy array or a torch tensor")
            if len(t.shape) != 3:
                raise ValueError(f"{n}: shape {list(t.shape)} is not [tokens, heads, head_dim]")
            vs, _, _ = _tensors.heads_views(t, n, "thd", writable=(n == "q_out"))
            views.append(vs[0])
        kv_heads, head_dim = int(k.shape[1]), int(k.shape[2])
        pos = _tensors.int64_row(positions, "positions", int(q.shape[0]))
        sl = _tensors.int64_row(slots, "slots", int(q.shape[0]))
        kp, kn, kt, kl, ks = _tensors.cache_memory(k_cache, "k_cache", kv_heads, head_dim)
        vp, vn, vt, vl, vs_ = _tensors.cache_memory(v_cache, "v_cache", kv_heads, head_dim)
        if (vt, vl, vs_) != (kt, kl, ks):
            raise ValueError(f"v_cache: a {vt} cache of {vl} x {vs_} slots, k_cache a {kt} cache of {kl} x {ks}")
        layer = _tensors.int_arg(layer, "layer")
        # What is written (q_out, the caches) shares no memory with what is read (q, k, v) or with each
        # other; q_out may be q itself.
        q_v, k_v, v_v, qo_v = views
        _tensors.check_views_apart([k_v, v_v], [qo_v], "q_out", "k or v")
        if qo_v != q_v:
            _tensors.check_views_apart([q_v], [qo_v], "q_out", "q without being it")
        spans = [_tensors.view_span(vw) for vw in views]
        for name, span in (("k_cache", (kp, kp + kn)), ("v_cache", (vp, vp + vn))):
            _tensors.check_spans_apart([span], spans, name, "q, k, v or q_out")
        _posenc.apply_rope_kv_cache(self._table_for([pos]), *self._layout(), *views, pos, sl, kp, kn, vp, vn, kt, kl, ks,
                                    int(layer), bool(reference))
        return q_out

    def apply_multi_axis(self, x: Any, positions: Any, *, order: Optional[str] = None) -> Any:
        """Multi-axis RoPE (M-RoPE, 2-D vision) in place: positions [components, tokens] (or
        [batch, components, tokens]), e.g. the (t, h, w) rows of Qwen2-VL's get_rope_index."""
        views, tokens, _ = _tensors.heads_views(x, "x", order, fold=False)
        p = _tensors.int_array(positions, "positions")
        if p.ndim not in (2, 3) or p.shape[-1] != tokens or (p.ndim == 3 and p.shape[0] != len(views)):
            raise ValueError(f"positions: shape {list(p.shape)} is not [components, {tokens}] per batch element")
        p = _tensors.to_int64(p, "positions")
        rows = [p] * len(views) if p.ndim == 2 else [np.ascontiguousarray(p[b]) for b in range(p.shape[0])]
        if len(rows) != len(views) or any(r.ndim != 2 or r.shape[1] != tokens for r in rows):
            raise ValueError(f"positions: shape {list(p.shape)} is not [components, {tokens}] per batch element")
        seq_len = self._fixed_seq_len or max((int(r.max()) + 1 for r in rows if r.size), default=1)
        self.scheme._s.apply_multi_axis(seq_len, views, [r.reshape(-1) for r in rows], self.precision, "x")
        return x

    def apply_layer(self, q: Any, k: Any, positions: Any, layer: int, *, order: Optional[str] = None) -> Tuple[Any, Any]:
        """What decoder layer `layer` does to q and k, in place: RoPE on a RoPE layer, then the query
        temperature at `positions` where the schedule gives one there (Llama 4's attn_temperature_tuning
        on its NoPE layers; Ministral 3's llama_4_scaling_beta on every layer, after the rotation)."""
        if self._schedule is None:
            self._schedule = self.scheme.layer_schedule()
        sch = self._schedule
        layer = _tensors.int_arg(layer, "layer")
        if not 0 <= layer < len(sch.rope):
            raise ValueError(f"layer: {layer} is outside [0, {len(sch.rope)}) ({sch.rule})")
        if sch.rope[layer]:
            self.apply_qk(q, k, positions, order=order)
        if sch.temperature[layer]:
            views, tokens, _ = _tensors.heads_views(q, "q", order)
            rows = _tensors.position_rows(positions, _tensors.batch_of(q, order), tokens, views=len(views))
            _posenc.apply_query_temperature(views, [self.scheme.attn_temperature_scales(r) for r in rows])
        return q, k

    def apply_rotary_pos_emb(self, q: Any, k: Any, cos: Any = None, sin: Any = None, position_ids: Any = None,
                             unsqueeze_dim: int = 1, from_cos_sin: bool = True) -> Tuple[Any, Any]:
        """Hugging Face's `apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1)`,
        computed by posenc: returns new (q_embed, k_embed) and leaves q and k as they are.

        q, k: [batch, heads, seq, head_dim] (unsqueeze_dim=1) or [batch, seq, heads, head_dim]
        (unsqueeze_dim=2). Given HF's `cos` and `sin` ([batch, seq, rotary_dim], q's dtype): HF's
        formula on them, bit for bit (posenc.hf.apply_cos_sin). With position_ids only, or
        from_cos_sin=False, posenc computes the angles itself, from `position_ids` ([batch, seq] or
        [seq]) when given, else from the positions that `cos` and `sin` encode (recovered and
        checked: cos/sin that no integer position of this config gives raise ValueError). See
        posenc.hf for switching a model over in one line.
        """
        from . import hf  # noqa: PLC0415
        return hf.apply_rotary_pos_emb(self, q, k, cos, sin, position_ids, unsqueeze_dim, from_cos_sin)

    def __repr__(self) -> str:
        s = self.scheme
        return (f"Rope({s.scaling['type']}, {s.pairing}, R={s.rotary_dim}/{s.head_dim}, base={s.base:g}, "
                f"precision={self.precision})")


# ---- model files and embeddings ---------------------------------------------------------------


class Model:
    """A model file posenc opened (GGUF, safetensors, Hugging Face folder, llama2.c, .npy): its
    embedding and position tables, read in place from the memory map. Arrays it returns keep the file
    mapped while they live, whether or not the Model does."""

    def __init__(self, path: PathLike):
        self._m = _posenc.Model.open(os.fspath(path))

    path = property(lambda self: self._m.path)
    format = property(lambda self: self._m.format, doc="gguf, safetensors, hf-folder, llama2c or npy")
    architecture = property(lambda self: self._m.architecture)
    vocab_size = property(lambda self: self._m.vocab_size)
    d_model = property(lambda self: self._m.d_model)
    n_layers = property(lambda self: self._m.n_layers)
    n_heads = property(lambda self: self._m.n_heads)
    n_kv_heads = property(lambda self: self._m.n_kv_heads)
    context_length = property(lambda self: self._m.context_length)

    @property
    def tensors(self) -> List[Tuple[str, List[int], str]]:
        """(name, shape, stored type) of every tensor."""
        return [(n, list(s), t) for n, s, t in self._m.tensors]

    def tensor(self, name: str) -> np.ndarray:
        """A read-only numpy view of a float32 / float16 tensor in the file (bfloat16: its uint16 bits)."""
        if not isinstance(name, str):
            raise TypeError(f"name: {name!r} ({type(name).__name__}) is not a tensor name (str)")
        return self._m.tensor_array(name)

    def token_embedding(self) -> np.ndarray:
        """The token embedding table [vocab, d_model] as stored (read-only view, no copy)."""
        name = self._m.token_embedding_name()
        if name is None:
            raise OSError(f"model {self.path}: no token embedding table")
        return self._m.tensor_array(name)

    def embed(self, ids: Any, *, multiplier: float = 1.0, out_dtype: str = "float32") -> np.ndarray:
        """Rows of the token table for `ids` (any stored type, ggml blocks dequantized), times
        `multiplier` (Gemma: sqrt(d_model)): [len(ids), d_model] float32 (or bfloat16 bits as uint16)."""
        return self._m.lookup(self._lookup_ids(ids, "ids"), False, _real(multiplier, "multiplier"), out_dtype)

    def positions(self, positions: Any) -> np.ndarray:
        """Rows of the learned position table (GPT-2's wpe) for `positions`."""
        return self._m.lookup(self._lookup_ids(positions, "positions"), True, 1.0, "float32")

    def _lookup_ids(self, ids: Any, name: str) -> np.ndarray:
        a = _tensors.int_array(ids, name)
        _tensors.check_built_size(f"{name} x d_model", (a.size, max(int(self.d_model), 1)), 1 << 31)  # before any copy
        return _tensors.to_int64(a.reshape(-1), name)

    def scheme(self, **options: Any) -> Scheme:
        """The model's positional scheme (Scheme.from_model)."""
        return Scheme.from_model(self.path, **options)

    def __repr__(self) -> str:
        return (f"Model({self.path!r}, format={self.format}, architecture={self.architecture or '?'}, "
                f"vocab={self.vocab_size}, d_model={self.d_model}, layers={self.n_layers}, heads={self.n_heads})")


def _ids(ids: Any, name: str = "ids") -> np.ndarray:
    return _tensors.to_int64(_tensors.int_array(ids, name).reshape(-1), name)


# ---- absolute and relative schemes ------------------------------------------------------------


def sinusoidal_table(positions: Any, d_model: int, layout: str = "interleaved", base: float = 10000.0) -> np.ndarray:
    """Vaswani et al.'s sinusoidal positions [T, d_model] float32: layout "interleaved" (sin at even
    dims: Vaswani, XLM) or "concat" ([sin | cos]: fairseq, Marian)."""
    p = _ids(positions, "positions")
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
    return _posenc.t5_buckets(_ids(relative_positions, "relative_positions"), bool(bidirectional),
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


def split_qkv(qkv: Any, num_heads: int, num_kv_heads: int, head_dim: int) -> Tuple[Any, Any, Any]:
    """Views (no copy) q [T, num_heads, head_dim], k and v [T, num_kv_heads, head_dim] of a fused QKV
    projection output [T, (num_heads + 2 * num_kv_heads) * head_dim] (q heads, then k, then v in each
    row), for Rope.apply_kv_cache. ValueError when the shape does not split or a view would need a copy."""
    qkv = _tensors.as_tensor(qkv, "qkv")
    if not isinstance(qkv, np.ndarray) and not _tensors.is_torch(qkv):
        raise ValueError(f"qkv: {type(qkv).__name__} is not a numpy array or a torch tensor")
    num_heads = _tensors.int_arg(num_heads, "num_heads", 1, 1 << 31)
    num_kv_heads = _tensors.int_arg(num_kv_heads, "num_kv_heads", 1, 1 << 31)
    head_dim = _tensors.int_arg(head_dim, "head_dim", 1, 1 << 31)
    width = (num_heads + 2 * num_kv_heads) * head_dim
    if len(qkv.shape) != 2 or int(qkv.shape[1]) != width:
        raise ValueError(f"qkv: shape {list(qkv.shape)} is not [tokens, ({num_heads} + 2 x {num_kv_heads}) x {head_dim}]")
    heads = int(num_heads) + 2 * int(num_kv_heads)
    if _tensors.is_torch(qkv):
        try:
            x = qkv.view(qkv.shape[0], heads, int(head_dim))
        except RuntimeError as e:
            raise ValueError(f"qkv: strides {list(qkv.stride())} cannot be viewed as heads without a copy") from e
    else:
        x = np.asarray(qkv)
        if x.strides[1] != x.itemsize:
            raise ValueError(f"qkv: strides {list(x.strides)} (bytes) cannot be viewed as heads without a copy")
        x = np.lib.stride_tricks.as_strided(x, (x.shape[0], heads, int(head_dim)),
                                            (x.strides[0], int(head_dim) * x.itemsize, x.itemsize))
    h, kv = int(num_heads), int(num_kv_heads)
    return x[:, :h], x[:, h:h + kv], x[:, h + kv:]


# ---- vision-language position rows -------------------------------------------------------------

Span = Union[int, Mapping[str, Any]]


def text_vision_positions(layout: Sequence[Span], spatial_merge_size: int = 2, *, start: int = 0,
                          tokens_per_second: Optional[float] = None) -> Tuple[np.ndarray, int]:
    """The (t, h, w) M-RoPE position rows [3, T] int64 of a token layout, as Qwen2-VL / Qwen2.5-VL /
    Qwen3-VL's get_rope_index computes them, and the next free position (a decode step's position on all
    three rows; HF's rope_deltas = next - T).

    Each span is an int (that many text tokens) or a dict as the golden cases write it:
    {"type": "text", "tokens": n} or {"type": "image" | "video" | "frame", "grid_thw": [t, h, w]} with
    the grid in patches before the spatial merge (image_grid_thw / video_grid_thw). Time: without
    tokens_per_second (Qwen2-VL, Qwen3-VL) frame f is at t = f; with it (Qwen2.5-VL's
    vision_config.tokens_per_second) a video's frame f is at trunc(f * second_per_grid_t *
    tokens_per_second) in float32 (the span's "second_per_grid_t", default 1.0) and an image's at 0.
    ValueError names the span and field of a bad layout."""
    spans = []
    if isinstance(layout, (str, bytes, Mapping)) or not hasattr(layout, "__iter__"):
        raise TypeError(f"layout: {type(layout).__name__} is not a sequence of spans")
    for i, s in enumerate(layout):
        if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            spans.append((False, _tensors.int_arg(s, f"span {i}: text tokens"), 1, 0, 0, 1.0, 1.0))
            continue
        if not isinstance(s, Mapping) or "type" not in s:
            raise ValueError(f"span {i}: {s!r} is neither a text token count nor a dict with a 'type'")
        kind = s["type"]
        if kind == "text":
            if "tokens" not in s:
                raise ValueError(f"span {i}: a text span without 'tokens'")
            spans.append((False, _tensors.int_arg(s["tokens"], f"span {i}: tokens"), 1, 0, 0, 1.0, 1.0))
            continue
        if kind not in ("image", "video", "frame"):
            raise ValueError(f"span {i}: type {kind!r} (expected text, image, video or frame)")
        grid = s.get("grid_thw", ())
        if isinstance(grid, (str, bytes)) or not hasattr(grid, "__len__") or len(grid) != 3:
            raise ValueError(f"span {i}: grid_thw {grid!r} is not [t, h, w]")
        g = [_tensors.int_arg(v, f"span {i}: grid_thw[{j}]") for j, v in enumerate(grid)]
        spt, tps = 1.0, 1.0
        if tokens_per_second is not None:
            tps = _real(tokens_per_second, "tokens_per_second")
            spt = 0.0 if kind == "image" else _real(s.get("second_per_grid_t", 1.0), f"span {i}: second_per_grid_t")
        spans.append((True, 0, g[0], g[1], g[2], spt, tps))
    rows, nxt = _posenc.text_vision_positions(spans, _tensors.int_arg(spatial_merge_size, "spatial_merge_size"),
                                              _tensors.int_arg(start, "start"))
    return rows, int(nxt)


def vision_patch_positions(grid_thw: Sequence[int], spatial_merge_size: int = 2) -> np.ndarray:
    """The (h, w) rows [2, t*h*w] int64 of a vision encoder's 2-D RoPE, in the order the encoder sees its
    patches: spatial_merge_size windows row-major, row-major inside each, repeated per frame (Qwen2-VL);
    spatial_merge_size 1 is plain row-major (Pixtral)."""
    if isinstance(grid_thw, (str, bytes)) or not hasattr(grid_thw, "__len__") or len(grid_thw) != 3:
        raise ValueError(f"grid_thw {grid_thw!r} is not [t, h, w]")
    g = [_tensors.int_arg(v, f"grid_thw[{j}]") for j, v in enumerate(grid_thw)]
    return _posenc.vision_patch_positions(g[0], g[1], g[2], _tensors.int_arg(spatial_merge_size, "spatial_merge_size"))


def _real(x: Any, name: str) -> float:
    """A real number argument (not a string or bool): TypeError naming it otherwise."""
    if isinstance(x, (bool, np.bool_, str, bytes)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: {x!r} ({type(x).__name__}) is not a number")
    return float(x)


def golden(folder: PathLike, *, cli: Optional[PathLike] = None) -> Tuple[int, str]:
    """Runs every golden case under `folder` through the CLI's `posenc golden` (the runner lives in the
    CLI, not the library). Returns (exit code, output). `cli`: the posenc executable (default: the
    POSENC_CLI environment variable, else `posenc` on PATH)."""
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    exe = os.fspath(cli) if cli is not None else os.environ.get("POSENC_CLI") or shutil.which("posenc")
    if not exe:
        raise OSError("posenc golden: no CLI found (set POSENC_CLI or put posenc on PATH)")
    r = subprocess.run([exe, "golden", os.fspath(folder)], capture_output=True, text=True, check=False)
    return r.returncode, r.stdout + r.stderr
