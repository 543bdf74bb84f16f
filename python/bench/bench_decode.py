#!/usr/bin/env python3
"""Decode-size calls from Python against the same C++ call on the same tensors, side by side in one run
(a benchmark, not a test: it prints measurements and asserts nothing).

Python: one whole call as a user makes it (`rope.apply(q, pos)`, perf_counter_ns around it). C++: the
same call prepared once by the extension's RopeCall (the tensors read, the views planned, validated),
then its kernel call (ApplyRope / ApplyRopeQK / ApplyRopeKvCache, which validate again per call as any
C++ caller's does) run `calls` times back to back inside C++, each timed there with the GIL released.
"general" is the same Python call through Rope's general path (python/posenc/_tensors.py's
descriptors, the path every call took before RopeCall; still the path for dynamic-NTK tables and
unusual objects). "C++ 1/call": the same C++-timed kernel call made once per Python iteration, so the
kernel meets the caches as the Python call's does (back to back, a large call runs warmer: at
apply_kv_cache T=64 that alone is a few us). Rounds alternate them so background load hits each;
medians over all calls.

Cases (Llama-3-8B: 32 heads of 128, 8 KV heads, base 500000, float32 activations):
  Rope.apply       q [1, 32, 128] (one token), [64, 32, 128] (64 sequences, one token each), in place;
                   torch q [64, 32, 1, 128] (HF's [B, H, S, D], decode) with positions [64, 1]
  Rope.apply_qk    q [1, 32, 128], k [1, 8, 128]
  apply_kv_cache   q/k/v split_qkv views of [T, 48 x 128], T = 1 and 64 at scattered slots of a
                   float16 cache [16384, 8, 128], into q_out; T = 1 into a float8 e4m3fn cache (uint8
                   [16384, 8, 128], per-head k_scale, per-tensor v_scale); and Qwen3-8B's (base 1e6) with QK-norm
                   (q_norm / k_norm weights [128] as bfloat16 torch tensors, as a model holds them),
                   bfloat16 activations and cache, T = 1
  apply_mla_cache  DeepSeek-V3's MLA row, T = 1, bfloat16: the latent [1, 512 + 64] normed (bfloat16
                   weight) and rotated into a [16384, 576] cache, q [1, 128, 192]'s rope windows in place

Usage: PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_decode.py [--rounds 7] [--calls 2000]
"""
import argparse
import statistics
import time

import numpy as np

import posenc

CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
          "max_position_embeddings": 8192, "rope_theta": 500000.0}


def python_us(call, n):
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t) / 1e3)
    return out


def compare(rope, label, call, cpp, rounds, n):
    fast = rope._call
    py, gen, c, c1 = [], [], [], []
    for _ in range(rounds):
        py += python_us(call, n)
        c += [t * 1e6 for t in cpp(n)]
        c1 += [cpp(1)[0] * 1e6 for _ in range(n)]
        rope._call = None  # the general path
        try:
            gen += python_us(call, n)
        finally:
            rope._call = fast
    p, g, cc, c1 = (statistics.median(v) for v in (py, gen, c, c1))
    print(f"{label:<46} python {p:7.2f}  C++ {cc:7.2f}  adds {p - cc:5.2f}   C++ 1/call {c1:7.2f}  adds {p - c1:5.2f}"
          f"   general path {g:7.2f}  (us)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    posenc.set_num_threads(a.threads)
    print(f"posenc {posenc.__version__}, SIMD {posenc.simd_target()}, {posenc.num_threads()} thread(s), "
          f"{a.rounds} rounds x {a.calls} calls, medians")
    rope = posenc.Rope(CONFIG)
    call = rope._call[1]
    rng = np.random.default_rng(0)
    for t in (1, 64):
        q = rng.standard_normal((t, 32, 128)).astype(np.float32)
        pos = rng.integers(0, 8192, t)
        compare(rope, f"Rope.apply q [{t}, 32, 128] numpy", lambda: rope.apply(q, pos),
                lambda n: call.time_apply(q, pos, None, None, "forward", n), a.rounds, a.calls)
    q = rng.standard_normal((1, 32, 128)).astype(np.float32)
    k = rng.standard_normal((1, 8, 128)).astype(np.float32)
    pos = rng.integers(0, 8192, 1)
    compare(rope, "Rope.apply_qk q [1, 32, 128] k [1, 8, 128]", lambda: rope.apply_qk(q, k, pos),
            lambda n: call.time_qk(q, k, pos, n), a.rounds, a.calls)
    for t in (1, 64):
        qkv = rng.standard_normal((t, 48 * 128)).astype(np.float32)
        q, k, v = posenc.split_qkv(qkv, 32, 8, 128)
        q_out = np.empty((t, 32, 128), np.float32)
        kc = np.zeros((16384, 8, 128), np.float16)
        vc = np.zeros_like(kc)
        pos = rng.integers(0, 8192, t)
        slots = rng.choice(16384, t, replace=False)
        compare(rope, f"apply_kv_cache T={t} (f16 cache [16384, 8, 128])",
                lambda: rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_out=q_out),
                lambda n: call.time_kv_cache(q, k, v, pos, slots, kc, vc, q_out, n), a.rounds, a.calls)
    q, k, v = posenc.split_qkv(rng.standard_normal((1, 48 * 128)).astype(np.float32), 32, 8, 128)
    q_out = np.empty((1, 32, 128), np.float32)
    pos, slots = rng.integers(0, 8192, 1), rng.choice(16384, 1, replace=False)
    kc8 = np.zeros((16384, 8, 128), np.uint8)
    vc8 = np.zeros_like(kc8)
    ks, vs = np.linspace(0.25, 1.2, 8).astype(np.float32), np.array([0.7], np.float32)
    compare(rope, "apply_kv_cache T=1 (float8 e4m3fn cache)",
            lambda: rope.apply_kv_cache(q, k, v, pos, slots, kc8, vc8, q_out=q_out, cache_type="float8_e4m3fn",
                                        k_scale=ks, v_scale=vs),
            lambda n: call.time_kv_cache(q, k, v, pos, slots, kc8, vc8, q_out, n, cache_type="float8_e4m3fn",
                                         k_scale=ks, v_scale=vs), a.rounds, a.calls)
    if not a.no_torch:
        import torch  # noqa: PLC0415
        qwen3 = posenc.Rope({**CONFIG, "model_type": "qwen3", "head_dim": 128, "rope_theta": 1e6})
        qcall = qwen3._call[1]
        q, k, v = posenc.split_qkv(torch.randn(1, 48 * 128).to(torch.bfloat16), 32, 8, 128)
        q_out = torch.empty(1, 32, 128, dtype=torch.bfloat16)
        kc = torch.zeros(16384, 8, 128, dtype=torch.bfloat16)
        vc = torch.zeros_like(kc)
        wq, wk = (torch.rand(128) + 0.5).to(torch.bfloat16), (torch.rand(128) + 0.5).to(torch.bfloat16)
        pos, slots = torch.tensor([int(rng.integers(0, 8192))]), torch.tensor([int(rng.integers(0, 16384))])
        compare(qwen3, "apply_kv_cache T=1 QK-norm (bf16, Qwen3-8B)",
                lambda: qwen3.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_out=q_out, q_norm=wq, k_norm=wk,
                                             norm_eps=1e-6),
                lambda n: qcall.time_kv_cache(q, k, v, pos, slots, kc, vc, q_out, n, wq, wk, 1e-6, "per_head"),
                a.rounds, a.calls)
        qt = torch.randn(64, 32, 1, 128)
        pt = torch.randint(0, 8192, (64, 1))
        ds = posenc.Rope({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                          "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                          "v_head_dim": 128, "rope_theta": 10000.0, "max_position_embeddings": 8192})
        dcall = ds._call[1]
        kv = torch.randn(1, 576).to(torch.bfloat16)
        qd = torch.randn(1, 128, 192).to(torch.bfloat16)
        mc = torch.zeros(16384, 576, dtype=torch.bfloat16)
        wl = (torch.rand(512) + 0.5).to(torch.bfloat16)
        compare(ds, "apply_mla_cache T=1 (bf16, DeepSeek-V3)",
                lambda: ds.apply_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, mc, q=qd, q_out=qd, kv_norm=wl,
                                           norm_eps=1e-6),
                lambda n: dcall.time_mla_cache(kv[:, :512], kv[:, 512:], pos, slots, mc, qd, qd, wl, 1e-6, "per_head",
                                               n), a.rounds, a.calls)
        rope.apply(qt, pt)  # (the first torch call registers torch's types)
        compare(rope, "Rope.apply q [64, 32, 1, 128] torch", lambda: rope.apply(qt, pt),
                lambda n: call.time_apply(qt, pt, None, None, "forward", n), a.rounds, a.calls)


if __name__ == "__main__":
    main()
