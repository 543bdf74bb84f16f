"""Vision-language position rows: get_rope_index's (t, h, w) rows and a vision encoder's (h, w) patches."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _posenc, _tensors

# ---- vision-language position rows -------------------------------------------------------------

Span = Union[int, Mapping[str, Any]]


def text_vision_positions(layout: Sequence[Span], spatial_merge_size: int = 2, *, start: int = 0,
                          tokens_per_second: Optional[float] = None) -> Tuple[np.ndarray, int]:
    """The (t, h, w) M-RoPE position rows [3, T] int64 of a token layout, as Qwen2-VL / Qwen2.5-VL /
    Qwen3-VL's get_rope_index computes them, and the next free position (a decode step's position on all
    three rows; HF's rope_deltas = next - T).

    Each span is an int (that many text tokens) or a dict as the golden cases write it:
    {"type": "text", "tokens": n} or {"type": "image" | "video" | "frame", "grid_thw": [t, h, w]} with
    the grid in patches before the spatial merge (image_grid_thw / video_grid_thw). Time: without
    tokens_per_second (Qwen2-VL, Qwen3-VL) frame f is at t = f; with it (Qwen2.5-VL's
    vision_config.tokens_per_second) a video's frame f is at trunc(f * second_per_grid_t *
    tokens_per_second) in float32 (the span's "second_per_grid_t", default 1.0) and an image's at 0.
    ValueError names the span and field of a bad layout."""
    spans = []
    if isinstance(layout, (str, bytes, Mapping)) or not hasattr(layout, "__iter__"):
        raise TypeError(f"layout: {type(layout).__name__} is not a sequence of spans")
    for i, s in enumerate(layout):
        if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            spans.append((False, _tensors.int_arg(s, f"span {i}: text tokens"), 1, 0, 0, 1.0, 1.0))
            continue
        if not isinstance(s, Mapping) or "type" not in s:
            raise ValueError(f"span {i}: {s!r} is neither a text token count nor a dict with a 'type'")
        kind = s["type"]
        if kind == "text":
            if "tokens" not in s:
                raise ValueError(f"span {i}: a text span without 'tokens'")
            spans.append((False, _tensors.int_arg(s["tokens"], f"span {i}: tokens"), 1, 0, 0, 1.0, 1.0))
            continue
        if kind not in ("image", "video", "frame"):
            raise ValueError(f"span {i}: type {kind!r} (expected text, image, video or frame)")
        grid = s.get("grid_thw", ())
        if isinstance(grid, (str, bytes)) or not hasattr(grid, "__len__") or len(grid) != 3:
            raise ValueError(f"span {i}: grid_thw {grid!r} is not [t, h, w]")
        g = [_tensors.int_arg(v, f"span {i}: grid_thw[{j}]") for j, v in enumerate(grid)]
        spt, tps = 1.0, 1.0
        if tokens_per_second is not None:
            tps = _tensors.real_arg(tokens_per_second, "tokens_per_second")
            spt = 0.0 if kind == "image" else _tensors.real_arg(s.get("second_per_grid_t", 1.0), f"span {i}: second_per_grid_t")
        spans.append((True, 0, g[0], g[1], g[2], spt, tps))
    rows, nxt = _posenc.text_vision_positions(spans, _tensors.int_arg(spatial_merge_size, "spatial_merge_size"),
                                              _tensors.int_arg(start, "start"))
    return rows, int(nxt)


def vision_patch_positions(grid_thw: Sequence[int], spatial_merge_size: int = 2) -> np.ndarray:
    """The (h, w) rows [2, t*h*w] int64 of a vision encoder's 2-D RoPE, in the order the encoder sees its
    patches: spatial_merge_size windows row-major, row-major inside each, repeated per frame (Qwen2-VL);
    spatial_merge_size 1 is plain row-major (Pixtral)."""
    if isinstance(grid_thw, (str, bytes)) or not hasattr(grid_thw, "__len__") or len(grid_thw) != 3:
        raise ValueError(f"grid_thw {grid_thw!r} is not [t, h, w]")
    g = [_tensors.int_arg(v, f"grid_thw[{j}]") for j, v in enumerate(grid_thw)]
    return _posenc.vision_patch_positions(g[0], g[1], g[2], _tensors.int_arg(spatial_merge_size, "spatial_merge_size"))
