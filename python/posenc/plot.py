"""Pictures of the seed's ideas, drawn from posenc's own numbers (matplotlib).

    python3 -m posenc.plot --out DIR [--config config.json] [--format png,svg]

writes the whole set (and, when the CLI is found, `posenc demo`'s numbers as demo.txt beside them):

- wavelengths.*   each RoPE pair's wavelength against the original context, coloured by regime
                  (extrapolated, blended, interpolated, ...), for YaRN, Llama 3 and the given config
- attention.*     the demo's attention maps with and without positions, for a sequence and for the
                  same tokens permuted (mapped back): without positions they are the same map
- biases.*        ALiBi and T5 bias maps
- rope_pair.*     one RoPE pair turning with position, and the score q_m . k_n against m - n
- multi_axis.*    the (t, h, w) positions of text and an image grid (M-RoPE) and which pairs follow which

Every function returns the matplotlib Figure; the numbers it drew are in `fig.posenc_data` (the tests
check them against posenc's API).
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

import posenc

REGIME_COLOURS = {"extrapolated": "tab:blue", "blended": "tab:orange", "interpolated": "tab:red",
                  "scaled": "tab:purple", "unrotated": "tab:gray"}

YARN = {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
LLAMA3 = {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}}
QWEN2_VL = {"model_type": "qwen2_vl", "hidden_size": 1536, "num_attention_heads": 12, "max_position_embeddings": 32768,
            "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}


def _plt():
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def _original_context(scheme: "posenc.Scheme") -> int:
    sc = scheme.scaling
    return int(sc.get("original_max_position_embeddings") or scheme.max_position_embeddings or 0)


def wavelengths(schemes: Sequence[Any], *, labels: Optional[Sequence[str]] = None, seq_len: Optional[int] = None):
    """Per pair, wavelength 2*pi/inv_freq after scaling (dots, coloured by regime) and before (line),
    against the original context length (dashed): the picture that explains YaRN and Llama 3."""
    plt = _plt()
    schemes = [posenc.load_scheme(s) for s in schemes]
    fig, axes = plt.subplots(1, len(schemes), figsize=(5.5 * len(schemes), 4.2), squeeze=False)
    data: Dict[str, Any] = {"panels": []}
    for i, (ax, s) in enumerate(zip(axes[0], schemes)):
        f = s.frequencies(seq_len)
        with np.errstate(divide="ignore"):
            wl = np.where(f.inv_freq > 0, 2 * math.pi / f.inv_freq, np.inf)
            wl0 = 2 * math.pi / s.unscaled_frequencies()
        regimes = s.pair_regimes(seq_len)
        pairs = np.arange(len(wl))
        ax.plot(pairs, wl0, color="0.6", lw=1, label="unscaled")
        for r in dict.fromkeys(regimes):
            m = np.array([x == r for x in regimes])
            ax.scatter(pairs[m], wl[m], s=12, color=REGIME_COLOURS.get(r, "k"), label=r, zorder=3)
        ctx = _original_context(s)
        if ctx:
            ax.axhline(ctx, ls="--", color="k", lw=1, label=f"original context {ctx}")
        ax.set_yscale("log")
        ax.set_xlabel("pair i")
        ax.set_ylabel("wavelength (tokens)")
        title = labels[i] if labels else f"{s.scaling['type']} (factor {s.nominal_factor():g})"
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left")
        data["panels"].append({"wavelength": wl, "unscaled": wl0, "regimes": regimes, "context": ctx})
    fig.tight_layout()
    fig.posenc_data = data
    return fig


def _softmax(s: np.ndarray) -> np.ndarray:
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_maps(tokens: int = 12, d: int = 64, seed: int = 0):
    """Attention of one head over a random sequence, per scheme (none, sinusoidal, RoPE, ALiBi, T5):
    top row the sequence, bottom row the same tokens permuted, the map re-indexed back. Without
    positions the two are the same map (attention is permutation-equivariant); every scheme breaks it."""
    plt = _plt()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, d)).astype(np.float32)
    wq = (rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)
    wk = (rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)
    perm = rng.permutation(tokens)
    inv = np.argsort(perm)
    pos = np.arange(tokens)
    rope = posenc.Rope({"hidden_size": d, "num_attention_heads": 1, "max_position_embeddings": 4096,
                        "rope_theta": 100.0})
    sin_table = posenc.sinusoidal_table(pos, d)
    alibi = posenc.alibi_bias(posenc.alibi_slopes(8, "bloom")[:1], tokens, tokens)[0]  # slope 1/2
    t5_table = (rng.standard_normal((32, 1)) * 2).astype(np.float32)
    t5 = posenc.t5_bias(t5_table, tokens, tokens, bidirectional=True)[0]

    def scores(xs: np.ndarray, scheme: str) -> np.ndarray:
        if scheme == "sinusoidal":
            xs = xs + sin_table
        q, k = (xs @ wq)[:, None, :].copy(), (xs @ wk)[:, None, :].copy()
        if scheme == "rope":
            rope.apply_qk(q, k, pos)
        s = (q[:, 0] @ k[:, 0].T) / math.sqrt(d)
        if scheme == "alibi":
            s = s + alibi
        if scheme == "t5":
            s = s + t5
        return _softmax(s)

    schemes = ["none", "sinusoidal", "rope", "alibi", "t5"]
    fig, axes = plt.subplots(2, len(schemes), figsize=(3 * len(schemes), 6.2))
    data: Dict[str, Any] = {"permutation": perm}
    for c, scheme in enumerate(schemes):
        a = scores(x, scheme)
        b = scores(x[perm], scheme)[np.ix_(inv, inv)]  # permuted sequence, rows/cols mapped back
        data[scheme] = (a, b)
        for r, m in enumerate((a, b)):
            axes[r, c].imshow(m, cmap="viridis", vmin=0, vmax=max(a.max(), b.max()))
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[0, c].set_title(f"{scheme}")
        axes[1, c].set_xlabel(f"max |diff| {np.abs(a - b).max():.2g}")
    axes[0, 0].set_ylabel("sequence")
    axes[1, 0].set_ylabel("permuted, mapped back")
    fig.suptitle("attention without positions is permutation-equivariant; each scheme breaks that")
    fig.tight_layout()
    fig.posenc_data = data
    return fig


def bias_maps(tokens: int = 24, heads: Sequence[int] = (0, 3, 7), seed: int = 0):
    """ALiBi bias -slope_h (i - j) for a few of 8 heads (BLOOM slopes), and T5's bucket of j - i
    (bidirectional and causal, 32 buckets, max distance 128) for i, j < tokens."""
    plt = _plt()
    slopes = posenc.alibi_slopes(8, "bloom")
    alibi = posenc.alibi_bias(slopes, tokens, tokens)
    rel = (np.arange(tokens)[None, :] - np.arange(tokens)[:, None]).reshape(-1)
    b_bi = posenc.t5_buckets(rel, bidirectional=True).reshape(tokens, tokens)
    b_causal = posenc.t5_buckets(rel, bidirectional=False).reshape(tokens, tokens)
    fig, axes = plt.subplots(1, len(heads) + 2, figsize=(3.2 * (len(heads) + 2), 3.4))
    for ax, h in zip(axes, heads):
        im = ax.imshow(alibi[h], cmap="magma")
        ax.set_title(f"ALiBi head {h} (slope {slopes[h]:.3g})", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    for ax, b, name in ((axes[-2], b_bi, "bidirectional"), (axes[-1], b_causal, "causal")):
        im = ax.imshow(b, cmap="tab20c")
        ax.set_title(f"T5 bucket of j - i ({name})", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    for ax in axes:
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.tight_layout()
    fig.posenc_data = {"alibi": alibi, "slopes": slopes, "t5_bidirectional": b_bi, "t5_causal": b_causal}
    return fig


def rope_pair(pair: int = 2, head_dim: int = 16, positions: int = 24, base: float = 10000.0, seed: int = 0):
    """Left: pair `pair` of a unit vector rotated by posenc at positions 0..N-1 (it turns by
    inv_freq[pair] per position, norm kept). Right: the score q_m . k_n against m - n for several
    offsets m: the curves coincide, RoPE scores depend only on m - n."""
    plt = _plt()
    rope = posenc.Rope({"hidden_size": head_dim, "num_attention_heads": 1, "max_position_embeddings": 4096,
                        "rope_theta": base})
    rng = np.random.default_rng(seed)
    v = np.zeros((positions, 1, head_dim), np.float32)
    v[:, 0, pair] = 1.0  # half pairing: pair i is (i, i + head_dim/2)
    rope.apply(v, np.arange(positions))
    xy = v[:, 0, [pair, pair + head_dim // 2]]
    q0 = rng.standard_normal(head_dim).astype(np.float32)
    k0 = rng.standard_normal(head_dim).astype(np.float32)
    rel = np.arange(-positions + 1, positions)
    curves = {}
    for m in (positions, 4 * positions, 40 * positions):
        n = m - rel
        q = np.repeat(q0[None, None], len(rel), 0)
        k = np.repeat(k0[None, None], len(rel), 0)
        rope.apply(q, np.full(len(rel), m))
        rope.apply(k, n)
        curves[m] = (q[:, 0] * k[:, 0]).sum(-1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.2))
    t = np.linspace(0, 2 * math.pi, 200)
    a.plot(np.cos(t), np.sin(t), color="0.8", lw=1)
    a.scatter(xy[:, 0], xy[:, 1], c=np.arange(positions), cmap="viridis", zorder=3)
    for p in range(0, positions, max(1, positions // 6)):
        a.annotate(str(p), xy[p], fontsize=8)
    a.set_aspect("equal")
    a.set_title(f"pair {pair}: {rope.inv_freq[pair]:.3g} rad per position")
    for m, s in curves.items():
        b.plot(rel, s, lw=3 if m == positions else 1.2, label=f"m = {m}")
    b.set_xlabel("m - n")
    b.set_ylabel("q_m . k_n")
    b.set_title("the score depends only on m - n")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.posenc_data = {"pair_xy": xy, "scores": curves, "relative": rel}
    return fig


def image_grid_positions(text_before: int, grid_h: int, grid_w: int, text_after: int) -> np.ndarray:
    """(t, h, w) rows [3, T] for text, an image grid of grid_h x grid_w merged patches, and text, as
    Qwen2-VL's get_rope_index lays out one image (posenc.text_vision_positions with no further merge)."""
    rows, _ = posenc.text_vision_positions([text_before, {"type": "image", "grid_thw": [1, grid_h, grid_w]}, text_after],
                                           spatial_merge_size=1)
    return rows


def multi_axis(config: Optional[Dict[str, Any]] = None, grid_h: int = 6, grid_w: int = 8):
    """The M-RoPE positions of text + an image grid (t, h, w rows), and which position row drives each
    rotary pair (posenc's plan for the config's sections)."""
    plt = _plt()
    scheme = posenc.load_scheme(config or QWEN2_VL)
    pos = image_grid_positions(3, grid_h, grid_w, 3)
    _, _, comp, ncomp = scheme.multi_axis_plan(int(pos.max()) + 1)
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6), gridspec_kw={"width_ratios": [1, 1, 1, 1.4]})
    img = pos[:, 3:3 + grid_h * grid_w].reshape(3, grid_h, grid_w)
    for c, name in zip(range(3), "thw"):
        axes[0].plot(pos[c], marker=".", lw=1, label=name, color=f"C{c}")
    axes[0].axvspan(3, 3 + grid_h * grid_w - 1, color="0.9")
    axes[0].set_xlabel("token (text, image patches, text)")
    axes[0].set_ylabel("position")
    axes[0].legend(fontsize=8)
    axes[0].set_title("(t, h, w) rows per token")
    for ax, c, name in zip(axes[1:3], (1, 2), "hw"):
        im = ax.imshow(img[c], cmap="viridis")
        ax.set_title(f"image patches: {name} position")
        fig.colorbar(im, ax=ax, fraction=0.046)
    axes[3].bar(np.arange(len(comp)), np.ones(len(comp)), color=[f"C{c}" for c in comp], width=1.0)
    axes[3].set_yticks([])
    axes[3].set_xlabel("rotary pair")
    ms = scheme.multi_axis or {}
    axes[3].set_title(f"pair -> row ({ms.get('section_layout')}, sections {ms.get('sections')}): "
                      + ", ".join(f"C{c}={n}" for c, n in zip(range(ncomp), "thw")), fontsize=8)
    fig.tight_layout()
    fig.posenc_data = {"positions": pos, "pair_component": comp}
    return fig


def write_all(out: str, *, config: Any = None, formats: Iterable[str] = ("png", "svg"),
              cli: Optional[str] = None) -> List[str]:
    """Writes the whole set into `out` (and demo.txt from `posenc demo` when the CLI is found)."""
    os.makedirs(out, exist_ok=True)
    schemes: List[Any] = [YARN, LLAMA3]
    labels = ["YaRN x4 (Qwen2.5 style)", "Llama 3.1 x8"]
    if config is not None:
        schemes.append(config)
        labels.append(str(config) if not isinstance(config, dict) else "given config")
    figures = {"wavelengths": lambda: wavelengths(schemes, labels=labels), "attention": attention_maps,
               "biases": bias_maps, "rope_pair": rope_pair, "multi_axis": multi_axis}
    written = []
    plt = _plt()
    for name, make in figures.items():
        fig = make()
        for fmt in formats:
            path = os.path.join(out, f"{name}.{fmt}")
            fig.savefig(path, dpi=110)
            written.append(path)
        plt.close(fig)
    exe = cli or os.environ.get("POSENC_CLI") or shutil.which("posenc")
    if exe:
        r = subprocess.run([exe, "demo"], capture_output=True, text=True, check=False)
        path = os.path.join(out, "demo.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(r.stdout)
        written.append(path)
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m posenc.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the pictures into")
    ap.add_argument("--config", help="also draw this config's wavelengths (config.json, .gguf, model folder)")
    ap.add_argument("--format", default="png,svg", help="comma-separated: png, svg, pdf")
    ap.add_argument("--cli", help="the posenc executable for demo.txt (default: POSENC_CLI, else PATH)")
    a = ap.parse_args(argv)
    try:
        written = write_all(a.out, config=a.config, formats=a.format.split(","), cli=a.cli)
    except (ValueError, OSError, NotImplementedError) as e:
        print(f"posenc.plot: error: {e}", file=sys.stderr)
        return 2
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
