#!/usr/bin/env python3
"""`posenc check` against dumps made by torch, the way Hugging Face computes RoPE.

The frequencies come from tests/conformance/hf_reference.py (Hugging Face's formulas re-derived in
torch, checked there bit for bit against transformers' inv_freq); the rotation is
LlamaRotaryEmbedding + apply_rotary_pos_emb: float32 angles from position_ids @ inv_freq, cos/sin
times the attention scaling cast to the query dtype, q * cos + rotate_half(q) * sin in that dtype.
For three families in bfloat16 and float16, a correct dump passes (exit 0) and each planted fault
fails (exit 1) with its cause first in --json's diagnosis. Exit 77 (skip) without torch or numpy.

usage: check_torch.py POSENC_CLI
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    print("torch or numpy not available: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
import hf_reference as hf  # noqa: E402

FAMILIES = ["llama__llama-3.1-8b", "qwen2__qwen2.5-7b-instruct-yarn-d1e200f", "phi3__phi-3.5-mini-instruct"]
POSITIONS = [0, 1, 2, 3, 50, 400, 1000, 3000, 7000, 12000, 20000, 30000, 45000, 60000]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), -1)


def dump(config, dtype, fault, folder):
    pos = torch.tensor(POSITIONS)
    c = dict(config)
    if fault == "scaling_missing":
        c.pop("rope_scaling", None)
    rope = hf.freqs(c, seq_len=int(pos.max()) + 1)
    inv = torch.tensor(rope.inv_freq, dtype=torch.float32)
    scale = rope.attention_factor
    if fault == "attention_scaling":
        scale = 1.0
    shift = 16 if fault == "position_offset" else 0
    freqs = (pos[:, None] + shift).float() @ inv[None, :]
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)
    if fault == "direction":
        sin = -sin
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(4, len(POSITIONS), 2 * inv.numel(), generator=gen).to(dtype)  # [H, T, D], one batch row
    if fault == "pairing":  # pairs (2i, 2i+1): rotate the interleaved view
        d = q.shape[-1]
        perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
        inverse = torch.argsort(perm)
        out = (q[..., perm] * cos + rotate_half(q[..., perm]) * sin)[..., inverse]
    else:
        out = q * cos + rotate_half(q) * sin
    np.save(os.path.join(folder, "q.npy"), q.float().numpy())
    np.save(os.path.join(folder, "q_rot.npy"), out.float().numpy())
    np.save(os.path.join(folder, "pos.npy"), pos.numpy())


def main():
    cli = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for name in FAMILIES:
            with open(os.path.join(HERE, "..", "conformance", "configs", name + ".json")) as f:
                config = json.load(f)["config"]
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(config, f)
            faults = ["none", "pairing", "scaling_missing", "position_offset", "direction"]
            if hf.freqs(config, seq_len=POSITIONS[-1] + 1).attention_factor != 1.0:
                faults.append("attention_scaling")
            for dtype, flag in [(torch.bfloat16, "bf16"), (torch.float16, "f16")]:
                for fault in faults:
                    dump(config, dtype, fault, folder)
                    cmd = [cli, "check", "--model", os.path.join(folder, "config.json"), "--order", "heads-first",
                           "--dtype", flag, "--json"]
                    for opt, file in [("--before", "q.npy"), ("--after", "q_rot.npy"), ("--positions", "pos.npy")]:
                        cmd += [opt, os.path.join(folder, file)]
                    run = subprocess.run(cmd, capture_output=True, text=True)
                    want_rc = 0 if fault == "none" else 1
                    got = "?"
                    if run.returncode in (0, 1):
                        report = json.loads(run.stdout)
                        got = report["diagnosis"][0]["cause"] if report["diagnosis"] else "none"
                    ok = run.returncode == want_rc and got == fault
                    print(f"{'ok  ' if ok else 'FAIL'} {name} {flag} {fault}: exit {run.returncode}, first cause {got}")
                    if not ok:
                        failures += 1
                        print(run.stdout[-2000:], run.stderr[-2000:])
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
