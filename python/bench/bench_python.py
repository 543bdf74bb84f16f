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
  drop-in  Hugging Face's apply_rotary_pos_emb formula (q * cos + rotate_half(q) * sin on q and k, cos/sin
           unsqueezed, eager torch) against posenc.hf.drop_in on the same HF-made cos/sin (bit for bit the
           same q and k; new output tensors, as HF returns), Llama-3-8B q [1, 32, T, 128] (a strided view
           of [1, T, 32, 128]), k [1, 8, T, 128], T = 1, 16, 512, 4096, float32 and bfloat16; HF and posenc
           alternate within each round, the ratio is HF median / posenc median (the bar: >= 20x)
  py/C++   the same cos/sin call into given outputs: Python (posenc.hf.apply_cos_sin(out=...)) against
           the C++ call timed in C++ on the same views (_posenc.time_cos_sin_qk); the bar for prefill:
           Python / C++ <= 1.10
  kvcache  Rope.apply_kv_cache (RoPE fused with the KV-cache write, q/k/v split_qkv views of the fused
           projection [T, 48 x 128]) against what a torch engine does: cos/sin gathered at the positions,
           q * cos + rotate_half(q) * sin on q and k, then k and v converted and index_copy_'d into the
           cache at the slots; prefill T = 512 (slots 0..511) and decode 64 tokens at scattered slots of
           16384; float16 cache; the same thread count for torch and posenc. Both give the same q and cache
           bytes for float32 activations (asserted); for 16-bit ones torch rounds after each op
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

CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 8192, "rope_theta": 500000.0}


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


def torch_settings(a, torch):
    """(threads, dtype name, torch dtype) for every --threads and --dtypes value, with posenc's and
    torch's thread counts set to `threads` for the rows that follow."""
    for threads in [int(t) for t in a.threads.split(",")]:
        posenc.set_num_threads(threads)
        torch.set_num_threads(threads)
        for dtype_name in a.dtypes.split(","):
            yield threads, dtype_name, getattr(torch, dtype_name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--posenc", required=True, help="the posenc CLI of the same build")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true", help="skip the Hugging Face comparison")
    ap.add_argument("--sections", default="apply,dropin",
                    help="apply (rope.apply vs the CLI), dropin (cos/sin drop-in), kvcache (fused cache write vs torch)")
    ap.add_argument("--tokens", default="1,16,512,4096", help="T of the drop-in section")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="dtypes of the drop-in section")
    a = ap.parse_args()
    if "dropin" in a.sections.split(","):
        bench_drop_in(a)
    if "kvcache" in a.sections.split(","):
        bench_kv_cache(a)
    if "apply" not in a.sections.split(","):
        return
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


def bench_drop_in(a):
    import torch  # noqa: PLC0415

    from posenc import _posenc, hf  # noqa: PLC0415
    rope = posenc.Rope(CONFIG)
    drop_in = hf.drop_in(rope)
    inv = torch.from_numpy(rope.inv_freq.astype(np.float32))

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):  # transformers' Llama function
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    print(f"drop-in: simd {posenc.simd_target()}; torch {torch.__version__}; medians over {a.rounds} rounds")
    for threads, dtype_name, dtype in torch_settings(a, torch):
        for T in [int(t) for t in a.tokens.split(",")]:
            gen = torch.Generator().manual_seed(T)
            q = torch.randn(1, T, 32, 128, generator=gen).to(dtype).transpose(1, 2)  # HF's strided view
            k = torch.randn(1, T, 8, 128, generator=gen).to(dtype).transpose(1, 2)
            pos = torch.arange(T)[None] + (8000 - T if T == 1 else 0)
            freqs = (inv[None, :, None] @ pos[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
            hq, hk = hf_apply_rotary_pos_emb(q, k, cos, sin)
            pq, pk = drop_in(q, k, cos, sin)
            assert torch.equal(hq, pq) and torch.equal(hk, pk), "not HF's bits"
            qo, ko = torch.empty_like(q), torch.empty_like(k)
            reps = max(5, min(2001, int(2e6 / (T * 40 * 128))))
            r = {key: [] for key in ("hf", "posenc", "py", "cpp")}
            descs = [hf._desc(x, n) for x, n in ((q, "q"), (k, "k"), (qo, "q_out"), (ko, "k_out"), (cos, "cos"),
                                                       (sin, "sin"))]
            for _ in range(a.rounds):
                r["hf"].append(median_ms(lambda: hf_apply_rotary_pos_emb(q, k, cos, sin), reps))
                r["posenc"].append(median_ms(lambda: drop_in(q, k, cos, sin), reps))
                # Python and C++ alternate call by call on the same buffers, so each finds them as
                # the other left them (whole blocks of each favoured whichever ran second).
                py, cpp = [], []
                hf.apply_cos_sin(q, k, cos, sin, out=(qo, ko))
                for _ in range(reps):
                    t0 = time.perf_counter()
                    hf.apply_cos_sin(q, k, cos, sin, out=(qo, ko))
                    py.append((time.perf_counter() - t0) * 1e3)
                    cpp.append(_posenc.time_cos_sin_qk("half", *descs, 1, 1)[0] * 1e3)
                r["py"].append(statistics.median(py))
                r["cpp"].append(statistics.median(cpp))
            m = {key: statistics.median(v) for key, v in r.items()}
            print(f"threads {threads} {dtype_name:8s} T={T:5d}: HF formula {m['hf'] * 1e3:10.1f} us  "
                  f"posenc drop-in {m['posenc'] * 1e3:9.1f} us  HF/posenc {m['hf'] / m['posenc']:6.1f}x (bar >= 20x)  | "
                  f"into given out: python {m['py'] * 1e3:9.1f} us  C++ {m['cpp'] * 1e3:9.1f} us  "
                  f"python/C++ {m['py'] / m['cpp']:.3f}", flush=True)
    posenc.set_num_threads(0)


def bench_kv_cache(a):
    import torch  # noqa: PLC0415
    rope = posenc.Rope(dict(CONFIG, num_key_value_heads=8))
    inv = torch.from_numpy(rope.inv_freq.astype(np.float32))
    freqs = torch.outer(torch.arange(8192, dtype=torch.float32), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos_table, sin_table = emb.cos(), emb.sin()

    def torch_engine(q, k, v, pos, slots, kc, vc):
        cos, sin = cos_table[pos].to(q.dtype)[:, None], sin_table[pos].to(q.dtype)[:, None]

        def rot(x):
            half = x.shape[-1] // 2
            return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin
        q_out = rot(q)
        kc.index_copy_(0, slots, rot(k).to(kc.dtype))
        vc.index_copy_(0, slots, v.to(vc.dtype))
        return q_out

    print(f"kvcache: simd {posenc.simd_target()}; torch {torch.__version__}; medians over {a.rounds} rounds")
    for threads, dtype_name, dtype in torch_settings(a, torch):
        for kind, T in (("prefill", 512), ("decode", 64)):
            gen = torch.Generator().manual_seed(T)
            qkv = torch.randn(T, 48 * 128, generator=gen).to(dtype)
            q, k, v = posenc.split_qkv(qkv, 32, 8, 128)
            if kind == "prefill":
                pos, slots = torch.arange(T), torch.arange(T)
            else:
                pos, slots = torch.randint(0, 8192, (T,), generator=gen), torch.randperm(16384, generator=gen)[:T]
            kc, vc = torch.zeros(16384, 8, 128, dtype=torch.float16), torch.zeros(16384, 8, 128, dtype=torch.float16)
            kc2, vc2 = kc.clone(), vc.clone()
            q_out = torch.empty(T, 32, 128, dtype=dtype)
            tq = torch_engine(q, k, v, pos, slots, kc2, vc2)
            rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_out=q_out)
            if dtype == torch.float32:
                assert torch.allclose(tq, q_out, atol=1e-5) and torch.allclose(kc.float(), kc2.float(), atol=2e-3)
            reps = 201 if kind == "decode" else 21
            r = {"torch": [], "posenc": []}
            for _ in range(a.rounds):
                r["torch"].append(median_ms(lambda: torch_engine(q, k, v, pos, slots, kc2, vc2), reps))
                r["posenc"].append(median_ms(lambda: rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_out=q_out),
                                             reps))
            m = {key: statistics.median(x) for key, x in r.items()}
            print(f"threads {threads} {dtype_name:8s} {kind:7s} T={T:4d} -> float16 cache: torch engine "
                  f"{m['torch'] * 1e3:9.1f} us  posenc apply_kv_cache {m['posenc'] * 1e3:9.1f} us  "
                  f"torch/posenc {m['torch'] / m['posenc']:5.1f}x", flush=True)
    posenc.set_num_threads(0)


if __name__ == "__main__":
    main()
