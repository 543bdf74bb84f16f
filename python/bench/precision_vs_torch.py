#!/usr/bin/env python3
"""How far posenc's own `reference` cos/sin are from Hugging Face's, and why (a measurement, not a test).

HF's rotary module computes inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)) in
float32: a float32 pow and a float32 division, each rounded, so some pairs' inv_freq are 1 ulp off the
correctly rounded float32 of base^(-2i/dim). posenc computes the frequencies in float64 and rounds each
once to float32 (its `reference` angle is then float32(position) x that float32, as HF multiplies). Per
config this prints: how many pairs' float32 inv_freq differ between the two and by how many ulps; at
positions 4096 .. 2^20, the largest |angle| difference (radians) and |cos|, |sin| difference between
posenc's Rope.cos_sin and HF's float32 cos/sin; and, for contrast, the drop-in given HF's own cos/sin,
whose q/k are HF's bits (0 differing elements).

Usage: PYTHONPATH=build/python /usr/bin/python3 python/bench/precision_vs_torch.py
"""
import numpy as np
import torch

import posenc

CONFIGS = [("Llama 2 (base 1e4, dim 128)", 10000.0, 128), ("Llama 3 (base 5e5, dim 128)", 500000.0, 128),
           ("base 1e6, dim 128", 1000000.0, 128), ("GPT-NeoX-like (base 1e4, dim 64)", 10000.0, 64)]
POSITIONS = [4096, 32768, 131072, 1 << 20]


def hf_inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def main():
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    for name, base, dim in CONFIGS:
        heads = 8
        cfg = {"model_type": "llama", "hidden_size": heads * dim, "num_attention_heads": heads, "rope_theta": base,
               "max_position_embeddings": 1 << 21}
        rope = posenc.Rope(cfg, max_positions=16)  # (positions past the table: computed on the fly, same numbers)
        ours = rope.inv_freq.astype(np.float32)
        theirs = hf_inv_freq(base, dim).numpy()
        ulps = np.abs(ours.view(np.int32).astype(np.int64) - theirs.view(np.int32).astype(np.int64))
        print(f"{name}: {int((ulps > 0).sum())} of {dim // 2} pairs' float32 inv_freq differ from torch's "
              f"(max {int(ulps.max())} ulp)")
        for p in POSITIONS:
            pos = torch.tensor([p], dtype=torch.int64)
            freqs = torch.outer(pos.float(), torch.from_numpy(theirs))
            hc, hs = freqs.cos().numpy()[0], freqs.sin().numpy()[0]
            c, s = rope.cos_sin(np.array([p]))
            da = np.abs(np.float32(p) * ours - np.float32(p) * theirs).max()
            dc = np.abs(c[0].astype(np.float64) - hc).max()
            ds = np.abs(s[0].astype(np.float64) - hs).max()
            print(f"  position {p:>7}: max |angle diff| {da:.3g} rad, |cos diff| {dc:.3g}, |sin diff| {ds:.3g}")
        # The drop-in on HF's own cos/sin: HF's bits.
        q = torch.randn(1, heads, 4, dim)
        k = torch.randn(1, heads, 4, dim)
        pos = torch.tensor([[131068, 131069, 131070, 131071]])
        freqs = torch.einsum("bs,d->bsd", pos.float(), torch.from_numpy(theirs))
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos(), emb.sin()

        def rotate_half(x):
            return torch.cat((-x[..., dim // 2:], x[..., : dim // 2]), -1)
        want = q * cos[:, None] + rotate_half(q) * sin[:, None]
        got, _ = posenc.hf.drop_in(rope)(q, k, cos, sin)
        print(f"  drop-in with HF's cos/sin at 131068..131071: {int((got.view(torch.int32) != want.view(torch.int32)).sum())} "
              f"of {want.numel()} q elements differ from HF's formula")


if __name__ == "__main__":
    main()
