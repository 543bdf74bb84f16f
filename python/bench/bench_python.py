#!/usr/bin/env python3
"""posenc from Python against posenc from C++ and against Hugging Face's torch formula (a benchmark,
not a test: it prints measurements, it asserts nothing).

Same shapes as `posenc bench` (Llama-3-8B: 32 heads of 128, base 500000, half pairing, float32, in
place, warm buffers):
  decode   [64, 32, 128], 64 sequences x 1 token at scattered positions < 8192: the Python call's
           overhead = Python median - C++ median (`posenc bench`'s rope_decode, same threads)
  prefill  [4096, 32, 128] positions 0..4095: Python / C++ (rope_prefill_q); the issue's bar: <= 1.10
  vs HF    HF's q [1, 32, 4096, 128]: q * cos + rotate_half(q) * sin in torch eager (cos/sin built
           once, as HF's cache) on q and k (8 heads) against posenc's drop-in on the same tensors (out of place, as HF),
           same torch/posenc thread count; the bar: >= 20x
           (the drop-in returns new tensors as HF does, so it pays for a fresh output: the first touch
           of its pages; apply_qk in place on the same tensors is printed beside it)
Rounds alternate Python and C++ so background load hits both alike; medians over all rounds.

Usage: PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python.py --posenc build/posenc [--threads 1,2]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

import posenc

CONFIG = {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 8192, "rope_theta": 500000.0}


def median_ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def cpp_ms(exe, case, threads, reps):
    r = subprocess.run([exe, "bench", "--filter", f"^{case}$", "--json", "--threads", str(threads), "--cache", "warm",
                        "--reps", str(reps)], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[0])["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--posenc", required=True, help="the posenc CLI of the same build")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true", help="skip the Hugging Face comparison")
    a = ap.parse_args()
    rope = posenc.Rope(CONFIG)
    rng = np.random.default_rng(3)
    dec = rng.standard_normal((64, 32, 128)).astype(np.float32)
    dec_pos = rng.integers(0, 8192, 64)
    pre = rng.standard_normal((4096, 32, 128)).astype(np.float32)
    pre_pos = np.arange(4096)
    torch = None
    if not a.no_torch:
        try:
            import torch  # noqa: PLC0415
        except ImportError:
            print("torch not importable: no Hugging Face comparison", file=sys.stderr)
    print(f"simd {posenc.simd_target()}; medians over {a.rounds} rounds")
    for threads in [int(t) for t in a.threads.split(",")]:
        posenc.set_num_threads(threads)
        res = {k: [] for k in ("dec_py", "dec_cpp", "pre_py", "pre_cpp", "hf", "dropin", "inplace")}
        if torch is not None:
            torch.set_num_threads(threads)
            q = torch.from_numpy(pre).view(1, 4096, 32, 128).transpose(1, 2).contiguous()
            inv = torch.from_numpy(rope.inv_freq.astype(np.float32))
            freqs = torch.outer(torch.arange(4096, dtype=torch.float32), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None, None], emb.sin()[None, None]
            ids = torch.arange(4096)[None]
            drop_in = posenc.hf.drop_in(rope)

            k = q[:, :8].clone()  # 8 key/value heads, as Llama-3-8B

            def hf_one(x):
                half = x.shape[-1] // 2
                return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

            def hf():
                return hf_one(q), hf_one(k)
        for _ in range(a.rounds):
            res["dec_py"].append(median_ms(lambda: rope.apply(dec, dec_pos), 501))
            res["dec_cpp"].append(cpp_ms(a.posenc, "rope_decode/float32/half", threads, 501))
            res["pre_py"].append(median_ms(lambda: rope.apply(pre, pre_pos), 15))
            res["pre_cpp"].append(cpp_ms(a.posenc, "rope_prefill_q/float32/half", threads, 15))
            if torch is not None:
                res["hf"].append(median_ms(hf, 5))
                res["dropin"].append(median_ms(lambda: drop_in(q, k, position_ids=ids), 5))
                res["inplace"].append(median_ms(lambda: rope.apply_qk(q, k, ids), 5))
        m = {k: statistics.median(v) for k, v in res.items() if v}
        print(f"threads {threads}: decode  python {m['dec_py'] * 1e3:8.1f} us  C++ {m['dec_cpp'] * 1e3:8.1f} us  "
              f"overhead {1e3 * (m['dec_py'] - m['dec_cpp']):6.1f} us")
        print(f"threads {threads}: prefill python {m['pre_py']:8.3f} ms  C++ {m['pre_cpp']:8.3f} ms  "
              f"python/C++ {m['pre_py'] / m['pre_cpp']:.3f} (bar <= 1.10)")
        if "hf" in m:
            print(f"threads {threads}: HF torch formula {m['hf']:8.3f} ms  posenc drop-in (q and k)         "
                  f"{m['dropin']:8.3f} ms  speedup {m['hf'] / m['dropin']:.1f}x (bar >= 20x)")
            print(f"threads {threads}: HF torch formula {m['hf']:8.3f} ms  posenc apply_qk in place         "
                  f"{m['inplace']:8.3f} ms  speedup {m['hf'] / m['inplace']:.1f}x")
    posenc.set_num_threads(0)


if __name__ == "__main__":
    main()
