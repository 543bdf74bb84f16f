// Internal to the RoPE kernels: the resolved job the per-target code runs, and shared validation.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "posenc/kernels/rope.hpp"

namespace posenc::detail {

// One tensor of a RoPE call (queries or keys), strides in elements.
struct RopeTensor {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t heads = 0;
  int64_t in_token_stride = 0, in_head_stride = 0;
  int64_t out_token_stride = 0, out_head_stride = 0;
};

// Everything a kernel needs, validated: up to two tensors sharing dtype, layout and positions, so the
// cos/sin of each token are fetched once for all heads of both.
struct RopeJob {
  DType dtype = DType::kF32;
  RotaryLayout layout;
  const RopeTable* table = nullptr;
  const int64_t* positions = nullptr;
  bool backward = false;
  bool prefetch_out = false;  // StorePrefetchPolicy().rope_out_of_place
  int num_tensors = 0;
  RopeTensor tensors[2];
};

// Rotates tokens [begin, end) of every tensor of `job` with the best enabled SIMD target.
void RopeTokens(const RopeJob& job, int64_t begin, int64_t end);

// Out-of-place checks shared by the reference and the fast path: same shape and dtype, and `out`
// is either exactly `in` or does not overlap it at all.
Status ValidateRopeOutput(const HeadsView& in, const HeadsView& out);

// The scalar reference rotation of token t, every head, by that token's cos/sin (c, s: one value per
// pair): float64 arithmetic on the float32 cos/sin, one rounding to T. `sign` is +1 forward, -1
// backward; `row` is scratch of head_dim elements (so in == out is safe). Shared by ApplyRopeReference
// and the multi-axis reference, which differ only in where c and s come from.
template <typename T>
void RotateTokenReference(const RotaryLayout& L, const float* c, const float* s, double sign, const HeadsView& in,
                          const HeadsView& out, int64_t t, std::vector<T>& row) {
  const int64_t n = L.num_pairs();
  for (int64_t h = 0; h < in.heads; ++h) {
    const T* src = in.at<T>(t, h);
    std::memcpy(row.data(), src, sizeof(T) * static_cast<size_t>(L.head_dim));
    T* dst = out.at<T>(t, h);
    if (dst != src) std::memcpy(dst, row.data(), sizeof(T) * static_cast<size_t>(L.head_dim));
    for (int64_t i = 0; i < n; ++i) {
      const double a = LoadAsF32(&row[static_cast<size_t>(L.first(i))]);
      const double b = LoadAsF32(&row[static_cast<size_t>(L.second(i))]);
      const double ci = c[i];
      const double si = sign * s[i];
      StoreFromF32(static_cast<float>(a * ci - b * si), dst + L.first(i));
      StoreFromF32(static_cast<float>(a * si + b * ci), dst + L.second(i));
    }
  }
}

}  // namespace posenc::detail
