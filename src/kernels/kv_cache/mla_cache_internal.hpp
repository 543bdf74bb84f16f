// Internal to the MLA cache-row kernels (mla_cache.cpp, mla_cache_ref.cpp).
#pragma once

#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/mla_cache.hpp"

namespace posenc::detail {

// Every check ApplyMlaRopeCache and its reference make (see mla_cache.hpp).
Status ValidateMlaRopeCache(const MlaRopeArgs& args, const HeadsView& kv_c, const HeadsView& k_pe, const HeadsView& q,
                            const HeadsView& q_out, const MlaCacheView& cache);

// The rope key's layout: args' pairing over a head of rope_dim, all rotated.
inline RotaryLayout MlaKeyLayout(const RotaryLayout& q_layout, int64_t rope_dim) {
  return {q_layout.pairing, rope_dim, 0, rope_dim};
}

// The validated call, as the per-target loop reads it.
struct MlaJob {
  RopeJob q_rope, k_rope;  // tensors set per token
  HeadsView kv_c, k_pe, q, q_out;
  MlaCacheView cache;
  int64_t layer = 0;
  const int64_t* slots = nullptr;
  HeadRmsNorm kv_norm;
  bool direct = false;  // cache type == activation dtype
};

}  // namespace posenc::detail
