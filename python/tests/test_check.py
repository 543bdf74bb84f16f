"""posenc.check / posenc.diff / posenc.testing.assert_rope_matches: the CLI's `posenc check` and
`posenc diff` from Python, the same report.

The engine under test is Hugging Face's arithmetic re-derived in torch (tests/conformance/hf_reference.py
for the frequencies, which checks itself against transformers; LlamaRotaryEmbedding +
apply_rotary_pos_emb for the rotation: float32 angles, cos/sin times the attention factor cast to the
dump's dtype, q * cos + rotate_half(q) * sin in that dtype), with one fault planted at a time. Each
report must name the planted fault first, and be the very JSON `posenc check --json` prints for the
same dump saved to .npy (bfloat16 saved as float32 with --dtype bf16).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc.testing import assert_rope_matches

torch = pytest.importorskip("torch")

from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "conformance"))
import hf_reference as hf  # noqa: E402

POSITIONS = [0, 1, 2, 3, 50, 400, 1000, 3000, 7000, 12000, 20000, 30000, 45000, 60000]


def published(name):
    with open(ROOT / "tests" / "conformance" / "configs" / (name + ".json")) as f:
        return json.load(f)["config"]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), -1)


def engine(config, dtype, fault="none", positions=POSITIONS, heads=4, layer_type=None):
    """(q [H, T, D], rotated q [H, T, D], positions [T]) as an HF engine with `fault` computes them."""
    pos = torch.tensor(positions)
    c = dict(config)
    if fault == "scaling_missing":
        c.pop("rope_scaling", None)
    if fault == "base":
        c["rope_theta"] = 10000.0
    rope = hf.freqs(c, layer_type=layer_type, seq_len=int(pos.max()) + 1)
    inv = torch.tensor(rope.inv_freq, dtype=torch.float32)
    scale = 1.0 if fault == "attention_scaling" else rope.attention_factor
    shift = 16 if fault == "position_offset" else 0
    freqs = (pos[:, None] + shift).float() @ inv[None, :]
    if fault == "precision":  # angles computed in bfloat16
        freqs = freqs.bfloat16().float()
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)
    if fault == "direction":
        sin = -sin
    if fault == "cos_sin_swapped":
        cos, sin = sin, cos
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(heads, len(positions), hf.head_dim(hf.text_config(config)), generator=gen).to(dtype)
    r = inv.numel() * 2  # the rotary window, at the front of the head
    qr = q[..., :r]
    if fault == "pairing":  # pairs (2i, 2i+1): rotate the interleaved view
        perm = torch.cat([torch.arange(0, r, 2), torch.arange(1, r, 2)])
        out = (qr[..., perm] * cos + rotate_half(qr[..., perm]) * sin)[..., torch.argsort(perm)]
    else:
        out = qr * cos + rotate_half(qr) * sin
    return q, torch.cat([out, q[..., r:]], -1), pos


def cli_json(cli, tmp_path, config, args, arrays):
    """`posenc check --json` (or diff) on the same inputs, saved to tmp_path."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config))
    cmd = [cli, "check", "--model", str(cfg), "--json"] + args
    for flag, a in arrays.items():
        path = tmp_path / (flag.strip("-") + ".npy")
        np.save(path, a)
        cmd += [flag, str(path)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def f32(t):
    return t.float().numpy()


FAULTS = {
    "llama__llama-3.1-8b": ["pairing", "scaling_missing", "base", "position_offset", "precision", "direction",
                            "cos_sin_swapped"],
    "qwen2__qwen2.5-7b-instruct-yarn-d1e200f": ["pairing", "scaling_missing", "attention_scaling", "position_offset",
                                                "direction"],
    "phi3__phi-3.5-mini-instruct": ["pairing", "attention_scaling", "position_offset", "cos_sin_swapped"],
}
CASES = [(n, f, d) for n, faults in FAULTS.items() for f in ["none"] + faults
         for d in (["bfloat16", "float16"] if f in ("none", "pairing") else ["bfloat16"])]


@pytest.mark.parametrize("name,fault,dtype", CASES)
def test_planted_fault_named_first_as_the_cli_names_it(name, fault, dtype, cli, tmp_path):
    config = published(name)
    q, out, pos = engine(config, getattr(torch, dtype), fault)
    # torch tensors [H, T, D] straight in (bfloat16 too); the CLI reads the same values from .npy.
    r = posenc.check(config, before=q, after=out, positions=pos, order="heads-first")
    assert r.passed == (fault == "none"), r.text
    assert (r.cause or "none") == fault, r.text
    assert r.verdict == ("pass" if fault == "none" else "fail")
    if fault != "none":
        assert r.diagnosis[0].max_error_over_tolerance <= 1.0
        assert r.worst.error > r.worst.tolerance
    flag = {"bfloat16": "bf16", "float16": "f16"}[dtype]
    want = cli_json(cli, tmp_path, config, ["--order", "heads-first", "--dtype", flag],
                    {"--before": f32(q), "--after": f32(out), "--positions": pos.numpy()})
    assert r.json == want


def test_numpy_tokens_first_and_torch_heads_first_give_one_report():
    config = published("llama__llama-3.1-8b")
    q, out, pos = engine(config, torch.float32, "direction")
    a = posenc.check(config, before=q, after=out, positions=pos, order="heads-first")
    b = posenc.check(config, before=np.ascontiguousarray(f32(q).transpose(1, 0, 2)),
                     after=np.ascontiguousarray(f32(out).transpose(1, 0, 2)), positions=pos.numpy())
    # a strided view (no copy): the heads-first tensor read through its transpose
    c = posenc.check(config, before=q.transpose(0, 1), after=out.transpose(0, 1), positions=pos.numpy().astype(np.int32))
    # positions as a strided int64 view and as uint16 (copied to int64)
    d = posenc.check(config, before=q, after=out, positions=np.repeat(pos.numpy(), 2)[::2], order="heads-first")
    e = posenc.check(config, before=q, after=out, positions=pos.numpy().astype(np.uint16), order="heads-first")
    assert a.json == b.json == c.json == d.json == e.json
    assert a.cause == "direction"
    assert a.worst.head is not None and a.worst.pair is not None and a.worst.position in POSITIONS


def test_float64_numpy_dump_reads_as_float32(cli, tmp_path):
    config = published("llama__llama-3.1-8b")
    q, out, pos = engine(config, torch.float32)
    r = posenc.check(config, before=f32(q).astype(np.float64), after=f32(out).astype(np.float64), positions=pos,
                     order="heads-first")
    assert r.passed, r.text
    assert r.json == cli_json(cli, tmp_path, config, ["--order", "heads-first"],
                              {"--before": f32(q).astype(np.float64), "--after": f32(out).astype(np.float64),
                               "--positions": pos.numpy()})
    # the text is the CLI's text too
    text = subprocess.run([cli, "check", "--model", str(tmp_path / "config.json"), "--order", "heads-first",
                           "--before", str(tmp_path / "before.npy"), "--after", str(tmp_path / "after.npy"),
                           "--positions", str(tmp_path / "positions.npy")], capture_output=True, text=True)
    assert text.returncode == 0 and r.text == text.stdout


def test_numpy_float16_dump():
    config = published("qwen2__qwen2.5-7b-instruct-yarn-d1e200f")
    q, out, pos = engine(config, torch.float16, "scaling_missing")
    r = posenc.check(config, before=f32(q).astype(np.float16).transpose(1, 0, 2),
                     after=f32(out).astype(np.float16).transpose(1, 0, 2), positions=pos.numpy())
    assert r.cause == "scaling_missing" and "float16" not in r.target, r.text
    assert r.json == posenc.check(config, before=q, after=out, positions=pos, order="heads-first").json


def test_bfloat16_values_saved_as_float32_with_dtype():
    config = published("llama__llama-3.1-8b")
    q, out, pos = engine(config, torch.bfloat16, "position_offset")
    r = posenc.check(config, before=f32(q), after=f32(out), positions=pos, order="heads-first", dtype="bf16")
    assert r.cause == "position_offset"
    assert r.json == posenc.check(config, before=q, after=out, positions=pos, order="heads-first").json
    q32, out32, _ = engine(config, torch.float32)
    with pytest.raises(ValueError, match=r"^after: value .* is not a bfloat16 value"):
        posenc.check(config, before=f32(q32), after=f32(out32), positions=pos, order="heads-first", dtype="bfloat16")


def test_cos_sin_cache_and_inv_freq_forms(cli, tmp_path):
    config = published("qwen2__qwen2.5-7b-instruct-yarn-d1e200f")
    rope = hf.freqs(config, seq_len=4096)
    inv = torch.tensor(rope.inv_freq, dtype=torch.float32)
    pos = torch.arange(4096)
    emb = torch.cat([pos[:, None].float() * inv] * 2, -1)
    cos, sin = emb.cos() * rope.attention_factor, emb.sin() * rope.attention_factor
    r = posenc.check(config, cos=cos, sin=sin)
    assert r.passed and r.form == "cos_sin", r.text
    assert r.json == cli_json(cli, tmp_path, config, [], {"--cos": f32(cos), "--sin": f32(sin)})
    # [T, R/2] per pair, at explicit positions, with cos and sin swapped
    rows = torch.tensor([5, 77, 4000])
    swapped = posenc.check(config, cos=sin[rows, : inv.numel()].numpy(), sin=cos[rows, : inv.numel()].numpy(),
                           positions=rows.numpy())
    assert swapped.cause == "cos_sin_swapped", swapped.text
    f = posenc.check(config, inv_freq=inv.numpy(), seq_len=4096)
    assert f.passed and f.form == "inv_freq", f.text
    unscaled = torch.tensor(hf.freqs({k: v for k, v in config.items() if k != "rope_scaling"}).inv_freq)
    g = posenc.check(config, inv_freq=unscaled.float(), seq_len=4096)
    assert g.cause == "scaling_missing", g.text
    assert g.json == cli_json(cli, tmp_path, config, ["--seq-len", "4096"], {"--inv-freq": unscaled.float().numpy()})


def mrope_engine(config, positions, sections):
    """Qwen2-VL's apply_multimodal_rotary_pos_emb: pair block i of `sections` takes position row i % 3."""
    c = hf.text_config(config)
    d = hf.head_dim(c)
    inv = 1.0 / (float(c["rope_theta"]) ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    emb = [torch.cat([p[:, None].float() * inv] * 2, -1) for p in positions]  # 3 x [T, D]
    split = list(sections) * 2
    pieces, start = [], 0
    for i, n in enumerate(split):
        pieces.append(emb[i % 3][:, start:start + n])
        start += n
    full = torch.cat(pieces, -1)
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(positions.shape[1], 2, d, generator=gen)
    return q, q * full.cos()[:, None] + rotate_half(q) * full.sin()[:, None]


def test_mrope_positions_3_by_t(cli, tmp_path):
    config = published("qwen2_vl__qwen-qwen2-vl-7b-instruct-gptq-int8")
    t = torch.arange(12)
    pos = torch.stack([t, t // 3 + 100, t % 3 + 200])  # [3, T]: temporal, height, width rows
    sections = config["rope_scaling"]["mrope_section"]
    q, out = mrope_engine(config, pos, sections)
    r = posenc.check(config, before=q, after=out, positions=pos)
    assert r.passed, r.text
    # height and width rows read in each other's place: a listed cause
    q, out = mrope_engine(config, pos[[0, 2, 1]], sections)
    bad = posenc.check(config, before=q, after=out, positions=pos)
    assert bad.cause == "sections", bad.text
    assert bad.json == cli_json(cli, tmp_path, config, [], {"--before": q.numpy(), "--after": out.numpy(),
                                                            "--positions": pos.numpy()})
    # section sizes swapped ([24, 16, 24]): no cause in the list; not_explained with where it starts
    q, out = mrope_engine(config, pos, [sections[1], sections[0], sections[2]])
    other = posenc.check(config, before=q, after=out, positions=pos)
    assert [c.id for c in other.diagnosis] == ["not_explained"], other.text
    assert other.error_first_position == 100 and other.error_pairs == tuple(range(16, 24))


def test_layer_type_selection_gemma3():
    config = published("gemma3_text__jrcastropy-functiongemma-270m-it-simple-tool-calling")  # states layer_types
    q, out, pos = engine(config, torch.float32, layer_type="sliding_attention", positions=POSITIONS[:8])
    ok = posenc.check(config, before=q, after=out, positions=pos, order="heads-first", layer_type="sliding_attention")
    assert ok.passed and "sliding_attention" in ok.target, ok.text
    full = config["layer_types"].index("full_attention")
    wrong = posenc.check(config, before=q, after=out, positions=pos, order="heads-first", layer=full)
    assert wrong.cause == "layer_type", wrong.text
    with pytest.raises(ValueError, match=r"^--layer 999: the model has 18 layers"):
        posenc.check(config, before=q, after=out, positions=pos, order="heads-first", layer=999)


def test_assert_rope_matches_passes_and_fails_with_the_diagnosis():
    config = published("llama__llama-3.1-8b")
    q, out, pos = engine(config, torch.bfloat16)
    report = assert_rope_matches(config, pos, q, out, order="heads-first")
    assert report.passed
    q, out, pos = engine(config, torch.bfloat16, "pairing")
    with pytest.raises(AssertionError) as e:
        assert_rope_matches(config, pos, q, out, order="heads-first")
    msg = str(e.value)
    assert msg.startswith("FAIL: layer 0, site rope")
    assert "diagnosis (best first):\n  pairing" in msg
    assert msg == posenc.check(config, before=q, after=out, positions=pos, order="heads-first").text.rstrip("\n")


def test_model_as_path_and_dict_agree(tmp_path):
    config = published("phi3__phi-3.5-mini-instruct")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    q, out, pos = engine(config, torch.float16, "position_offset")
    a = posenc.check(config, before=q, after=out, positions=pos, order="heads-first")
    b = posenc.check(path, before=q, after=out, positions=pos, order="heads-first")
    assert a.json == b.json and a.cause == "position_offset"
    with pytest.raises(TypeError, match="^model: int is not a config dict or a path"):
        posenc.check(3, before=q, after=out, positions=pos)


ONE_LINE = r"^[^\n]+$"


def test_bad_input_is_a_one_line_value_error():
    config = published("llama__llama-3.1-8b")
    q, out, pos = engine(config, torch.float32, positions=POSITIONS[:4])
    qn, on = f32(q).transpose(1, 0, 2), f32(out).transpose(1, 0, 2)  # [T, H, D] views
    cases = [
        (dict(before=qn, after=on[:, :2]), "before is [4, 4, 128] but after is [4, 2, 128]"),
        (dict(before=qn[..., :64], after=on[..., :64]), "after"),  # a head size the layer does not have
        (dict(before=qn, after=on, positions=pos[:3]), "position"),
        (dict(before=qn, after=on, positions=[[0, 1], [2, 3]]), "positions of shape [2, 2] for 4 tokens; the model's "
                                                                 "RoPE takes [4]"),
        (dict(before=qn, after=on, positions=[0.0, 1.0, 2.0, 3.0]), "positions: dtype float64 is not an integer type"),
        (dict(before=qn, after=None), "rotated tensors need before, after and positions"),
        (dict(before=qn, after=on, cos=on[0]), "give exactly one dump"),
        (dict(before=qn.astype(np.int32), after=on), "before: dtype int32"),
        (dict(before=qn, after=on, order="sideways"), "order: 'sideways' is not tokens-first or heads-first"),
        (dict(before=qn, after=on, layer_type="sliding_attention"), "--layer-type sliding_attention"),
        (dict(before=qn, after=on, site="indexer"), "--site indexer"),
        (dict(before=qn, after=on, dtype="int8"), "dtype: 'int8' is not float32, float16 or bfloat16"),
    ]
    for kw, text in cases:
        kw.setdefault("positions", pos)
        with pytest.raises(ValueError, match=ONE_LINE) as e:
            posenc.check(config, **kw)
        assert text in str(e.value), (kw.keys(), str(e.value))
    nan = on.copy()
    nan[2, 1, 5] = np.nan
    with pytest.raises(ValueError, match=ONE_LINE) as e:
        posenc.check(config, before=qn, after=nan, positions=pos)
    assert "NaN" in str(e.value) and "after" in str(e.value)
    with pytest.raises(ValueError, match=ONE_LINE) as e:
        posenc.check(config, before=qn, after=on, positions=[0, 1, 2, -5])
    assert "-5" in str(e.value)
    with pytest.raises(ValueError, match=r"^model \(dict\): the model's scheme is [a-z_]+, not RoPE: nothing to check$"):
        posenc.check(published("gpt2__openai-community-gpt2-xl"), before=qn, after=on, positions=pos)
    with pytest.raises(OSError, match=ONE_LINE) as e:
        posenc.diff(config, "/nonexistent/config.json")
    assert "/nonexistent/config.json" in str(e.value)


def to_v5(c):
    """transformers v5's spelling: rope_theta and rope_scaling moved into rope_parameters."""
    c = dict(c)
    p = dict(c.pop("rope_scaling", None) or {})
    if "type" in p:
        p.setdefault("rope_type", p.pop("type"))
    p.setdefault("rope_type", "default")
    p["rope_theta"] = c.pop("rope_theta")
    c["rope_parameters"] = p
    return c


def test_diff_v4_v5_equivalent_and_dropped_scaling_named(cli, tmp_path):
    v4 = published("llama__llama-3.1-8b")
    same = posenc.diff(v4, to_v5(v4))
    assert same.equivalent and bool(same), same.text
    assert all(not d.affects for d in same.differences)
    dropped = to_v5(v4)
    dropped["rope_parameters"] = {"rope_type": "default", "rope_theta": 500000.0}
    r = posenc.diff(v4, dropped)
    assert not r.equivalent
    scaling = [d for d in r.differences if d.field == "scaling"]
    assert scaling and scaling[0].a == "llama3" and scaling[0].b == "default", r.text
    assert "B applies no scaling" in scaling[0].text and scaling[0].layers == (0, 31)
    assert r.cost["first_position_over_1e-3_rad"] is not None and r.cost["first_position_over_1e-3_rad"] > 0
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(v4))
    b.write_text(json.dumps(dropped))
    run = subprocess.run([cli, "diff", str(a), str(b), "--json"], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    want = json.loads(run.stdout)
    got = posenc.diff(str(a), str(b)).json
    assert got == want
    assert posenc.diff(str(a), str(b)).text == subprocess.run([cli, "diff", str(a), str(b)], capture_output=True,
                                                              text=True).stdout


def test_cause_ids_are_the_issue_vocabulary():
    assert set(posenc._check.CAUSE_IDS) == {
        "pairing", "window", "base", "scaling_missing", "scaling_param", "attention_scaling", "position_offset",
        "position_reset", "precision", "direction", "cos_sin_swapped", "sections", "layer_type", "not_explained"}
