"""Schemes: a model's positional scheme as the library reads it (posenc's PositionScheme)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _posenc, _tensors

PathLike = Union[str, "os.PathLike[str]"]
ConfigSource = Union[PathLike, Mapping[str, Any], "Scheme"]


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
    string, is a ValueError naming its key path (json's own TypeError names neither); nesting deeper
    than posenc's JSON bound (_posenc.MAX_JSON_NESTING, the C++ kMaxJsonNesting) is refused before
    any recursion could run out of stack (a cycle included)."""
    def plain(v: Any, path: str, depth: int = 0) -> Any:
        if depth > _posenc.MAX_JSON_NESTING:
            raise ValueError(f"{what}: {_tensors.cap(path)} is nested more than {_posenc.MAX_JSON_NESTING} levels deep")
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
                    raise ValueError(f"{what}: key {_tensors.quote(k)} in {_tensors.cap(path) if path else 'the top level'} "
                                     "is not a string")
                out[k] = plain(x, f"{path}.{k}" if path else k, depth + 1)
            return out
        if isinstance(v, (list, tuple)):
            return [plain(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
        raise ValueError(f"{what}: {_tensors.cap(path) if path else 'the value'}: {type(v).__name__} is not a JSON value "
                         "(a number, string, bool, None, list or dict)")
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
                    model_type: Optional[str] = None, assume_layout: str = "", layer: int = -1,
                    site: str = "") -> "Scheme":
        """A Hugging Face config.json (a path or a dict), in either spelling (rope_scaling or
        rope_parameters). `model_type` fills in a dict's missing model_type (it fixes the pairing of
        families such as gptj, cohere, glm4). `assume_layout` ("half" or "interleaved") states the pair
        layout of a model_type posenc does not know (`posenc families` lists those it does); without it
        such a config raises ValueError naming the model_type. Known families ignore it. `layer` (a decoder
        layer index) and `site` (attention, mla, indexer, attention_output, compressor) choose which of the
        model's rotations the scheme describes; a layer without RoPE gives kind "none"."""
        layer = _tensors.int_arg(layer, "layer")
        if isinstance(config, Mapping):
            c = dict(config)
            if model_type is not None and "model_type" not in c:
                c["model_type"] = model_type
            return Scheme(_posenc.Scheme.from_hf_json(_config_json(c, "config"), "config dict", layer_type, assume_layout,
                                                      layer, site))
        return Scheme(_posenc.Scheme.from_hf_config(_tensors.path_arg(config, "config"), layer_type, assume_layout,
                                                    layer, site))

    @staticmethod
    def from_gguf(path: PathLike, *, allow_default_freq_base: bool = True) -> "Scheme":
        """A GGUF file's metadata, with llama.cpp's per-architecture pairing."""
        return Scheme(_posenc.Scheme.from_gguf(_tensors.path_arg(path, "path"), allow_default_freq_base))

    @staticmethod
    def from_model(path: PathLike, *, allow_default_freq_base: bool = True, layer_type: str = "",
                   assume_layout: str = "") -> "Scheme":
        """Any model posenc opens: a GGUF file, a Hugging Face folder, safetensors with config.json
        (`assume_layout` as for from_config)."""
        return Scheme(_posenc.Scheme.from_model(_tensors.path_arg(path, "path"), allow_default_freq_base, layer_type, assume_layout))

    @staticmethod
    def from_ggml(params: Mapping[str, Any], head_dim: int) -> "Scheme":
        """ggml_rope_ext's parameters (n_dims, mode, freq_base, freq_scale, ext_factor, ...)."""
        return Scheme(_posenc.Scheme.from_rope_json(_config_json(dict(params), "params"), _tensors.int_arg(head_dim, "head_dim"),
                                                     "ggml params"))

    # what it is
    kind = property(lambda self: self._s.kind, doc="rope, learned, sinusoidal, alibi, t5_bucket or none")
    model_type = property(lambda self: self._s.model_type)
    site = property(lambda self: self._s.site, doc="the RoPE site described: attention, mla, indexer, ...")
    sites = property(lambda self: list(self._s.sites), doc="the RoPE sites of the model's attention layers")
    rotation_sign = property(lambda self: self._s.rotation_sign, doc="-1 where the site rotates backwards")
    qk_norm = property(lambda self: self._s.qk_norm,
                       doc="the norm of q and k before RoPE: none, per_head, per_head_float32, "
                           "per_head_one_plus_weight, whole_projection, whole_projection_cast, per_head_layernorm")
    rope_keys = property(lambda self: list(self._s.rope_keys), doc="keyed parameter sets (main / compress, ...)")
    rope_key = property(lambda self: self._s.rope_key, doc="the parameter set described")
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
    scaling_params = property(lambda self: list(self._s.scaling_params),
                              doc="(key, value) of each parameter the scaling uses, as `posenc inspect` lists them")
    frequencies_depend_on_seq_len = property(lambda self: self._s.frequencies_depend_on_seq_len,
                                             doc="whether the frequencies change with the sequence length "
                                                 "(dynamic NTK, LongRoPE, ...): the library's answer")
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
        """Per RoPE pair what `posenc inspect --json` lists (the library's DescribeRopePairs): pair,
        dims, frequency, wavelength (2*pi/frequency in tokens; None when unrotated), divisor (unscaled /
        scaled frequency; absent when unrotated), regime, and for multi-axis RoPE its component."""
        pairs, _ = self._s.pairs(self._seq_len(seq_len))
        return [dict(p, dims=list(p["dims"])) for p in pairs]

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
        return self._s.attn_temperature_scales(_tensors.ids_arg(positions, "positions"), bool(exact))

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
            lines.append(f"scaling: {self.scaling['type']}")
            for key, value in self.scaling_params:  # (the scaling's row of the library's table)
                lines.append(f"  {key}: {value}")
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


def load_scheme(source: ConfigSource, *, layer_type: str = "", allow_default_freq_base: bool = True,
                model_type: Optional[str] = None, assume_layout: str = "", layer: int = -1,
                site: str = "") -> Scheme:
    """A scheme from a dict (Hugging Face config), a config.json path, a .gguf file or a model folder
    (or a .safetensors / llama2.c file posenc opens). A Scheme is returned as it is. `assume_layout`
    ("half" or "interleaved") states the pair layout of a model_type posenc does not know."""
    if isinstance(source, Scheme):
        return source
    if isinstance(source, Mapping):
        return Scheme.from_config(source, layer_type=layer_type, model_type=model_type, assume_layout=assume_layout,
                                  layer=layer, site=site)
    path = _tensors.path_arg(source, "source")
    if path.endswith(".gguf"):
        return Scheme.from_gguf(path, allow_default_freq_base=allow_default_freq_base)
    if path.endswith(".json"):
        return Scheme.from_config(path, layer_type=layer_type, assume_layout=assume_layout, layer=layer, site=site)
    return Scheme.from_model(path, allow_default_freq_base=allow_default_freq_base, layer_type=layer_type,
                             assume_layout=assume_layout)
