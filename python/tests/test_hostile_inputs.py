"""Hostile inputs across the whole Python API: every entry point that takes tensors, arrays or integers
is given malformed input (wrong dtype, ndim, zero-size, mismatched shapes, overlapping / negative /
out-of-bounds strides, read-only or aliased outputs, out-of-range / huge / float positions, slots and
layers, huge claimed sizes, torch tensors that require grad or live on 'meta'). Each case asserts the
exception type, that the one-line message names the argument and what is wrong, and that every buffer
the caller owns (outputs, in-place inputs, caches) is bit for bit as it was. The seeded fuzz and the
buffer-owner cases are in test_hostile_fuzz.py."""

import numpy as np
import pytest
import torch

import posenc
from conftest import DATA, need
from posenc import cp, hf
from hostile_support import CFG, QWEN2_VL, T, H, KV, D, ast, rope, rnd, ro, refuses  # noqa: F401 (rope: a fixture)

# ---- table of cases: (id, factory) where factory(rope) returns (call, exc, pattern, buffers) -------

CASES = []


def case(name, exc, pattern):
    def deco(f):
        CASES.append(pytest.param(f, exc, pattern, id=name))
        return f
    return deco


def _x():
    return rnd(T, H, D)


# Rope.apply: positions
for _name, _pos, _pat in [
        ("uint64 past int64", np.array([0, 1, 2, 2 ** 63 + 5], np.uint64), r"^positions: value 9223372036854775813 at index 3 is beyond int64"),
        ("float", np.array([0.0, 1, 2, 3]), r"^positions: dtype float64 is not an integer type"),
        ("nan", np.array([np.nan, 1, 2, 3]), r"^positions: dtype float64"),
        ("bool", np.array([True, False, True, False]), r"^positions: dtype bool"),
        ("ragged", [[0, 1, 2, 3], [0, 1]], r"^positions: not an array of integers"),
        ("python int past int64", [0, 1, 2, 2 ** 70], r"^positions: dtype object"),
        ("meta tensor", torch.zeros(T, dtype=torch.int64, device="meta"), r"^positions: tensor is on device meta"),
        ("bfloat16 tensor", torch.arange(T, dtype=torch.bfloat16), r"^positions: dtype torch.bfloat16 is not an integer type"),
        ("negative", np.array([0, 1, -2, 3]), r"position -2 at index 2 is outside \[0, 2\^31\)"),
        ("2^62", np.array([0, 1, 2, 2 ** 62]), r"position 4611686018427387904 at index 3 is outside"),
        ("too few", np.arange(3), r"^positions: 3 positions for 4 tokens"),
        ("3-d", np.zeros((1, 1, T), np.int64), r"^positions: shape \[1, 1, 4\] is not \[tokens\]"),
        ("huge stride-0 row", ast(np.zeros(1, np.int64), (2 ** 40,), (0,)), r"^positions: 1099511627776 positions for 4 tokens")]:
    def _f(rope, _pos=_pos):
        x = _x()
        return (lambda: rope.apply(x, _pos)), ValueError, None, [x]
    case(f"apply positions {_name}", ValueError, _pat)(_f)

# Rope.apply: x and out
_base = rnd(T + 1, H, D)
for _name, _mk, _pat in [
        ("x float64", lambda: rnd(T, H, D, dtype=np.float64), r"^x: dtype float64 is not float32 or float16"),
        ("x complex", lambda: np.zeros((T, H, D), np.complex64), r"^x: dtype complex64"),
        ("x bool", lambda: np.zeros((T, H, D), bool), r"^x: dtype bool"),
        ("x int torch", lambda: torch.zeros(T, H, D, dtype=torch.int32), r"^x: dtype torch.int32"),
        ("x 2-d", lambda: rnd(H, D), r"^x: shape \[8, 64\] is not"),
        ("x 5-d", lambda: rnd(1, 1, T, H, D), r"^x: shape \[1, 1, 4, 8, 64\] is not"),
        ("x byte-swapped", lambda: rnd(T, H, D).astype(">f4"), r"^x: dtype >f4"),
        ("x negative token stride", lambda: rnd(T, H, D)[::-1], r"^x: negative strides \[-512, 64, 1\]"),
        ("x head_dim stride 2", lambda: rnd(T, H, 2 * D)[..., ::2], r"^x: head_dim axis has stride 2"),
        ("x stride-0 tokens", lambda: ast(rnd(1, H, D), (T, H, D), (0, 4 * D, 4)), r"^x: an axis of extent 4 has stride 0"),
        ("x 2^40 stride-0 tokens", lambda: ast(rnd(1, H, D), (2 ** 40, H, D), (0, 4 * D, 4)), r"^x: an axis of extent 1099511627776 has stride 0"),
        ("x heads overlapping", lambda: ast(rnd(T, H, D), (T, H, D), (4 * H * D, 4 * 32, 4)), r"^x: strides \(token 512, head 32\) overlap rows"),
        ("x strides past its buffer", lambda: ast(rnd(1, 1, D), (1, 2, D), (4, 2 ** 62, 4)), r"^x: shape \[1, 2, 64\] and strides .* reach outside the 256 bytes"),
        ("x read-only", lambda: ro(rnd(T, H, D)), r"^x: array is read-only"),
        ("x broadcast (read-only)", lambda: np.broadcast_to(rnd(1, H, D), (T, H, D)), r"^x: array is read-only"),
        ("x requires grad", lambda: torch.zeros(T, H, D, requires_grad=True), r"^x: tensor requires grad"),
        ("x meta", lambda: torch.zeros(T, H, D, device="meta"), r"^x: tensor is on device meta"),
        ("x sparse", lambda: torch.zeros(T, H, D).to_sparse(), r"^x: tensor has no dense memory"),
        ("x list", lambda: [[0.0]], r"^x: list is not a numpy array or a torch tensor"),
        ("x head_dim 0", lambda: rnd(T, H, 0), r"x has head_dim 0, layout says 64"),
        ("x head_dim 32", lambda: rnd(T, H, 32), r"head_dim 32")]:
    def _f(rope, _mk=_mk, _name=_name):
        x = _mk()
        # snapshot what the caller owns (not a view reaching past its buffer, not 2^40 claimed rows, not meta)
        safe = isinstance(x, (np.ndarray, torch.Tensor)) and "2^40" not in _name and "past its buffer" not in _name \
            and "meta" not in _name and "sparse" not in _name
        bufs = [x] if safe else []
        return (lambda: rope.apply(x, np.arange(T))), ValueError, None, bufs
    case(f"apply {_name}", ValueError, _pat)(_f)

for _name, _mk, _pat in [
        ("read-only", lambda x: ro(rnd(T, H, D)), r"^out: array is read-only"),
        ("float16", lambda x: rnd(T, H, D, dtype=np.float16), r"^out: dtype float16 differs from the input's float32"),
        ("wrong shape", lambda x: rnd(T + 1, H, D), r"^out: shape \[5, 8, 64\] differs"),
        ("torch for numpy", lambda x: torch.zeros(T, H, D), r"^out: a Tensor, the input a ndarray"),
        ("list", lambda x: [1], r"^out: list is not a numpy array or a torch tensor"),
        ("stride-0", lambda x: np.broadcast_to(rnd(1, H, D), (T, H, D)), r"^out: array is read-only")]:
    def _f(rope, _mk=_mk):
        x = _x()
        out = _mk(x)
        bufs = [x] + ([out] if isinstance(out, np.ndarray) and out.flags.c_contiguous else [])
        return (lambda: rope.apply(x, np.arange(T), out=out)), ValueError, None, bufs
    case(f"apply out {_name}", ValueError, _pat)(_f)


@case("apply out shifted view of the input", ValueError, r"^out: overlaps the input without being it")
def _(rope):
    buf = rnd(T + 1, H, D)
    return (lambda: rope.apply(buf[:T], np.arange(T), out=buf[1:])), ValueError, None, [buf]


@case("apply out torch requires grad", ValueError, r"^out: tensor requires grad")
def _(rope):
    x, out = torch.zeros(T, H, D), torch.zeros(T, H, D, requires_grad=True)
    return (lambda: rope.apply(x, np.arange(T), out=out)), ValueError, None, [x, out]


@case("apply out meta", ValueError, r"^out: tensor is on device meta")
def _(rope):
    x = torch.zeros(T, H, D)
    return (lambda: rope.apply(x, np.arange(T), out=torch.zeros(T, H, D, device="meta"))), ValueError, None, [x]


@case("apply bad second batch row writes no element", ValueError, r"position -1 at index 1")
def _(rope):
    x = torch.from_numpy(rnd(2, H, 3, D))
    return (lambda: rope.apply(x, np.array([[0, 1, 2], [0, -1, 2]]))), ValueError, None, [x]


@case("apply batch stride 0", ValueError, r"^x: batch stride 0 overlaps")
def _(rope):
    return (lambda: rope.apply(torch.zeros(1, H, 5, D).expand(3, H, 5, D), np.arange(5))), ValueError, None, []


@case("apply direction", ValueError, r"^direction 'sideways'")
def _(rope):
    x = _x()
    return (lambda: rope.apply(x, np.arange(T), direction="sideways")), ValueError, None, [x]


# Rope.apply_qk
for _name, _mk, _pat in [
        ("k tokens", lambda: rnd(T + 1, KV, D), r"^k: shape \[5, 2, 64\] does not match q's"),
        ("k float16", lambda: rnd(T, KV, D, dtype=np.float16), r"keys are float16, queries float32"),
        ("k head_dim", lambda: rnd(T, KV, 32), r"k has head_dim 32"),
        ("k read-only", lambda: ro(rnd(T, KV, D)), r"^k: array is read-only"),
        ("k list", lambda: [1.0], r"^k: list is not"),
        ("k meta", lambda: torch.zeros(T, KV, D, device="meta"), r"^k: tensor is on device meta")]:
    def _f(rope, _mk=_mk):
        q, k = _x(), _mk()
        bufs = [q] + ([k] if isinstance(k, np.ndarray) else [])
        if isinstance(k, torch.Tensor):
            q = torch.from_numpy(q)
            bufs = [q]
        return (lambda: rope.apply_qk(q, k, np.arange(T))), ValueError, None, bufs
    case(f"apply_qk {_name}", ValueError, _pat)(_f)


@case("apply_qk k inside q", ValueError, r"^k: overlaps q without being it")
def _(rope):
    q = _x()
    return (lambda: rope.apply_qk(q, q[:, :2], np.arange(T))), ValueError, None, [q]


@case("apply_qk negative position in k's call writes neither", ValueError, r"position -5 at index 3")
def _(rope):
    q, k = _x(), rnd(T, KV, D, seed=1)
    return (lambda: rope.apply_qk(q, k, np.array([0, 1, 2, -5]))), ValueError, None, [q, k]


# Rope.cos_sin, frequencies, constructor
for _name, _call, _exc, _pat in [
        ("cos_sin negative", lambda r: r.cos_sin(np.array([-1])), ValueError, r"^positions: position -1 at index 0 is outside"),
        ("cos_sin float", lambda r: r.cos_sin(np.array([1.5])), ValueError, r"^positions: dtype float64"),
        ("cos_sin 2-d", lambda r: r.cos_sin(np.zeros((2, 3), np.int64)), ValueError, r"^positions: shape \[2, 3\]"),
        ("frequencies seq_len 2^64", lambda r: r.frequencies(2 ** 64), ValueError, r"^seq_len: 18446744073709551616 is outside"),
        ("frequencies seq_len negative", lambda r: r.frequencies(-5), ValueError, r"seq_len -5 is negative"),
        ("frequencies seq_len float", lambda r: r.frequencies(3.5), TypeError, r"^seq_len: 3.5 \(float\) is not an integer"),
        ("pair_regimes seq_len 2^70", lambda r: r.scheme.pair_regimes(2 ** 70), ValueError, r"^seq_len: "),
        ("Rope max_positions 2^31", lambda r: posenc.Rope(CFG, max_positions=2 ** 31), ValueError, r"^max_positions: 2147483648 rows of 32 pairs is a \d+ byte table"),
        ("Rope max_positions 2^70", lambda r: posenc.Rope(CFG, max_positions=2 ** 70), ValueError, r"^max_positions: 1180591620717411303424 is outside"),
        ("Rope max_positions -1", lambda r: posenc.Rope(CFG, max_positions=-1), ValueError, r"^max_positions: -1 is outside"),
        ("Rope seq_len float", lambda r: posenc.Rope(CFG, seq_len=1.5), TypeError, r"^seq_len: 1.5"),
        ("Rope seq_len -1", lambda r: posenc.Rope(CFG, seq_len=-1), ValueError, r"^seq_len: -1 is outside"),
        ("from_ggml head_dim 2^70", lambda r: posenc.Scheme.from_ggml({"n_dims": 64}, 2 ** 70), ValueError, r"^head_dim: "),
        ("apply_layer layer 4", lambda r: r.apply_layer(rnd(T, H, D), rnd(T, KV, D), np.arange(T), 4), ValueError, r"^layer: 4 is outside \[0, 4\)"),
        ("apply_layer layer -1", lambda r: r.apply_layer(rnd(T, H, D), rnd(T, KV, D), np.arange(T), -1), ValueError, r"^layer: -1 is outside"),
        ("apply_layer layer float", lambda r: r.apply_layer(rnd(T, H, D), rnd(T, KV, D), np.arange(T), 1.5), TypeError, r"^layer: 1.5 \(float\)"),
        ("apply_layer layer str", lambda r: r.apply_layer(rnd(T, H, D), rnd(T, KV, D), np.arange(T), "1"), TypeError, r"^layer: '1' \(str\)"),
        ("apply_multi_axis on 1-D RoPE", lambda r: r.apply_multi_axis(rnd(T, H, D), np.zeros((3, T), np.int64)), ValueError, r"not a multi-axis rope"),
        ("attn_temperature_scales negative", lambda r: r.scheme.attn_temperature_scales(np.array([-1])), ValueError, r"positions\[0\] = -1 is outside"),
]:
    def _f(rope, _call=_call):
        return (lambda: _call(rope)), None, None, []
    case(_name, _exc, _pat)(_f)

# Rope constructors from hostile config dicts
for _key, _val, _pat in [
        ("num_attention_heads", 2 ** 31, r"'num_attention_heads' = 2147483648 does not divide hidden_size"),
        ("num_attention_heads", 3.5, r"'num_attention_heads' is 3.5, expected an integer"),
        ("num_attention_heads", "8", r"'num_attention_heads' is \"8\", expected an integer"),
        ("num_attention_heads", True, r"'num_attention_heads' is true"),
        ("head_dim", 0, r"'head_dim' is 0, must be positive"),
        ("head_dim", 2 ** 31, r"head_dim 2147483648 is beyond"),
        ("head_dim", 7, r"rotary dimension 7"),
        ("hidden_size", 2 ** 62, r"head_dim 576460752303423488 is beyond"),
        ("rope_theta", float("nan"), r"rope_theta.*NaN is not JSON"),
        ("rope_theta", float("inf"), r"rope_theta.*Infinity is not JSON"),
        ("rope_theta", -1.0, r"'rope_theta' is -1, must be finite and positive"),
        ("rope_theta", 0.0, r"'rope_theta' is 0"),
        ("max_position_embeddings", -1, r"'max_position_embeddings' is -1"),
        ("max_position_embeddings", 2 ** 70, r"'max_position_embeddings' is 1.18.*expected an integer"),
        ("partial_rotary_factor", 2.0, r"'partial_rotary_factor' is 2, must be in \(0, 1\]"),
        ("num_hidden_layers", 2 ** 40, r"'num_hidden_layers' is 1099511627776, must be in \[1, 65536\]"),
        ("rope_scaling", {"rope_type": "dynamic", "factor": -2}, r"dynamic 'factor' = -2"),
        ("rope_scaling", [1, 2], r"'rope_scaling' is \[1,2\], expected an object")]:
    def _f(rope, _key=_key, _val=_val):
        return (lambda: posenc.Rope({**CFG, _key: _val})), None, None, []
    case(f"Rope config {_key}={_val!r}", ValueError, _pat)(_f)


@case("Rope config huge max_position_embeddings builds a bounded table", ValueError, r"^ok: built")
def _(rope):
    def call():
        r = posenc.Rope({**CFG, "max_position_embeddings": 2 ** 62})
        assert r._max_positions == 1 << 15  # table capped; positions past it computed on the fly
        raise ValueError("ok: built")
    return call, ValueError, None, []


# Rope.apply_kv_cache
def _kv(rope, **over):
    a = dict(q=rnd(T, H, D), k=rnd(T, KV, D, seed=1), v=rnd(T, KV, D, seed=2), positions=np.arange(T),
             slots=np.arange(T), k_cache=np.zeros((2, 8, KV, D), np.float32), v_cache=np.zeros((2, 8, KV, D), np.float32))
    kw = {n: over.pop(n) for n in ("q_out", "layer") if n in over}
    a.update(over)
    bufs = [b for b in (a["q"], a["k"], a["v"], a["k_cache"], a["v_cache"], kw.get("q_out"))
            if isinstance(b, (np.ndarray, torch.Tensor)) and getattr(b, "device", torch.device("cpu")).type == "cpu"
            and 0 not in (b.strides if isinstance(b, np.ndarray) else b.stride())]
    return (lambda: rope.apply_kv_cache(**a, **kw)), None, None, bufs


def _cache(shape=(2, 8, KV, D), dtype=np.float32):
    return np.zeros(shape, dtype)


_shared_cache = np.zeros((3, 8, KV, D), np.float32)
_fused = rnd(T, H, D)
for _name, _over, _exc, _pat in [
        ("slot out of range", dict(slots=np.array([0, 1, 2, 8])), ValueError, r"token 3 writes slot 8 outside the cache's \[0, 8\)"),
        ("slot negative", dict(slots=np.array([0, 1, 2, -1])), ValueError, r"token 3 writes slot -1"),
        ("slot duplicated", dict(slots=np.array([0, 1, 1, 3])), ValueError, r"tokens 1 and 2 both write slot 1"),
        ("slot 2^62", dict(slots=np.array([0, 1, 2, 2 ** 62])), ValueError, r"slot 4611686018427387904 outside"),
        ("slot uint64 past int64", dict(slots=np.array([0, 1, 2, 2 ** 63 + 1], np.uint64)), ValueError, r"^slots: value 9223372036854775809 at index 3 is beyond int64"),
        ("slot float", dict(slots=np.array([0, 1, 2, 3.0])), ValueError, r"^slots: dtype float64"),
        ("slots meta", dict(slots=torch.zeros(T, dtype=torch.int64, device="meta")), ValueError, r"^slots: tensor is on device meta"),
        ("slots short", dict(slots=np.arange(3)), ValueError, r"^slots: shape \[3\] is not \[4\]"),
        ("layer 2", dict(layer=2), ValueError, r"layer 2 outside \[0, 2\)"),
        ("layer -1", dict(layer=-1), ValueError, r"layer -1 outside"),
        ("layer 2^63", dict(layer=2 ** 63), ValueError, r"^layer: 9223372036854775808 is outside"),
        ("layer float", dict(layer=1.5), TypeError, r"^layer: 1.5 \(float\) is not an integer"),
        ("layer str", dict(layer="1"), TypeError, r"^layer: '1' \(str\)"),
        ("position negative", dict(positions=np.array([0, 1, 2, -3])), ValueError, r"position -3 at index 3"),
        ("positions short", dict(positions=np.arange(3)), ValueError, r"^positions: shape \[3\] is not \[4\]"),
        ("v tokens", dict(v=rnd(3, KV, D)), ValueError, r"3 value tokens for 4 query tokens"),
        ("v dtype", dict(v=rnd(T, KV, D, dtype=np.float16)), ValueError, r"values float16; all must share one dtype"),
        ("q float64", dict(q=rnd(T, H, D, dtype=np.float64)), ValueError, r"^q: dtype float64"),
        ("q 4-d", dict(q=rnd(1, T, H, D)), ValueError, r"^q: shape \[1, 4, 8, 64\] is not \[tokens, heads, head_dim\]"),
        ("q_out read-only", dict(q_out=ro(rnd(T, H, D))), ValueError, r"^q_out: array is read-only"),
        ("q_out shape", dict(q_out=rnd(T, H, D + 2)), ValueError, r"output \[4, 8, 66\] float32 differs from input"),
        ("q_out list", dict(q_out=[1]), ValueError, r"^q_out: list is not a numpy array"),
        ("q_out over k", dict(k=_fused[:, :KV], q_out=_fused), ValueError, r"^q_out: overlaps k or v"),
        ("k_cache read-only", dict(k_cache=ro(_cache())), ValueError, r"^k_cache: array is read-only"),
        ("k_cache not contiguous", dict(k_cache=np.zeros((2, 8, KV, 2 * D), np.float32)[..., ::2]), ValueError, r"^k_cache: array is not C-contiguous"),
        ("k_cache float64", dict(k_cache=_cache(dtype=np.float64)), ValueError, r"^k_cache: dtype float64"),
        ("k_cache list", dict(k_cache=[0]), ValueError, r"^k_cache: list is not"),
        ("k_cache meta", dict(k_cache=torch.zeros(2, 8, KV, D, device="meta")), ValueError, r"^k_cache: tensor is on device meta"),
        ("k_cache requires grad", dict(q=torch.zeros(T, H, D), k=torch.zeros(T, KV, D), v=torch.zeros(T, KV, D),
                                       k_cache=torch.zeros(2, 8, KV, D, requires_grad=True), v_cache=torch.zeros(2, 8, KV, D)),
         ValueError, r"^k_cache: tensor requires grad"),
        ("k_cache 2^40 stride-0 slots", dict(k_cache=ast(np.zeros(1, np.float32), (2, 2 ** 40, KV, D), (0, 0, 0, 0))), ValueError, r"^k_cache: array is not C-contiguous"),
        ("v_cache slots differ", dict(v_cache=_cache((2, 9, KV, D))), ValueError, r"^v_cache: a float32 cache of 2 x 9 slots, k_cache a float32 cache of 2 x 8"),
        ("caches shared", dict(k_cache=_shared_cache[:2], v_cache=_shared_cache[1:]), ValueError, r"k and v memory overlap"),
        ("k_cache over q", dict(q=_shared_cache.reshape(-1)[:T * H * D].reshape(T, H, D), k_cache=_shared_cache[:2]), ValueError, r"^k_cache: overlaps q, k, v or q_out"),
        ("v_cache over k", dict(k=_shared_cache.reshape(-1)[:T * KV * D].reshape(T, KV, D), v_cache=_shared_cache[:2]), ValueError, r"^v_cache: overlaps q, k, v or q_out"),
        ("q8_0 row width", dict(k_cache=_cache((2, 8, KV * D), np.uint8), v_cache=_cache((2, 8, KV * D), np.uint8)), ValueError, r"^k_cache: shape \[2, 8, 128\] is not \[layers, slots, 136\]"),
        ("q8_0 beside float32", dict(v_cache=_cache((2, 8, KV * D // 32 * 34), np.uint8)), ValueError, r"^v_cache: a q8_0 cache")]:
    def _f(rope, _over=_over):
        return _kv(rope, **dict(_over))
    case(f"apply_kv_cache {_name}", _exc, _pat)(_f)


# Rope.apply_kv_cache with QK-norm (a Qwen3 scheme; the fixture's Llama has none)
_QWEN3 = {**CFG, "model_type": "qwen3", "head_dim": D}
for _name, _over, _exc, _pat in [
        ("weight short", dict(q_norm=np.ones(D - 1, np.float32), norm_eps=1e-6), ValueError, r"^rms norm of queries: weight has 63 values"),
        ("weight nan", dict(k_norm=np.array([np.nan] + [1.0] * (D - 1)), norm_eps=1e-6), ValueError, r"^k_norm: value nan at index 0"),
        ("weight 2-d", dict(q_norm=np.ones((2, D)), norm_eps=1e-6), ValueError, r"^q_norm: shape \[2, 64\] is not 1-d"),
        ("weight empty", dict(q_norm=np.ones(0), norm_eps=1e-6), ValueError, r"^q_norm: no values"),
        ("eps 0", dict(q_norm=np.ones(D), norm_eps=0.0), ValueError, r"^rms norm of queries: eps = 0 must be finite and > 0"),
        ("eps str", dict(q_norm=np.ones(D), norm_eps="1e-6"), TypeError, r"^norm_eps: '1e-6' \(str\) is not a number"),
        ("eps missing", dict(q_norm=np.ones(D)), ValueError, r"^norm_eps: required with q_norm"),
        ("eps alone", dict(norm_eps=1e-6), ValueError, r"^norm_eps: given without a norm weight"),
        ("convention unknown", dict(k_norm=np.ones(D), norm_eps=1e-6, norm="rms"), ValueError, r"^k_norm: norm 'rms'"),
        ("convention layernorm", dict(k_norm=np.ones(D), norm_eps=1e-6, norm="per_head_layernorm"), ValueError, r"not an RMSNorm posenc runs"),
        ("convention int", dict(k_norm=np.ones(D), norm_eps=1e-6, norm=3), ValueError, r"^norm: 3 is not a string")]:
    def _f(rope, _over=_over):
        return _kv(posenc.Rope(_QWEN3), **dict(_over))
    case(f"apply_kv_cache qk_norm {_name}", _exc, _pat)(_f)


def _no_qk_norm(rope):
    return _kv(rope, q_norm=np.ones(D), norm_eps=1e-6)


case("apply_kv_cache qk_norm on a scheme without", ValueError, r"^q_norm: the scheme has no QK-norm")(_no_qk_norm)

# Rope.apply_mla_cache (a small DeepSeek-V3 scheme: latent 64, rope 32, q heads of 32 + 32)
_DEEPSEEK = {"model_type": "deepseek_v3", "hidden_size": 256, "num_attention_heads": 2, "kv_lora_rank": 64,
             "q_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 32, "v_head_dim": 32,
             "rope_theta": 10000.0, "max_position_embeddings": 2048}
_mla_in, _mla_q = rnd(T, 96), rnd(T, 2, 64)


def _mla(**over):
    r = posenc.Rope(_DEEPSEEK)
    kv = over.pop("kv", rnd(T, 96))
    a = dict(kv_c=kv[:, :64], k_pe=kv[:, 64:], positions=np.arange(T), slots=np.arange(T),
             cache=np.zeros((2, 8, 96), np.float32))
    a.update(over)
    bufs = [b for b in (kv, a["cache"], a.get("q"), a.get("q_out")) if isinstance(b, np.ndarray) and b.size]
    return (lambda: r.apply_mla_cache(**a)), None, None, bufs


for _name, _over, _exc, _pat in [
        ("slot out of range", dict(slots=np.array([0, 1, 2, 8])), ValueError, r"token 3 writes slot 8 outside"),
        ("slot duplicated", dict(slots=np.array([0, 1, 1, 3])), ValueError, r"tokens 1 and 2 both write slot 1"),
        ("positions short", dict(positions=np.arange(3)), ValueError, r"^positions: shape \[3\] is not \[4\]"),
        ("position negative", dict(positions=np.array([0, 1, 2, -3])), ValueError, r"position -3 at index 3"),
        ("layer 2", dict(layer=2), ValueError, r"layer 2 outside \[0, 2\)"),
        ("layer str", dict(layer="1"), TypeError, r"^layer: '1' \(str\)"),
        ("cache row width", dict(cache=np.zeros((2, 8, 95), np.float32)), ValueError, r"^cache: shape \[2, 8, 95\] is not \[layers, slots, 96\]"),
        ("cache heads axis", dict(cache=np.zeros((2, 8, 1, 96), np.float32)), ValueError, r"^cache: shape \[2, 8, 1, 96\]"),
        ("cache read-only", dict(cache=ro(np.zeros((2, 8, 96), np.float32))), ValueError, r"^cache: array is read-only"),
        ("cache float64", dict(cache=np.zeros((2, 8, 96))), ValueError, r"^cache: dtype float64"),
        ("cache over kv_c", dict(kv=_mla_in, cache=_mla_in.reshape(1, T, 96)), ValueError, r"^cache: overlaps kv_c, k_pe, q or q_out"),
        ("q8_0 row", dict(cache=np.zeros((2, 8, 96), np.uint8)), ValueError, r"^cache: shape \[2, 8, 96\] is not \[layers, slots, 102\]"),
        ("float8 scale 0", dict(cache=np.zeros((2, 8, 96), np.uint8), cache_type="float8_e4m3fn", scale=0.0), ValueError, r"scale"),
        ("scale on float32", dict(scale=2.0), ValueError, r"scale"),
        ("kv_c 1-d", dict(kv_c=rnd(64)), ValueError, r"^kv_c: shape \[64\] is not \[tokens, values\]"),
        ("kv_c float64", dict(kv_c=rnd(T, 64, dtype=np.float64)), ValueError, r"^kv_c: dtype float64"),
        ("k_pe width", dict(k_pe=rnd(T, 16)), ValueError, r"k_pe is \[4, 1, 16\], the cache needs \[4, 1, 32\]"),
        ("k_pe tokens", dict(k_pe=rnd(T + 1, 32)), ValueError, r"k_pe is \[5, 1, 32\], the cache needs \[4, 1, 32\]"),
        ("kv_norm short", dict(kv_norm=np.ones(63), norm_eps=1e-6), ValueError, r"^rms norm of kv_c: weight has 63 values"),
        ("kv_norm no eps", dict(kv_norm=np.ones(64)), ValueError, r"^norm_eps: required with kv_norm"),
        ("q head_dim", dict(q=rnd(T, 2, 32)), ValueError, r"32"),
        ("q_out without q", dict(q_out=rnd(T, 2, 64)), ValueError, r"^q_out: given without q"),
        ("q_out read-only", dict(q=rnd(T, 2, 64), q_out=ro(rnd(T, 2, 64))), ValueError, r"^q_out: array is read-only"),
        ("q_out over kv_c", dict(kv=_mla_q.reshape(-1)[:T * 96].reshape(T, 96), q=rnd(T, 2, 64), q_out=_mla_q), ValueError, r"^q_out: overlaps kv_c or k_pe")]:
    def _f(rope, _over=_over):
        return _mla(**dict(_over))
    case(f"apply_mla_cache {_name}", _exc, _pat)(_f)


# posenc.split_qkv
for _name, _args, _exc, _pat in [
        ("width", (rnd(T, 100), H, KV, D), ValueError, r"^qkv: shape \[4, 100\] is not \[tokens, \(8 \+ 2 x 2\) x 64\]"),
        ("3-d", (rnd(T, 1, 768), H, KV, D), ValueError, r"^qkv: shape \[4, 1, 768\]"),
        ("list", ([[1.0]], H, KV, D), ValueError, r"^qkv: list is not"),
        ("negative heads", (rnd(T, 0), -2, 1, D), ValueError, r"^num_heads: -2 is outside"),
        ("head_dim 0", (rnd(T, 0), H, KV, 0), ValueError, r"^head_dim: 0 is outside"),
        ("heads 2^62 and negative kv", (rnd(T, 768), 2 ** 62, -2 ** 61 + 6, D), ValueError, r"^num_heads: 4611686018427387904 is outside"),
        ("float heads", (rnd(T, 768), 8.5, KV, D), TypeError, r"^num_heads: 8.5 \(float\)"),
        ("bool kv heads", (rnd(T, 768), H, True, D), TypeError, r"^num_kv_heads: True is a bool"),
        ("row not contiguous", (rnd(T, 1536)[:, ::2], H, KV, D), ValueError, r"^qkv: strides \[6144, 8\] \(bytes\) cannot be viewed")]:
    def _f(rope, _args=_args):
        return (lambda: posenc.split_qkv(*_args)), None, None, []
    case(f"split_qkv {_name}", _exc, _pat)(_f)


# posenc.hf.apply_cos_sin / drop_in / apply_rotary_pos_emb
B, S = 2, 5


def _hf(rope, dtype=torch.float32):
    q, k = torch.from_numpy(rnd(B, H, S, D)).to(dtype), torch.from_numpy(rnd(B, KV, S, D, seed=1)).to(dtype)
    c, s = rope.cos_sin(np.arange(S))
    c = torch.from_numpy(np.concatenate([c, c], -1)[None]).to(dtype)
    s = torch.from_numpy(np.concatenate([s, s], -1)[None]).to(dtype)
    return q, k, c, s


for _name, _call, _pat in [
        ("cos float64", lambda q, k, c, s: hf.apply_cos_sin(q, k, c.double(), s.double()), r"^cos: dtype torch.float64"),
        ("q int", lambda q, k, c, s: hf.apply_cos_sin(q.int(), k, c, s), r"^q: dtype torch.int32"),
        ("cos 1-d", lambda q, k, c, s: hf.apply_cos_sin(q, k, c[0, 0], s[0, 0]), r"^cos: shape \[64\] is not \[seq, rotary_dim\]"),
        ("cos odd width", lambda q, k, c, s: hf.apply_cos_sin(q, k, c[..., :63], s[..., :63]), r"^cos: width 63 does not fit"),
        ("cos width 0", lambda q, k, c, s: hf.apply_cos_sin(q, k, c[..., :0], s[..., :0]), r"^cos: width 0"),
        ("cos wider than head_dim", lambda q, k, c, s: hf.apply_cos_sin(q, k, torch.cat([c, c], -1), torch.cat([s, s], -1)), r"^cos: width 128"),
        ("cos seq", lambda q, k, c, s: hf.apply_cos_sin(q, k, c[:, :4], s[:, :4]), r"^cos: shape \[1, 4, 64\] has 4 positions for q's 5 tokens"),
        ("cos batch 3", lambda q, k, c, s: hf.apply_cos_sin(q, k, c.expand(3, S, D).contiguous(), s.expand(3, S, D).contiguous()), r"^cos: batch 3 is neither 1 nor q's 2"),
        ("cos last axis strided", lambda q, k, c, s: hf.apply_cos_sin(q, k, torch.cat([c, c], -1)[..., ::2], torch.cat([s, s], -1)[..., ::2]), r"^cos: last axis has stride 2"),
        ("sin shape", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s[:, :4]), r"^sin: shape \[1, 4, 64\] differs from cos's"),
        ("sin dtype", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s.half()), r"^sin: dtype differs from cos's"),
        ("cos meta", lambda q, k, c, s: hf.apply_cos_sin(q, k, torch.zeros(1, S, D, device="meta"), s), r"^cos: tensor is on device meta"),
        ("q meta", lambda q, k, c, s: hf.apply_cos_sin(torch.zeros(B, H, S, D, device="meta"), k, c, s), r"^q: tensor is on device meta"),
        ("q requires grad", lambda q, k, c, s: hf.apply_cos_sin(q.clone().requires_grad_(), k, c, s), r"^q: tensor requires grad"),
        ("cos requires grad", lambda q, k, c, s: hf.apply_cos_sin(q, k, c.clone().requires_grad_(), s), r"^cos: tensor requires grad"),
        ("sin requires grad (given outputs)", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s.clone().requires_grad_(), out=(torch.empty_like(q), torch.empty_like(k))), r"^sin: tensor requires grad"),
        ("q sparse", lambda q, k, c, s: hf.apply_cos_sin(q.to_sparse(), k, c, s), r"^q: tensor has no dense memory \(layout torch.sparse_coo\)"),
        ("q sparse (given outputs)", lambda q, k, c, s: hf.apply_cos_sin(q.to_sparse(), k, c, s, out=(torch.empty_like(q), torch.empty_like(k))), r"^q: tensor has no dense memory"),
        ("q heads expanded (stride 0)", lambda q, k, c, s: hf.apply_cos_sin(q[:, :1].expand(B, H, S, D), k, c, s), r"^q: strides \(token 64, head 0\) overlap rows"),
        ("k meta", lambda q, k, c, s: hf.apply_cos_sin(q, torch.zeros(B, KV, S, D, device="meta"), c, s), r"^k: tensor is on device meta"),
        ("q claiming a 10 TiB output", lambda q, k, c, s: hf.apply_cos_sin(torch.zeros(D).as_strided((2 ** 30, H, S, D), (0, 0, 0, 1)), k, c, s), r"^q: its output of shape \[1073741824, 8, 5, 64\] \(\d+ bytes\) cannot be allocated"),
        ("unsqueeze_dim True", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, unsqueeze_dim=True), r"^unsqueeze_dim: True"),
        ("unsqueeze_dim True with position_ids", lambda q, k, c, s: posenc.Rope(CFG).apply_rotary_pos_emb(q, k, position_ids=torch.arange(S)[None], unsqueeze_dim=True), r"^unsqueeze_dim: True"),
        ("q 3-d", lambda q, k, c, s: hf.apply_cos_sin(q[0], k[0], c, s), r"^q: shape \[8, 5, 64\] is not 4-d"),
        ("q list", lambda q, k, c, s: hf.apply_cos_sin([1], k, c, s), r"^q: list is not"),
        ("q negative strides (numpy)", lambda q, k, c, s: hf.apply_cos_sin(q.numpy()[:, :, ::-1], k.numpy(), c.numpy(), s.numpy()), r"^q: negative strides"),
        ("k head_dim", lambda q, k, c, s: hf.apply_cos_sin(q, torch.zeros(B, KV, S, 32), c, s), r"^cos: width 64 does not fit k's head_dim 32"),
        ("unsqueeze_dim 3", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, unsqueeze_dim=3), r"^unsqueeze_dim: 3 \(expected 1"),
        ("unsqueeze_dim '1'", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, unsqueeze_dim="1"), r"^unsqueeze_dim: '1'"),
        ("pairing", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, pairing="diag"), r"^pairing 'diag'"),
        ("out a 1-tuple", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, out=(torch.empty_like(q),)), r"^out: tuple is not a pair"),
        ("out q_out shape", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, out=(torch.empty(B, H, S, D + 2), torch.empty_like(k))), r"^q_out: shape or dtype differs from q's"),
        ("out q_out stride 0", lambda q, k, c, s: hf.apply_cos_sin(q, k, c, s, out=(torch.zeros(D).expand(B, H, S, D), torch.empty_like(k))), r"^q_out: an axis of extent 2 has stride 0"),
        ("position_ids negative", lambda q, k, c, s: hf.apply_rotary_pos_emb(posenc.Rope(CFG), q, k, position_ids=torch.tensor([[0, 1, 2, 3, -4]])), r"position -4 at index 4"),
        ("position_ids float", lambda q, k, c, s: hf.drop_in(posenc.Rope(CFG))(q, k, None, None, torch.tensor([[0, 1, 2, 3, 4.0]])), r"^positions: dtype float32"),
        ("position_ids 3-d", lambda q, k, c, s: hf.drop_in(posenc.Rope(CFG))(q, k, None, None, torch.zeros(1, 1, S, dtype=torch.int64)), r"^positions: shape \[1, 1, 5\]"),
        ("no positions at all", lambda q, k, c, s: hf.apply_rotary_pos_emb(posenc.Rope(CFG), q, k), r"^position_ids: none given"),
        ("recovered from garbage cos", lambda q, k, c, s: posenc.Rope(CFG).apply_rotary_pos_emb(q, k, c * 2, s, from_cos_sin=False), r"^cos/sin: batch element 0 matches no integer positions"),
        ("recovered from NaN cos", lambda q, k, c, s: posenc.Rope(CFG).apply_rotary_pos_emb(q, k, c * float("nan"), s, from_cos_sin=False), r"^cos: holds non-finite values"),
        ("recovered from inf sin", lambda q, k, c, s: posenc.Rope(CFG).apply_rotary_pos_emb(q, k, c, s * float("inf"), from_cos_sin=False), r"^sin: holds non-finite values"),
        ("recovered from meta cos", lambda q, k, c, s: posenc.Rope(CFG).apply_rotary_pos_emb(q, k, torch.zeros(1, S, D, device="meta"), s, from_cos_sin=False), r"^cos: tensor is on device meta"),
        ("recovered from narrow cos", lambda q, k, c, s: posenc.Rope(CFG).apply_rotary_pos_emb(q, k, c[..., :32], s[..., :32], from_cos_sin=False), r"^cos: shape \[1, 5, 32\] is not \[batch, seq, 64\]")]:
    def _f(rope, _call=_call):
        q, k, c, s = _hf(rope)
        return (lambda: _call(q, k, c, s)), None, None, [q, k, c, s]
    case(f"hf {_name}", ValueError, _pat)(_f)


def _hf_out(rope, make):
    q, k, c, s = _hf(rope)
    q, k, c, s = (t.numpy() for t in (q, k, c, s))
    qo, ko = make(q, k, c, s)
    bufs = [q, k, c, s] + [b for b in (qo, ko) if isinstance(b, np.ndarray) and b.flags.c_contiguous]
    return (lambda: hf.apply_cos_sin(q, k, c, s, out=(qo, ko))), None, None, bufs


for _name, _make, _pat in [
        ("read-only q_out", lambda q, k, c, s: (ro(np.zeros_like(q)), np.zeros_like(k)), r"^q_out: array is read-only"),
        ("read-only broadcast k_out", lambda q, k, c, s: (np.zeros_like(q), np.broadcast_to(np.zeros(D, np.float32), k.shape)), r"^k_out: array is read-only"),
        ("k_out is q_out", lambda q, k, c, s: (lambda o: (o, o[:, :KV]))(np.zeros_like(q)), r"^k_out: overlaps q_out"),
        ("q_out over k", lambda q, k, c, s: (k.reshape(-1)[:0].base.reshape(-1)[:q.size].reshape(q.shape) if False else np.zeros_like(q), q[:, :KV]), r"^k_out: overlaps q"),
        ("q_out over cos", lambda q, k, c, s: (np.zeros_like(q), np.zeros_like(k)) if False else (np.zeros_like(q), ast(c, k.shape, (0, 0, c.strides[1], 4))), r"^k_out: (overlaps cos|an axis of extent)")]:
    def _f(rope, _make=_make):
        return _hf_out(rope, _make)
    case(f"hf out {_name}", ValueError, _pat)(_f)


@case("hf out shifted against q", ValueError, r"^q_out: partly overlaps q")
def _(rope):
    q, k, c, s = _hf(rope)
    buf = torch.from_numpy(rnd(q.numel() + 1))
    ko = torch.zeros_like(k)
    qin, qo = buf[:-1].view(q.shape), buf[1:].view(q.shape)
    return (lambda: hf.apply_cos_sin(qin, k, c, s, out=(qo, ko))), None, None, [buf, ko, k]


@case("hf out requires grad", ValueError, r"^q_out: tensor requires grad")
def _(rope):
    q, k, c, s = _hf(rope)
    qo, ko = torch.zeros_like(q).requires_grad_(), torch.zeros_like(k)
    return (lambda: hf.apply_cos_sin(q, k, c, s, out=(qo, ko))), None, None, [qo, ko, q, k]


# absolute and relative schemes
_tab = np.zeros((32, 4), np.float32)
for _name, _call, _exc, _pat in [
        ("sinusoidal d_model 2^40", lambda: posenc.sinusoidal_table(np.arange(3), 2 ** 40), ValueError, r"^positions x d_model: 3 x 1099511627776 = \d+ elements is more than posenc builds at once"),
        ("sinusoidal d_model 2^70", lambda: posenc.sinusoidal_table(np.arange(3), 2 ** 70), ValueError, r"^d_model: "),
        ("sinusoidal d_model float", lambda: posenc.sinusoidal_table(np.arange(3), 8.7), TypeError, r"^d_model: 8.7 \(float\)"),
        ("sinusoidal d_model odd", lambda: posenc.sinusoidal_table(np.arange(3), 7), ValueError, r"d_model 7 must be even and positive"),
        ("sinusoidal position negative", lambda: posenc.sinusoidal_table(np.array([-1]), 8), ValueError, r"position -1 at index 0 is negative"),
        ("sinusoidal positions float", lambda: posenc.sinusoidal_table(np.array([1.5]), 8), ValueError, r"^positions: dtype float64"),
        ("sinusoidal base nan", lambda: posenc.sinusoidal_table(np.arange(3), 8, base=float("nan")), ValueError, r"base nan must be finite and positive"),
        ("alibi_slopes 2^40 heads", lambda: posenc.alibi_slopes(2 ** 40), ValueError, r"num_heads 1099511627776 must be in \[1, 2\^20\]"),
        ("alibi_slopes heads float", lambda: posenc.alibi_slopes(8.5), TypeError, r"^num_heads: 8.5"),
        ("alibi_slopes variant", lambda: posenc.alibi_slopes(8, "x"), ValueError, r"^variant 'x'"),
        ("alibi_bias 2^20 x 2^20", lambda: posenc.alibi_bias([1.0], 2 ** 20, 2 ** 20), ValueError, r"^heads x query_length x key_length: 1 x 1048576 x 1048576 = \d+ elements"),
        ("alibi_bias negative length", lambda: posenc.alibi_bias([1.0], -1, 3), ValueError, r"^query_length: -1 is outside"),
        ("alibi_bias offset past 2^62", lambda: posenc.alibi_bias([1.0], 2, 3, query_offset=2 ** 63 - 1), ValueError, r"^query_offset: 9223372036854775807 is outside"),
        ("alibi_bias NaN slope", lambda: posenc.alibi_bias([float("nan")], 2, 3), ValueError, r"^slopes: value nan at index 0 is not finite"),
        ("alibi_bias string slope", lambda: posenc.alibi_bias(["a"], 2, 3), ValueError, r"^slopes: dtype <U1 is not a real number type"),
        ("alibi_bias complex slope", lambda: posenc.alibi_bias(np.array([1j]), 2, 3), ValueError, r"^slopes: dtype complex128"),
        ("alibi_bias bfloat16 NaN slope", lambda: posenc.alibi_bias(torch.tensor([0.5, float("nan")], dtype=torch.bfloat16), 2, 3), ValueError, r"^slopes: value nan at index 1 is not finite"),
        ("alibi_bias 2-d slopes", lambda: posenc.alibi_bias(np.ones((2, 2)), 2, 3), ValueError, r"^slopes: shape \[2, 2\] is not 1-d"),
        ("alibi_bias no slopes", lambda: posenc.alibi_bias([], 2, 3), ValueError, r"no slopes"),
        ("t5_buckets num_buckets 3", lambda: posenc.t5_buckets(np.arange(3), num_buckets=3), ValueError, r"num_buckets 3 must be even and >= 4"),
        ("t5_buckets max_distance 0", lambda: posenc.t5_buckets(np.arange(3), max_distance=0), ValueError, r"max_distance 0 must exceed max_exact 8"),
        ("t5_buckets float", lambda: posenc.t5_buckets(np.array([1.5])), ValueError, r"^relative_positions: dtype float64"),
        ("t5_buckets num_buckets float", lambda: posenc.t5_buckets(np.arange(3), num_buckets=32.5), TypeError, r"^num_buckets: 32.5"),
        ("t5_bias 2^20 x 2^20", lambda: posenc.t5_bias(_tab, 2 ** 20, 2 ** 20), ValueError, r"^heads x query_length x key_length: 4 x 1048576 x 1048576"),
        ("t5_bias 2^31 x 2^31", lambda: posenc.t5_bias(_tab, 2 ** 31, 2 ** 31), ValueError, r"^heads x query_length x key_length"),
        ("t5_bias negative length", lambda: posenc.t5_bias(_tab, 2, -3), ValueError, r"^key_length: -3 is outside"),
        ("t5_bias table rows", lambda: posenc.t5_bias(np.zeros((31, 4), np.float32), 2, 3), ValueError, r"got float32 \[31, 4\]"),
        ("t5_bias table 1-d", lambda: posenc.t5_bias(np.zeros(32, np.float32), 2, 3), ValueError, r"^table: shape \[32\] is not \[num_buckets, heads\]"),
        ("t5_bias table float64", lambda: posenc.t5_bias(np.zeros((32, 4)), 2, 3), ValueError, r"^table: dtype float64 is not float32"),
        ("t5_bias table stride-0 2^40 heads", lambda: posenc.t5_bias(ast(np.zeros(1, np.float32), (32, 2 ** 40), (0, 0)), 2, 3), ValueError, r"^table: 32 x 1099511627776 = \d+ elements"),
        ("t5_bias table meta", lambda: posenc.t5_bias(torch.zeros(32, 4, device="meta"), 2, 3), ValueError, r"^table: tensor is on device meta"),
        ("shaw 2^20 x 2^20", lambda: posenc.shaw_indices(2 ** 20, 2 ** 20, 4), ValueError, r"^query_length x key_length: 1048576 x 1048576"),
        ("shaw negative length", lambda: posenc.shaw_indices(-1, 2, 4), ValueError, r"^query_length: -1 is outside"),
        ("shaw negative k", lambda: posenc.shaw_indices(2, 2, -4), ValueError, r"^max_relative_position: -4 is outside"),
        ("shaw k 2^63-1", lambda: posenc.shaw_indices(2, 2, 2 ** 63 - 1), ValueError, r"^max_relative_position: 9223372036854775807 is outside"),
        ("shaw offset -2^63", lambda: posenc.shaw_indices(2, 2, 4, query_offset=-2 ** 63), ValueError, r"^query_offset: -9223372036854775808 is outside"),
        ("set_num_threads 10^6", lambda: posenc.set_num_threads(10 ** 6), ValueError, r"^n: 1000000 is outside \[-2147483648, 1024\]"),
        ("set_num_threads 2^40", lambda: posenc.set_num_threads(2 ** 40), ValueError, r"^n: 1099511627776 is outside"),
        ("set_num_threads float", lambda: posenc.set_num_threads(2.5), TypeError, r"^n: 2.5 \(float\) is not an integer"),
        # vision-language position rows
        ("text_vision negative text", lambda: posenc.text_vision_positions([-3]), ValueError, r"^span 0: text tokens = -3 is negative"),
        ("text_vision 2^62 text", lambda: posenc.text_vision_positions([2 ** 62]), ValueError, r"^span 0: the layout is more than 16777216 tokens"),
        ("text_vision 2^70 text", lambda: posenc.text_vision_positions([2 ** 70]), ValueError, r"^span 0: text tokens: "),
        ("text_vision huge grid", lambda: posenc.text_vision_positions([{"type": "image", "grid_thw": [2 ** 20] * 3}]), ValueError, r"^span 0: grid 1048576 x 1048576 x 1048576 is more than"),
        ("text_vision grid 2^70", lambda: posenc.text_vision_positions([{"type": "image", "grid_thw": [1, 2 ** 70, 4]}]), ValueError, r"^span 0: grid_thw\[1\]: "),
        ("text_vision grid float", lambda: posenc.text_vision_positions([{"type": "image", "grid_thw": [1, 4.5, 4]}]), TypeError, r"^span 0: grid_thw\[1\]: 4.5 \(float\)"),
        ("text_vision grid string", lambda: posenc.text_vision_positions([{"type": "image", "grid_thw": "abc"}]), ValueError, r"^span 0: grid_thw 'abc' is not \[t, h, w\]"),
        ("text_vision grid odd", lambda: posenc.text_vision_positions([{"type": "image", "grid_thw": [1, 3, 3]}]), ValueError, r"^span 0: grid h 3 x w 3 is not a multiple"),
        ("text_vision grid zero", lambda: posenc.text_vision_positions([{"type": "image", "grid_thw": [0, 4, 4]}]), ValueError, r"^span 0: grid 0 x 4 x 4 has a side < 1"),
        ("text_vision text without tokens", lambda: posenc.text_vision_positions([3, {"type": "text"}]), ValueError, r"^span 1: a text span without 'tokens'"),
        ("text_vision tokens float", lambda: posenc.text_vision_positions([{"type": "text", "tokens": 2.5}]), TypeError, r"^span 0: tokens: 2.5"),
        ("text_vision merge 0", lambda: posenc.text_vision_positions([3], 0), ValueError, r"spatial_merge_size = 0 must be >= 1"),
        ("text_vision start 2^62", lambda: posenc.text_vision_positions([3], start=2 ** 62), ValueError, r"start position 4611686018427387904 is outside"),
        ("text_vision tokens_per_second nan", lambda: posenc.text_vision_positions([{"type": "video", "grid_thw": [2, 4, 4]}], tokens_per_second=float("nan")), ValueError, r"tokens_per_second = nan is not finite"),
        ("text_vision second_per_grid_t string", lambda: posenc.text_vision_positions([{"type": "video", "grid_thw": [2, 4, 4], "second_per_grid_t": "x"}], tokens_per_second=2), TypeError, r"^span 0: second_per_grid_t: 'x' \(str\) is not a number"),
        ("text_vision layout an int", lambda: posenc.text_vision_positions(5), TypeError, r"^layout: int is not a sequence of spans"),
        ("text_vision span bool", lambda: posenc.text_vision_positions([True]), ValueError, r"^span 0: True is neither"),
        ("vision_patch huge", lambda: posenc.vision_patch_positions([1, 2 ** 16, 2 ** 16]), ValueError, r"grid 1 x 65536 x 65536 is more than 16777216 tokens"),
        ("vision_patch negative", lambda: posenc.vision_patch_positions([1, -4, 4]), ValueError, r"grid 1 x -4 x 4 has a side < 1"),
        ("vision_patch two sides", lambda: posenc.vision_patch_positions([4, 4]), ValueError, r"^grid_thw \[4, 4\] is not \[t, h, w\]"),
        ("vision_patch float", lambda: posenc.vision_patch_positions([1, 4.5, 4]), TypeError, r"^grid_thw\[1\]: 4.5"),
        ("vision_patch 2^70", lambda: posenc.vision_patch_positions([1, 2 ** 70, 4]), ValueError, r"^grid_thw\[1\]: "),
        ("vision_patch None", lambda: posenc.vision_patch_positions(None), ValueError, r"^grid_thw None is not"),
        ("vision_patch merge 0", lambda: posenc.vision_patch_positions([1, 4, 4], 0), ValueError, r"spatial_merge_size = 0"),
        # context-parallel shards
        ("cp cp_size 0", lambda: cp.shard([10], 0, 0), ValueError, r"^cp_size: 0 \(expected >= 1\)"),
        ("cp cp_size 2^62", lambda: cp.shard([10], 2 ** 62, 0), ValueError, r"^cp_size: 4611686018427387904 is beyond 2\^31"),
        ("cp cp_size bool", lambda: cp.shard([10], True, 0), TypeError, r"^cp_size: True is a bool"),
        ("cp rank negative", lambda: cp.shard([10], 2, -1), ValueError, r"^rank: -1 is outside \[0, 2\)"),
        ("cp rank float", lambda: cp.shard([10], 2, 0.5), TypeError, r"^rank: 0.5 \(float\)"),
        ("cp seq negative", lambda: cp.shard([-10], 2, 0), ValueError, r"^seq_len: -10 is negative"),
        ("cp seq 2^40", lambda: cp.shard([2 ** 40], 2, 0), ValueError, r"^seq_len: 1099511627776 is beyond 2\^31"),
        ("cp seq float", lambda: cp.shard([10.7], 2, 0), TypeError, r"^seq_lens\[0\]: 10.7 \(float\)"),
        ("cp seq string", lambda: cp.shard(["a"], 2, 0), TypeError, r"^seq_lens\[0\]: 'a' \(str\)"),
        ("cp seq_lens an int", lambda: cp.shard(10, 2, 0), TypeError, r"^seq_lens: int is not a sequence"),
        ("cp split with no sequences", lambda: cp.shard([], 2, 0, "x"), ValueError, r"^split: 'x' \(expected zigzag or contiguous\)"),
        ("cp padded_length float", lambda: cp.padded_length(10.5, 2), TypeError, r"^seq_len: 10.5"),
        ("cp padded_length cp string", lambda: cp.padded_length(10, "2"), TypeError, r"^cp_size: '2' \(str\)")]:
    def _f(rope, _call=_call):
        return _call, None, None, []
    case(_name, _exc, _pat)(_f)


# multi-axis RoPE (Qwen2-VL's M-RoPE)
for _name, _pos, _mkx, _pat in [
        ("two components", np.zeros((2, T), np.int64), None, r"8 positions for 3 components x 4 tokens of x"),
        ("1-d", np.zeros(T, np.int64), None, r"^positions: shape \[4\] is not \[components, 4\]"),
        ("negative", -np.ones((3, T), np.int64), None, r"position \[0, 0\] = -1 is outside \[0, 2\^31\)"),
        ("2^62", np.full((3, T), 2 ** 62, np.int64), None, r"= 4611686018427387904 is outside"),
        ("uint64 past int64", np.full((3, T), 2 ** 63 + 1, np.uint64), None, r"^positions: value 9223372036854775809 at index 0 is beyond int64"),
        ("float", np.zeros((3, T)), None, r"^positions: dtype float64"),
        ("batch mismatch", np.zeros((3, 3, T), np.int64), lambda: rnd(2, 12, T, 128), r"^positions: shape \[3, 3, 4\] is not \[components, 4\]"),
        ("x read-only", np.zeros((3, T), np.int64), lambda: ro(rnd(T, 12, 128)), r"^x: array is read-only"),
        ("x float64", np.zeros((3, T), np.int64), lambda: rnd(T, 12, 128, dtype=np.float64), r"^x: dtype float64"),
        ("x stride-0 tokens", np.zeros((3, T), np.int64), lambda: ast(rnd(1, 12, 128), (T, 12, 128), (0, 512, 4)), r"^x: an axis of extent 4 has stride 0")]:
    def _f(rope, _pos=_pos, _mkx=_mkx):
        x = _mkx() if _mkx else rnd(T, 12, 128)
        r = posenc.Rope(QWEN2_VL)
        return (lambda: r.apply_multi_axis(x, _pos)), None, None, [x] if x.strides[0] else []
    case(f"apply_multi_axis {_name}", ValueError, _pat)(_f)


def test_model_lookups_refuse_hostile_ids():
    path = need(DATA / "models" / "stories260K" / "stories260K.bin", "stories260K model")
    m = posenc.Model(path)
    for ids, exc, pat in [
            (np.array([2 ** 63 + 1], np.uint64), ValueError, r"^ids: value 9223372036854775809 at index 0 is beyond int64"),
            ([2 ** 62], ValueError, r"token id 4611686018427387904 at index 0 is outside the vocabulary \[0, 512\)"),
            ([-1], ValueError, r"token id -1 at index 0 is outside the vocabulary"),
            ([1.5], ValueError, r"^ids: dtype float64"),
            ([[1], [1, 2]], ValueError, r"^ids: not an array of integers"),
            (torch.zeros(2, dtype=torch.int64, device="meta"), ValueError, r"^ids: tensor is on device meta"),
            (ast(np.zeros(1, np.int64), (2 ** 40,), (0,)), ValueError, r"^ids x d_model: 1099511627776 x 64 = \d+ elements is more than")]:
        refuses(lambda: m.embed(ids), exc, pat)
    refuses(lambda: m.embed([1], multiplier="x"), TypeError, r"^multiplier: 'x' \(str\) is not a number")
    refuses(lambda: m.embed([1], multiplier=float("nan")), ValueError, r"multiplier nan is not finite")
    refuses(lambda: m.embed([1], out_dtype="int8"), ValueError, r"output dtype int8")
    refuses(lambda: m.tensor(5), TypeError, r"^name: 5 \(int\) is not a tensor name")
    refuses(lambda: m.tensor("nope"), OSError, r"no tensor named 'nope'")
    refuses(lambda: m.positions([0]), OSError, r"no learned position table")
    refuses(lambda: posenc.Model("/nonexistent/model"), OSError, r"no such file or folder")
    assert m.embed(np.array([3], np.uint8)).shape == (1, 64)


@pytest.mark.parametrize("factory,exc,pattern", CASES)
def test_hostile_input_is_refused_by_name(rope, factory, exc, pattern):
    call, _, _, buffers = factory(rope)
    refuses(call, exc, pattern, *buffers)


def test_case_table_covers_the_api():
    """Every public entry point that takes tensors, arrays or integers has cases here."""
    names = " ".join(p.id for p in CASES)
    for entry in ("apply positions", "apply out", "apply_qk", "cos_sin", "frequencies", "Rope config", "Rope max_positions",
                  "apply_layer", "apply_multi_axis", "attn_temperature_scales", "apply_kv_cache", "apply_kv_cache qk_norm",
                  "apply_mla_cache", "split_qkv", "hf out",
                  "hf position_ids", "hf recovered", "sinusoidal", "alibi_slopes", "alibi_bias", "t5_buckets", "t5_bias",
                  "shaw", "text_vision", "vision_patch", "cp ", "from_ggml", "apply_multi_axis negative"):
        assert entry in names, entry
    assert len(CASES) >= 200, len(CASES)


# ---- what is accepted stays correct --------------------------------------------------------------


def test_edge_inputs_that_are_valid(rope):
    """Zero-size arrays are no-ops (their strides mean nothing), a scalar position is one token, fused
    QKV views rotate in place through apply_qk and apply_kv_cache (q and k interleave in every row
    without sharing an element), and a huge max_position_embeddings builds a bounded table."""
    for shape in ((0, H, D), (T, 0, D), (0, H, 2, D)):
        x = rnd(*shape)
        assert rope.apply(x, np.arange(shape[-3] if len(shape) == 3 else 2)).shape == shape
    c, s = rope.cos_sin(3)
    c2, s2 = rope.cos_sin([3])
    assert np.array_equal(c, c2) and np.array_equal(s, s2)
    qkv = rnd(T, (H + 2 * KV) * D)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    q_ref, k_ref = q.copy(), k.copy()
    rope.apply(q_ref, np.arange(T))
    rope.apply(k_ref, np.arange(T))
    rope.apply_qk(q, k, np.arange(T))
    assert np.array_equal(q, q_ref) and np.array_equal(k, k_ref)
    shard = cp.shard([7, 0, 5], 2, 1, "zigzag")
    assert shard.positions.dtype == np.int64 and shard.positions.shape == shard.valid.shape
