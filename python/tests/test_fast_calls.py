"""Rope's decode-speed path (one C++ entry per call, _posenc.RopeCall, reading the tensors themselves)
against its general path (python/posenc/_tensors.py's descriptors): the same bytes for every shape,
order, dtype, batch folding, out, in place, GQA and cache type; it is taken where it should be (the
entry answers, not None); and where it declines, the general path runs and words the error."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import posenc

CFG = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
       "max_position_embeddings": 4096, "rope_theta": 500000.0}
H, KV, D = 4, 2, 128


def general(rope):
    """The same Rope with the C++ entry switched off (its general path)."""
    g = posenc.Rope(CFG)
    g._call = None
    return g


def both(make):
    """Two identical copies of the inputs `make` builds."""
    a = make()
    b = [x.clone() if isinstance(x, torch.Tensor) else x.copy() if isinstance(x, np.ndarray) else x for x in a]
    return a, b


def same_bits(a, b):
    a = a.view(torch.int16) if isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16 else a
    b = b.view(torch.int16) if isinstance(b, torch.Tensor) and b.dtype == torch.bfloat16 else b
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


CASES = [  # (shape, order, positions shape)
    ((5, H, D), None, (5,)),
    ((H, 5, D), "htd", (5,)),
    ((3, H, 7, D), None, (3, 7)),      # [B, H, S, D] contiguous: one view per element
    ((3, H, 7, D), None, (7,)),        # shared positions
    ((6, H, 1, D), None, (6, 1)),      # decode: folded into one view of 6 tokens
    ((6, H, 1, D), "bhsd", (1,)),      # decode, one shared position: joined rows
    ((3, 7, H, D), "bshd", (3, 7)),    # token-major elements back to back: folded
    ((0, H, D), None, (0,)),
]


@pytest.mark.parametrize("shape,order,pshape", CASES)
@pytest.mark.parametrize("kind", ["numpy", "torch32", "torch16", "bf16"])
def test_apply_fast_equals_general(shape, order, pshape, kind):
    rope = posenc.Rope(CFG)
    g = general(rope)
    rng = np.random.default_rng(len(shape) * 31 + sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    pos = rng.integers(0, 6000, pshape)  # (past the 4096-row table too)
    if kind != "numpy":
        x = torch.from_numpy(x).to({"torch32": torch.float32, "torch16": torch.float16, "bf16": torch.bfloat16}[kind])
        pos = torch.from_numpy(pos)
    (a, pa), (b, pb) = both(lambda: [x, pos])
    assert rope._call[1].apply(a, pa, None, order, "forward", False) is a  # the entry took it
    g.apply(b, pb, order=order)
    same_bits(a, b)
    # out of place, backward, the reference kernel
    (a, oa), (b, ob) = both(lambda: [x, x * 0])
    r = rope.apply(a, pos, out=oa, order=order, direction="backward")
    assert r is oa
    g.apply(b, pos, out=ob, order=order, direction="backward")
    same_bits(oa, ob)
    same_bits(a, x)
    (a,), (b,) = both(lambda: [x])
    rope.apply_reference(a, pos, order=order)
    g.apply_reference(b, pos, order=order)
    same_bits(a, b)


def test_transposed_hf_views_and_gqa_qk():
    rope = posenc.Rope(CFG)
    g = general(rope)
    q = torch.randn(2, 9, H, D).transpose(1, 2)  # HF's [B, H, S, D], a transposed view
    k = torch.randn(2, 9, KV, D).transpose(1, 2)
    pos = torch.arange(18).reshape(2, 9) + 100
    (qa, ka), (qb, kb) = both(lambda: [q, k])
    r = rope._call[1].apply_qk(qa, ka, pos, None, "forward")
    assert r is not None and r[0] is qa and r[1] is ka
    g.apply_qk(qb, kb, pos)
    same_bits(qa, qb)
    same_bits(ka, kb)


@pytest.mark.parametrize("cache", ["float16", "bfloat16", "q8_0"])
@pytest.mark.parametrize("tokens", [1, 5])
def test_kv_cache_fast_equals_general(cache, tokens):
    rope = posenc.Rope(CFG)
    g = general(rope)
    qkv = torch.randn(tokens, (H + 2 * KV) * D)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "q8_0": torch.uint8}[cache]
    shape = (2, 64, KV * D // 32 * 34) if cache == "q8_0" else (2, 64, KV, D)
    pos = torch.arange(tokens) + 3000
    slots = torch.randperm(64)[:tokens]
    caches = [torch.zeros(shape, dtype=dt) for _ in range(4)]
    qa = rope.apply_kv_cache(q, k, v, pos, slots, caches[0], caches[1], layer=1)
    qb = g.apply_kv_cache(q, k, v, pos, slots, caches[2], caches[3], layer=1)
    same_bits(qa, qb)
    same_bits(caches[0], caches[2])
    same_bits(caches[1], caches[3])
    assert rope._call[1].apply_kv_cache(q, k, v, pos, slots, caches[0], caches[1], None, 1, False) is not None


@pytest.mark.parametrize("wdtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm", [None, "per_head_one_plus_weight"])
def test_kv_cache_with_qk_norm_fast_equals_general(wdtype, norm):
    """QK-norm decode calls take the one-call entry (the weights widened there) and give the general
    path's bytes; the general path is forced by naming the cache type."""
    rope = posenc.Rope({**CFG, "model_type": "qwen3", "head_dim": D})
    qkv = torch.randn(3, (H + 2 * KV) * D).to(torch.bfloat16)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    wq, wk = (torch.rand(D) + 0.5).to(wdtype), (torch.rand(D) - 0.5).to(wdtype)
    pos, slots = torch.tensor([5, 900, 3000]), torch.tensor([7, 1, 60])
    caches = [torch.zeros(64, KV, D, dtype=torch.bfloat16) for _ in range(4)]
    kw = dict(q_norm=wq, k_norm=wk, norm_eps=1e-6, norm=norm)
    qa = rope.apply_kv_cache(q, k, v, pos, slots, caches[0], caches[1], **kw)
    qb = rope.apply_kv_cache(q, k, v, pos, slots, caches[2], caches[3], cache_type="bfloat16", **kw)
    same_bits(qa, qb)
    same_bits(caches[0], caches[2])
    same_bits(caches[1], caches[3])
    conv = rope.scheme.qk_norm if norm is None else norm
    assert rope._call[1].apply_kv_cache(q, k, v, pos, slots, caches[0], caches[1], None, 0, False, wq, wk, 1e-6,
                                        conv) is not None
    # weights at an odd address (a float16 view into a byte buffer) give the same bytes
    buf = np.zeros(2 * D + 1, np.uint8)
    odd = np.frombuffer(buf, np.float16, count=D, offset=1)
    odd.setflags(write=True)
    odd[:] = wq.float().numpy().astype(np.float16)
    cu, cg = torch.zeros_like(caches[0]), torch.zeros_like(caches[0])
    qu = rope.apply_kv_cache(q, k, v, pos, slots, cu, torch.zeros_like(cu), q_norm=odd, norm_eps=1e-6, norm=norm)
    qg = rope.apply_kv_cache(q, k, v, pos, slots, cg, torch.zeros_like(cg), q_norm=odd, norm_eps=1e-6, norm=norm,
                             cache_type="bfloat16")
    same_bits(qu, qg)
    # declined (None, nothing written) where the general path words an error or converts
    c = torch.zeros_like(caches[0])
    for bad in [(wq, wk, None, conv), (wq, wk, 1e-6, "none"), (wq, wk, 1e-6, "per_head_layernorm"),
                (wq, wk, True, conv), ([1.0] * D, None, 1e-6, conv), (wq[::2], None, 1e-6, conv),
                (None, None, 1e-6, None), (wq.reshape(2, -1), None, 1e-6, conv)]:
        assert rope._call[1].apply_kv_cache(q, k, v, pos, slots, c, c.clone(), None, 0, False, *bad) is None
    assert c.abs().sum() == 0


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("scales", [(None, None), (0.5, 0.125), "per_head"])
def test_float8_kv_cache_fast_equals_general(fmt, scales):
    """float8 caches (uint8 codes with cache_type, scales as numbers or per-head float32 arrays) take the
    one-call entry and give the general path's bytes; what the general path words is declined."""
    rope, g = posenc.Rope(CFG), general(posenc.Rope(CFG))
    qkv = torch.randn(3, (H + 2 * KV) * D).to(torch.bfloat16)
    q, k, v = posenc.split_qkv(qkv, H, KV, D)
    ks, vs = (np.array([0.5, 2.0], np.float32), np.array([0.25, 1.0], np.float32)) if scales == "per_head" else scales
    pos, slots = torch.tensor([5, 900, 3000]), torch.tensor([7, 1, 60])
    caches = [torch.zeros(64, KV, D, dtype=torch.uint8) for _ in range(4)]
    kw = dict(cache_type=fmt, k_scale=ks, v_scale=vs)
    qa = rope.apply_kv_cache(q, k, v, pos, slots, caches[0], caches[1], **kw)
    qb = g.apply_kv_cache(q, k, v, pos, slots, caches[2], caches[3], **kw)
    same_bits(qa, qb)
    same_bits(caches[0], caches[2])
    same_bits(caches[1], caches[3])
    assert caches[0].any()
    call = rope._call[1]
    args = (q, k, v, pos, slots, caches[0], caches[1], None, 0, False, None, None, None, None)
    assert call.apply_kv_cache(*args, fmt, ks, vs) is not None
    c = torch.zeros_like(caches[0])
    bad_args = (q, k, v, pos, slots, c, c.clone(), None, 0, False, None, None, None, None)
    for bad in [("float8", ks, vs), (fmt, 0.0, vs), (fmt, float("nan"), vs), (fmt, np.ones(3, np.float32), vs),
                (fmt, np.ones(2, np.float64), vs), (fmt, "1", vs), (None, 0.5, None), ("q8_0", None, None)]:
        assert call.apply_kv_cache(*bad_args, *bad) is None, bad
    assert c.abs().sum() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cache", ["same", "q8_0", "float8_e5m2"])
def test_mla_cache_fast_equals_general(dtype, cache):
    """Rope.apply_mla_cache takes the one-call entry and gives the general path's bytes, q in place and
    without q; a uint8 cache of the float row's width (float8 codes, which need cache_type) is declined."""
    cfg = {"model_type": "deepseek_v3", "hidden_size": 1024, "num_attention_heads": H, "kv_lora_rank": 512,
           "q_lora_rank": 256, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "rope_theta": 10000.0, "max_position_embeddings": 4096}
    rope, g = posenc.Rope(cfg), posenc.Rope(cfg)
    g._call = None
    kv = torch.randn(3, 576).to(dtype)
    q = torch.randn(3, H, 192).to(dtype)
    w = (torch.rand(512) + 0.5).to(torch.bfloat16)
    pos, slots = torch.tensor([5, 900, 3000]), torch.tensor([7, 1, 30])
    shape, cdt = {"same": ((2, 32, 576), dtype), "q8_0": ((2, 32, 576 // 32 * 34), torch.uint8),
                  "float8_e5m2": ((2, 32, 576), torch.uint8)}[cache]
    caches = [torch.zeros(shape, dtype=cdt) for _ in range(4)]
    qa, qb = q.clone(), q.clone()
    kw = dict(layer=1, kv_norm=w, norm_eps=1e-6)
    if cache == "float8_e5m2":
        kw.update(cache_type=cache, scale=0.5)
    assert rope.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, caches[0], q=qa, q_out=qa, **kw) is qa
    g.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, caches[1], q=qb, q_out=qb, **kw)
    same_bits(qa, qb)
    same_bits(caches[0], caches[1])
    assert rope.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, caches[2], **kw) is None
    same_bits(caches[2], caches[0])
    call = rope._call[1]
    assert call.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, caches[3], q, None, 1, False, w, 1e-6,
                                "per_head", kw.get("cache_type"), kw.get("scale")) is not None
    c8 = torch.zeros(2, 32, 576, dtype=torch.uint8)
    assert call.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, c8, None, None, 1, False, None, None,
                                None) is None
    assert c8.abs().sum() == 0


def test_declined_calls_raise_the_general_paths_errors():
    rope = posenc.Rope(CFG)
    call = rope._call[1]
    x = np.zeros((2, H, D), np.float32)
    # each declined by the entry (None, nothing written) and worded by the general path
    for args, err, msg in [
        ((x, np.array([0, -1])), ValueError, r"position -1"),
        ((x, np.array([0, 1, 2])), ValueError, r"^positions: 3 positions for 2 tokens"),
        ((x[:, :, ::2], np.array([0, 1])), ValueError, r"^x: head_dim axis has stride 2"),
        ((x.astype(np.float64), np.array([0, 1])), ValueError, r"^x: dtype float64 is not float32 or float16"),
        ((np.zeros((2, D), np.float32), np.array([0, 1])), ValueError, r"^x: shape \[2, 128\] is not"),
    ]:
        before = args[0].copy()
        assert call.apply(*args, None, None, "forward", False) is None
        with pytest.raises(err, match=msg):
            rope.apply(*args)
        np.testing.assert_array_equal(args[0], before)
    ro = np.zeros((2, H, D), np.float32)
    ro.flags.writeable = False
    assert call.apply(ro, np.arange(2), None, None, "forward", False) is None
    with pytest.raises(ValueError, match="^x: array is read-only"):
        rope.apply(ro, np.arange(2))
    with pytest.raises(ValueError, match="order 'bhsd' does not fit a 3-d shape"):
        rope.apply(x, np.arange(2), order="bhsd")
    # a view reaching past its owner's memory (as_strided): declined, refused by name
    base = np.zeros(H * D, np.float32)
    bad = np.lib.stride_tricks.as_strided(base, (2, H, D), (H * D * 4, D * 4, 4))
    assert call.apply(bad, np.arange(2), None, None, "forward", False) is None
    with pytest.raises(ValueError, match="reach outside"):
        rope.apply(bad, np.arange(2))
    # q and k sharing memory
    q = np.zeros((2, H, D), np.float32)
    with pytest.raises(ValueError, match="^k: overlaps q without being it"):
        rope.apply_qk(q, q[:, :KV], np.arange(2))
    # a tensor that requires grad is declined; the general path refuses it outside no_grad
    t = torch.zeros(2, H, D, requires_grad=True)
    assert call.apply(t, np.arange(2), None, None, "forward", False) is None
    with pytest.raises(ValueError, match="requires grad"):
        rope.apply(t, np.arange(2))


def test_a_dynamic_table_takes_the_general_path():
    cfg = dict(CFG, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    rope = posenc.Rope(cfg)
    assert rope._call is None
    x = np.ones((3, H, D), np.float32)
    rope.apply(x, np.arange(3))
    assert np.isfinite(x).all() and not (x == 1).all()


def test_numpy_calls_import_no_torch():
    code = textwrap.dedent("""
        import sys, numpy as np, posenc
        cfg = %r
        rope = posenc.Rope(cfg)
        q = np.ones((1, 4, 128), np.float32)
        rope.apply(q, np.arange(1))
        rope.apply_qk(q, np.ones((1, 2, 128), np.float32), 0)
        print("torch" in sys.modules)
    """ % (CFG,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_set_num_threads_returns_the_count():
    try:
        assert posenc.set_num_threads(3) == 3
        assert posenc.num_threads() == 3
        assert posenc.set_num_threads(0) == posenc.num_threads()
    finally:
        posenc.set_num_threads(0)


def test_set_num_threads_warns_when_the_os_refuses_threads():
    # A process whose address space has room for few thread stacks: the pool starts what it can, and
    # set_num_threads says so (RuntimeWarning with the pool's reason) and returns the smaller count.
    code = textwrap.dedent("""
        import resource, warnings, posenc
        def used():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[0]) * resource.getpagesize()
        cap = used() + (48 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            n = posenc.set_num_threads(300)
        print(n, posenc.num_threads(), len(w), w[0].category.__name__ if w else "", str(w[0].message) if w else "")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    n, running, warned, category, message = out.stdout.strip().split(" ", 4)
    assert 1 <= int(n) < 300 and int(n) == int(running)
    assert (warned, category) == ("1", "RuntimeWarning")
    assert message.startswith("set_num_threads(300): thread pool: started "), message
