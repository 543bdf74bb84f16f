"""RoPE for one model: Rope (a cos/sin table built once, and the kernels), and split_qkv."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _posenc, _tensors
from ._scheme import ConfigSource, Frequencies, LayerSchedule, load_scheme

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
        self._dynamic = self.scheme.frequencies_depend_on_seq_len and seq_len is None
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
        # The decode-speed calls (a fixed table): one C++ entry per call reads the tensors themselves
        # (_posenc.RopeCall); it answers None for anything out of the ordinary, and the general path
        # below runs (and words any error). Kept with the scheme it was made for.
        self._call = None if self._table is None else (
            self.scheme, _posenc.RopeCall(self._table, *self._layout(), int(self.scheme.rotation_sign)))

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

    def _site_direction(self, direction: str) -> str:
        """The kernel's direction: the one asked for, reversed at a site that rotates backwards
        (DeepSeek-V4's attention output: scheme.rotation_sign -1)."""
        if self.scheme.rotation_sign >= 0 or direction not in ("forward", "backward"):
            return direction
        return "backward" if direction == "forward" else "forward"

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
        return self._apply(x, positions, out, order, direction, False)

    def apply_reference(self, x: Any, positions: Any, *, out: Any = None, order: Optional[str] = None,
                        direction: str = "forward") -> Any:
        """The scalar reference kernel (float64 rotation, one rounding), same contract as `apply`."""
        return self._apply(x, positions, out, order, direction, True)

    def _apply(self, x: Any, positions: Any, out: Any, order: Optional[str], direction: str,
               reference: bool) -> Any:
        """`apply` / `apply_reference`: RopeCall's fast path for this scheme, else `_apply_general`."""
        call = self._call
        if call is not None and call[0] is self.scheme:
            r = call[1].apply(x, positions, out, order, direction, reference)
            if r is not None:
                return r
        return self._apply_general(x, positions, out, order, direction, reference)

    def _apply_general(self, x: Any, positions: Any, out: Any, order: Optional[str], direction: str,
                       reference: bool) -> Any:
        """`apply` / `apply_reference` past RopeCall's fast path: any tensor, order and positions, each
        error worded here."""
        x, out = _tensors.as_tensor(x, "x"), None if out is None else _tensors.as_tensor(out, "out")
        views, rows, out_views = self._views_in_out(x, positions, out, order)
        _posenc.apply_rope(self._table_for(rows), *self._layout(), views, out_views, rows,
                           self._site_direction(direction), "x", reference)
        return x if out is None else out

    def apply_qk(self, q: Any, k: Any, positions: Any, *, order: Optional[str] = None,
                 direction: str = "forward") -> Tuple[Any, Any]:
        """Rotates q and k in place at the same positions (k may have fewer heads: grouped-query
        attention). Shapes and orders as `apply`."""
        call = self._call
        if call is not None and call[0] is self.scheme:
            r = call[1].apply_qk(q, k, positions, order, direction)
            if r is not None:
                return r
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
        _posenc.apply_rope_qk(self._table_for(rows), *self._layout(), qv, kv, rows, self._site_direction(direction))
        return q, k

    def apply_kv_cache(self, q: Any, k: Any, v: Any, positions: Any, slots: Any, k_cache: Any, v_cache: Any, *,
                       q_out: Any = None, layer: int = 0, reference: bool = False, cache_type: Optional[str] = None,
                       k_scale: Any = None, v_scale: Any = None, q_norm: Any = None, k_norm: Any = None,
                       norm_eps: Any = None, norm: Optional[str] = None) -> Any:
        """RoPE fused with the KV-cache write, one pass per token (posenc's ApplyRopeKvCache), as an
        engine runs it after its QKV projection: q_out[t] = RoPE(q[t]); k_cache[layer, slots[t]] =
        RoPE(k[t]) and v_cache[layer, slots[t]] = v[t], converted to the cache's type (nearest even;
        Q8_0 blocks as ggml's quantize_row_q8_0). Bit for bit `apply` on q and k followed by the copy.

        q: [T, heads, head_dim], k and v: [T, kv_heads, head_dim], one dtype (views of a fused
        projection output: `posenc.split_qkv`). positions, slots: [T] integers (a slot is a cache row:
        contiguous, paged or scattered alike); positions are 1-D, which for an M-RoPE model is its text
        tokens' rotation (t = h = w); image tokens' (t, h, w) rows go through `apply_multi_axis`. Caches: [layers, slots, kv_heads, head_dim] (or without
        layers) in float32 / float16 / bfloat16, or uint8 [layers, slots, kv_heads * head_dim / 32 * 34]
        for Q8_0; both of one kind. float8 caches (vLLM's fp8 KV cache: code = fp8(x / scale), PyTorch's
        float8_e4m3fn / float8_e5m2 conversion) are torch float8 tensors, or uint8 tensors of the float
        caches' shape with cache_type="float8_e4m3fn" / "float8_e5m2"; k_scale / v_scale: one float (per
        tensor) or kv_heads floats (per head), 1 when None. q_out: a [T, heads, head_dim] tensor of q's dtype (q itself for in
        place), allocated like q when None. QK-norm (Qwen3, Gemma 3, OLMo 2, ...): q_norm / k_norm, the
        attention's q_norm / k_norm weights (head_dim values; num_heads * head_dim for whole-projection
        norms; rounded to float32), RMS-normalise q and k before RoPE in the same pass, bit for bit
        posenc's norm then `apply`; `norm` is the convention (default: the scheme's `qk_norm`, from the
        model's family: per_head, per_head_float32, per_head_one_plus_weight (Gemma's 1 + w),
        whole_projection, whole_projection_cast) and `norm_eps` the config's rms_norm_eps (required with a
        weight). Returns q_out. A slot outside the cache or written twice, a shape, dtype, weight or overlap
        that does not fit: ValueError naming it, nothing written."""
        call = self._call
        if call is not None and call[0] is self.scheme:
            normed = q_norm is not None or k_norm is not None
            r = call[1].apply_kv_cache(q, k, v, positions, slots, k_cache, v_cache, q_out, layer, reference, q_norm,
                                       k_norm, norm_eps, (self.scheme.qk_norm if norm is None else norm) if normed
                                       else norm, cache_type, k_scale, v_scale)
            if r is not None:
                return r
        (qw, kw), eps, convention = _norm_args(self.scheme.qk_norm, ((q_norm, "q_norm"), (k_norm, "k_norm")),
                                               norm_eps, norm)
        q, k, v = (_tensors.as_tensor(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v")))
        q_out = _q_out_like(q, q_out)
        views = [_thd_view(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v"), (q_out, "q_out"))]
        kv_heads, head_dim = int(k.shape[1]), int(k.shape[2])
        pos = _tensors.int64_row(positions, "positions", int(q.shape[0]))
        sl = _tensors.int64_row(slots, "slots", int(q.shape[0]))
        kp, kn, kt, kl, ks = _tensors.cache_memory(k_cache, "k_cache", kv_heads, head_dim, cache_type)
        vp, vn, vt, vl, vs_ = _tensors.cache_memory(v_cache, "v_cache", kv_heads, head_dim, cache_type)
        scales = [_tensors.cache_scale(s, n) for s, n in ((k_scale, "k_scale"), (v_scale, "v_scale"))]
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
                                    int(layer), bool(reference), k_scale=scales[0], v_scale=scales[1], q_norm=qw,
                                    k_norm=kw, norm_eps=eps, norm=convention)
        return q_out

    def apply_mla_cache(self, kv_c: Any, k_pe: Any, positions: Any, slots: Any, cache: Any, *, q: Any = None,
                        q_out: Any = None, layer: int = 0, kv_norm: Any = None, norm_eps: Any = None,
                        norm: str = "per_head", reference: bool = False, cache_type: Optional[str] = None,
                        scale: Any = None) -> Any:
        """The MLA cache row (DeepSeek-V2/V3, Kimi K2: posenc's ApplyMlaRopeCache), one pass per token:
        cache[layer, slots[t]] = [RMSNorm(kv_c[t]) | RoPE(k_pe[t])] and, with q, each query head's rope
        window (the scheme's: its last rotary_dim values, interleaved pairs for DeepSeek) rotated into q_out.

        kv_c: [T, kv_lora_rank], k_pe: [T, rope_dim] (or [T, 1, ...]; views of the kv_a projection output
        as they are), q: [T, heads, head_dim] (qk_nope_head_dim + qk_rope_head_dim), one dtype (float32,
        float16, bfloat16). kv_norm: kv_a_layernorm's weight (kv_lora_rank values), `norm` its convention
        (DeepSeek's RMSNorm: per_head, over the whole latent), `norm_eps` the config's rms_norm_eps
        (required with the weight); without it the latent is copied. cache: [layers, slots, kv_lora_rank +
        rope_dim] or [slots, ...] in float32 / float16 / bfloat16 (or torch float8), uint8 Q8_0 rows or
        float8 codes with cache_type, scale: float8's one divisor (1 when None). q_out: q's shape and
        dtype (q itself for in place), allocated like q when None. Returns q_out (None without q). Anything
        that does not fit: ValueError naming it, nothing written."""
        call = self._call
        if call is not None and call[0] is self.scheme:
            r = call[1].apply_mla_cache(kv_c, k_pe, positions, slots, cache, q, q_out, layer, reference, kv_norm,
                                        norm_eps, norm if kv_norm is not None else None, cache_type, scale)
            if r is not None:
                return r[0]
        (kvw,), eps, convention = _norm_args("none", ((kv_norm, "kv_norm"),), norm_eps,
                                             norm if kv_norm is not None else None)
        kv_c, k_pe = (_tensors.as_tensor(t, n) for t, n in ((kv_c, "kv_c"), (k_pe, "k_pe")))
        views = []
        for t, n in ((kv_c, "kv_c"), (k_pe, "k_pe")):
            if not isinstance(t, np.ndarray) and not _tensors.is_torch(t):
                raise ValueError(f"{n}: {type(t).__name__} is not a numpy array or a torch tensor")
            if len(t.shape) == 2:
                t = t[:, None, :] if isinstance(t, np.ndarray) else t.unsqueeze(1)
            if len(t.shape) != 3 or int(t.shape[1]) != 1:
                raise ValueError(f"{n}: shape {list(t.shape)} is not [tokens, values] or [tokens, 1, values]")
            vs, _, _ = _tensors.heads_views(t, n, "thd", writable=False)
            views.append(vs[0])
        q_views: List[Any] = [(), ()]
        if q is not None:
            q = _tensors.as_tensor(q, "q")
            q_out = _q_out_like(q, q_out)
            q_views = [_thd_view(q, "q"), _thd_view(q_out, "q_out")]
            if q_views[1] != q_views[0]:
                _tensors.check_views_apart([q_views[0]], [q_views[1]], "q_out", "q without being it")
            _tensors.check_views_apart(views, [q_views[1]], "q_out", "kv_c or k_pe")
        elif q_out is not None:
            raise ValueError("q_out: given without q")
        rank, rope_dim = int(kv_c.shape[-1]), self._layout()[3]  # the cache row: the latent, the scheme's rope dims
        tokens = int(kv_c.shape[0])
        pos = _tensors.int64_row(positions, "positions", tokens)
        sl = _tensors.int64_row(slots, "slots", tokens)
        ptr, nbytes, ct, layers, nslots = _tensors.cache_memory(cache, "cache", 1, rank + rope_dim, cache_type,
                                                                heads_axis=False)
        spans = [_tensors.view_span(vw) for vw in views + [v for v in q_views if v]]
        _tensors.check_spans_apart([(ptr, ptr + nbytes)], spans, "cache", "kv_c, k_pe, q or q_out")
        _posenc.apply_mla_rope_cache(self._table_for([pos]), *self._layout(), views[0], views[1], tuple(q_views[0]),
                                     tuple(q_views[1]), pos, sl, ptr, nbytes, ct, layers, nslots,
                                     _tensors.int_arg(layer, "layer"), bool(reference), kvw, eps, convention,
                                     _tensors.cache_scale(scale, "scale"))
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
        # (at most 2^31: a larger position is refused by the library, naming it, not by the int64 seq_len)
        seq_len = self._fixed_seq_len or min(max((int(r.max()) + 1 for r in rows if r.size), default=1), 1 << 31)
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
        # Everything checked and every scale computed before q or k is written.
        temperature = None
        if sch.temperature[layer]:
            q = _tensors.as_tensor(q, "q")
            views, tokens, _ = _tensors.heads_views(q, "q", order)
            rows = _tensors.position_rows(positions, _tensors.batch_of(q, order), tokens, views=len(views))
            scales = [self.scheme.attn_temperature_scales(r) for r in rows]
            for sc in scales:
                bad = np.flatnonzero(~np.isfinite(sc))
                if bad.size:
                    raise ValueError(f"attn_temperature: the scale at token {int(bad[0])} is {sc[bad[0]]} (the "
                                     f"temperature {self.scheme.attn_temperature} overflows float32 there); q and k unchanged")
            temperature = (views, scales)
        if sch.rope[layer]:
            q, k = self.apply_qk(q, k, positions, order=order)
        if temperature is not None:
            _posenc.apply_query_temperature(*temperature)
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


def _q_out_like(q: Any, q_out: Any) -> Any:
    """q_out as given (as a tensor), or a new uninitialised one like q."""
    if q_out is None:
        q_out = q.new_empty(q.shape) if _tensors.is_torch(q) else np.empty_like(q)
    return _tensors.as_tensor(q_out, "q_out")


def _thd_view(t: Any, name: str) -> Any:
    """The one [tokens, heads, head_dim] view of a 3-d numpy array or torch tensor (writable for q_out)."""
    if not isinstance(t, np.ndarray) and not _tensors.is_torch(t):
        raise ValueError(f"{name}: {type(t).__name__} is not a numpy array or a torch tensor")
    if len(t.shape) != 3:
        raise ValueError(f"{name}: shape {list(t.shape)} is not [tokens, heads, head_dim]")
    vs, _, _ = _tensors.heads_views(t, name, "thd", writable=(name == "q_out"))
    return vs[0]


def _norm_args(scheme_norm: str, weights: Sequence[Tuple[Any, str]], eps: Any,
               norm: Optional[str]) -> Tuple[List[list], float, str]:
    """The kernel's norm arguments: each weight as float values ([] for None), eps and the convention
    ("none" without a weight). A convention or eps without a weight, a weight with no convention (the
    scheme's none and no `norm`) or no eps, an empty weight: ValueError naming it."""
    given = [(w, n) for w, n in weights if w is not None]
    if not given:
        if norm is not None or eps is not None:
            raise ValueError(f"{'norm' if norm is not None else 'norm_eps'}: given without a norm weight "
                             f"({' or '.join(n for _, n in weights)})")
        return [[] for _ in weights], 1e-6, "none"
    convention = norm if norm is not None else scheme_norm
    name = given[0][1]
    if not isinstance(convention, str):
        raise ValueError(f"norm: {_tensors.quote(convention)} is not a string")
    if convention == "none":
        raise ValueError(f"{name}: the scheme has no QK-norm (qk_norm none); name its convention with norm= "
                         "(one of Scheme.qk_norm's names)")
    if eps is None:
        raise ValueError(f"norm_eps: required with {name} (the config's rms_norm_eps)")
    rows = []
    for w, n in weights:
        row = [] if w is None else _tensors.float_row(w, n)
        if w is not None and len(row) == 0:
            raise ValueError(f"{n}: no values")
        rows.append([] if w is None else row.tolist())
    return rows, _tensors.real_arg(eps, "norm_eps"), convention


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
