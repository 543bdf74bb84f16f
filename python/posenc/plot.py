"""Pictures of the seed's ideas, drawn from posenc's own numbers (matplotlib).

    python3 -m posenc.plot --out DIR [--config config.json] [--format png,svg] [--cli PATH | --no-demo]

writes the whole set, and `posenc demo`'s numbers as demo.txt beside them:

- wavelengths.*   each RoPE pair's wavelength against the original context, coloured by regime
                  (unscaled, extrapolated, blended, interpolated, ...: `posenc inspect --help` defines
                  them), for YaRN, Llama 3 and the given config
- attention.*     attention maps of one head over a sequence and over the same tokens permuted (mapped
                  back): with the causal mask off, without positions the two are the same map and each
                  scheme breaks that; with a decoder's causal mask (masked cells grey) the mask alone
                  breaks it, and ALiBi is drawn, as BLOOM and MPT use it, only under the mask
- biases.*        ALiBi bias maps (under the causal mask) and T5's buckets (bidirectional; causal, masked)
- rope_pair.*     one RoPE pair turning with position, and the score q_m . k_n against m - n
- multi_axis.*    the (t, h, w) positions of text and an image grid (M-RoPE) and which pairs follow which
                  row: the given config's sections when it is an M-RoPE config, else Qwen2-VL's

Every function returns the matplotlib Figure; the numbers it drew are in `fig.posenc_data` (the tests
check properties of them against posenc's API). Nothing is written unless everything succeeded: the
figures and demo.txt are made in a temporary folder inside DIR and moved into place at the end.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

import posenc

# One colour per regime; the names and their meanings come from posenc (PairRegimeMeaning).
REGIME_COLOURS = {"unscaled": "tab:green", "extrapolated": "tab:blue", "blended": "tab:orange",
                  "interpolated": "tab:red", "scaled": "tab:purple", "unrotated": "tab:gray"}
FORMATS = ("png", "svg", "pdf")
MASKED_COLOUR = "0.82"

YARN = {"model_type": "qwen2", "_name_or_path": "YaRN x4 (Qwen2.5 style)", "hidden_size": 4096,
        "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
LLAMA3 = {"model_type": "llama", "_name_or_path": "Llama 3.1 x8", "hidden_size": 4096, "num_attention_heads": 32,
          "max_position_embeddings": 131072, "rope_theta": 500000.0,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}}
QWEN2_VL = {"model_type": "qwen2_vl", "_name_or_path": "Qwen2-VL", "hidden_size": 1536, "num_attention_heads": 12,
            "max_position_embeddings": 32768, "rope_theta": 1000000.0,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}

_TITLE_CHARS = 40


def _plt():
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def _short(text: str, limit: int = _TITLE_CHARS) -> str:
    text = " ".join(str(text).split())  # one line
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _original_context(scheme: "posenc.Scheme") -> int:
    sc = scheme.scaling
    return int(sc.get("original_max_position_embeddings") or scheme.max_position_embeddings or 0)


# ---- model configs ----------------------------------------------------------------------------------

def _is_model_config(c: Any) -> bool:
    """A Hugging Face config.json names its model: model_type (every PretrainedConfig writes it) or
    architectures."""
    return isinstance(c, dict) and (isinstance(c.get("model_type"), str) or isinstance(c.get("architectures"), list))


def _name_of(c: Dict[str, Any], fallback: str) -> str:
    for key in ("_name_or_path", "model_type"):
        v = c.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return fallback


def load_model_config(source: Any) -> Tuple["posenc.Scheme", str]:
    """(scheme, model name) of what `--config` names: a config dict, a config.json, a .gguf or a model
    folder. Refuses (ValueError, one line) what is not a model config, e.g. a golden case.json: a
    config.json must name its model (model_type or architectures)."""
    if isinstance(source, posenc.Scheme):
        return source, _short(source.model_type or source.source or "scheme")
    if isinstance(source, dict):
        if not _is_model_config(source):
            raise ValueError("config dict: not a model config: a Hugging Face config names its model "
                             "(model_type or architectures)")
        return posenc.load_scheme(source), _short(_name_of(source, "config"))
    path = os.fspath(source)
    if "\0" in path:
        raise ValueError("--config: the path holds a NUL byte")
    if not os.path.exists(path):
        raise ValueError(f"--config {path!r}: no such file or folder")
    json_path = os.path.join(path, "config.json") if os.path.isdir(path) else path
    is_json = False
    if os.path.isfile(json_path):
        with open(json_path, "rb") as f:
            head = f.read(64).lstrip()
        is_json = head.startswith(b"{") or head.startswith(b"[") or json_path.endswith(".json")
    if is_json:
        try:
            with open(json_path, encoding="utf-8") as f:
                c = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"--config {path!r}: not JSON ({_short(e, 120)})") from None
        if not _is_model_config(c):
            keys = ", ".join(list(c)[:6]) if isinstance(c, dict) else type(c).__name__
            hint = "; a posenc golden case? its model config is its 'config' object" if (
                isinstance(c, dict) and isinstance(c.get("config"), dict)) else ""
            raise ValueError(f"--config {path!r}: not a model config: a Hugging Face config.json names its model "
                             f"(model_type or architectures), this one has neither (keys: {_short(keys, 80)}){hint}")
        scheme = posenc.load_scheme(json_path if not os.path.isdir(path) else path)
        return scheme, _short(_name_of(c, os.path.basename(os.path.normpath(path))))
    scheme = posenc.load_scheme(path)  # .gguf, safetensors, llama2.c: posenc's readers judge it
    return scheme, _short(scheme.model_type or os.path.basename(os.path.normpath(path)))


def _rope_scheme(source: Any) -> Tuple["posenc.Scheme", str]:
    scheme, name = load_model_config(source)
    if scheme.kind != "rope":
        raise ValueError(f"--config {name}: its scheme is {scheme.kind}, not RoPE: no pairs to draw")
    return scheme, name


# ---- the pictures -----------------------------------------------------------------------------------

def wavelengths(schemes: Sequence[Any], *, labels: Optional[Sequence[str]] = None, seq_len: Optional[int] = None):
    """Per pair, wavelength 2*pi/inv_freq after scaling (dots, coloured by regime) and before (line),
    against the original context length (dashed): the picture that explains YaRN and Llama 3."""
    plt = _plt()
    loaded = [_rope_scheme(s) if isinstance(s, (dict, str, os.PathLike)) else (posenc.load_scheme(s), None)
              for s in schemes]
    fig, axes = plt.subplots(1, len(loaded), figsize=(5.5 * len(loaded), 4.4), squeeze=False)
    data: Dict[str, Any] = {"panels": []}
    for i, (ax, (s, name)) in enumerate(zip(axes[0], loaded)):
        f = s.frequencies(seq_len)
        with np.errstate(divide="ignore"):
            wl = np.where(f.inv_freq > 0, 2 * math.pi / f.inv_freq, np.inf)
            wl0 = 2 * math.pi / s.unscaled_frequencies()
        regimes = s.pair_regimes(seq_len)
        pairs = np.arange(len(wl))
        ax.plot(pairs, wl0, color="0.6", lw=1, label="unscaled formula base^(-2i/R)")
        for r in dict.fromkeys(regimes):
            m = np.array([x == r for x in regimes])
            ax.scatter(pairs[m], wl[m], s=12, color=REGIME_COLOURS.get(r, "k"), label=r, zorder=3)
        ctx = _original_context(s)
        if ctx:
            ax.axhline(ctx, ls="--", color="k", lw=1, label=f"original context {ctx}")
        ax.set_yscale("log")
        ax.set_xlabel("pair i (fast to slow)")
        ax.set_ylabel("wavelength 2*pi/theta_i (tokens)")
        title = labels[i] if labels else (name or s.model_type or "config")
        factor = s.nominal_factor()
        ax.set_title(_short(title) + (f"\n{s.scaling['type']} x{factor:g}" if factor != 1 else "\nno scaling"),
                     fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
        data["panels"].append({"wavelength": wl, "unscaled": wl0, "regimes": regimes, "context": ctx,
                               "title": ax.get_title()})
    fig.suptitle("a pair whose unscaled wavelength (grey line) is above the dashed line never finishes a turn in the "
                 "original context: the scalings slow those pairs down (interpolated) and keep the fast ones", fontsize=9)
    fig.tight_layout()
    fig.posenc_data = data
    return fig


def _masked_softmax(s: np.ndarray, mask: Optional[np.ndarray]) -> np.ndarray:
    """Row softmax; masked entries (True) get weight exactly 0."""
    s = s.astype(np.float64)
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def causal_mask(tokens: int) -> np.ndarray:
    """True where key j comes after query i (j > i): what a decoder hides."""
    return np.triu(np.ones((tokens, tokens), dtype=bool), k=1)


# (key, title, causal, scheme): the seed's story with the mask off, then a decoder's mask on.
ATTENTION_PANELS = (("none", "no positions", False, "none"),
                    ("sinusoidal", "sinusoidal x+p", False, "sinusoidal"),
                    ("rope", "RoPE", False, "rope"),
                    ("t5", "T5 (bidirectional)", False, "t5"),
                    ("causal", "causal mask only", True, "none"),
                    ("causal_rope", "causal + RoPE", True, "rope"),
                    ("causal_alibi", "causal + ALiBi", True, "alibi"))


def attention_maps(tokens: int = 12, d: int = 64, seed: int = 0):
    """Attention of one head over a random sequence (rows: queries i, columns: keys j): top row the
    sequence, bottom row the same tokens permuted, the map re-indexed back. The first four columns have
    the causal mask off, as the seed tells it: without positions the two maps are the same (attention is
    permutation-equivariant) and each scheme breaks that. The last three have a decoder's causal mask
    (grey cells: masked): the mask alone breaks the symmetry, and ALiBi is shown as it is used, under it.
    The positional numbers (RoPE rotation, sinusoidal table, ALiBi and T5 biases) are posenc's; the
    softmax of the scores is numpy's."""
    plt = _plt()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, d)).astype(np.float32)
    wq = (rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)
    wk = (rng.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32)
    perm = rng.permutation(tokens)
    inv = np.argsort(perm)
    pos = np.arange(tokens)
    rope = posenc.Rope({"model_type": "llama", "hidden_size": d, "num_attention_heads": 1, "max_position_embeddings": 4096,
                        "rope_theta": 100.0})
    sin_table = posenc.sinusoidal_table(pos, d)
    slope = float(posenc.alibi_slopes(8, "bloom")[0])  # 1/2
    alibi = posenc.alibi_bias([slope], tokens, tokens)[0]
    t5_table = (rng.standard_normal((32, 1)) * 2).astype(np.float32)
    t5 = posenc.t5_bias(t5_table, tokens, tokens, bidirectional=True)[0]
    mask = causal_mask(tokens)

    def weights(xs: np.ndarray, scheme: str, causal: bool) -> np.ndarray:
        if scheme == "sinusoidal":
            xs = xs + sin_table
        q, k = (xs @ wq)[:, None, :].copy(), (xs @ wk)[:, None, :].copy()
        if scheme == "rope":
            rope.apply_qk(q, k, pos)
        s = (q[:, 0].astype(np.float64) @ k[:, 0].T.astype(np.float64)) / math.sqrt(d)
        if scheme == "alibi":
            s = s + alibi
        if scheme == "t5":
            s = s + t5
        return _masked_softmax(s, mask if causal else None)

    fig, axes = plt.subplots(2, len(ATTENTION_PANELS), figsize=(2.6 * len(ATTENTION_PANELS), 6.0))
    data: Dict[str, Any] = {"permutation": perm, "mask": {}, "alibi_slope": slope, "alibi_bias": alibi}
    for c, (key, title, causal, scheme) in enumerate(ATTENTION_PANELS):
        a = weights(x, scheme, causal)
        b = weights(x[perm], scheme, causal)[np.ix_(inv, inv)]  # permuted sequence, rows/cols mapped back
        ma = mask if causal else np.zeros_like(mask)
        mb = ma[np.ix_(inv, inv)]  # where the permuted sequence's mask lands once mapped back
        data[key] = (a, b)
        data["mask"][key] = (ma, mb)
        vmax = max(a.max(), b.max())
        for r, (m, mm) in enumerate(((a, ma), (b, mb))):
            cmap = plt.get_cmap("viridis").copy()
            cmap.set_bad(MASKED_COLOUR)
            axes[r, c].imshow(np.ma.masked_array(m, mm), cmap=cmap, vmin=0, vmax=vmax)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[0, c].set_title(title, fontsize=10, color="tab:red" if causal else "k")
        axes[1, c].set_xlabel(f"max |diff| {np.abs(a - b).max():.2g}", fontsize=9)
    axes[0, 0].set_ylabel("sequence\n(query i down, key j across)", fontsize=9)
    axes[1, 0].set_ylabel("permuted, mapped back", fontsize=9)
    fig.suptitle("left, causal mask off: without positions the permuted map is the same map (diff 0); each scheme "
                 "breaks that.\nright, a decoder's causal mask (grey: key after query, masked): the mask alone "
                 "breaks it; ALiBi is only used under it", fontsize=10)
    fig.tight_layout()
    fig.posenc_data = data
    return fig


def bias_maps(tokens: int = 24, heads: Sequence[int] = (0, 3, 7), seed: int = 0):
    """ALiBi bias -slope_h (i - j) for a few of 8 heads (BLOOM slopes), drawn under the causal mask it is
    used with (masked cells grey), and T5's bucket of j - i (32 buckets, max distance 128): bidirectional
    (an encoder: no mask) and causal (a decoder: masked)."""
    del seed
    plt = _plt()
    slopes = posenc.alibi_slopes(8, "bloom")
    alibi = posenc.alibi_bias(slopes, tokens, tokens)
    mask = causal_mask(tokens)
    rel = (np.arange(tokens)[None, :] - np.arange(tokens)[:, None]).reshape(-1)
    b_bi = posenc.t5_buckets(rel, bidirectional=True).reshape(tokens, tokens)
    b_causal = posenc.t5_buckets(rel, bidirectional=False).reshape(tokens, tokens)
    fig, axes = plt.subplots(1, len(heads) + 2, figsize=(3.3 * (len(heads) + 2), 3.9))
    magma = plt.get_cmap("magma").copy()
    magma.set_bad(MASKED_COLOUR)
    for ax, h in zip(axes, heads):
        im = ax.imshow(np.ma.masked_array(alibi[h], mask), cmap=magma)
        ax.set_title(f"ALiBi head {h} (slope {slopes[h]:.3g})\ncausal: grey = masked", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046, label="bias added to the score")
    tab = plt.get_cmap("tab20c").copy()
    tab.set_bad(MASKED_COLOUR)
    for ax, b, m, name in ((axes[-2], b_bi, None, "bidirectional (encoder)"),
                           (axes[-1], b_causal, mask, "causal (decoder): grey = masked")):
        im = ax.imshow(b if m is None else np.ma.masked_array(b, m), cmap=tab)
        ax.set_title(f"T5 bucket of j - i\n{name}", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046, label="bucket")
    for ax in axes:
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.suptitle("ALiBi penalises distant keys; a key after the query (j > i) is masked, never rewarded", fontsize=10)
    fig.tight_layout()
    fig.posenc_data = {"alibi": alibi, "slopes": slopes, "mask": mask, "t5_bidirectional": b_bi,
                       "t5_causal": b_causal}
    return fig


def rope_pair(pair: int = 2, head_dim: int = 16, positions: int = 24, base: float = 10000.0, seed: int = 0):
    """Left: pair `pair` of a unit vector rotated by posenc at positions 0..N-1 (it turns by
    inv_freq[pair] per position, norm kept). Right: the score q_m . k_n against m - n for several
    offsets m: the curves coincide, RoPE scores depend only on m - n."""
    plt = _plt()
    rope = posenc.Rope({"model_type": "llama", "hidden_size": head_dim, "num_attention_heads": 1, "max_position_embeddings": 4096,
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
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.4))
    t = np.linspace(0, 2 * math.pi, 200)
    a.plot(np.cos(t), np.sin(t), color="0.8", lw=1)
    a.scatter(xy[:, 0], xy[:, 1], c=np.arange(positions), cmap="viridis", zorder=3)
    for p in range(0, positions, max(1, positions // 6)):
        a.annotate(f"m={p}", xy[p], fontsize=8)
    a.set_aspect("equal")
    a.set_xlabel(f"x_{pair}")
    a.set_ylabel(f"x_{pair + head_dim // 2}")
    theta = float(rope.inv_freq[pair])
    a.set_title(f"pair {pair} at position m: angle m * theta, theta = {theta:.3g} rad", fontsize=10)
    for m, s in curves.items():
        b.plot(rel, s, lw=3 if m == positions else 1.2, label=f"m = {m}")
    b.set_xlabel("m - n (tokens)")
    b.set_ylabel("q_m . k_n")
    b.set_title("the score depends only on m - n: the curves coincide", fontsize=10)
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.posenc_data = {"pair_xy": xy, "theta": theta, "scores": curves, "relative": rel}
    return fig


def image_grid_positions(text_before: int, grid_h: int, grid_w: int, text_after: int) -> np.ndarray:
    """(t, h, w) rows [3, T] for text, an image grid of grid_h x grid_w merged patches, and text, as
    Qwen2-VL's get_rope_index lays out one image (posenc.text_vision_positions with no further merge)."""
    rows, _ = posenc.text_vision_positions([text_before, {"type": "image", "grid_thw": [1, grid_h, grid_w]}, text_after],
                                           spatial_merge_size=1)
    return rows


def multi_axis(config: Any = None, grid_h: int = 6, grid_w: int = 8, *, name: Optional[str] = None):
    """The M-RoPE positions of text + an image grid (t, h, w rows), and which position row drives each
    rotary pair: posenc's plan for the config's sections (Qwen2-VL's when no config is given)."""
    plt = _plt()
    scheme, cname = load_model_config(config if config is not None else QWEN2_VL)
    name = name or cname
    if scheme.multi_axis is None:
        raise ValueError(f"--config {name}: not an M-RoPE config (no mrope_section): no multi-axis plan to draw")
    pos = image_grid_positions(3, grid_h, grid_w, 3)
    _, _, comp, ncomp = scheme.multi_axis_plan(int(pos.max()) + 1)
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8), gridspec_kw={"width_ratios": [1, 1, 1, 1.4]})
    img = pos[:, 3:3 + grid_h * grid_w].reshape(3, grid_h, grid_w)
    for c, row in zip(range(3), "thw"):
        axes[0].plot(pos[c], marker=".", lw=1, label=row, color=f"C{c}")
    axes[0].axvspan(3, 3 + grid_h * grid_w - 1, color="0.9")
    axes[0].set_xlabel("token (text, image patches, text)")
    axes[0].set_ylabel("position")
    axes[0].legend(fontsize=8)
    axes[0].set_title("(t, h, w) rows per token", fontsize=10)
    for ax, c, row in zip(axes[1:3], (1, 2), "hw"):
        im = ax.imshow(img[c], cmap="viridis")
        ax.set_title(f"image patches: {row} position", fontsize=10)
        ax.set_xlabel("patch column")
        ax.set_ylabel("patch row")
        fig.colorbar(im, ax=ax, fraction=0.046)
    axes[3].bar(np.arange(len(comp)), np.ones(len(comp)), color=[f"C{c}" for c in comp], width=1.0)
    axes[3].set_yticks([])
    axes[3].set_xlabel("rotary pair")
    ms = scheme.multi_axis or {}
    axes[3].set_title(f"{_short(name)}: pair -> row ({ms.get('section_layout')}, sections {ms.get('sections')})\n"
                      + ", ".join(f"C{c}={n}" for c, n in zip(range(ncomp), "thw")), fontsize=9)
    fig.tight_layout()
    fig.posenc_data = {"positions": pos, "pair_component": comp, "sections": ms.get("sections"), "name": name}
    return fig


# ---- the command ------------------------------------------------------------------------------------

def _check_formats(formats: Iterable[str]) -> List[str]:
    out = [f.strip().lower() for f in formats]
    if not out or any(not f for f in out):
        raise ValueError("--format: give one or more of " + ", ".join(FORMATS) + ", comma-separated")
    for f in out:
        if f not in FORMATS:
            raise ValueError(f"--format: {_short(f, 40)!r} is not one of " + ", ".join(FORMATS))
    return list(dict.fromkeys(out))


def _build_tree_cli() -> Optional[str]:
    """build/posenc when this package is the build tree's copy (build/python/posenc)."""
    exe = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(posenc.__file__)), "..", "..", "posenc"))
    return exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None


def find_cli(cli: Optional[str] = None) -> str:
    """The posenc executable for demo.txt: `cli`, else POSENC_CLI, else `posenc` on PATH, else the build
    tree's (build/posenc beside build/python/posenc). ValueError saying where to get it when none."""
    for what, exe in (("--cli", cli), ("POSENC_CLI", os.environ.get("POSENC_CLI"))):
        if exe:
            if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                raise ValueError(f"{what} {exe!r}: not an executable file")
            return exe
    exe = shutil.which("posenc") or _build_tree_cli()
    if exe:
        return exe
    raise ValueError("the posenc CLI (it writes demo.txt) was not found: pass --cli PATH, set POSENC_CLI, or put "
                     "posenc on PATH (`cmake --build build --target posenc_cli` builds build/posenc); "
                     "--no-demo skips demo.txt")


def _run_demo(exe: str) -> str:
    try:
        r = subprocess.run([exe, "demo"], capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError(f"{exe} demo: could not run: {_short(e, 200)}") from None
    if r.returncode != 0 or not r.stdout.strip():
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"{exe} demo failed (exit status {r.returncode}): {_short(why, 200)}")
    return r.stdout


def write_all(out: str, *, config: Any = None, formats: Iterable[str] = ("png", "svg"),
              cli: Optional[str] = None, demo: bool = True) -> List[str]:
    """Writes the whole set into `out` (and demo.txt from `posenc demo` unless demo=False). Everything is
    checked first (formats, the config, the CLI), made in a temporary folder inside `out`, and moved
    into place only when every figure and the demo succeeded: on an error nothing in `out` changes."""
    fmts = _check_formats(formats)
    schemes: List[Any] = [YARN, LLAMA3]
    labels = [YARN["_name_or_path"], LLAMA3["_name_or_path"]]
    multi_config: Any = None
    multi_name: Optional[str] = None
    if config is not None:
        scheme, name = _rope_scheme(config)
        schemes.append(scheme)
        labels.append(name)
        if scheme.multi_axis is not None:
            multi_config, multi_name = scheme, name
    exe = find_cli(cli) if demo else None
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out!r}: exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    figures = {"wavelengths": lambda: wavelengths(schemes, labels=labels), "attention": attention_maps,
               "biases": bias_maps, "rope_pair": rope_pair,
               "multi_axis": lambda: multi_axis(multi_config, name=multi_name if multi_config is not None
                                                else "Qwen2-VL (example)")}
    plt = _plt()
    tmp = tempfile.mkdtemp(prefix=".posenc-plot-", dir=out)
    try:
        names = []
        for name, make in figures.items():
            fig = make()
            try:
                for fmt in fmts:
                    fig.savefig(os.path.join(tmp, f"{name}.{fmt}"), dpi=110, format=fmt)
                    names.append(f"{name}.{fmt}")
            finally:
                plt.close(fig)
        if exe:
            with open(os.path.join(tmp, "demo.txt"), "w", encoding="utf-8") as f:
                f.write(_run_demo(exe))
            names.append("demo.txt")
        written = []
        for n in names:
            os.replace(os.path.join(tmp, n), os.path.join(out, n))
            written.append(os.path.join(out, n))
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m posenc.plot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the pictures into")
    ap.add_argument("--config", help="also draw this model's wavelengths, and its M-RoPE plan when it has one "
                                     "(a model's config.json, .gguf or model folder)")
    ap.add_argument("--format", default="png,svg", help="comma-separated: " + ", ".join(FORMATS))
    ap.add_argument("--cli", help="the posenc executable for demo.txt (default: POSENC_CLI, else PATH, else the "
                                  "build tree's)")
    ap.add_argument("--no-demo", action="store_true", help="do not write demo.txt (no CLI needed)")
    a = ap.parse_args(argv)
    try:
        written = write_all(a.out, config=a.config, formats=a.format.split(","), cli=a.cli, demo=not a.no_demo)
    except (ValueError, OSError, NotImplementedError, KeyError) as e:
        print(f"posenc.plot: error: {_short(e, 900)}", file=sys.stderr)
        return 2
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
