"""Rope.apply_kv_cache (posenc's fused RoPE + KV-cache write) from Python: the same bytes as Rope.apply_qk
followed by the cache copy, for every activation dtype and cache type (float caches by torch's own
nearest-even conversion, Q8_0 by ggml's quantize_row_q8_0 definition written here in numpy), on views
of a fused projection (split_qkv), with numpy arrays, in place, the reference kernel; and the errors."""
import numpy as np
import pytest
import torch

import posenc

CFG = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
       "max_position_embeddings": 4096, "rope_theta": 500000.0}
T, H, KV, D = 17, 4, 2, 128


def q8_0_reference(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q8_0_ref of float32 rows [n, k] (k % 32 == 0) as bytes [n, k / 32 * 34]."""
    n, k = x.shape
    b = x.reshape(n, k // 32, 32).astype(np.float32)
    amax = np.abs(b).max(axis=2)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * idv[:, :, None]).astype(np.float32)
    # roundf, halves away from zero; |v| + 0.5 in float64 is exact for float32 v
    qs = (np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)).astype(np.int8)
    out = np.empty((n, k // 32, 34), np.uint8)
    out[:, :, :2] = d.astype(np.float16).view(np.uint8).reshape(n, k // 32, 2)
    out[:, :, 2:] = qs.view(np.uint8)
    return out.reshape(n, -1)


def make_inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(T, (H + 2 * KV) * D, generator=g).to(dtype)
    pos = torch.randint(0, 4000, (T,), generator=g)
    slots = torch.randperm(40, generator=g)[:T]
    return qkv, pos, slots


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cache", ["float32", "float16", "bfloat16", "q8_0"])
def test_fused_equals_rotate_then_copy(dtype, cache):
    rope = posenc.Rope(CFG)
    qkv, pos, slots = make_inputs(dtype)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    if cache == "q8_0":
        kc = torch.zeros(3, 40, KV * D // 32 * 34, dtype=torch.uint8)
    else:
        kc = torch.zeros(3, 40, KV, D, dtype=getattr(torch, cache))
    vc = torch.zeros_like(kc)
    q_out = rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, layer=2)
    q_ref, k_ref = q.clone(), k.clone()
    rope.apply_qk(q_ref, k_ref, pos, order="thd")
    assert torch.equal(q_out, q_ref)
    assert kc[:2].abs().sum() == 0 and vc[:2].abs().sum() == 0  # other layers untouched
    if cache == "q8_0":
        want_k = q8_0_reference(k_ref.float().reshape(T, -1).numpy())
        want_v = q8_0_reference(v.float().reshape(T, -1).numpy())
        assert np.array_equal(kc[2, slots].numpy(), want_k)
        assert np.array_equal(vc[2, slots].numpy(), want_v)
    else:
        assert torch.equal(kc[2, slots], k_ref.to(kc.dtype))
        assert torch.equal(vc[2, slots], v.to(kc.dtype))
    # The scalar reference kernel gives q within its own rounding of the fast one, the same cache rows
    # when the cache type is exact for the values.
    q2 = rope.apply_kv_cache(q, k, v, pos, slots, torch.zeros_like(kc), torch.zeros_like(vc), layer=2, reference=True)
    assert torch.allclose(q2.float(), q_out.float(), atol=2e-2, rtol=1e-2)


def test_numpy_in_place_and_single_layer_cache():
    rope = posenc.Rope(CFG)
    x = np.random.default_rng(1).standard_normal((T, (H + 2 * KV) * D)).astype(np.float32)
    q, k, v = posenc.split_qkv(x, H, KV, D)
    q_ref = q.copy()
    k_ref = k.copy()
    pos = np.arange(T) + 100
    rope.apply_qk(q_ref, k_ref, pos, order="thd")
    kc = np.zeros((T, KV, D), np.float16)
    vc = np.zeros_like(kc)
    out = rope.apply_kv_cache(q, k, v, pos, np.arange(T)[::-1].copy(), kc, vc, q_out=q)  # in place
    assert out is q
    assert np.array_equal(q, q_ref)
    assert np.array_equal(kc[::-1], k_ref.astype(np.float16))
    assert np.array_equal(vc[::-1], v.astype(np.float16))


def test_errors_name_what_is_wrong_and_write_nothing():
    rope = posenc.Rope(CFG)
    qkv, pos, _ = make_inputs(torch.float32)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    kc = torch.zeros(1, 8, KV, D)
    vc = torch.zeros_like(kc)
    slots = torch.arange(T) % 8  # collisions
    with pytest.raises(ValueError, match="slot"):
        rope.apply_kv_cache(q, k, v, pos, slots, kc, vc)
    assert kc.abs().sum() == 0
    big = torch.zeros(1, 40, KV, D)
    with pytest.raises(ValueError, match="token 0 .*slot 99|slot 99"):
        rope.apply_kv_cache(q, k, v, pos, torch.tensor([99] + list(range(1, T))), big, torch.zeros_like(big))
    with pytest.raises(ValueError, match="layer"):
        rope.apply_kv_cache(q, k, v, pos, torch.arange(T), big, torch.zeros_like(big), layer=1)
    with pytest.raises(ValueError, match=r"k_cache: shape \[40, 2, 64\]"):
        rope.apply_kv_cache(q, k, v, pos, torch.arange(T), torch.zeros(40, KV, 64), torch.zeros(40, KV, 64))
    with pytest.raises(ValueError, match="v_cache: a float16 cache"):
        rope.apply_kv_cache(q, k, v, pos, torch.arange(T), big, torch.zeros(1, 40, KV, D, dtype=torch.float16))
    with pytest.raises(ValueError, match="k_cache: tensor is not contiguous"):
        nc = torch.zeros(1, KV, 40, D).transpose(1, 2)
        rope.apply_kv_cache(q, k, v, pos, torch.arange(T), nc, nc)
    with pytest.raises(ValueError, match=r"k_cache: shape \[40, 100\] is not \[layers, slots, 272\]"):
        rope.apply_kv_cache(q, k, v, pos, torch.arange(T), torch.zeros(40, 100, dtype=torch.uint8),
                            torch.zeros(40, 100, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"slots: shape \[3\]"):
        rope.apply_kv_cache(q, k, v, pos, torch.arange(3), big, torch.zeros_like(big))
    with pytest.raises(ValueError, match="qkv: shape"):
        posenc.split_qkv(qkv, H, KV, 64)
    assert big.abs().sum() == 0


def float8_reference(x: np.ndarray, fmt: str) -> np.ndarray:
    """PyTorch's float32 -> float8_e4m3fn / float8_e5m2 conversion of finite x, written here from the
    formats' definitions: the nearest code, ties to the even code; e4m3fn past 464 is NaN (0x7f), e5m2
    past 61440 is infinity (0x7c)."""
    exp_bits, man_bits = (4, 3) if fmt == "float8_e4m3fn" else (5, 2)
    bias = (1 << (exp_bits - 1)) - 1
    codes = np.arange(128)
    e, m = codes >> man_bits, codes & ((1 << man_bits) - 1)
    vals = np.where(e == 0, m * 2.0 ** (1 - bias - man_bits), (1 + m / (1 << man_bits)) * 2.0 ** (e - bias))
    last = 0x7e if fmt == "float8_e4m3fn" else 0x7b  # the largest finite code
    vals = vals[:last + 1]
    a = np.abs(x.astype(np.float64)).ravel()
    hi = np.clip(np.searchsorted(vals, a), 1, last)
    lo = hi - 1
    d_lo, d_hi = a - vals[lo], vals[hi] - a
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    code = np.where(a > vals[last], last, code)  # (448, 464] / (57344, 61440) round down to the largest
    over = a > 464.0 if fmt == "float8_e4m3fn" else a >= 61440.0
    code = np.where(over, 0x7f if fmt == "float8_e4m3fn" else 0x7c, code)
    sign = np.signbit(x.ravel()).astype(np.int64) << 7
    return (code | sign).astype(np.uint8).reshape(x.shape)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_cache_with_per_tensor_and_per_head_scales(dtype, fmt):
    rope = posenc.Rope(CFG)
    qkv, pos, slots = make_inputs(dtype, seed=3)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    kc = torch.zeros(2, 40, KV, D, dtype=torch.uint8)  # float8 codes in uint8 storage
    vc = torch.zeros_like(kc)
    # per tensor; per head, the second head's scale putting many codes among the subnormals
    k_scale, v_scale = 0.5, [2.0, 64.0 if fmt == "float8_e4m3fn" else 4096.0]
    q_out = rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, layer=1, cache_type=fmt, k_scale=k_scale,
                                v_scale=np.array(v_scale, np.float32))
    q_ref, k_ref = q.clone(), k.clone()
    rope.apply_qk(q_ref, k_ref, pos, order="thd")
    assert torch.equal(q_out, q_ref)
    want_k = float8_reference(k_ref.float().numpy() / np.float32(k_scale), fmt)
    want_v = float8_reference(v.float().numpy() / np.array(v_scale, np.float32)[None, :, None], fmt)
    assert np.array_equal(kc[1, slots].numpy(), want_k)
    assert np.array_equal(vc[1, slots].numpy(), want_v)
    assert kc[0].sum() == 0 and vc[0].sum() == 0
    subnormal = (want_v & 0x7f) < (1 << (3 if fmt == "float8_e4m3fn" else 2))
    assert subnormal.sum() > 100
    # The scalar reference kernel writes the same codes (q to within its own rounding).
    kc2, vc2 = torch.zeros_like(kc), torch.zeros_like(vc)
    rope.apply_kv_cache(q, k, v, pos, slots, kc2, vc2, layer=1, cache_type=fmt, k_scale=k_scale, v_scale=v_scale,
                        reference=True)
    assert torch.equal(kc2, kc) and torch.equal(vc2, vc)


def test_float8_cache_errors_name_what_is_wrong_and_write_nothing():
    rope = posenc.Rope(CFG)
    qkv, pos, slots = make_inputs(torch.float32)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    kc = torch.zeros(1, 40, KV, D, dtype=torch.uint8)
    vc = torch.zeros_like(kc)
    q_before = q.clone()
    cases = [
        (dict(cache_type="float8_e4m3"), "cache_type: 'float8_e4m3' is not one of"),
        (dict(cache_type="float8_e4m3fn", k_scale=[1.0, 2.0, 3.0]), r"k_scale has 3 values, not 1 \(per tensor\) or 2"),
        (dict(cache_type="float8_e5m2", v_scale=0.0), r"v_scale\[0\] = 0 is not a finite scale > 0"),
        (dict(cache_type="float8_e5m2", v_scale=float("nan")), r"v_scale\[0\] = nan"),
        (dict(cache_type="float8_e5m2", k_scale=[[1.0]]), r"k_scale: shape \[1, 1\] is not a number or \[kv_heads\]"),
        (dict(cache_type="float8_e5m2", k_scale="big"), "k_scale: <U3 is not a number"),
        (dict(cache_type="float16"), "k_cache: a torch.uint8 tensor cannot hold a float16 cache"),
        (dict(k_scale=1.0), r"k_cache: shape \[1, 40, 2, 128\] is not \[layers, slots, 272\]"),  # uint8: q8_0
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, **kwargs)
    for f in (torch.zeros(1, 40, KV, D), torch.zeros(1, 40, KV * D // 32 * 34, dtype=torch.uint8)):
        with pytest.raises(ValueError, match=f"k_scale given for a {'float32' if f.is_floating_point() else 'q8_0'} cache"):
            rope.apply_kv_cache(q, k, v, pos, slots, f, torch.zeros_like(f), k_scale=1.0)
        assert f.sum() == 0
    assert kc.sum() == 0 and vc.sum() == 0 and torch.equal(q, q_before)
