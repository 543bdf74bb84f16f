// ApplyMlaRopeCache: validate once (mla_cache_ref.cpp), then per chunk of tokens, with the best SIMD
// target: the k_pe rows rotated (the RoPE kernels, detail::RopeTokens) into an L1 scratch, each token's
// latent normed (rms_norm-inl.hpp) with its rotated k_pe straight into the cache row when the cache has
// the activation dtype, else into an L1-resident row converted / quantized into the cache
// (kv_cache-inl.hpp), then the chunk's q rope windows rotated.
// Split over tokens: each token's row and q are its own, so any split gives the same bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kv_cache/mla_cache.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "kernels/kv_cache/kv_cache-inl.hpp"
#include "kernels/kv_cache/mla_cache_internal.hpp"
#include "kernels/norm/rms_norm-inl.hpp"
#include "kernels/rope/rope_internal.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {

// Tokens a chunk's two rotation calls cover: each RopeTokens call sets up its form, factors and
// prefetch per call, and a token's k_pe (one 64-value head) and q windows are too little work to carry
// that twice per token. The chunk's rotated k_pe rows wait in an L1 scratch (kMlaChunk x rope_dim).
constexpr int64_t kMlaChunk = 16;

template <typename T>
void MlaTokensT(const detail::MlaJob& job, int64_t begin, int64_t end) {
  const MlaCacheView& cache = job.cache;
  const int64_t L = cache.kv_lora_rank;
  const size_t R = static_cast<size_t>(cache.row_values());
  const size_t pe_bytes = sizeof(T) * static_cast<size_t>(cache.rope_dim);
  hwy::AlignedFreeUniquePtr<T[]> row = job.direct ? nullptr : hwy::AllocateAligned<T>(R);
  const hwy::AlignedFreeUniquePtr<T[]> pe = hwy::AllocateAligned<T>(static_cast<size_t>(kMlaChunk * cache.rope_dim));
  detail::RopeJob qj = job.q_rope, kj = job.k_rope;
  qj.num_tensors = job.q.heads > 0 ? 1 : 0;
  detail::RopeTensor& qt = qj.tensors[0];
  qt.heads = job.q.heads;
  qt.in_token_stride = job.q.token_stride, qt.in_head_stride = job.q.head_stride;
  qt.out_token_stride = job.q_out.token_stride, qt.out_head_stride = job.q_out.head_stride;
  kj.num_tensors = 1;
  kj.tensors[0] = {nullptr, pe.get(), 1, job.k_pe.token_stride, cache.rope_dim, cache.rope_dim, cache.rope_dim};
  const detail::RowScale scale = detail::KeyScale(cache.AsKvCache(nullptr));
  // The scattered rows of tokens [from, to), a chunk ahead (as FusedTokensT): a cache row (PrefetchCacheRow)
  // whose slot does not follow the token before's, and cos/sin rows (into L2 where cache rows go there)
  // whose position does not; the hardware streams follow the rest. xeon, cold, 1 thread, 10 rounds
  // alternating: mla_decode bfloat16 0.220 -> 0.209 ms; prefetching prefill's consecutive rows too made
  // it 4% slower.
  const size_t slot_bytes = static_cast<size_t>(cache.slot_bytes());
  const size_t row_lines = detail::CosSinRowLines(*job.k_rope.table);
  const bool whole_rows = WholeRowPrefetch(slot_bytes);
  const int64_t* pos = job.k_rope.positions;
  const auto prefetch_rows = [&](int64_t from, int64_t to) {
    for (int64_t t = from; t < std::min(to, end); ++t) {
      const bool first = t == begin;
      if (first || pos[t] != pos[t - 1] + 1)
        detail::PrefetchCosSinRows(*job.k_rope.table, pos[t], row_lines, whole_rows);
      if (first || job.slots[t] != job.slots[t - 1] + 1)
        PrefetchCacheRow(cache.row(job.layer, job.slots[t]), slot_bytes);
    }
  };
  prefetch_rows(begin, begin + kMlaChunk);
  for (int64_t t0 = begin; t0 < end; t0 += kMlaChunk) {
    const int64_t m = std::min(kMlaChunk, end - t0);
    prefetch_rows(t0 + m, t0 + m + kMlaChunk);
    // The chunk's k_pe rows rotated into the scratch by one call.
    kj.positions = job.k_rope.positions + t0;
    kj.tensors[0].in = job.k_pe.at<const T>(t0, 0);
    detail::RopeTokens(kj, 0, m);
    // Each token's cache row: the normed latent and its rotated k_pe.
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = t0 + i;
      std::byte* dst = cache.row(job.layer, job.slots[t]);
      T* base = job.direct ? reinterpret_cast<T*>(dst) : row.get();
      const T* c = job.kv_c.at<const T>(t, 0);
      if (job.kv_norm.enabled())
        RmsNormTokenT(job.kv_norm, c, 0, base, 0, 1, L);
      else
        std::memcpy(base, c, sizeof(T) * static_cast<size_t>(L));
      std::memcpy(base + L, pe.get() + i * cache.rope_dim, pe_bytes);
      if (!job.direct) StoreRowFrom(static_cast<const T*>(row.get()), cache.type, dst, R, scale);
    }
    // Then the chunk's q windows, by one call.
    if (qj.num_tensors > 0) {
      qj.positions = job.q_rope.positions + t0;
      qt.in = job.q.at<const T>(t0, 0);
      qt.out = job.q_out.at<T>(t0, 0);
      detail::RopeTokens(qj, 0, m);
    }
  }
}

void MlaTokensTarget(const detail::MlaJob& job, int64_t begin, int64_t end) {
  VisitFloatDType(job.kv_c.dtype, [&](auto tag) { MlaTokensT<typename decltype(tag)::type>(job, begin, end); });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc {
HWY_EXPORT(MlaTokensTarget);

Status ApplyMlaRopeCache(const MlaRopeArgs& args, HeadsView kv_c, HeadsView k_pe, HeadsView q, HeadsView q_out,
                         const MlaCacheView& cache) {
  POSENC_RETURN_IF_ERROR(detail::ValidateMlaRopeCache(args, kv_c, k_pe, q, q_out, cache));
  const int64_t tokens = kv_c.tokens;
  if (tokens == 0) return OkStatus();
  detail::MlaJob job;
  detail::RopeJob rj;
  rj.dtype = kv_c.dtype;
  rj.table = args.rope.table;
  rj.positions = args.rope.positions.data();
  rj.backward = args.rope.direction == RopeDirection::kBackward;
  rj.prefetch_out = StorePrefetchPolicy().rope_out_of_place;
  job.q_rope = rj;
  job.q_rope.layout = args.rope.layout;
  job.k_rope = rj;
  job.k_rope.layout = detail::MlaKeyLayout(args.rope.layout, cache.rope_dim);
  job.kv_c = kv_c;
  job.k_pe = k_pe;
  job.q = q;
  job.q_out = q_out;
  job.cache = cache;
  job.layer = args.layer;
  job.slots = args.slots.data();
  job.kv_norm = args.kv_norm;
  job.direct = detail::StoresAsIs(cache.type, kv_c.dtype);
  // Bytes touched, for the threads-or-inline choice only.
  const double es = static_cast<double>(SizeOf(kv_c.dtype));
  const double per_token = static_cast<double>(cache.row_values()) * es + static_cast<double>(cache.slot_bytes()) +
                           2.0 * static_cast<double>(q.heads * q.head_dim) * es;
  const double touched = per_token * static_cast<double>(tokens);
  ParallelFor(args.rope.parallel, tokens, detail::TouchedBytes(touched), [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(MlaTokensTarget)(job, b, e);
  });
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
