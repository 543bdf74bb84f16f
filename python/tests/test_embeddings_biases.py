"""Embeddings from model files and the absolute / relative schemes, against the golden data."""
import json

import numpy as np
import pytest
import torch

import posenc
from conftest import DATA, golden_cases, need

ALIBI = golden_cases("hf", {"alibi"})
T5 = golden_cases("hf", {"t5_bucket"})
SIN = golden_cases("hf", {"sinusoidal"})


def _case(folder):
    j = json.loads((folder / "case.json").read_text())
    return j, {role: np.load(folder / name) for role, name in j["files"].items()}


def test_stories260k_embeddings_match_llama2c():
    ref = need(DATA / "models" / "stories260K" / "reference", "stories260K reference")
    m = posenc.Model(ref.parent / "stories260K.bin")
    assert (m.format, m.vocab_size, m.d_model) == ("llama2c", 512, 64)
    ids = np.load(ref / "token_ids.npy")
    want = np.load(ref / "embeddings.npy")
    assert np.array_equal(m.embed(ids), want)
    assert np.array_equal(m.token_embedding()[ids], want)


def test_gguf_embeddings():
    path = need(DATA / "models" / "llama-2-tiny-random" / "llama-2-tiny-random.gguf", "llama-2-tiny-random")
    m = posenc.Model(path)
    ids = np.array([0, 5, m.vocab_size - 1])
    rows = m.embed(ids, multiplier=2.0)
    assert rows.shape == (3, m.d_model) and rows.dtype == np.float32
    name = [t for t in m.tensors if t[0] == "token_embd.weight"][0]
    if name[2] in ("F32", "F16"):
        np.testing.assert_array_equal(rows, 2.0 * m.token_embedding()[ids].astype(np.float32))
    scheme = m.scheme(allow_default_freq_base=True)
    assert scheme.kind == "rope" and scheme.pairing == "interleaved"
    # No rope.freq_base in the file: llama.cpp's 10000 by default, said in a note; refused on request.
    default = posenc.Scheme.from_gguf(path)
    assert default.base == 10000.0 and any("base 10000 assumed" in n for n in default.notes), default.notes
    with pytest.raises(OSError, match="llama.rope.freq_base"):  # kNotFound, as a missing file
        posenc.Scheme.from_gguf(path, allow_default_freq_base=False)


@pytest.mark.parametrize("folder", ALIBI, ids=[c.name for c in ALIBI])
def test_alibi(folder):
    j, a = _case(folder)
    slopes = posenc.alibi_slopes(j["num_heads"], j["variant"])
    tol = j["tolerance"]
    np.testing.assert_allclose(slopes, a["slopes"], rtol=tol["slopes"]["rtol"], atol=tol["slopes"]["atol"])
    bias = posenc.alibi_bias(slopes, j["query_length"], j["key_length"])
    np.testing.assert_allclose(bias, a["bias"], rtol=tol["bias"]["rtol"], atol=tol["bias"]["atol"])
    if j["variant"] == "mpt":  # the bloom cases' configs carry no hidden_size, which ParseHfConfig needs
        assert posenc.load_scheme(j["config"], model_type=j.get("hf_model_type")).kind == "alibi"


@pytest.mark.parametrize("folder", T5, ids=[c.name for c in T5])
def test_t5_buckets(folder):
    j, a = _case(folder)
    got = posenc.t5_buckets(a["relative_positions"], bidirectional=j["bidirectional"], num_buckets=j["num_buckets"],
                            max_distance=j["max_distance"])
    assert np.array_equal(got, a["buckets"])


def test_t5_bias_and_shaw():
    table = np.random.default_rng(3).standard_normal((32, 4)).astype(np.float32)
    bias = posenc.t5_bias(table, 6, 9, bidirectional=False)
    rel = np.arange(9)[None, :] - np.arange(6)[:, None]
    buckets = posenc.t5_buckets(rel.reshape(-1), bidirectional=False).reshape(6, 9)
    assert np.array_equal(bias, table[buckets].transpose(2, 0, 1))
    idx = posenc.shaw_indices(5, 7, 2)
    assert np.array_equal(idx, np.clip(np.arange(7)[None] - np.arange(5)[:, None], -2, 2) + 2)
    with pytest.raises(ValueError, match="num_buckets"):
        posenc.t5_buckets([0], num_buckets=1)


@pytest.mark.parametrize("folder", SIN, ids=[c.name for c in SIN])
def test_sinusoidal(folder):
    j, a = _case(folder)
    got = posenc.sinusoidal_table(a["positions"], j["d_model"], j["layout"])
    np.testing.assert_allclose(got, a["table"], rtol=0, atol=j["tolerance"]["table"]["atol"])


def test_golden_runner_through_the_cli(cli):
    case = need(DATA / "golden" / "hf" / "rope_llama2_7b_default", "golden case")
    code, out = posenc.golden(case, cli=cli)
    assert code == 0 and "1 passed, 0 failed" in out, out


def test_bfloat16_slopes_are_their_float32_values():
    """A bfloat16 torch tensor of slopes (numpy has no bfloat16) gives the bias of the same values in
    float32, which holds every bfloat16 exactly."""
    s16 = torch.tensor([0.5, 0.2509765625, 2.0 ** -8], dtype=torch.bfloat16)
    np.testing.assert_array_equal(posenc.alibi_bias(s16, 3, 5), posenc.alibi_bias(s16.float().numpy(), 3, 5))
