// ApplyRopeKvCache: validate once (fused_rope_ref.cpp), then run the per-target fused loop
// (fused_rope-inl.hpp) of the best SIMD target, split over tokens with the caller's ParallelRunner or
// the internal pool. Each token's q, cache rows and scratch are its own, so any split gives the same
// bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kv_cache/fused_rope.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/kv_cache/fused_rope-inl.hpp"

#if HWY_ONCE
#include <algorithm>
#include <cstdint>

#include "kernels/kv_cache/fused_rope_internal.hpp"
#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc {
HWY_EXPORT(FusedTokensTarget);

Status ApplyRopeKvCache(const FusedRopeArgs& args, const QkvViews& qkv, HeadsView q_out, const KvCacheView& cache) {
  POSENC_RETURN_IF_ERROR(detail::ValidateRopeKvCache(args, qkv, q_out, cache));
  const int64_t tokens = qkv.q.tokens;
  if (tokens == 0) return OkStatus();
  detail::FusedRopeJob job;
  job.rope.dtype = qkv.q.dtype;
  job.rope.layout = args.rope.layout;
  job.rope.table = args.rope.table;
  job.rope.positions = args.rope.positions.data();
  job.rope.backward = args.rope.direction == RopeDirection::kBackward;
  job.rope.prefetch_out = StorePrefetchPolicy().rope_out_of_place;
  job.rope.norm_f32_regs = Float32NormInRegisters();
  job.q = qkv.q;
  job.k = qkv.k;
  job.v = qkv.v;
  job.q_out = q_out;
  job.cache = cache;
  job.layer = args.layer;
  job.slots = args.slots.data();
  job.q_scale = args.q_scale.empty() ? nullptr : args.q_scale.data();
  job.q_norm = args.q_norm;
  job.k_norm = args.k_norm;
  job.k_direct = detail::StoresAsIs(cache.type, qkv.q.dtype);
  // Bytes written (q rows and cache rows, streamed in a large call: StreamStoreMinBytes) and touched (for
  // the threads-or-inline choice only).
  const double es = static_cast<double>(SizeOf(qkv.q.dtype));
  const double row = static_cast<double>(cache.kv_heads * cache.head_dim);
  const double q_row = static_cast<double>(qkv.q.heads * qkv.q.head_dim) * es;
  const double written = static_cast<double>(tokens) * (q_row + 2.0 * static_cast<double>(cache.slot_bytes()));
  // q is not streamed where it is read back for a temperature; a normed head only in a whole-head window
  // (RopeTensor::stream).
  const RotaryLayout& L = args.rope.layout;
  const bool whole = L.rotary_start == 0 && L.rotary_dim == L.head_dim;
  job.stream_q =
      job.q_scale == nullptr && (whole || !args.q_norm.enabled()) && detail::StreamsHeads(qkv.q, q_out, written);
  job.stream_cache = detail::StreamsCacheRows(cache, written) && (whole || !args.k_norm.enabled());
  // Tokens per rotation call. RopeTokens sets up its form, factors and norm weights per call, which a
  // call per token pays for every token: a small call (decode: scattered rows, bound by their latency and
  // by that set-up) rotates up to 8 tokens a call, their k rows staged in L1 (kFusedChunkBytes). A large
  // call is bound by memory, and there a token per call keeps each token's cache conversion beside the
  // next token's loads and sends k straight into its cache row (zen4, cold, 1 thread, 3 runs: chunks made
  // decode 1.05-1.16x faster, prefill into q8_0 / float8 10-18% slower and into streamed float caches
  // 7-24% slower).
  const double k_row_bytes = std::max(row * es, 1.0);
  job.chunk =
      written >= static_cast<double>(StreamStoreMinBytes())
          ? 1
          : std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(detail::kFusedChunkBytes) / k_row_bytes), 1,
                                detail::kFusedChunkMax);
  const double touched = written + static_cast<double>(tokens) * (q_row + 2.0 * row * es);
  ParallelFor(args.rope.parallel, tokens, detail::TouchedBytes(touched), [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(FusedTokensTarget)(job, b, e);
  });
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
