"""The drop-in under every calling convention Hugging Face's apply_rotary_pos_emb has had, each checked
against that version's own formula written here in torch: bit for bit, or a ValueError, never a
different answer.

- transformers <= 4.33 (Llama, GPT-NeoX): cos/sin a table [1, 1, kv_len, dim] from the rotary
  module's cache; the function squeezes it and indexes it with position_ids, then unsqueezes dim 1.
- 4.34 - 4.37 (and remote-code models written then): a table [kv_len, dim], cos[position_ids]
  .unsqueeze(unsqueeze_dim) (unsqueeze_dim from 4.36; 1 before).
- 4.38 on: cos/sin per token [batch, seq, dim] from the rotary module's forward(x, position_ids);
  position_ids is accepted and unused; cos.unsqueeze(unsqueeze_dim).

Each is run on a left-padded batch (position_ids from the attention mask, as generate() builds them),
a KV-cache offset, and a decode step of one token, in float32, float16 and bfloat16, with
unsqueeze_dim 1 ([B, H, S, D], HF's transposed view) and 2 ([B, S, H, D]). A seeded sweep over shape
combinations then calls the drop-in and the formula of every convention whose signature the call fits:
where the drop-in answers, its answer must be the bits of the formula that applies."""
import itertools

import numpy as np
import pytest
import torch

import posenc

CFG = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
       "max_position_embeddings": 4096, "rope_theta": 10000.0}
B, H, KV, D = 2, 4, 2, 64
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INT = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


# ---- each version's function, as it was written (the formula; names ours) ----------------------

def hf_4_33(q, k, cos, sin, position_ids):
    cos = cos.squeeze(1).squeeze(0)  # [seq_len, dim]
    sin = sin.squeeze(1).squeeze(0)
    cos = cos[position_ids].unsqueeze(1)  # [bs, 1, seq_len, dim]
    sin = sin[position_ids].unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def hf_4_36(q, k, cos, sin, position_ids, unsqueeze_dim=1):
    cos = cos[position_ids].unsqueeze(unsqueeze_dim)
    sin = sin[position_ids].unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def hf_4_38(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def rotary_cache(kv_len, dtype):
    """The rotary module's cos/sin cache before 4.38: emb = cat(freqs, freqs) for positions [0, kv_len)."""
    inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
    t = torch.arange(kv_len, dtype=torch.float32)
    emb = torch.cat((torch.outer(t, inv),) * 2, dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotary_per_token(position_ids, dtype):
    """4.38's rotary forward: per-token cos/sin [B, S, D]."""
    inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
    freqs = (inv[None, :, None].expand(position_ids.shape[0], -1, 1) @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def assert_bits(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    g, w = got.contiguous().view(INT[got.dtype]), want.contiguous().view(INT[want.dtype])
    n = int((g != w).sum())
    assert n == 0, f"{what}: {n} of {g.numel()} elements differ"


@pytest.fixture(scope="module")
def drop_in():
    return posenc.hf.drop_in(posenc.Rope(CFG))


def steps(offset):
    """(q/k length, position_ids, kv_len) of a left-padded prefill after `offset` cached tokens, then a
    decode step: row 1 has 3 padding tokens (HF: cumsum of the mask - 1, padding at 1)."""
    seq = 7
    mask = torch.tensor([[1] * seq, [0, 0, 0] + [1] * (seq - 3)])
    pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1) + offset
    return [(seq, pos, offset + seq), (1, pos[:, -1:] + 1, offset + seq + 1)]


def qk(length, dtype, unsqueeze_dim, gen):
    q = torch.randn(B, length, H, D, generator=gen).to(dtype)
    k = torch.randn(B, length, KV, D, generator=gen).to(dtype)
    if unsqueeze_dim == 1:  # HF's q.view(B, S, H, D).transpose(1, 2)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    return q, k


@pytest.mark.parametrize("offset", [0, 3000])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_table_conventions_are_hf_bit_for_bit(drop_in, dtype, offset):
    gen = torch.Generator().manual_seed(offset + 1)
    for length, pos, kv_len in steps(offset):
        cos, sin = rotary_cache(kv_len, dtype)
        for unsqueeze_dim in (1, 2):
            q, k = qk(length, dtype, unsqueeze_dim, gen)
            q0, k0 = q.clone(), k.clone()
            what = f"{dtype} length {length} offset {offset} unsqueeze_dim {unsqueeze_dim}"
            got = drop_in(q, k, cos, sin, pos, unsqueeze_dim)
            want = hf_4_36(q, k, cos, sin, pos, unsqueeze_dim)
            assert_bits(got[0], want[0], "4.36 q " + what)
            assert_bits(got[1], want[1], "4.36 k " + what)
            got = drop_in(q, k, cos, sin, position_ids=pos[:1], unsqueeze_dim=unsqueeze_dim)  # ids of batch 1
            want = hf_4_36(q, k, cos, sin, pos[:1], unsqueeze_dim)
            assert_bits(got[0], want[0], "4.36 ids [1, S] q " + what)
            if unsqueeze_dim == 1:
                got = drop_in(q, k, cos[None, None], sin[None, None], pos)
                want = hf_4_33(q, k, cos[None, None], sin[None, None], pos)
                assert_bits(got[0], want[0], "4.33 q " + what)
                assert_bits(got[1], want[1], "4.33 k " + what)
            assert torch.equal(q, q0) and torch.equal(k, k0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_per_token_convention_is_hf_bit_for_bit(drop_in, dtype):
    gen = torch.Generator().manual_seed(7)
    for length, pos, _ in steps(100):
        cos, sin = rotary_per_token(pos, dtype)
        for unsqueeze_dim in (1, 2):
            q, k = qk(length, dtype, unsqueeze_dim, gen)
            want = hf_4_38(q, k, cos, sin, pos, unsqueeze_dim)
            for ids in (None, pos):  # 4.38 on: position_ids accepted and unused
                got = drop_in(q, k, cos, sin, ids, unsqueeze_dim)
                assert_bits(got[0], want[0], f"4.38 q {dtype} {length} {unsqueeze_dim}")
                assert_bits(got[1], want[1], f"4.38 k {dtype} {length} {unsqueeze_dim}")
            if dtype == torch.float32:  # numpy arrays, the same bits
                got = drop_in(q.numpy(), k.numpy(), cos.numpy(), sin.numpy(), pos.numpy(), unsqueeze_dim)
                assert np.array_equal(got[0], want[0].numpy()) and np.array_equal(got[1], want[1].numpy())


def test_numpy_table_convention(drop_in):
    gen = torch.Generator().manual_seed(3)
    for length, pos, kv_len in steps(50):
        cos, sin = rotary_cache(kv_len, torch.float32)
        q, k = qk(length, torch.float32, 1, gen)
        want = hf_4_36(q, k, cos, sin, pos)
        got = drop_in(q.numpy(), k.numpy(), cos.numpy(), sin.numpy(), pos.numpy())
        assert np.array_equal(got[0], want[0].numpy()) and np.array_equal(got[1], want[1].numpy())


def test_partial_rotary_table(drop_in):
    """A model that rotates the first dims only (GPT-NeoX, Phi before 4.38): the formula on the slice,
    the rest concatenated; the drop-in given the whole head and a narrower table passes the rest."""
    gen = torch.Generator().manual_seed(5)
    rot = 32
    inv = 1.0 / (10000.0 ** (torch.arange(0, rot, 2).float() / rot))
    emb = torch.cat((torch.outer(torch.arange(20.0), inv),) * 2, dim=-1)
    cos, sin = emb.cos(), emb.sin()
    pos = torch.tensor([[5, 6, 7], [1, 1, 2]])
    q, k = qk(3, torch.float32, 1, gen)
    qr, kr = hf_4_36(q[..., :rot], k[..., :rot], cos, sin, pos)
    got = drop_in(q, k, cos, sin, pos)
    assert_bits(got[0], torch.cat((qr, q[..., rot:]), -1), "q")
    assert_bits(got[1], torch.cat((kr, k[..., rot:]), -1), "k")


@pytest.mark.parametrize("name,cos_shape,ids,unsqueeze_dim,pattern", [
    ("id past the table", (8, D), [[0, 1, 8]], 1, r"^position_ids: 8 at \[0, 2\] is outside the cos table's rows \[0, 8\)"),
    ("negative id (torch wraps it)", (8, D), [[0, -1, 2]], 1, r"^position_ids: -1 at \[0, 1\] is outside"),
    ("1-d ids for 3 tokens", (8, D), [0, 1, 2], 1, r"^position_ids: shape \[3\] does not index the cos table \[8, 64\]"),
    ("ids of another length", (8, D), [[0, 1]], 1, r"^position_ids: shape \[1, 2\] does not index"),
    ("ids batch 3", (8, D), [[0, 1, 2]] * 3, 1, r"^position_ids: shape \[3, 3\] does not index"),
    ("3-d ids", (8, D), [[[0, 1, 2]]], 1, r"^position_ids: shape \[1, 1, 3\] does not index"),
    ("float ids", (8, D), [[0.0, 1.0, 2.0]], 1, r"^position_ids: dtype float32 is not an integer type"),
    ("4-d table not [1, 1, ...]", (2, 1, 8, D), [[0, 1, 2]], 1, r"^cos: shape \[2, 1, 8, 64\] with position_ids \[1, 3\] is neither"),
    ("5-d cos", (1, 1, 1, 8, D), [[0, 1, 2]], 1, r"^cos: shape \[1, 1, 1, 8, 64\] with position_ids"),
    ("4-d table, unsqueeze_dim 2", (1, 1, 8, D), [[0, 1, 2]], 2, r"^cos: shape \[1, 1, 8, 64\] with position_ids \[1, 3\] is neither"),
    ("2-d cos without ids", (3, D), None, 1, r"^cos: shape \[3, 64\] without position_ids is not per token"),
    ("2-d cos without ids, unsqueeze_dim 2", (3, D), None, 2, r"^cos: shape \[3, 64\] without position_ids"),
])
def test_conventions_refuse_what_no_version_computes(drop_in, name, cos_shape, ids, unsqueeze_dim, pattern):
    q, k = qk(3, torch.float32, unsqueeze_dim, torch.Generator().manual_seed(0))
    cos = torch.ones(cos_shape)
    with pytest.raises(ValueError, match=pattern) as e:
        drop_in(q, k, cos, cos.clone(), None if ids is None else torch.tensor(ids), unsqueeze_dim)
    assert "\n" not in str(e.value)


def _formulas(q, k, cos, sin, ids, unsqueeze_dim):
    """The answers of the version whose convention the call's shapes are (a version that raises, or
    broadcasts to another shape than q's, gives none): per-token 3-d cos (and 2-d without ids) is
    4.38's, a 2-d table with ids 4.34-4.37's, a 4-d table with ids 4.33's (unsqueeze_dim 1 only then)."""
    if cos.dim() == 3 or ids is None:
        versions = [lambda: hf_4_38(q, k, cos, sin, ids, unsqueeze_dim)]
    elif cos.dim() == 2:
        versions = [lambda: hf_4_36(q, k, cos, sin, ids, unsqueeze_dim)]
    elif cos.dim() == 4 and unsqueeze_dim == 1:
        versions = [lambda: hf_4_33(q, k, cos, sin, ids)]
    else:
        versions = []
    out = []
    for f in versions:
        try:
            r = f()
        except (RuntimeError, IndexError):
            continue
        if r[0].shape == q.shape and r[1].shape == k.shape:
            out.append(r)
    return out


def test_shape_sweep_answers_only_with_the_formulas_bits(drop_in):
    """Every combination of cos shape (per token, 2-d, 4-d table; batch 1, B or 3; rows S, 1 or a
    table), position_ids (none, 1-d, [1, S], [B, S], left-padded or past the table) and unsqueeze_dim:
    the drop-in answers with the bits of the version the call fits, or refuses; and where any version
    answers with q's shape, the drop-in answers too for the conventions it documents."""
    gen = torch.Generator().manual_seed(11)
    answered = refused = 0
    for S, unsqueeze_dim in itertools.product((1, 3, H), (1, 2)):
        q, k = qk(S, torch.float32, unsqueeze_dim, gen)
        table, _ = rotary_cache(9, torch.float32)
        ids_opts = [None, torch.arange(S), torch.arange(S)[None], torch.arange(S).repeat(B, 1),
                    torch.tensor([[1] * S, list(range(S))]), torch.full((B, S), 9)]
        cos_opts = [table[:S], table[:1], table, table[None, None], table[None, :S], table[None, :S].repeat(B, 1, 1),
                    table[None, :S].repeat(3, 1, 1), table[None, None, :S], table[None, :S, None]]
        for cos, ids in itertools.product(cos_opts, ids_opts):
            sin = cos * 0.75 - 0.125  # any sin of cos's shape: the same for both sides
            want = _formulas(q, k, cos, sin, ids, unsqueeze_dim)
            try:
                got = drop_in(q, k, cos, sin, ids, unsqueeze_dim)
            except ValueError as e:
                assert "\n" not in str(e)
                refused += 1
                continue
            answered += 1
            what = f"cos {list(cos.shape)} ids {None if ids is None else list(ids.shape)} S {S} unsqueeze_dim {unsqueeze_dim}"
            assert want, f"{what}: the drop-in answered where no version of HF's formula does"
            for w in want:
                assert_bits(got[0], w[0], "q " + what)
                assert_bits(got[1], w[1], "k " + what)
    assert answered > 20 and refused > 20, (answered, refused)
