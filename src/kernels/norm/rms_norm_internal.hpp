// Internal to the RMSNorm kernels (rms_norm.cpp, rms_norm_ref.cpp) and the fused kernels that norm q
// and k on the way (kv_cache/fused_rope, kv_cache/mla_cache): the steps of rms_norm.hpp's one
// definition that the scalar reference and every SIMD target share.
#pragma once

#include <cmath>
#include <cstdint>

#include "posenc/kernels/rms_norm.hpp"

namespace posenc::detail {

inline constexpr int kRmsPartials = 16;

// The partial sums folded as rms_norm.hpp states: p[j] += p[j + 8], then + 4, + 2, + 1.
inline float FoldRmsPartials(float* p) {
  for (int w = kRmsPartials / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) p[j] += p[j + w];
  return p[0];
}

// r = 1 / sqrt(sum / n + eps), each step in float32.
inline float RmsScale(float sum, int64_t n, float eps) {
  const float mean = sum / static_cast<float>(n);
  return 1.0f / std::sqrt(mean + eps);
}

// The norm of one token's heads with the best enabled SIMD target (rms_norm.cpp): `in` and `out`
// head h at in + h * in_head_stride, out + h * out_head_stride (elements of `dtype`); out may be in.
void RmsNormToken(const HeadRmsNorm& norm, DType dtype, const void* in, int64_t in_head_stride, void* out,
                  int64_t out_head_stride, int64_t heads, int64_t head_dim);

}  // namespace posenc::detail
