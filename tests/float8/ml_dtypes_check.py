#!/usr/bin/env python3
"""posenc's float8 conversions against ml_dtypes (float8_e4m3fn, float8_e5m2).

ml_dtypes is an independent implementation; before it is trusted, its casts are checked to follow
PyTorch's rules on the points where float8 implementations differ (e4m3fn overflow is NaN, not
saturation; the tie at 464 goes to 448; e5m2 overflows to infinity; NaN stays NaN). Then every code
decodes to the same float32 value, and every float32 pattern of a set that covers every sign,
exponent and top-7 mantissa bits (with low bits zero, tiny, half and full) plus random patterns
encodes to the same code. NaN inputs are compared as NaN codes only: ml_dtypes 0.5.4 gives e5m2 NaN
the code 0x7e where PyTorch (and posenc) give 0x7f (both NaN; float8_test checks PyTorch's).

usage: ml_dtypes_check.py path/to/float8_codes     (exit 77: ml_dtypes missing, skipped)
"""
import subprocess
import sys

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:  # the venv could not be made (offline): skip, saying why
    print(f"SKIP: {e}")
    sys.exit(77)

tool = sys.argv[1]
E4, E5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2


def codes(x, t):
    return np.asarray(x, dtype=np.float32).astype(t).view(np.uint8)


# 1. ml_dtypes follows PyTorch's rules (c10/util/Float8_e4m3fn.h, Float8_e5m2.h).
rules = [
    (E4, 448.0, 0x7E), (E4, 464.0, 0x7E), (E4, np.nextafter(np.float32(464), np.float32(1e9)), 0x7F),
    (E4, 480.0, 0x7F), (E4, np.inf, 0x7F), (E4, -np.inf, 0xFF), (E4, 2.0**-10, 0x00), (E4, 3 * 2.0**-10, 0x02),
    (E5, 57344.0, 0x7B), (E5, 61440.0, 0x7C), (E5, np.inf, 0x7C), (E5, -1e30, 0xFC), (E5, 2.0**-17, 0x00),
    (E4, -0.0, 0x80), (E5, -0.0, 0x80),
]
for t, x, want in rules:
    got = int(codes([x], t)[0])
    assert got == want, f"ml_dtypes {t.__name__}({x!r}) = {got:#04x}, PyTorch's rule gives {want:#04x}"


def is_nan_code(c, t):
    c = np.asarray(c) & 0x7F
    return c == 0x7F if t is E4 else c > 0x7C


for t in (E4, E5):
    got = int(codes([np.nan], t)[0])
    assert is_nan_code(got, t), f"ml_dtypes {t.__name__}(nan) = {got:#04x}, not a NaN code"
print("ml_dtypes follows PyTorch's float8 rules on the", len(rules) + 2, "points checked")

# 2. Every code decodes alike (bit for bit; NaN as NaN).
dec = np.frombuffer(subprocess.run([tool, "--decode"], check=True, capture_output=True).stdout, np.float32)
dec = dec.reshape(256, 2)
for col, t in ((0, E4), (1, E5)):
    ref = np.arange(256, dtype=np.uint8).view(t).astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(dec[:, col]), nan), f"{t.__name__}: NaN codes differ"
    bad = np.nonzero(dec[~nan, col].view(np.uint32) != ref[~nan].view(np.uint32))[0]
    assert bad.size == 0, f"{t.__name__}: codes decode differently, first {np.arange(256)[~nan][bad[0]]:#04x}"
print("all 256 codes of both formats decode as ml_dtypes decodes them")

# 3. Encoding over the patterns.
hi = np.arange(65536, dtype=np.uint32) << 16
lo = np.array([0, 1, 0x7FFF, 0x8000, 0xFFFF], dtype=np.uint32)
rng = np.random.default_rng(2026)
bits = np.concatenate([(hi[:, None] | lo[None, :]).ravel(), rng.integers(0, 2**32, 1 << 20, dtype=np.uint32)])
x = bits.view(np.float32)
out = subprocess.run([tool], input=x.tobytes(), check=True, capture_output=True).stdout
ours = np.frombuffer(out, np.uint8).reshape(-1, 2)
for col, t in ((0, E4), (1, E5)):
    with np.errstate(over="ignore", invalid="ignore"):
        ref = codes(x, t)
    nan_in = np.isnan(x)
    assert np.all(ours[nan_in, col] & 0x7F == 0x7F) and np.all(is_nan_code(ref[nan_in], t))
    bad = np.nonzero((ours[:, col] != ref) & ~nan_in)[0]
    if bad.size:
        i = bad[0]
        sys.exit(f"{t.__name__}: {bad.size} patterns differ; first bits {bits[i]:#010x} ({x[i]!r}): "
                 f"posenc {ours[i, col]:#04x}, ml_dtypes {ref[i]:#04x}")
    print(f"{t.__name__}: {x.size} float32 patterns encode as ml_dtypes encodes them")
