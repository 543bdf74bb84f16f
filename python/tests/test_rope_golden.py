"""RoPE from Python on every golden RoPE case: against the reference's own outputs, against Hugging
Face's formula written out in torch (cos/sin in float32 as HF computes them), and against the CLI."""
import json
import pathlib
import subprocess

import numpy as np
import pytest
import torch

import posenc
from conftest import DATA, golden_cases, need

HF_CASES = golden_cases("hf", {"rope"})
GGML_CASES = golden_cases("ggml", {"rope"})
MROPE_CASES = [c for c in golden_cases("hf", {"mrope"})]


def _case(folder: pathlib.Path):
    j = json.loads((folder / "case.json").read_text())
    arrays = {role: np.load(folder / name) for role, name in j["files"].items()}
    return j, arrays


def _rope(j, precision="reference"):
    if "n_dims" in j["config"]:
        scheme = posenc.Scheme.from_ggml(j["config"], j.get("head_dim") or np.load(
            pathlib.Path(j["_folder"]) / j["files"]["input"]).shape[2])
    else:
        scheme = _scheme(j)
    return posenc.Rope(scheme, precision=precision, seq_len=j.get("seq_len"))


def _scheme(j):
    """The case's config read for the layer and site the case holds (FORMAT.md: layer_index,
    layer_type, rotary_site); a temperature case's layer is about its temperature, not a rotation."""
    if j.get("scheme") not in ("rope", "nope", "mrope"):
        return posenc.load_scheme(j["config"], model_type=j.get("hf_model_type"))
    return posenc.load_scheme(j["config"], model_type=j.get("hf_model_type"), layer=j.get("layer_index", -1),
                              layer_type=j.get("layer_type", ""), site=j.get("rotary_site", ""))


# The drop-in and the torch transcription of HF's formula below take a rotary window at the front of the
# head, turning forward, at positions the drop-in can read back from cos/sin. The 2026 cases (windows at
# the back, inverse sites, keyed sets at long positions) are checked by test_posenc_matches_reference,
# the golden runner and rope_frequencies_test instead.
def _front_window_case(folder):
    j = json.loads((folder / "case.json").read_text())
    return j.get("generator") != "tools/gen_hf_golden_2026.py"


def _close(got, want, tol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.abs(got - want) - (tol["atol"] + tol.get("rtol", 0.0) * np.abs(want))
    assert err.max() <= 0, f"{what}: exceeds the tolerance by {err.max():.3g} (max |diff| {np.abs(got - want).max():.3g})"


def _ids(cases):
    return [c.name for c in cases]


def test_golden_cases_present():
    need(DATA / "golden" / "hf", "golden cases")
    assert len(HF_CASES) >= 15, [c.name for c in HF_CASES]


@pytest.mark.parametrize("folder", HF_CASES + GGML_CASES, ids=_ids(HF_CASES + GGML_CASES))
def test_posenc_matches_reference(folder):
    """posenc from Python gives the reference's numbers: inv_freq, attention scaling, expected
    (float32 angles) and expected_exact (float64 angles), each within the case's tolerance."""
    j, a = _case(folder)
    j["_folder"] = str(folder)
    rope = _rope(j)
    freqs = rope.frequencies(j.get("seq_len") or int(a["positions"].max()) + 1)
    if "inv_freq" in a:
        _close(freqs.inv_freq, a["inv_freq"], j["tolerance"].get("inv_freq", {"atol": 0, "rtol": 2.0 ** -22}), "inv_freq")
    if "attention_scaling" in j:
        assert abs(freqs.attention_scaling - j["attention_scaling"]) <= 1e-6 * abs(j["attention_scaling"])
    dtype = np.float16 if j.get("dtype") == "float16" else np.float32
    x = a["input"].astype(dtype)
    rope.apply(x, a["positions"])
    _close(x, a["expected"], j["tolerance"]["expected"], "expected (reference precision)")
    if "expected_exact" in a:
        exact = _rope(j, "exact")
        y = a["input"].astype(dtype)
        exact.apply(y, a["positions"])
        _close(y, a["expected_exact"], j["tolerance"]["expected_exact"], "expected_exact (exact precision)")


# ---- Hugging Face's formula, written out in torch ---------------------------------------------


def hf_cos_sin(inv_freq, position_ids, attention_scaling, interleaved):
    """HF's rotary embedding forward: float32 inv_freq @ float32 positions, cat (or repeat_interleave
    for the interleaved families), cos and sin times the attention scaling, all in float32."""
    inv = torch.from_numpy(np.asarray(inv_freq, np.float32))
    inv_expanded = inv[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    pos_expanded = position_ids[:, None, :].float()
    freqs = (inv_expanded.float() @ pos_expanded.float()).transpose(1, 2)
    emb = torch.repeat_interleave(freqs, 2, dim=-1) if interleaved else torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * attention_scaling, emb.sin() * attention_scaling


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def hf_apply(q, cos, sin, rotary_dim, interleaved, unsqueeze_dim=1):
    """apply_rotary_pos_emb on the first rotary_dim dims (partial rotary passes the rest through)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    rot = rotate_every_two if interleaved else rotate_half
    return torch.cat((q_rot * cos + rot(q_rot) * sin, q_pass), dim=-1)


def _hf_setup(folder):
    j, a = _case(folder)
    j["_folder"] = str(folder)
    rope = _rope(j)
    s = rope.scheme
    assert s.rotary_start == 0
    interleaved = s.pairing == "interleaved"
    x = torch.from_numpy(a["input"])                      # [T, H, D]
    p = torch.from_numpy(a["positions"]).long()
    # batch of 2: the case's tokens, and the same tokens at the positions in reverse order (a KV-cache
    # offset / left padding changes nothing but the positions); stored [B, S, H, D] as projections
    # produce them, and viewed [B, H, S, D] as HF transposes them (a strided view)
    bshd = torch.stack((x, x.flip(0)))
    position_ids = torch.stack((p, p.flip(0)))
    q = bshd.transpose(1, 2)
    cos, sin = hf_cos_sin(a["inv_freq"], position_ids, j.get("attention_scaling", 1.0), interleaved)
    return j, a, rope, q, position_ids, cos, sin, interleaved


HF_FRONT_CASES = [c for c in HF_CASES if _front_window_case(c)]


@pytest.mark.parametrize("folder", HF_FRONT_CASES, ids=_ids(HF_FRONT_CASES))
def test_hf_formula_reproduces_golden(folder):
    """The torch transcription of HF's formula gives the case's expected output (so the comparisons
    below compare with HF itself)."""
    j, a, rope, q, position_ids, cos, sin, interleaved = _hf_setup(folder)
    ref = hf_apply(q, cos, sin, rope.scheme.rotary_dim, interleaved)
    _close(ref[0].transpose(0, 1).numpy(), a["expected"], j["tolerance"]["expected"], "HF formula vs expected")


@pytest.mark.parametrize("folder", HF_FRONT_CASES, ids=_ids(HF_FRONT_CASES))
def test_drop_in_matches_hf_formula(folder):
    """posenc's apply_rotary_pos_emb on HF-shaped q and k (strided [B, H, S, D] views) gives HF's q and
    k within the case's tolerance: from HF's own cos/sin (bit for bit: test_hf_bitexact.py), and from
    posenc's angles (from_cos_sin=False) at positions read back from HF's cos/sin or given as position_ids."""
    j, a, rope, q, position_ids, cos, sin, interleaved = _hf_setup(folder)
    k = q[:, :1]  # one kv head: grouped-query attention
    want_q = hf_apply(q, cos, sin, rope.scheme.rotary_dim, interleaved)
    want_k = hf_apply(k, cos, sin, rope.scheme.rotary_dim, interleaved)
    q_before = q.clone()
    bits_q, _ = rope.apply_rotary_pos_emb(q, k, cos, sin)
    _close(bits_q.numpy(), want_q.numpy(), {"atol": 0.0}, "drop-in from HF's cos/sin")
    got_q, got_k = rope.apply_rotary_pos_emb(q, k, cos, sin, from_cos_sin=False)
    assert torch.equal(q, q_before), "the drop-in must leave q as it was (HF returns new tensors)"
    for got, want, what in ((got_q, want_q, "q"), (got_k, want_k, "k")):
        for b in range(2):
            _close(got[b].transpose(0, 1).numpy(), want[b].transpose(0, 1).numpy(), j["tolerance"]["expected"],
                   f"{what}[{b}] drop-in vs HF formula")
    by_ids_q, by_ids_k = posenc.hf.drop_in(rope, from_cos_sin=False)(q, k, cos, sin, position_ids=position_ids)
    assert torch.equal(by_ids_q, got_q) and torch.equal(by_ids_k, got_k)


@pytest.mark.parametrize("folder", HF_CASES[:1], ids=_ids(HF_CASES[:1]))
def test_drop_in_bshd_and_bfloat16(folder):
    """unsqueeze_dim=2 ([B, S, H, D] q and k), and bfloat16 tensors as HF runs them (cos/sin cast to
    bfloat16, each product and sum rounded to bfloat16): within 2 bfloat16 ulps of max|x|."""
    j, a, rope, q, position_ids, cos, sin, interleaved = _hf_setup(folder)
    qs = q.transpose(1, 2)  # back to [B, S, H, D]
    got_q, got_k = rope.apply_rotary_pos_emb(qs, qs, cos, sin, unsqueeze_dim=2)
    want = hf_apply(qs, cos, sin, rope.scheme.rotary_dim, interleaved, unsqueeze_dim=2)
    _close(got_q.numpy(), want.numpy(), j["tolerance"]["expected"], "bshd drop-in vs HF formula")
    qb = qs.to(torch.bfloat16)
    got_b, _ = rope.apply_rotary_pos_emb(qb, qb, cos.to(torch.bfloat16), sin.to(torch.bfloat16), unsqueeze_dim=2)
    assert got_b.dtype == torch.bfloat16
    want_b = hf_apply(qb, cos.to(torch.bfloat16), sin.to(torch.bfloat16), rope.scheme.rotary_dim, interleaved, 2)
    bound = 2 * 2.0 ** -8 * float(qs.abs().max()) * max(1.0, rope.attention_scaling) + j["tolerance"]["expected"]["atol"]
    assert float((got_b.float() - want_b.float()).abs().max()) <= bound


def test_drop_in_refuses_foreign_cos_sin():
    """posenc's own angles (from_cos_sin=False): cos/sin of another config (base 10000 vs 500000) match
    no integer positions: ValueError."""
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096,
                        "rope_theta": 500000.0})
    other = posenc.Rope({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 4096,
                         "rope_theta": 10000.0})
    pos = torch.arange(100, 116)[None]
    cos, sin = hf_cos_sin(other.inv_freq.astype(np.float32), pos, 1.0, False)
    q = torch.randn(1, 4, 16, 64)
    with pytest.raises(ValueError, match="matches no integer positions"):
        rope.apply_rotary_pos_emb(q, q, cos, sin, from_cos_sin=False)
    cos, sin = hf_cos_sin(rope.inv_freq.astype(np.float32), pos, 1.0, False)
    got, _ = rope.apply_rotary_pos_emb(q, q, cos, sin, from_cos_sin=False)
    assert torch.equal(got, rope.apply_rotary_pos_emb(q, q, position_ids=pos)[0])


# ---- the same numbers as the C++ API (the CLI) ---------------------------------------------------


@pytest.mark.parametrize("precision", ["reference", "exact"])
@pytest.mark.parametrize("folder", HF_CASES[:6], ids=_ids(HF_CASES[:6]))
def test_same_numbers_as_cli(folder, precision, cli, tmp_path):
    """`posenc rope` (C++ API through the CLI) and posenc from Python give the same bits in reference
    precision; in exact precision the table's rows (float64 angle additions) and the CLI's on-the-fly
    rows may differ by one float32 ulp of cos/sin."""
    j, a = _case(folder)
    cfg = dict(j["config"])
    if "hf_model_type" in j:
        cfg.setdefault("model_type", j["hf_model_type"])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    np.save(tmp_path / "in.npy", a["input"])
    np.save(tmp_path / "pos.npy", a["positions"].astype(np.int64))
    args = [cli, "rope", "--config", str(tmp_path / "config.json"), "--positions", str(tmp_path / "pos.npy"),
            "--input", str(tmp_path / "in.npy"), "--output", str(tmp_path / "out.npy"), "--precision", precision]
    if "seq_len" in j:
        args += ["--seq-len", str(j["seq_len"])]
    for key, flag in (("layer_index", "--layer"), ("layer_type", "--layer-type"), ("rotary_site", "--site")):
        if key in j:
            args += [flag, str(j[key])]
    r = subprocess.run(args, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    want = np.load(tmp_path / "out.npy")
    j["_folder"] = str(folder)
    x = a["input"].copy()
    _rope(j, precision).apply(x, a["positions"])
    if precision == "reference":
        assert np.array_equal(x, want)
    else:
        np.testing.assert_allclose(x, want, rtol=0, atol=4 * 2.0 ** -24 * float(np.abs(a["input"]).max()) * 4)


# ---- multi-axis RoPE --------------------------------------------------------------------------


@pytest.mark.parametrize("folder", MROPE_CASES, ids=_ids(MROPE_CASES))
def test_multi_axis_matches_reference(folder):
    """M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) positions [3, T] through Rope.apply_multi_axis."""
    j, a = _case(folder)
    rope = posenc.Rope(_scheme(j), seq_len=j.get("seq_len"))
    assert rope.scheme.multi_axis is not None
    x = a["input"].copy()
    rope.apply_multi_axis(x, a["positions"])
    _close(x, a["expected"], j["tolerance"]["expected"], "expected")
    _, _, comp, _ = rope.scheme.multi_axis_plan(int(a["positions"].max()) + 1)
    if "pair_component" in a:
        assert np.array_equal(comp, a["pair_component"])


# ---- per-layer schedules and Llama 4's query temperature -----------------------------------------

SCHEDULE_CASES = [c for c in HF_CASES + golden_cases("hf", {"attn_temperature"})
                  if "layer_schedule" in json.loads((c / "case.json").read_text())["files"]]


@pytest.mark.parametrize("folder", SCHEDULE_CASES, ids=_ids(SCHEDULE_CASES))
def test_layer_schedule(folder):
    j, a = _case(folder)
    scheme = _scheme(j)
    sch = scheme.layer_schedule()
    assert [int(x) for x in sch.rope] == a["layer_schedule"].tolist(), sch.rule


def test_llama4_query_temperature_on_a_nope_layer():
    """Scout's NoPE layer 3: apply_layer scales the queries (HF's attn_scales), keys untouched; a RoPE
    layer rotates both."""
    folder = need(DATA / "golden" / "hf" / "attn_temp_llama4_scout", "attn_temp_llama4_scout case")
    j, a = _case(folder)
    rope = posenc.Rope(j["config"], model_type=j["hf_model_type"])
    sch = rope.scheme.layer_schedule()
    layer = j["layer_index"]
    assert not sch.rope[layer] and sch.temperature[layer]
    scales = rope.scheme.attn_temperature_scales(a["positions"])
    _close(scales, a["attn_scales"], j["tolerance"]["attn_scales"], "attn_scales")
    _close(rope.scheme.attn_temperature_scales(a["positions"], exact=True), a["attn_scales_exact"],
           j["tolerance"]["attn_scales_exact"], "attn_scales_exact")
    q = a["input"].copy()
    k = a["input"].copy()
    rope.apply_layer(q, k, a["positions"], layer)
    _close(q, a["expected"], j["tolerance"]["expected"], "expected")
    assert np.array_equal(k, a["input"])
    rope_layer = sch.rope.index(True)
    q2, k2 = a["input"].copy(), a["input"].copy()
    rope.apply_layer(q2, k2, a["positions"], rope_layer)
    assert np.array_equal(q2, rope.apply(a["input"].copy(), a["positions"]))
    with pytest.raises(ValueError, match=r"layer: 48 is outside \[0, 48\)"):
        rope.apply_layer(q, k, a["positions"], 48)


@pytest.mark.parametrize("folder", HF_CASES, ids=_ids(HF_CASES))
def test_hf_style_model_step(folder):
    """A model in HF's style on the case's config: q and k from projections, viewed [B, H, S, D] from
    [B, S, H, D]; batch 0 continues a KV cache (positions from an offset), batch 1 is left-padded
    (position_ids = cumsum(mask) - 1, padding filled with 1, as HF does); then one decode step.
    posenc's drop-in gives HF's q and k within the case's tolerance, with and without position_ids."""
    j, a = _case(folder)
    j["_folder"] = str(folder)
    rope = _rope(j)
    s = rope.scheme
    interleaved = s.pairing == "interleaved"
    heads, kv_heads, d, hidden, seq = 2, 1, s.head_dim, 32, 6
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(hidden, heads * d, generator=gen) / hidden ** 0.5
    wk = torch.randn(hidden, kv_heads * d, generator=gen) / hidden ** 0.5
    offset = max(int(a["positions"].max()) - seq - 1, 0)
    mask = torch.tensor([[1] * seq, [0, 0] + [1] * (seq - 2)])
    position_ids = mask.cumsum(-1) - 1
    position_ids = position_ids.masked_fill(mask == 0, 1)
    position_ids[0] += offset
    steps = [(seq, position_ids), (1, torch.tensor([[offset + seq], [seq - 2]]))]
    for length, pos in steps:
        x = torch.randn(2, length, hidden, generator=gen)
        q = (x @ wq).view(2, length, heads, d).transpose(1, 2)
        k = (x @ wk).view(2, length, kv_heads, d).transpose(1, 2)
        cos, sin = hf_cos_sin(a["inv_freq"], pos, j.get("attention_scaling", 1.0), interleaved)
        want_q = hf_apply(q, cos, sin, s.rotary_dim, interleaved)
        want_k = hf_apply(k, cos, sin, s.rotary_dim, interleaved)
        for kwargs in ({}, {"position_ids": pos}):
            got_q, got_k = posenc.hf.drop_in(rope)(q, k, cos, sin, **kwargs)
            for got, want, what in ((got_q, want_q, "q"), (got_k, want_k, "k")):
                _close(got.numpy(), want.numpy(), j["tolerance"]["expected"], f"{what} (length {length}, {kwargs.keys()})")


@pytest.mark.parametrize("folder", HF_CASES, ids=_ids(HF_CASES))
def test_scheme_shows_what_inspect_shows(folder, cli, tmp_path):
    """Scheme.pairs() equals `posenc inspect --json`'s pairs, and the repr's pair table is the CLI's,
    line for line."""
    j, _ = _case(folder)
    cfg = dict(j["config"])
    if "hf_model_type" in j:
        cfg.setdefault("model_type", j["hf_model_type"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    scheme = posenc.load_scheme(path)
    r = subprocess.run([cli, "inspect", str(path), "--json"], capture_output=True, text=True, check=True)
    want = json.loads(r.stdout)
    assert scheme.pairs() == [{k: v for k, v in p.items() if k != "component"} for p in want["pairs"]]
    assert scheme.frequencies().attention_scaling == want["attention_scaling"]
    text = subprocess.run([cli, "inspect", str(path)], capture_output=True, text=True, check=True).stdout
    cli_table = text[text.index(" pair        dims"):].rstrip("\n").splitlines()
    py_text = repr(scheme)
    assert py_text[py_text.index(" pair        dims"):].splitlines() == cli_table
