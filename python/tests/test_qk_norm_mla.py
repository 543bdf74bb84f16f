"""QK-norm fused into Rope.apply_kv_cache and the MLA cache row (Rope.apply_mla_cache) from Python: the
values of an independent torch definition (HF's RMSNorm classes written out here: Qwen3's cast then
scale, Gemma 3's 1 + w, scale then cast) followed by posenc's own RoPE, the scalar reference kernel's
bytes, the scheme's convention read from the model's family, and the errors (nothing written)."""
import numpy as np
import pytest
import torch

import posenc

T, H, KV, D = 9, 4, 2, 128
QWEN3 = {"model_type": "qwen3", "hidden_size": 512, "num_attention_heads": H, "num_key_value_heads": KV,
         "head_dim": D, "rope_theta": 1e6, "max_position_embeddings": 4096}
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 512, "num_attention_heads": H, "num_key_value_heads": KV,
          "head_dim": D, "rope_theta": 1e6, "max_position_embeddings": 4096}
LLAMA = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": H, "num_key_value_heads": KV,
         "max_position_embeddings": 4096, "rope_theta": 500000.0}
DEEPSEEK = {"model_type": "deepseek_v3", "hidden_size": 1024, "num_attention_heads": H, "kv_lora_rank": 512,
            "q_lora_rank": 256, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "rope_theta": 10000.0, "max_position_embeddings": 4096}
EPS = 1e-6


def rms_norm(x: torch.Tensor, w: torch.Tensor, convention: str) -> torch.Tensor:
    """HF's per-head RMSNorm of x [..., head_dim] in its input dtype, by convention."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    if convention == "per_head":  # Qwen3RMSNorm, DeepseekV3RMSNorm: weight * x.to(input_dtype)
        return w.to(x.dtype) * h.to(x.dtype)
    if convention == "per_head_one_plus_weight":  # Gemma3RMSNorm: x * (1 + w) in float32
        return (h * (1.0 + w.float())).to(x.dtype)
    return (h * w.float()).to(x.dtype)  # per_head_float32: (x * w).to(input_dtype)


def close(a: torch.Tensor, b: torch.Tensor, dtype=None) -> None:
    """Equal up to the last bits torch's rsqrt and reduction order leave (a few ulps of `dtype`, the
    activations' type: a's by default)."""
    tol = {torch.float32: (2e-5, 2e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}[dtype or a.dtype]
    torch.testing.assert_close(a.float(), b.float(), rtol=tol[0], atol=tol[1])


def test_schemes_say_their_qk_norm():
    assert posenc.Rope(QWEN3).scheme.qk_norm == "per_head"
    assert posenc.Rope(GEMMA3).scheme.qk_norm == "per_head_one_plus_weight"
    assert posenc.Rope(LLAMA).scheme.qk_norm == "none"
    assert posenc.Rope(DEEPSEEK).scheme.qk_norm == "none"


@pytest.mark.parametrize("cfg", [QWEN3, GEMMA3], ids=["qwen3", "gemma3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cache", ["bfloat16", "float32", "q8_0"])
def test_fused_qk_norm_is_norm_then_rope(cfg, dtype, cache):
    rope = posenc.Rope(cfg)
    g = torch.Generator().manual_seed(3)
    qkv = (torch.randn(T, (H + 2 * KV) * D, generator=g) * 3).to(dtype)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    wq, wk = torch.rand(D, generator=g) + 0.5, torch.rand(D, generator=g) - 0.5
    pos, slots = torch.randint(0, 4000, (T,), generator=g), torch.randperm(20, generator=g)[:T]
    shape = (20, KV * D // 32 * 34) if cache == "q8_0" else (20, KV, D)
    cdt = torch.uint8 if cache == "q8_0" else getattr(torch, cache)
    kc, vc = torch.zeros(shape, dtype=cdt), torch.zeros(shape, dtype=cdt)
    q_out = rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_norm=wq, k_norm=wk, norm_eps=EPS)
    # The definition: each head normed (the scheme's convention), then posenc's RoPE.
    conv = rope.scheme.qk_norm
    q_ref, k_ref = rms_norm(q, wq, conv), rms_norm(k, wk, conv)
    rope.apply_qk(q_ref, k_ref, pos, order="thd")
    close(q_out, q_ref)
    if cache != "q8_0":
        close(kc[slots], k_ref.to(kc.dtype), dtype)
        assert torch.equal(vc[slots], v.to(vc.dtype))
    # The scalar reference kernel: the same values up to its own float32 rounding (no FMA), v the same bytes.
    kc2, vc2 = torch.zeros_like(kc), torch.zeros_like(vc)
    q2 = rope.apply_kv_cache(q, k, v, pos, slots, kc2, vc2, q_norm=wq, k_norm=wk, norm_eps=EPS, reference=True)
    close(q2, q_out)
    assert torch.equal(vc2, vc)
    if cache != "q8_0":
        close(kc2, kc, dtype)
    # A convention named differently from the scheme's gives other values.
    other = "per_head_float32" if conv == "per_head_one_plus_weight" else "per_head_one_plus_weight"
    q3 = rope.apply_kv_cache(q, k, v, pos, slots, torch.zeros_like(kc), torch.zeros_like(vc), q_norm=wq,
                             k_norm=wk, norm_eps=EPS, norm=other)
    assert not torch.equal(q3, q_out)


def test_qk_norm_on_numpy_in_place_and_q_only():
    rope = posenc.Rope(QWEN3)
    x = np.random.default_rng(4).standard_normal((T, (H + 2 * KV) * D)).astype(np.float32)
    q, k, v = posenc.split_qkv(x, H, KV, D)
    w = np.linspace(0.5, 1.5, D, dtype=np.float32)
    q_ref = rms_norm(torch.from_numpy(q.copy()), torch.from_numpy(w), "per_head")
    k_ref = torch.from_numpy(k.copy())
    rope.apply_qk(q_ref, k_ref, np.arange(T), order="thd")
    kc = np.zeros((T, KV, D), np.float32)
    vc = np.zeros_like(kc)
    out = rope.apply_kv_cache(q, k, v, np.arange(T), np.arange(T), kc, vc, q_out=q, q_norm=w, norm_eps=EPS)
    assert out is q
    close(torch.from_numpy(q), q_ref)
    assert np.array_equal(kc, k_ref.numpy())  # k not normed: k_norm not given


def test_qk_norm_errors_name_what_is_wrong_and_write_nothing():
    rope, plain = posenc.Rope(QWEN3), posenc.Rope(LLAMA)
    qkv = torch.randn(T, (H + 2 * KV) * D)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    kc = torch.zeros(20, KV, D)
    vc = torch.zeros_like(kc)
    q_out = torch.zeros(T, H, D)
    w = torch.ones(D)
    args = (q, k, v, torch.arange(T), torch.arange(T), kc, vc)
    cases = [
        (rope, dict(q_norm=torch.ones(D - 1), norm_eps=EPS), "norm of queries: weight has 127 values"),
        (rope, dict(k_norm=w, norm_eps=0.0), "eps"),
        (rope, dict(q_norm=w), "norm_eps: required with q_norm"),
        (rope, dict(norm_eps=EPS), "norm_eps: given without a norm weight"),
        (rope, dict(norm="per_head"), "norm: given without a norm weight"),
        (rope, dict(q_norm=torch.tensor([1.0, float("nan")] * 64), norm_eps=EPS), "q_norm: value nan at index 1"),
        (rope, dict(q_norm=torch.ones(0), norm_eps=EPS), "q_norm: no values"),
        (rope, dict(q_norm=w, norm_eps=EPS, norm="rms"), "q_norm: norm 'rms' \\(expected one of per_head, "),
        (rope, dict(q_norm=w, norm_eps=EPS, norm="per_head_layernorm"), "not an RMSNorm"),
        (plain, dict(q_norm=w, norm_eps=EPS), "q_norm: the scheme has no QK-norm"),
    ]
    for r, kw, match in cases:
        with pytest.raises(ValueError, match=match):
            r.apply_kv_cache(*args, q_out=q_out, **kw)
    assert kc.abs().sum() == 0 and vc.abs().sum() == 0 and q_out.abs().sum() == 0
    # A scheme without QK-norm runs one when the convention is named.
    plain.apply_kv_cache(*args, q_out=q_out, q_norm=w, norm_eps=EPS, norm="per_head")
    assert kc.abs().sum() > 0


def rotate_window(rope: posenc.Rope, x: torch.Tensor, pos) -> torch.Tensor:
    """x [T, rope_dim] rotated as the scheme rotates a q head's window (posenc's apply on a head whose
    window holds x)."""
    head = torch.zeros(x.shape[0], 1, rope.scheme.head_dim, dtype=x.dtype)
    head[:, 0, rope.scheme.rotary_start:] = x
    rope.apply(head, pos, order="thd")
    return head[:, 0, rope.scheme.rotary_start:]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("cache", ["same", "q8_0", "float8_e4m3fn"])
def test_mla_cache_row_is_norm_and_rope(dtype, cache):
    rope = posenc.Rope(DEEPSEEK)
    g = torch.Generator().manual_seed(5)
    kv = (torch.randn(T, 512 + 64, generator=g) * 2).to(dtype)  # the kv_a projection output
    q = torch.randn(T, H, 192, generator=g).to(dtype)
    w = torch.rand(512, generator=g) + 0.5
    pos, slots = torch.randint(0, 4000, (T,), generator=g), torch.randperm(16, generator=g)[:T]
    if cache == "same":
        c = torch.zeros(2, 16, 576, dtype=dtype)
    elif cache == "q8_0":
        c = torch.zeros(2, 16, 576 // 32 * 34, dtype=torch.uint8)
    else:
        c = torch.zeros(2, 16, 576, dtype=torch.uint8)
    ct = cache if cache == "float8_e4m3fn" else None
    scale = 0.5 if ct else None
    q_out = rope.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, c, q=q, layer=1, kv_norm=w, norm_eps=EPS,
                                 cache_type=ct, scale=scale)
    assert c[0].abs().sum() == 0
    assert torch.equal(q_out[..., :128], q[..., :128])  # the nope dims as they were
    want_q = q.clone()
    rope.apply(want_q, pos, order="thd")
    assert torch.equal(q_out, want_q)
    row = torch.cat([rms_norm(kv[:, :512], w, "per_head"), rotate_window(rope, kv[:, 512:], pos)], dim=1)
    if cache == "same":
        close(c[1, slots], row)
    # The scalar reference, q in place: the same values up to its float32 rounding (no FMA).
    c2 = torch.zeros_like(c)
    q2 = q.clone()
    out2 = rope.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, c2, q=q2, q_out=q2, layer=1, kv_norm=w,
                                norm_eps=EPS, reference=True, cache_type=ct, scale=scale)
    assert out2 is q2
    close(q2, q_out)
    if cache == "same":
        close(c2, c)
    # The cache rows alone (no q): the same bytes as with q.
    c3 = torch.zeros_like(c)
    assert rope.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, c3, layer=1, kv_norm=w, norm_eps=EPS,
                                cache_type=ct, scale=scale) is None
    assert torch.equal(c3, c)


def test_mla_numpy_without_norm_copies_the_latent():
    rope = posenc.Rope(DEEPSEEK)
    kv = np.random.default_rng(6).standard_normal((T, 576)).astype(np.float32)
    c = np.zeros((12, 576), np.float32)
    slots = np.arange(T)[::-1].copy()
    rope.apply_mla_cache(kv[:, :512], kv[:, 512:], np.arange(T), slots, c)
    assert np.array_equal(c[slots, :512], kv[:, :512])
    want = rotate_window(rope, torch.from_numpy(kv[:, 512:].copy()), np.arange(T)).numpy()
    assert np.array_equal(c[slots, 512:], want)


def test_mla_errors_name_what_is_wrong_and_write_nothing():
    rope = posenc.Rope(DEEPSEEK)
    kv = torch.randn(T, 576)
    q = torch.randn(T, H, 192)
    c = torch.zeros(16, 576)
    w = torch.ones(512)
    base = (kv[:, :512], kv[:, 512:], torch.arange(T), torch.arange(T))
    cases = [
        (dict(cache=torch.zeros(16, 575)), r"cache: shape \[16, 575\] is not \[layers, slots, 576\]"),
        (dict(cache=c, kv_norm=torch.ones(511), norm_eps=EPS), "norm of kv_c: weight has 511 values"),
        (dict(cache=c, kv_norm=w), "norm_eps: required with kv_norm"),
        (dict(cache=c, q=torch.randn(T, H, 128)), "q"),
        (dict(cache=c, q_out=torch.zeros(T, H, 192)), "q_out: given without q"),
        (dict(cache=c, q=q, q_out=torch.zeros(T, H, 192, dtype=torch.float16)), "output .* float16 differs"),
        (dict(cache=torch.zeros(4, 576)), "slot"),
        (dict(cache=c, scale=2.0), "scale"),
        (dict(cache=torch.zeros(16, 576, dtype=torch.uint8), cache_type="float8_e4m3fn", scale=0.0), "scale"),
    ]
    for kw, match in cases:
        cache = kw.pop("cache")
        before = cache.clone()
        with pytest.raises(ValueError, match=match):
            rope.apply_mla_cache(*base, cache, **kw)
        assert torch.equal(cache, before)
    with pytest.raises(ValueError, match=r"k_pe: shape \[9, 2, 32\]"):
        rope.apply_mla_cache(kv[:, :512], kv[:, 512:].reshape(T, 2, 32), torch.arange(T), torch.arange(T), c)
    with pytest.raises(ValueError, match="cache"):  # the cache over its own input
        rope.apply_mla_cache(kv[:, :512], kv[:, 512:], torch.arange(T), torch.arange(T), kv)
    assert c.abs().sum() == 0
