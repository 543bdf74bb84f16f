#!/usr/bin/env python3
"""Decode-size calls from Python against the same C++ call on the same tensors, side by side in one run
(a benchmark, not a test: it prints measurements and asserts nothing).

For each call, the Python call is run once with the extension's entry point wrapped, which records the
arguments it hands to C++ (the views, positions, table); the C++ baseline then re-runs exactly that
validated call `reps` times back to back inside C++ (`reps=` of _posenc.apply_rope /
apply_rope_kv_cache), each timed there with the GIL released. The Python number is one whole call as a
user makes it (perf_counter_ns around it). Rounds alternate Python and C++ so background load hits
both; the medians over all calls are printed, and their difference is what Python adds.

Cases (Llama-3-8B: 32 heads of 128, 8 KV heads, base 500000, float32 activations):
  Rope.apply       q [1, 32, 128] (one token) and [64, 32, 128] (64 sequences, one token each), in place
  apply_kv_cache   q/k/v split_qkv views of [T, 48 x 128], T = 1 and 64 at scattered slots of a
                   float16 cache [16384, 8, 128]

Usage: PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_decode.py [--rounds 7] [--calls 2000]
"""
import argparse
import statistics
import time

import numpy as np

import posenc
from posenc import _posenc

CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
          "max_position_embeddings": 8192, "rope_theta": 500000.0}


def recorded(name, call):
    """The arguments `call` hands to _posenc.<name> (the call runs once)."""
    real = getattr(_posenc, name)
    seen = {}

    def spy(*args, **kwargs):
        seen["args"], seen["kwargs"] = args, kwargs
        return real(*args, **kwargs)
    setattr(_posenc, name, spy)
    try:
        call()
    finally:
        setattr(_posenc, name, real)
    return real, seen["args"], seen["kwargs"]


def python_us(call, n):
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t) / 1e3)
    return out


def compare(label, name, call, rounds, n):
    real, args, kwargs = recorded(name, call)
    kwargs = dict(kwargs)
    py, cpp = [], []
    for _ in range(rounds):
        py += python_us(call, n)
        kwargs["reps"] = n
        cpp += [t * 1e6 for t in real(*args, **kwargs)]
    p, c = statistics.median(py), statistics.median(cpp)
    print(f"{label:<44} python {p:8.2f} us   C++ {c:8.2f} us   python adds {p - c:6.2f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    posenc.set_num_threads(a.threads)
    print(f"posenc {posenc.__version__}, SIMD {posenc.simd_target()}, {posenc.num_threads()} thread(s), "
          f"{a.rounds} rounds x {a.calls} calls, medians")
    rope = posenc.Rope(CONFIG)
    rng = np.random.default_rng(0)
    for t in (1, 64):
        q = rng.standard_normal((t, 32, 128)).astype(np.float32)
        pos = rng.integers(0, 8192, t)
        compare(f"Rope.apply q [{t}, 32, 128]", "apply_rope", lambda: rope.apply(q, pos), a.rounds, a.calls)
    for t in (1, 64):
        qkv = rng.standard_normal((t, 48 * 128)).astype(np.float32)
        q, k, v = posenc.split_qkv(qkv, 32, 8, 128)
        q_out = np.empty((t, 32, 128), np.float32)
        kc = np.zeros((16384, 8, 128), np.float16)
        vc = np.zeros_like(kc)
        pos = rng.integers(0, 8192, t)
        slots = rng.choice(16384, t, replace=False)
        compare(f"apply_kv_cache T={t} (f16 cache [16384, 8, 128])", "apply_rope_kv_cache",
                lambda: rope.apply_kv_cache(q, k, v, pos, slots, kc, vc, q_out=q_out), a.rounds, a.calls)


if __name__ == "__main__":
    main()
