"""The Hugging Face drop-in given HF's own cos and sin returns HF's q and k bit for bit: the formula
`q * cos + rotate_half(q) * sin` (rotate_every_two for the interleaved families; partial rotary: the
first cos.shape[-1] dims, the rest passed through) written in torch here, on every golden RoPE case's
config (HF and ggml), in float32, float16 and bfloat16, for a model in HF's style: q and k from
projections viewed [batch, heads, seq, head_dim] (strided), grouped-query k, a KV-cache offset, left
padding, prefill then a decode step, unsqueeze_dim 1 and 2, cos of batch 1 broadcast."""
import numpy as np
import pytest
import torch

import posenc
from test_rope_golden import GGML_CASES, HF_CASES, _case, _ids, _rope, rotate_every_two, rotate_half

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def hf_formula(q, cos, sin, interleaved, unsqueeze_dim):
    """transformers' apply_rotary_pos_emb (with the partial-rotary split of Phi / GPT-NeoX / GLM)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    rot = cos.shape[-1]
    q_rot, q_pass = q[..., :rot], q[..., rot:]
    rh = rotate_every_two if interleaved else rotate_half
    return torch.cat((q_rot * cos + rh(q_rot) * sin, q_pass), dim=-1)


def hf_cos_sin(inv_freq, position_ids, scaling, interleaved, dtype):
    """HF's rotary embedding forward: float32 angles, cos/sin times the attention scaling, cast to q's dtype."""
    inv = torch.from_numpy(np.asarray(inv_freq, np.float32))
    freqs = (inv[None, :, None].expand(position_ids.shape[0], -1, 1) @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.repeat_interleave(freqs, 2, dim=-1) if interleaved else torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)


def assert_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype} {got.shape} vs {want.dtype} {want.shape}"
    g, w = got.contiguous().view(INT_VIEW[got.dtype]), want.contiguous().view(INT_VIEW[want.dtype])
    n = int((g != w).sum())
    assert n == 0, f"{what}: {n} of {g.numel()} elements differ in their bits (max |diff| {(got.float() - want.float()).abs().max():.3g})"


@pytest.mark.parametrize("folder", HF_CASES + GGML_CASES, ids=_ids(HF_CASES + GGML_CASES))
def test_drop_in_is_hf_bit_for_bit(folder):
    j, a = _case(folder)
    j["_folder"] = str(folder)
    rope = _rope(j)
    s = rope.scheme
    interleaved = s.pairing == "interleaved"
    inv_freq = a["inv_freq"] if "inv_freq" in a else rope.inv_freq
    scaling = j.get("attention_scaling", rope.attention_scaling)
    d, rot = s.head_dim, s.rotary_dim
    heads, kv_heads, hidden, seq = 4, 2, 48, 7
    gen = torch.Generator().manual_seed(1)
    wq = torch.randn(hidden, heads * d, generator=gen) / hidden ** 0.5
    wk = torch.randn(hidden, kv_heads * d, generator=gen) / hidden ** 0.5
    offset = max(int(a["positions"].max()) - seq - 1, 0)  # a KV-cache offset: the case's largest positions
    mask = torch.tensor([[1] * seq, [0, 0, 0] + [1] * (seq - 3)])  # row 1 left-padded
    pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    pos[0] += offset
    steps = [(seq, pos), (1, torch.tensor([[offset + seq], [seq - 3]]))]  # prefill, then one decode step
    drop_in = posenc.hf.drop_in(rope)
    checked = 0
    for dtype in DTYPES:
        for length, p in steps:
            x = torch.randn(2, length, hidden, generator=gen)
            for unsqueeze_dim in (1, 2):
                q = (x @ wq).to(dtype).view(2, length, heads, d)
                k = (x @ wk).to(dtype).view(2, length, kv_heads, d)
                if unsqueeze_dim == 1:  # HF's transpose: a strided [B, H, S, D] view of [B, S, H, D]
                    q, k = q.transpose(1, 2), k.transpose(1, 2)
                cos, sin = hf_cos_sin(inv_freq, p, scaling, interleaved, dtype)
                cos, sin = cos[..., :rot], sin[..., :rot]  # partial rotary: cos as wide as the rotated dims
                want_q, want_k = hf_formula(q, cos, sin, interleaved, unsqueeze_dim), hf_formula(k, cos, sin, interleaved, unsqueeze_dim)
                q0, k0 = q.clone(), k.clone()
                got_q, got_k = drop_in(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
                what = f"{dtype} length {length} unsqueeze_dim {unsqueeze_dim}"
                assert_bits(got_q, want_q, "q " + what)
                assert_bits(got_k, want_k, "k " + what)
                assert torch.equal(q, q0) and torch.equal(k, k0), "inputs changed"
                assert got_q.stride() == q.stride(), "q_embed keeps q's memory layout, as torch's elementwise ops do"
                # the Rope method and position_ids given beside cos/sin (HF ignores them): the same bits
                by_method, _ = rope.apply_rotary_pos_emb(q, k, cos, sin, position_ids=p, unsqueeze_dim=unsqueeze_dim)
                assert_bits(by_method, want_q, "q (method) " + what)
                checked += 2
    # cos of batch 1, broadcast over the batch (the same positions for every sequence)
    q = torch.randn(2, heads, seq, d, generator=gen)
    cos, sin = hf_cos_sin(inv_freq, torch.arange(seq)[None] + offset, scaling, interleaved, torch.float32)
    got_q, _ = drop_in(q, q[:, :kv_heads], cos[..., :rot], sin[..., :rot])
    assert_bits(got_q, hf_formula(q, cos[..., :rot], sin[..., :rot], interleaved, 1), "q, cos of batch 1")
    assert checked == 2 * len(DTYPES) * 2 * 2


def test_hf_bits_are_not_posenc_angles():
    """The cos/sin path really uses the given rows: cos/sin of another config (no integer position of
    this one) are applied as given, where from_cos_sin=False still refuses them."""
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0})
    other = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0})
    pos = torch.arange(8)[None]
    cos, sin = hf_cos_sin(other.inv_freq, pos, 1.0, False, torch.float32)
    q = torch.randn(1, 4, 8, 64)
    got, _ = rope.apply_rotary_pos_emb(q, q, cos, sin)
    assert_bits(got, hf_formula(q, cos, sin, False, 1), "foreign cos/sin")
    with pytest.raises(ValueError, match="matches no integer positions"):
        rope.apply_rotary_pos_emb(q, q, cos, sin, from_cos_sin=False)


def test_cos_sin_errors_name_the_argument():
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0})
    q = torch.randn(1, 4, 8, 64)
    cos, sin = hf_cos_sin(rope.inv_freq, torch.arange(8)[None], 1.0, False, torch.float32)
    with pytest.raises(ValueError, match="cos: dtype bfloat16 differs from q's float32"):
        rope.apply_rotary_pos_emb(q, q, cos.bfloat16(), sin.bfloat16())
    with pytest.raises(ValueError, match="cos: shape .* has 7 positions for q's 8 tokens"):
        rope.apply_rotary_pos_emb(q, q, cos[:, :7], sin[:, :7])
    with pytest.raises(ValueError, match="sin: shape"):
        rope.apply_rotary_pos_emb(q, q, cos, sin[:, :7])
    with pytest.raises(ValueError, match="cos: width 66 does not fit q's head_dim 64"):
        rope.apply_rotary_pos_emb(q, q, torch.cat((cos, cos[..., :2]), -1), torch.cat((sin, sin[..., :2]), -1))
    with pytest.raises(ValueError, match="cos: last axis has stride 2"):
        rope.apply_rotary_pos_emb(q, q, torch.cat((cos, cos), -1)[..., ::2], torch.cat((sin, sin), -1)[..., ::2])
    with pytest.raises(ValueError, match="q: dtype torch.float64"):
        rope.apply_rotary_pos_emb(q.double(), q.double(), cos.double(), sin.double())
    with pytest.raises(ValueError, match="q: head_dim axis is not contiguous"):
        rope.apply_rotary_pos_emb(q.transpose(2, 3)[..., :8, :], q.transpose(2, 3)[..., :8, :], cos[..., :8], sin[..., :8])
    with pytest.raises(ValueError, match="^k: dtype torch.int32 is not float32, float16 or bfloat16"):
        rope.apply_rotary_pos_emb(q, q.int(), cos, sin)
    with pytest.raises(ValueError, match="^sin: tensor is on device meta; posenc runs on CPU tensors only"):
        rope.apply_rotary_pos_emb(q, q, cos, torch.empty(sin.shape, device="meta"))


def test_cos_sin_refuses_tensors_that_require_grad():
    """The drop-in has no backward: under autograd it refuses, instead of returning q and k cut off
    from the graph; under no_grad (inference, HF's generate) the same tensors pass."""
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0})
    q, k = torch.randn(1, 4, 8, 64, requires_grad=True), torch.randn(1, 2, 8, 64)
    cos, sin = hf_cos_sin(rope.inv_freq, torch.arange(8)[None], 1.0, False, torch.float32)
    qo, ko = torch.zeros(1, 4, 8, 64), torch.zeros(1, 2, 8, 64)
    for call in (lambda: rope.apply_rotary_pos_emb(q, k, cos, sin),
                 lambda: posenc.hf.apply_cos_sin(k, q, cos, sin),
                 lambda: posenc.hf.apply_cos_sin(q, k, cos, sin, out=(qo, ko))):
        with pytest.raises(ValueError, match=r"^[qk]: tensor requires grad, and posenc's drop-in has no backward"):
            call()
    assert not qo.any() and not ko.any()
    with torch.no_grad():
        got_q, got_k = rope.apply_rotary_pos_emb(q, k, cos, sin)
    assert_bits(got_q, hf_formula(q.detach(), cos, sin, False, 1), "q under no_grad")
    assert_bits(got_k, hf_formula(k, cos, sin, False, 1), "k under no_grad")


def test_numpy_arrays_too():
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0})
    q = torch.randn(1, 4, 8, 64)
    cos, sin = hf_cos_sin(rope.inv_freq, torch.arange(8)[None], 1.0, False, torch.float32)
    got_q, _ = rope.apply_rotary_pos_emb(q.numpy(), q.numpy(), cos.numpy(), sin.numpy())
    assert isinstance(got_q, np.ndarray)
    assert_bits(torch.from_numpy(got_q), hf_formula(q, cos, sin, False, 1), "numpy q")


def test_into_given_outputs_and_in_place():
    """out=(q_out, k_out): the same bits written into the caller's tensors, also in place (out = q, k)."""
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0})
    q, k = torch.randn(2, 4, 8, 64), torch.randn(2, 2, 8, 64)
    cos, sin = hf_cos_sin(rope.inv_freq, torch.arange(8)[None].expand(2, -1), 1.0, False, torch.float32)
    want_q, want_k = hf_formula(q, cos, sin, False, 1), hf_formula(k, cos, sin, False, 1)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    got = posenc.hf.apply_cos_sin(q, k, cos, sin, out=(qo, ko))
    assert got[0] is qo and got[1] is ko
    assert_bits(qo, want_q, "q_out")
    assert_bits(ko, want_k, "k_out")
    posenc.hf.apply_cos_sin(q, k, cos, sin, out=(q, k))
    assert_bits(q, want_q, "q in place")
    buf = torch.randn(q.numel() + 1)
    with pytest.raises(ValueError, match="partly overlaps"):  # out shifted one element against the input
        posenc.hf.apply_cos_sin(buf[:-1].view(q.shape), k, cos, sin, out=(buf[1:].view(q.shape), ko))


@pytest.mark.parametrize("batch,seq", [(1, 1), (2, 1), (2, 5), (1, 7)])
def test_in_place_on_views_of_one_fused_qkv_output(batch, seq):
    """q and k cut from one fused projection output (their byte spans interleave, no element is
    shared) rotate in place with HF's bits; v, the rest of each row, is untouched. Views of the same
    rows that do share elements are still refused."""
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 1e4})
    hq, hkv, d = 4, 2, 64
    qkv = torch.randn(batch, seq, (hq + 2 * hkv) * d)
    q = qkv[..., :hq * d].view(batch, seq, hq, d).transpose(1, 2)
    k = qkv[..., hq * d:(hq + hkv) * d].view(batch, seq, hkv, d).transpose(1, 2)
    v_before = qkv[..., (hq + hkv) * d:].clone()
    cos, sin = hf_cos_sin(rope.inv_freq, torch.arange(seq)[None].expand(batch, -1), 1.0, False, torch.float32)
    want_q, want_k = hf_formula(q, cos, sin, False, 1), hf_formula(k, cos, sin, False, 1)
    posenc.hf.apply_cos_sin(q, k, cos, sin, out=(q, k))
    assert_bits(q, want_q, "fused q in place")
    assert_bits(k, want_k, "fused k in place")
    assert torch.equal(qkv[..., (hq + hkv) * d:], v_before), "v was written"
    k_shifted = qkv[..., hq * d - d:(hq + hkv) * d - d].view(batch, seq, hkv, d).transpose(1, 2)  # q's last head
    with pytest.raises(ValueError, match="^k_out: overlaps q_out"):
        posenc.hf.apply_cos_sin(q, k_shifted, cos, sin, out=(q, k_shifted))


def test_descs_apart_never_calls_views_that_share_an_element_apart():
    """_posenc.descs_apart (the one overlap rule of the drop-in's and the Rope methods' checks) against
    the element sets themselves, over random strided views of one small buffer: whenever it says
    apart, no element is shared; fused-row slices are recognized."""
    import itertools
    rng = np.random.default_rng(7)
    base = 1 << 20

    def elements(off, shape, strides):
        return {off + sum(i * s for i, s in zip(idx, strides)) for idx in itertools.product(*(range(n) for n in shape))}

    said_apart = 0
    for _ in range(3000):
        ndim = int(rng.integers(1, 4))
        descs = []
        for _ in range(2):
            shape = tuple(int(rng.integers(1, 4)) for _ in range(ndim))
            strides = tuple(int(rng.integers(0, 13)) for _ in range(ndim))
            descs.append((int(rng.integers(0, 40)), shape, strides))
        (oa, sa, ta), (ob, sb, tb) = descs
        apart = posenc._posenc.descs_apart((base + 4 * oa, "float32", sa, ta), (base + 4 * ob, "float32", sb, tb))
        if apart:
            said_apart += 1
            assert not elements(oa, sa, ta) & elements(ob, sb, tb), (descs,)
    assert said_apart > 300
    # row slices of one [5, 24] buffer: columns 0..7 and 8..23 are apart, 0..8 and 8..23 are not
    row = lambda off, width: (base + 4 * off, "float32", (5, width), (24, 1))  # noqa: E731
    assert posenc._posenc.descs_apart(row(0, 8), row(8, 16))
    assert not posenc._posenc.descs_apart(row(0, 9), row(8, 16))
    # extents past int64 (a hostile view's claims, checked only later) give an answer, not a wrap
    huge = lambda off: (base + 4 * off, "float32", (1 << 40, 1 << 30), ((1 << 62) // 7, 3))  # noqa: E731
    assert not posenc._posenc.descs_apart(huge(0), huge(3))  # one stride along: shares elements
    assert posenc._posenc.descs_apart(huge(0), huge(1))  # every element 1 mod 3 against 0 mod 3


def test_large_outputs_reuse_freed_memory():
    """Outputs from 1 MiB up come from buffers freed by earlier outputs (no fresh pages to fault in):
    the same address again once the first result is dropped, HF's bits still, q's strides kept, and
    a result alive is never handed out twice."""
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0})
    q = torch.randn(1, 160, 32, 128).bfloat16().transpose(1, 2)  # 1.25 MiB of bfloat16
    k = torch.randn(1, 160, 8, 128).bfloat16().transpose(1, 2)
    cos, sin = hf_cos_sin(rope.inv_freq, torch.arange(160)[None], 1.0, False, torch.bfloat16)
    posenc.hf.clear_output_cache()
    a, _ = rope.apply_rotary_pos_emb(q, k, cos, sin)
    assert_bits(a, hf_formula(q, cos, sin, False, 1), "q (reused buffer)")
    assert a.stride() == q.stride()
    first = a.data_ptr()
    b, _ = rope.apply_rotary_pos_emb(q, k, cos, sin)
    assert b.data_ptr() != first, "a live result's memory was handed out again"
    del a
    assert posenc._posenc.output_cache_bytes() >= q.numel() * 2, "the freed result went back to the cache"
    c, _ = rope.apply_rotary_pos_emb(q, k, cos, sin)
    assert c.data_ptr() == first
    assert_bits(c, hf_formula(q, cos, sin, False, 1), "q (reused buffer, second time)")
    del b, c
    posenc.hf.clear_output_cache()
    assert posenc._posenc.output_cache_bytes() == 0
