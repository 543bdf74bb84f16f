"""The pictures are drawn from posenc's own numbers, and each picture's data has the property it is
meant to teach (checked here against posenc's API); the plot command validates before it writes."""
import json
import math
import os
import stat

import numpy as np
import pytest

pytest.importorskip("matplotlib")
import posenc  # noqa: E402
import posenc.plot as plot  # noqa: E402

BASE = {"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 4096,
        "rope_theta": 10000.0}
NAMES = ("wavelengths", "attention", "biases", "rope_pair", "multi_axis")


def test_wavelengths_are_posenc_frequencies():
    fig = plot.wavelengths([plot.YARN, plot.LLAMA3])
    for ax, cfg, panel in zip(fig.axes, [plot.YARN, plot.LLAMA3], fig.posenc_data["panels"]):
        s = posenc.load_scheme(cfg)
        want = 2 * math.pi / s.frequencies().inv_freq
        assert np.array_equal(panel["wavelength"], want)
        assert panel["regimes"] == s.pair_regimes()
        assert {"extrapolated", "blended", "interpolated"} <= set(panel["regimes"])
        drawn = np.concatenate([c.get_offsets() for c in ax.collections])
        drawn = drawn[np.argsort(drawn[:, 0])]
        np.testing.assert_allclose(drawn[:, 1], want, rtol=1e-12)
        np.testing.assert_allclose(ax.lines[0].get_ydata(), 2 * math.pi / s.unscaled_frequencies(), rtol=1e-12)
        assert ax.lines[1].get_ydata()[0] == cfg["rope_scaling"]["original_max_position_embeddings"]
        # Interpolated pairs turn exactly `factor` times slower than the unscaled formula.
        interp = np.array([r == "interpolated" for r in panel["regimes"]])
        np.testing.assert_allclose(panel["wavelength"][interp] / panel["unscaled"][interp],
                                   cfg["rope_scaling"]["factor"], rtol=1e-12)
        assert ax.get_title().startswith(cfg["_name_or_path"])


def test_an_unscaled_model_is_unscaled_not_extrapolated():
    fig = plot.wavelengths([BASE])
    panel = fig.posenc_data["panels"][0]
    assert set(panel["regimes"]) == {"unscaled"}
    np.testing.assert_allclose(panel["wavelength"], panel["unscaled"], rtol=1e-12)
    assert "no scaling" in fig.axes[0].get_title()


def _row_sums_are_one(w, mask):
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (w[mask] == 0).all()


def test_attention_maps_tell_the_permutation_story_and_the_mask():
    fig = plot.attention_maps()
    d = fig.posenc_data
    n = d["none"][0].shape[0]
    upper = np.triu(np.ones((n, n), bool), 1)
    for key, _, causal, _ in plot.ATTENTION_PANELS:
        a, b = d[key]
        ma, mb = d["mask"][key]
        _row_sums_are_one(a, ma)
        _row_sums_are_one(b, mb)
        assert np.array_equal(ma, upper if causal else np.zeros_like(upper)), key
    a, b = d["none"]
    np.testing.assert_allclose(a, b, atol=1e-6)  # no positions, no mask: the same map
    for key in ("sinusoidal", "rope", "t5", "causal", "causal_rope", "causal_alibi"):
        a, b = d[key]
        assert np.abs(a - b).max() > 1e-3, key  # every scheme, and the causal mask alone, break it
    # The drawn images are these numbers, masked cells masked (drawn grey).
    axes = {t.get_title(): t for t in fig.axes}
    img = axes["causal + ALiBi"].images[0].get_array()
    assert np.array_equal(np.ma.getmaskarray(img), upper)
    np.testing.assert_array_equal(img.data, d["causal_alibi"][0])
    np.testing.assert_array_equal(axes["RoPE"].images[0].get_array(), d["rope"][0])
    # ALiBi's panel is causal attention reweighted by exp(-slope (i - j)), posenc's bias.
    np.testing.assert_array_equal(d["alibi_bias"], posenc.alibi_bias([d["alibi_slope"]], n, n)[0])
    lower = ~upper
    ratio = np.log(d["causal_alibi"][0][lower]) - np.log(d["causal"][0][lower])
    i, j = np.nonzero(lower)
    shift = ratio + d["alibi_slope"] * (i - j)  # constant along each row
    for row in range(n):
        np.testing.assert_allclose(shift[i == row], shift[i == row][0], atol=1e-9)
    # And it pulls every row's attention closer: the mean distance looked back shrinks.
    dist = np.where(lower, np.arange(n)[:, None] - np.arange(n)[None, :], 0)
    back_alibi, back_mask = (d["causal_alibi"][0] * dist).sum(1), (d["causal"][0] * dist).sum(1)
    assert (back_alibi[1:] < back_mask[1:]).all()


def test_bias_maps_draw_alibi_under_its_causal_mask():
    fig = plot.bias_maps(tokens=16, heads=(0, 5))
    want = posenc.alibi_bias(posenc.alibi_slopes(8, "bloom"), 16, 16)
    upper = np.triu(np.ones((16, 16), bool), 1)
    alibi_axes = [ax for ax in fig.axes if ax.images and ax.get_title().startswith("ALiBi")]
    assert len(alibi_axes) == 2
    for ax, h in zip(alibi_axes, (0, 5)):
        img = ax.images[0].get_array()
        assert np.array_equal(np.ma.getmaskarray(img), upper)  # the future is masked, not rewarded
        np.testing.assert_array_equal(img.data[~upper], want[h][~upper])
        assert (img.compressed() <= 0).all()  # every visible key is penalised (or 0 for itself)
        np.testing.assert_allclose(np.diag(img.data), 0.0)
    rel = (np.arange(16)[None, :] - np.arange(16)[:, None]).reshape(-1)
    t5_axes = [ax for ax in fig.axes if ax.images and ax.get_title().startswith("T5")]
    bi, causal = (ax.images[0].get_array() for ax in t5_axes)
    assert not np.ma.getmaskarray(bi).any()  # an encoder's buckets see both directions
    np.testing.assert_array_equal(np.asarray(bi), posenc.t5_buckets(rel, bidirectional=True).reshape(16, 16))
    assert np.array_equal(np.ma.getmaskarray(causal), upper)
    np.testing.assert_array_equal(causal.data, posenc.t5_buckets(rel, bidirectional=False).reshape(16, 16))


def test_rope_pair_turns_by_m_theta_and_scores_depend_on_m_minus_n():
    fig = plot.rope_pair(pair=2, head_dim=16, positions=20)
    d = fig.posenc_data
    xy = d["pair_xy"]
    np.testing.assert_allclose(np.hypot(xy[:, 0], xy[:, 1]), 1.0, atol=1e-6)
    rope = posenc.Rope({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 1, "max_position_embeddings": 4096,
                        "rope_theta": 10000.0})
    assert d["theta"] == rope.inv_freq[2]
    np.testing.assert_allclose(np.unwrap(np.arctan2(xy[:, 1], xy[:, 0])), np.arange(20) * d["theta"], atol=1e-5)
    curves = list(d["scores"].values())
    for c in curves[1:]:
        np.testing.assert_allclose(c, curves[0], atol=1e-4)
    np.testing.assert_allclose(fig.axes[1].lines[0].get_ydata(), curves[0])


def test_multi_axis_plan_is_posenc_plan():
    fig = plot.multi_axis(grid_h=3, grid_w=4)
    d = fig.posenc_data
    s = posenc.load_scheme(plot.QWEN2_VL)
    _, _, comp, _ = s.multi_axis_plan(int(d["positions"].max()) + 1)
    assert np.array_equal(d["pair_component"], comp)
    assert list(np.bincount(comp)) == s.multi_axis["sections"]
    assert d["positions"].shape == (3, 3 + 12 + 3)
    # The image patches' h and w rows are the grid's row and column (offset by the text before).
    img = d["positions"][:, 3:15].reshape(3, 3, 4)
    assert np.array_equal(img[1] - img[1].min(), np.repeat(np.arange(3)[:, None], 4, 1))
    assert np.array_equal(img[2] - img[2].min(), np.repeat(np.arange(4)[None, :], 3, 0))


MROPE = dict(BASE, model_type="qwen2_vl", _name_or_path="my-org/tiny-vl",
             rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]})


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def test_an_mrope_config_draws_its_own_grid(tmp_path, cli):
    cfg = _write(tmp_path, "config.json", MROPE)
    out = tmp_path / "out"
    assert plot.main(["--out", str(out), "--config", str(cfg), "--format", "png", "--cli", cli]) == 0
    fig = plot.multi_axis(str(cfg))
    assert list(np.bincount(fig.posenc_data["pair_component"])) == [8, 12, 12]
    assert fig.posenc_data["sections"] == [8, 12, 12]
    assert fig.axes[3].get_title().startswith("my-org/tiny-vl")
    assert (out / "multi_axis.png").stat().st_size > 1000


def test_titles_are_model_names_not_paths(tmp_path):
    deep = tmp_path / ("x" * 60) / "snapshots" / ("0123456789abcdef" * 3)
    deep.mkdir(parents=True)
    named = _write(deep, "config.json", dict(BASE, _name_or_path="meta-llama/Llama-2-7b-hf"))
    fig = plot.wavelengths([str(named)])
    title = fig.axes[0].get_title()
    assert title.splitlines()[0] == "meta-llama/Llama-2-7b-hf" and str(tmp_path) not in title
    bare = _write(deep, "bare.json", BASE)
    assert plot.wavelengths([str(bare)]).axes[0].get_title().splitlines()[0] == "llama"
    long = _write(deep, "long.json", dict(BASE, _name_or_path="org/" + "a" * 200))
    assert len(plot.wavelengths([str(long)]).axes[0].get_title().splitlines()[0]) <= 40


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _refused(capsys, argv, *needles):
    assert plot.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("posenc.plot: error: "), err
    for n in needles:
        assert n in err, err
    return err


@pytest.fixture
def existing(tmp_path):
    """An output folder that already holds pictures: a refused run must leave them as they are."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "attention.png").write_bytes(b"old picture")
    (out / "demo.txt").write_text("old demo")
    return out


def test_config_refuses_what_is_not_a_model_config(tmp_path, existing, capsys, cli):
    case = _write(tmp_path, "case.json", {"scheme": "rope", "description": "a golden case", "head_dim": 64,
                                          "config": BASE, "files": {"q": "q.npy"}})
    before = _snapshot(existing)
    _refused(capsys, ["--out", str(existing), "--config", str(case), "--cli", cli], "not a model config",
             "model_type or architectures", "'config' object")
    _refused(capsys, ["--out", str(existing), "--config", str(_write(tmp_path, "list.json", [1, 2])), "--cli", cli],
             "not a model config")
    _refused(capsys, ["--out", str(existing), "--config", str(tmp_path / "missing.json"), "--cli", cli],
             "no such file")
    bloom = _write(tmp_path, "bloom.json", {"model_type": "bloom", "n_embed": 64, "n_head": 8})
    _refused(capsys, ["--out", str(existing), "--config", str(bloom), "--cli", cli], "alibi", "not RoPE")
    assert _snapshot(existing) == before


def test_a_real_golden_case_is_refused(data_dir, existing, capsys, cli):
    case = data_dir / "golden" / "hf" / "rope_llama31_8b_llama3" / "case.json"
    if not case.is_file():
        pytest.skip(f"{case} not found")
    before = _snapshot(existing)
    _refused(capsys, ["--out", str(existing), "--config", str(case), "--cli", cli], "not a model config")
    assert _snapshot(existing) == before


def test_a_bad_format_overwrites_nothing(existing, capsys, cli):
    before = _snapshot(existing)
    _refused(capsys, ["--out", str(existing), "--format", "png,bogus", "--cli", cli], "'bogus'")
    _refused(capsys, ["--out", str(existing), "--format", "", "--cli", cli], "--format")
    assert _snapshot(existing) == before


def _fake_cli(tmp_path, body):
    exe = tmp_path / "fake-posenc"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def test_a_failing_demo_is_an_error_and_writes_nothing(tmp_path, existing, capsys):
    before = _snapshot(existing)
    exe = _fake_cli(tmp_path, "echo 'posenc demo: half a line'; echo 'demo: broke' >&2; exit 3")
    _refused(capsys, ["--out", str(existing), "--format", "png", "--cli", exe], "exit status 3", "demo: broke")
    exe = _fake_cli(tmp_path, "exit 0")  # exit 0 but no output: still no empty demo.txt
    _refused(capsys, ["--out", str(existing), "--format", "png", "--cli", exe], "exit status 0", "no output")
    assert _snapshot(existing) == before
    assert not [p for p in existing.iterdir() if p.name.startswith(".posenc-plot-")]  # no temporary folder left


def test_a_missing_cli_says_where_to_get_it(tmp_path, existing, capsys, monkeypatch):
    before = _snapshot(existing)
    _refused(capsys, ["--out", str(existing), "--cli", str(tmp_path / "nope")], "--cli", "not an executable")
    monkeypatch.delenv("POSENC_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(plot, "_build_tree_cli", lambda: None)
    _refused(capsys, ["--out", str(existing)], "posenc CLI", "--cli", "POSENC_CLI", "posenc_cli", "--no-demo")
    assert _snapshot(existing) == before
    # Without the demo, no CLI is needed; the old demo.txt is left alone.
    assert plot.main(["--out", str(existing), "--format", "png", "--no-demo"]) == 0
    assert (existing / "demo.txt").read_text() == "old demo"
    assert (existing / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_command_writes_the_set(tmp_path, cli):
    assert plot.main(["--out", str(tmp_path), "--cli", cli]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    for n in NAMES:
        assert f"{n}.png" in names and f"{n}.svg" in names
        assert (tmp_path / f"{n}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (tmp_path / f"{n}.svg").read_bytes()[:2000]
    demo = (tmp_path / "demo.txt").read_text()
    assert demo.startswith("posenc demo:") and demo.rstrip().endswith("All checks passed.")
    assert not [n for n in names if n.startswith(".")]


def test_the_readme_shows_the_pictures_this_module_draws():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    for n in ("attention", "biases", "wavelengths"):
        assert f"(docs/images/{n}.png)" in readme, n
        assert os.path.getsize(os.path.join(root, "docs", "images", f"{n}.png")) > 10000
