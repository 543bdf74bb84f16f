// Internal to the cos/sin RoPE kernel: the validated job the per-target code runs, and the scalar
// arithmetic that the reference and the SIMD tails share.
#pragma once

#include <cstdint>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/rope_cos_sin.hpp"

namespace posenc::detail {

struct RopeCosSinJob {
  RopeCosSinArgs args;
  HeadsView in, out;
};

// A float32 value rounded to T and widened back (float32: itself).
template <typename T>
inline float RoundTo(float v) {
  T t;
  StoreFromF32(v, &t);
  return LoadAsF32(&t);
}

// torch's y = x * c + r * s in storage type T: each product and the sum rounded to T.
template <typename T>
inline T CosSinOne(float x, float c, float r, float s) {
  T y;
  StoreFromF32(RoundTo<T>(x * c) + RoundTo<T>(r * s), &y);
  return y;
}

// One head row: rotary elements [j0, j1) of the window (j relative to the window start), scalar.
// `x`, `y` point at the window; half pairing reads x[j ± R/2], interleaved x[j ^ 1].
template <typename T>
inline void CosSinRowScalar(RopePairing pairing, int64_t R, const T* x, T* y, const T* c, const T* s, int64_t j0,
                            int64_t j1) {
  const int64_t h = R / 2;
  if (pairing == RopePairing::kHalf) {
    for (int64_t i = j0; i < j1 && i < h; ++i) {  // pairs (i, i + h), both read before either is written
      const float a = LoadAsF32(x + i), b = LoadAsF32(x + i + h);
      const T ya = CosSinOne<T>(a, LoadAsF32(c + i), -b, LoadAsF32(s + i));
      const T yb = CosSinOne<T>(b, LoadAsF32(c + i + h), a, LoadAsF32(s + i + h));
      y[i] = ya;
      y[i + h] = yb;
    }
  } else {
    for (int64_t i = j0; i < j1; i += 2) {
      const float a = LoadAsF32(x + i), b = LoadAsF32(x + i + 1);
      const T ya = CosSinOne<T>(a, LoadAsF32(c + i), -b, LoadAsF32(s + i));
      const T yb = CosSinOne<T>(b, LoadAsF32(c + i + 1), a, LoadAsF32(s + i + 1));
      y[i] = ya;
      y[i + 1] = yb;
    }
  }
}

}  // namespace posenc::detail
