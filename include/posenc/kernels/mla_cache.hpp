// The MLA (multi-head latent attention) cache row of DeepSeek-V2/V3, Kimi K2, GLM-4.7-Flash and their
// kind, written in one pass with the query side's rope slice.
//
// An MLA layer caches one row per token, not per-head K and V:
//   row = [ kvnorm(kv_c) (kv_lora_rank values) | RoPE(k_pe) (qk_rope_head_dim values) ]
// where kv_c is the compressed latent (kv_a_proj_with_mqa's first kv_lora_rank outputs), kvnorm its
// RMSNorm with kv_a_layernorm's weight (rms_norm.hpp), and k_pe the shared rope key (its last
// qk_rope_head_dim outputs), rotated at the token's position. The query heads' rope slices (the back
// qk_rope_head_dim dims of each q head of qk_nope_head_dim + qk_rope_head_dim) rotate in the same call.
//
// Per token t (position args.rope.positions[t], cache row args.slots[t]):
//   q_out[t]                  = RoPE(q[t]) with args.rope.layout (the back window of each q head)
//   cache.row(layer, slot)    = to_cache_type([kvnorm(kv_c[t]) | RoPE(k_pe[t])])
// which is exactly the unfused sequence ApplyHeadRmsNorm(kv_c, latent) (or a copy, with no norm),
// ApplyRope(k_pe, rope part) with the layout {pairing, rope_dim, 0, rope_dim}, ApplyRope(q, q_out), then
// StoreKvCache of the [kv_lora_rank + rope_dim] rows into a one-head cache of that size (the rows in
// the activation dtype first; Q8_0 blocks run along the whole row). The fast path equals that
// sequence bit for bit on every SIMD target; the reference equals it with the references.
//
// Example (DeepSeek-V3 decode, bfloat16 activations, float16 paged cache, interleaved rope pairs):
//   MlaCacheView cache{mem, KvCacheType::kF16, /*layers=*/61, pages * 64, /*kv_lora_rank=*/512, /*rope_dim=*/64};
//   MlaRopeArgs a{{{RopePairing::kInterleaved, 192, 128, 64}, &table, positions}, slots, layer,
//                 {kv_a_layernorm_weight, 1e-6f}};
//   Status s = ApplyMlaRopeCache(a, kv_c_view, k_pe_view, q_view, q_view, cache);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"

namespace posenc {

// One layer-major latent cache over caller memory (not owned): [layers][slots][kv_lora_rank + rope_dim]
// values of the cache type (Q8_0: the row as blocks of 32; float8: fp8(x / scale)).
struct MlaCacheView {
  void* data = nullptr;
  KvCacheType type = KvCacheType::kF32;
  int64_t layers = 1;
  int64_t slots = 0;
  int64_t kv_lora_rank = 0;
  int64_t rope_dim = 0;
  // Float8 caches only: the row's divisor, one finite value > 0, or empty (1). Not owned.
  std::span<const float> scale = {};

  int64_t row_values() const { return kv_lora_rank + rope_dim; }
  // The same cache as a one-head KvCacheView (k = data, k_scale = scale) for its row arithmetic and
  // StoreKvCache; `v` is the caller's (any disjoint memory, unused when only keys are stored).
  KvCacheView AsKvCache(void* v) const { return {data, v, type, layers, slots, 1, row_values(), scale}; }
  int64_t slot_bytes() const { return AsKvCache(nullptr).slot_bytes(); }
  int64_t bytes() const { return layers * slots * slot_bytes(); }
  std::byte* row(int64_t layer, int64_t slot) const {
    return static_cast<std::byte*>(data) + (layer * slots + slot) * slot_bytes();
  }
  // A cache type (IsKvCacheType), a scale only for float8 (KvCacheView's rules), dims > 0 (slots >= 0),
  // sizes that fit in int64, Q8_0 rows a multiple of 32, memory set and aligned.
  Status Validate() const;
};

struct MlaRopeArgs {
  RopeArgs rope;                   // the q heads' layout (window at the back), table, positions, direction, threads
  std::span<const int64_t> slots;  // cache row per token (ValidateKvSlots)
  int64_t layer = 0;               // in [0, cache.layers)
  HeadRmsNorm kv_norm = {};        // kv_a_layernorm over kv_lora_rank (scope per head); an empty weight: a copy
};

// kv_c: [T, 1, kv_lora_rank], k_pe: [T, 1, rope_dim], q and q_out: [T, H, layout.head_dim] (q may be
// empty, heads == 0: the cache rows only), one dtype (float32 / float16 / bfloat16). rope_dim must equal
// layout.rotary_dim. Validates everything, then writes; nothing is written on error. q_out may be q
// itself, or else must not overlap kv_c or k_pe; the cache must not overlap the inputs or q_out.
Status ApplyMlaRopeCache(const MlaRopeArgs& args, HeadsView kv_c, HeadsView k_pe, HeadsView q, HeadsView q_out,
                         const MlaCacheView& cache);
// The scalar reference: the same contract; the norm, rotation and row write references.
Status ApplyMlaRopeCacheReference(const MlaRopeArgs& args, HeadsView kv_c, HeadsView k_pe, HeadsView q,
                                  HeadsView q_out, const MlaCacheView& cache);

}  // namespace posenc
