// RoPE fused with the QKV split and the KV-cache write: what an engine does after its QKV projection,
// in one pass over each token's bytes.
//
// Per token t (position args.rope.positions[t], cache row args.slots[t]):
//   q_out[t]             = RoPE(qnorm(q[t]))            (times args.q_scale[t] when given)
//   cache.k[layer, slot] = to_cache_type(RoPE(knorm(k[t])))  (rounded to the activation dtype first)
//   cache.v[layer, slot] = to_cache_type(v[t])
// which is exactly what the unfused sequence computes: ApplyRope(q, q_out) out of place,
// ApplyQueryTemperature(q_out, q_scale), ApplyRope(k, k_tmp), StoreKvCache(cache, layer, slots,
// k_tmp, v) (kv_cache.hpp). With QK-norm (args.q_norm / args.k_norm enabled: Qwen3, Gemma 3, OLMo 2,
// GLM-4.5; qnorm and knorm are the identity otherwise) the unfused sequence starts with
// ApplyHeadRmsNorm(q, q_out) and ApplyHeadRmsNorm(k, k_tmp) (rms_norm.hpp) and rotates both in place.
// The fast path equals that sequence on the same SIMD target bit for bit;
// the reference equals it with ApplyRopeReference in place of ApplyRope.
//
// Multi-axis positions (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, posenc/math/multi_axis.hpp): give the table
// RopeTable::BuildPerToken builds from the [C, T] positions (once per forward pass: every layer shares
// them) and positions 0..T-1 (its row indices); the result equals ApplyMultiAxisRope on q and k followed
// by StoreKvCache, bit for bit (tests/unit/fused_rope_test.cpp).
//
// Example (Llama-3-8B prefill from the fused projection output, float16 cache):
//   auto qkv = SplitFusedQkv(proj, DType::kBF16, T, /*q_heads=*/32, /*kv_heads=*/8, 128).value();
//   FusedRopeArgs a{{layout, &table, positions}, slots, layer};
//   Status s = ApplyRopeKvCache(a, qkv, q_out_view, cache);
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"

namespace posenc {

// The three inputs: [T, Hq, D] queries, [T, Hkv, D] keys and values, one dtype.
struct QkvViews {
  HeadsView q, k, v;
};

// Views into a fused projection output: row t is q heads, then k heads, then v heads, each head_dim
// values; rows row_stride elements apart (0: dense, (q_heads + 2 kv_heads) * head_dim). The error
// names the value (negative dims, a row_stride shorter than a row, sizes past int64).
Result<QkvViews> SplitFusedQkv(void* data, DType dtype, int64_t tokens, int64_t q_heads, int64_t kv_heads,
                               int64_t head_dim, int64_t row_stride = 0);

struct FusedRopeArgs {
  RopeArgs rope;                         // layout, table, positions (one per token), direction, threads
  std::span<const int64_t> slots;        // cache row per token (ValidateKvSlots)
  int64_t layer = 0;                     // in [0, cache.layers)
  std::span<const float> q_scale;        // empty, or one finite scale per token (attn_temperature.hpp)
  HeadRmsNorm q_norm = {}, k_norm = {};  // QK-norm before RoPE (rms_norm.hpp); an empty weight: none
};

// Validates everything (ValidateRope for q and k, ValidateHeadRmsNorm for enabled norms, v's shape, q_out equal to q or
// disjoint from it, the cache and layer, the slots, the scales), then writes. Errors name the object and value; nothing
// is written on error. q_out may be qkv.q itself (in place), else it must not overlap k or v; the cache must not
// overlap the inputs or q_out (both refused: the writes go a chunk of tokens at a time).
Status ApplyRopeKvCache(const FusedRopeArgs& args, const QkvViews& qkv, HeadsView q_out, const KvCacheView& cache);

// The scalar reference: the same contract, per token RotateTokenReference and the scalar cache write.
Status ApplyRopeKvCacheReference(const FusedRopeArgs& args, const QkvViews& qkv, HeadsView q_out,
                                 const KvCacheView& cache);

}  // namespace posenc
