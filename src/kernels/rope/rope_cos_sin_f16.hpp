// The HF-exact float16 row in the CPU's own float16 arithmetic (rope_cos_sin_f16.cpp), called from the
// AVX3 code of rope_cos_sin-inl.hpp where NativeF16Arithmetic() (posenc/kernels/simd.hpp) holds.
#pragma once

#include <cstdint>

#include "posenc/core/dtype.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc::detail {

// g++ 12 and later offer the AVX512-FP16 intrinsics to functions with the target attribute, and build
// rope_cos_sin_f16.cpp's row. (clang 14, the fuzzers' compiler, hides them unless the whole file is
// compiled for AVX512-FP16; there the row is not compiled and the AVX3 float32 path serves float16.)
#if defined(__x86_64__) && !defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12
#define POSENC_HAVE_AVX512FP16 1
#else
#define POSENC_HAVE_AVX512FP16 0
#endif

// The float16 row [0, returned) of the rotary window; the caller finishes the row. Returns 0 where it
// is not compiled.
int64_t CosSinRowF16Native(RopePairing pairing, int64_t R, const f16_t* x, f16_t* y, const f16_t* c, const f16_t* s);

}  // namespace posenc::detail
