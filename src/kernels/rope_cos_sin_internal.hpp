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

// Rotates tokens [begin, end) of `job` with the best enabled SIMD target.
void RopeCosSinTokens(const RopeCosSinJob& job, int64_t begin, int64_t end);

// g++ 12 and later offer the AVX512-FP16 intrinsics to functions with the target attribute, and build
// rope_cos_sin_f16.cpp's row. (clang 14, the fuzzers' compiler, hides them unless the whole file is
// compiled for AVX512-FP16; there the row is not compiled and the AVX3 float32 path serves float16.)
#if defined(__x86_64__) && !defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12
#define POSENC_HAVE_AVX512FP16 1
#else
#define POSENC_HAVE_AVX512FP16 0
#endif

// The float16 row [0, returned) in the CPU's float16 arithmetic (rope_cos_sin_f16.cpp): only where
// NativeF16Arithmetic() (kernels/simd.hpp) holds; the caller finishes the row. Returns 0 where it is
// not compiled.
int64_t CosSinRowF16Native(RopePairing pairing, int64_t R, const f16_t* x, f16_t* y, const f16_t* c, const f16_t* s);

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
