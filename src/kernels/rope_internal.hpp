// Internal to the RoPE kernels: the resolved job the per-target code runs, and shared validation.
#pragma once

#include <cstdint>

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

}  // namespace posenc::detail
