// The HF-exact float16 row (rope_cos_sin-inl.hpp's CosSinRow) in the CPU's own float16 arithmetic:
// x86 AVX512-FP16 (Sapphire Rapids and later), 32 values per instruction with no conversions.
//
// Same bits as torch's float16 formula, which widens to float32, multiplies, rounds to float16, adds
// the two rounded products in float32 and rounds the sum to float16:
// * a product of two float16 (11-bit significands) is exact in float32 (22 bits), so torch's rounded
//   product is the correctly rounded product, which is what vmulph returns;
// * a float32 sum rounded to float16 is the correctly rounded float16 sum: double rounding is
//   innocuous for addition when the wider format has at least 2p + 2 bits (float32: 24 >= 2 x 11 + 2),
//   and float32's exponent range holds every float16 sum, subnormals exactly;
// * FP16 instructions compute subnormals (MXCSR's DAZ/FTZ do not apply to them), as float32 does here.
// NaN results are NaN either way (the tests compare bits and accept any NaN for a NaN, as for the
// other targets). tests/unit/rope_cos_sin_test.cpp compares this path with the scalar reference.
#include "kernels/rope/rope_cos_sin_f16.hpp"

#if POSENC_HAVE_AVX512FP16
#include <immintrin.h>
#endif

namespace posenc::detail {

#if POSENC_HAVE_AVX512FP16
namespace {

#define POSENC_FP16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512fp16")))

POSENC_FP16_TARGET inline __m512h Load(const f16_t* p) { return _mm512_loadu_ph(p); }
POSENC_FP16_TARGET inline void Store(f16_t* p, __m512h v) { _mm512_storeu_ph(p, v); }
POSENC_FP16_TARGET inline __m512h Xor(__m512h v, __m512i bits) {
  return _mm512_castsi512_ph(_mm512_xor_si512(_mm512_castph_si512(v), bits));
}
// round(round(x * c) + round(r * s)), each operation rounded to float16 (see the file comment).
POSENC_FP16_TARGET inline __m512h Rotate(__m512h x, __m512h c, __m512h r, __m512h s) {
  return _mm512_add_ph(_mm512_mul_ph(x, c), _mm512_mul_ph(r, s));
}

}  // namespace

POSENC_FP16_TARGET int64_t CosSinRowF16Native(RopePairing pairing, int64_t R, const f16_t* x, f16_t* y,
                                              const f16_t* c, const f16_t* s) {
  constexpr int64_t kN = 32;  // float16 values per vector
  int64_t i = 0;
  if (pairing == RopePairing::kHalf) {
    const __m512i sign = _mm512_set1_epi16(static_cast<short>(0x8000));
    const int64_t h = R / 2;
    for (; i + kN <= h; i += kN) {
      const __m512h a = Load(x + i), b = Load(x + h + i);
      const __m512h ya = Rotate(a, Load(c + i), Xor(b, sign), Load(s + i));
      const __m512h yb = Rotate(b, Load(c + h + i), a, Load(s + h + i));
      Store(y + i, ya);
      Store(y + h + i, yb);
    }
    return i;
  }
  // Interleaved: pair (2k, 2k + 1) shares a 32-bit lane; the partner is the lane rotated by 16 bits,
  // negated in its lower (even) element: lane 2k gets -x[2k + 1], lane 2k + 1 gets x[2k].
  const __m512i even_sign = _mm512_set1_epi32(0x00008000);
  for (; i + kN <= R; i += kN) {
    const __m512h v = Load(x + i);
    const __m512h r = Xor(_mm512_castsi512_ph(_mm512_maskz_rol_epi32(0xffff, _mm512_castph_si512(v), 16)), even_sign);
    Store(y + i, Rotate(v, Load(c + i), r, Load(s + i)));
  }
  return i;
}
#else
int64_t CosSinRowF16Native(RopePairing, int64_t, const f16_t*, f16_t*, const f16_t*, const f16_t*) { return 0; }
#endif

}  // namespace posenc::detail
