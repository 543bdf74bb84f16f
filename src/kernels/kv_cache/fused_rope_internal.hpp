// Internal to the fused RoPE + KV-cache kernels (fused_rope.cpp, fused_rope_ref.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/fused_rope.hpp"

namespace posenc::detail {

// The validated fused job: the RoPE job (dtype, layout, table, positions, direction; its tensors are
// set per token), the views, the cache and where to write.
struct FusedRopeJob {
  RopeJob rope;
  HeadsView q, k, v, q_out;
  KvCacheView cache;
  int64_t layer = 0;
  const int64_t* slots = nullptr;
  const float* q_scale = nullptr;  // nullptr: none
  bool k_direct = false;           // cache type == activation dtype: rotate k straight into its row
  bool stream_q = false;           // q_out rows written with streaming stores (fused_rope.cpp says when)
  bool stream_cache = false;       // the cache rows too, where their type is a float type
  int64_t chunk = 1;               // tokens per rotation call, 1..kFusedChunkMax (fused_rope.cpp says when)
  HeadRmsNorm q_norm, k_norm;      // enabled: normed before the rotation
};

// Tokens per rotation call at most, and the bytes of k rows a chunk stages in L1 at most.
inline constexpr int64_t kFusedChunkMax = 8;
inline constexpr size_t kFusedChunkBytes = 16 * 1024;

// Every check ApplyRopeKvCache and its reference make, in one place (see fused_rope.hpp).
Status ValidateRopeKvCache(const FusedRopeArgs& args, const QkvViews& qkv, const HeadsView& q_out,
                           const KvCacheView& cache);

}  // namespace posenc::detail
