#!/usr/bin/env python3
"""posenc's RoPE kernel side by side with PyTorch eager as Hugging Face applies it.

HF Llama: q_embed = q * cos + rotate_half(q) * sin, with cos/sin cached for the sequence
([seq, head_dim], broadcast over heads) and rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]).
Both sides run the same shapes ([4096, 32, 128] queries, [4096, 8, 128] keys; half layout), dtypes
and thread counts on this machine. Rounds alternate: a block of torch repetitions, then one
`posenc bench` run of the same case (`--cache warm`: torch also runs on warm buffers), so background load
hits both alike; medians over all.

Usage: /usr/bin/python3 bench/compare_torch.py [--posenc build/posenc] [--rounds 5] [--reps 7]
Needs Debian's python3-torch (apt-get install python3-torch).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("compare_torch.py: PyTorch is not installed (Debian: apt-get install python3-torch)")


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_rope(q, cos, sin):
    return q * cos + rotate_half(q) * sin


def torch_case(tokens, heads, head_dim, dtype):
    # HF keeps q as [batch, heads, seq, head_dim] and cos/sin as [batch, 1, seq, head_dim].
    q = torch.randn(1, heads, tokens, head_dim, dtype=torch.float32).to(dtype)
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    pos = torch.arange(tokens, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()[None, None].to(dtype)
    sin = emb.sin()[None, None].to(dtype)
    return q, cos, sin


def time_torch(q, cos, sin, reps):
    out = []
    with torch.no_grad():
        for _ in range(reps):
            t0 = time.perf_counter()
            hf_rope(q, cos, sin)
            out.append(time.perf_counter() - t0)
    return out


def time_posenc(exe, name, threads, reps):
    res = subprocess.run([exe, "bench", "--json", "--cache", "warm", "--filter", "^" + name + "$", "--threads", str(threads),
                          "--reps", str(reps)], capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    rows = [r for r in rows if r["op"] != "rope_table_build"]
    if len(rows) != 1:
        sys.exit(f"compare_torch.py: posenc bench gave {len(rows)} rows for {name}")
    return rows[0]["median_ms"] / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--posenc", default="build/posenc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args()
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    cases = [("rope_prefill_q", 4096, 32, 128), ("rope_prefill_k", 4096, 8, 128)]
    print(f"torch {torch.__version__}; posenc {args.posenc}; {args.rounds} rounds x {args.reps} reps, interleaved")
    print(f"{'case':36} {'threads':>7} {'torch ms':>10} {'posenc ms':>10} {'speedup':>8}")
    for op, tokens, heads, head_dim in cases:
        for dname in args.dtypes.split(","):
            for layout_suffix in ("half", "half/oop"):
                name = f"{op}{'_oop' if layout_suffix.endswith('oop') else ''}/{dname}/{layout_suffix}"
                if op == "rope_prefill_k" and layout_suffix.endswith("oop"):
                    continue  # no out-of-place key case in posenc bench
                for threads in [int(t) for t in args.threads.split(",")]:
                    torch.set_num_threads(threads)
                    q, cos, sin = torch_case(tokens, heads, head_dim, dtypes[dname])
                    tt, pt = [], []
                    for _ in range(args.rounds):
                        tt += time_torch(q, cos, sin, args.reps)
                        pt.append(time_posenc(args.posenc, name, threads, args.reps))
                    mt, mp = statistics.median(tt), statistics.median(pt)
                    print(json.dumps({"case": name, "threads": threads, "torch_median_ms": round(mt * 1e3, 3),
                                      "posenc_median_ms": round(mp * 1e3, 3), "speedup": round(mt / mp, 1)}))
                    sys.stdout.flush()


if __name__ == "__main__":
    main()
