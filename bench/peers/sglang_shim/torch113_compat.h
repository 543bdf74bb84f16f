// Ours, not SGLang's: what SGLang's sgl-kernel/csrc/cpu/{vec.h,rope.cpp} take from PyTorch 2.x and
// PyTorch 1.13 (Debian's libtorch-dev) lacks. build.sh force-includes it (-include) before rope.cpp.
// The float16 conversions use the same F16C/AVX512 instructions as PyTorch 2.x's Vectorized<Half>.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AMX_BF16__)
#define CPU_CAPABILITY_AVX512  // as SGLang's vec.h defines it, before ATen's vector headers
#else
#error "the SGLang peer is built for an AVX512-BF16 + AMX host (as SGLang's CPU kernels are)"
#endif

#include <ATen/Dispatch.h>
#include <ATen/cpu/vec/vec.h>
#include <immintrin.h>

#include <tuple>
#include <type_traits>

#ifndef AT_DISPATCH_REDUCED_FLOATING_TYPES
#define AT_DISPATCH_REDUCED_FLOATING_TYPES(TYPE, NAME, ...)        \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                   \
                     AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__) \
                     AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__))
#endif

namespace at::vec {

template <typename T>
constexpr bool is_reduced_floating_point_v = std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;

inline std::tuple<Vectorized<float>, Vectorized<float>> convert_to_float(const Vectorized<c10::BFloat16>& a) {
  return convert_bfloat16_float(a);
}

inline std::tuple<Vectorized<float>, Vectorized<float>> convert_to_float(const Vectorized<c10::Half>& a) {
  __at_align__ c10::Half h[Vectorized<c10::Half>::size()];
  a.store(h);
  const __m512i raw = _mm512_loadu_si512(h);
  return std::make_tuple(Vectorized<float>(_mm512_cvtph_ps(_mm512_castsi512_si256(raw))),
                         Vectorized<float>(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1))));
}

template <typename T>
Vectorized<T> convert_from_float(const Vectorized<float>& a, const Vectorized<float>& b);

template <>
inline Vectorized<c10::BFloat16> convert_from_float<c10::BFloat16>(const Vectorized<float>& a,
                                                                    const Vectorized<float>& b) {
  return convert_float_bfloat16(a, b);
}

template <>
inline Vectorized<c10::Half> convert_from_float<c10::Half>(const Vectorized<float>& a, const Vectorized<float>& b) {
  constexpr int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(__m512(a), r)),
                                       _mm512_cvtps_ph(__m512(b), r), 1);
  __at_align__ c10::Half out[Vectorized<c10::Half>::size()];
  _mm512_storeu_si512(out, h);
  return Vectorized<c10::Half>::loadu(out);
}

}  // namespace at::vec
