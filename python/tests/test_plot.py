"""The pictures are drawn from posenc's own numbers (what each axes holds is compared with the API)."""
import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")
import posenc  # noqa: E402
import posenc.plot as plot  # noqa: E402


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


def test_attention_maps_tell_the_permutation_story():
    fig = plot.attention_maps()
    d = fig.posenc_data
    a, b = d["none"]
    np.testing.assert_allclose(a, b, atol=1e-6)  # no positions: the same map
    for scheme in ("sinusoidal", "rope", "alibi", "t5"):
        a, b = d[scheme]
        assert np.abs(a - b).max() > 1e-3, scheme
    np.testing.assert_array_equal(fig.axes[2].images[0].get_array(), d["rope"][0])


def test_bias_maps_are_posenc_biases():
    fig = plot.bias_maps(tokens=16, heads=(0, 5))
    want = posenc.alibi_bias(posenc.alibi_slopes(8, "bloom"), 16, 16)
    np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), want[0])
    rel = (np.arange(16)[None, :] - np.arange(16)[:, None]).reshape(-1)
    causal = posenc.t5_buckets(rel, bidirectional=False).reshape(16, 16)
    image_axes = [ax for ax in fig.axes if ax.images and ax.get_title().startswith("T5")]
    np.testing.assert_array_equal(image_axes[-1].images[0].get_array(), causal)


def test_rope_pair_turns_and_scores_depend_on_m_minus_n():
    fig = plot.rope_pair(pair=2, head_dim=16, positions=20)
    d = fig.posenc_data
    xy = d["pair_xy"]
    np.testing.assert_allclose(np.hypot(xy[:, 0], xy[:, 1]), 1.0, atol=1e-6)
    rope = posenc.Rope({"hidden_size": 16, "num_attention_heads": 1, "max_position_embeddings": 4096,
                        "rope_theta": 10000.0})
    np.testing.assert_allclose(np.unwrap(np.arctan2(xy[:, 1], xy[:, 0])), np.arange(20) * rope.inv_freq[2], atol=1e-5)
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


def test_one_command_writes_the_set(tmp_path, cli):
    assert plot.main(["--out", str(tmp_path), "--cli", cli]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    for n in ("wavelengths", "attention", "biases", "rope_pair", "multi_axis"):
        assert f"{n}.png" in names and f"{n}.svg" in names
        assert (tmp_path / f"{n}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (tmp_path / f"{n}.svg").read_bytes()[:2000]
    assert "demo.txt" in names and (tmp_path / "demo.txt").stat().st_size > 100
