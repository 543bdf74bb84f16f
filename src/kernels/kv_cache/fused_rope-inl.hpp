// Per-target fused RoPE + KV-cache write, included once per SIMD target by fused_rope.cpp
// (foreach_target.h). Per chunk of tokens (job.chunk: up to 8 in a small call, one in a large one),
// one pass over their bytes: q and k rotated by one call of the RoPE kernels (rope-inl.hpp through
// detail::RopeTokens, the same code ApplyRope runs, so the rotation is bit for bit ApplyRope's; with
// QK-norm each head is normed on the way, in the rotation's registers where the head is the whole
// window), k straight into its cache row where a token is its own chunk and the cache has the activation
// dtype, else into L1-resident rows that are copied / converted / quantized into the cache
// (kv_cache-inl.hpp); then per token v converted from the input row to its cache row, and the query
// temperature multiplied into the just-written q row.
#if defined(POSENC_KERNELS_FUSED_ROPE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_FUSED_ROPE_INL_H_
#undef POSENC_KERNELS_FUSED_ROPE_INL_H_
#else
#define POSENC_KERNELS_FUSED_ROPE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstring>

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/simd/convert-inl.hpp"
#include "kernels/kv_cache/fused_rope_internal.hpp"
#include "kernels/kv_cache/kv_cache-inl.hpp"
#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "kernels/norm/rms_norm-inl.hpp"
#include "kernels/rope/rope_internal.hpp"
#include "kernels/simd/memory-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// row[i] = round_to_T(float32(row[i]) * s): ApplyQueryTemperature's float32 product.
template <typename T>
HWY_INLINE void ScaleRow(T* row, size_t n, float s) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, s);
  size_t i = 0;
  for (; i + N <= n; i += N) StoreF(df, hn::Mul(LoadF(df, row + i), vs), row + i);
  for (; i < n; ++i) StoreFromF32(LoadAsF32(row + i) * s, row + i);
}

// The lines of token t's heads that begin in [from, to) bytes of its row, whole heads.
template <typename T>
HWY_INLINE void PrefetchHeads(const HeadsView& x, int64_t t, size_t from, size_t to) {
  const size_t head_bytes = static_cast<size_t>(x.head_dim) * sizeof(T);
  if (head_bytes == 0) return;
  const int64_t first = static_cast<int64_t>(from / head_bytes);
  const int64_t last = std::min(x.heads, static_cast<int64_t>((to + head_bytes - 1) / head_bytes));
  for (int64_t h = first; h < last; ++h) PrefetchLines(x.at<const T>(t, h), head_bytes);
}

// A cache row from src, streamed or stored, and a token's heads normed into dense rows (the backward
// QK-norm): out of line, so FusedTokensT holds one copy of the converters and quantizers instead of one
// per call site. Inlined, the sanitizer build of this file spent 5 minutes of a core on it (g++ 12's
// variable tracking ran past its limit on FusedTokensT and started over); a call a row costs nothing
// beside the row.
template <typename T>
HWY_NOINLINE void CacheRowFrom(const T* src, KvCacheType type, void* dst, size_t n, const detail::RowScale& scale,
                               bool stream) {
  if (stream) {
    StreamRowFrom(src, type, dst, n, scale);
  } else {
    StoreRowFrom(src, type, dst, n, scale);
  }
}
template <typename T>
HWY_NOINLINE void NormTokenRows(const HeadRmsNorm& norm, const T* in, int64_t in_head_stride, T* out,
                                int64_t out_head_stride, int64_t heads, int64_t head_dim) {
  RmsNormTokenT(norm, in, in_head_stride, out, out_head_stride, heads, head_dim);
}

template <typename T>
void FusedTokensT(const detail::FusedRopeJob& job, int64_t begin, int64_t end) {
  const HeadsView& q = job.q;
  const HeadsView& k = job.k;
  const HeadsView& v = job.v;
  const HeadsView& qo = job.q_out;
  const KvCacheView& cache = job.cache;
  const size_t n = static_cast<size_t>(cache.kv_heads * cache.head_dim);
  const size_t slot_bytes = static_cast<size_t>(cache.slot_bytes());
  detail::RopeJob rj = job.rope;
  rj.num_tensors = 0;
  const int iq = q.heads > 0 ? rj.num_tensors++ : -1;
  const int ik = rj.num_tensors++;
  // QK-norm runs inside the rotation (rope-inl.hpp's RotateNormedToken), in registers where it can;
  // going backward (no model does; kept exact) each row is normed first, q into q_out and rotated
  // there, k into its dense scratch row.
  const HeadRmsNorm* qn = job.q_norm.enabled() ? &job.q_norm : nullptr;
  const HeadRmsNorm* kn = job.k_norm.enabled() ? &job.k_norm : nullptr;
  const bool pre_q = qn != nullptr && job.rope.backward, pre_k = kn != nullptr && job.rope.backward;
  // Large calls stream their q rows and cache rows from registers (job.stream_q, job.stream_cache; see
  // fused_rope.cpp), and do not prefetch those lines.
  const bool stream_q = job.stream_q && iq >= 0 && !pre_q, stream_kv = job.stream_cache;
  // (fused_rope.cpp); no larger than this range, so a one-token call (decode of one sequence) sends k
  // straight into its cache row and allocates no scratch where the cache has the activation dtype.
  const int64_t chunk = std::clamp<int64_t>(std::min(job.chunk, end - begin), 1, detail::kFusedChunkMax);
  const bool k_direct = job.k_direct && chunk == 1 && !pre_k;
  // Scratch rows only where a row must be staged (k in chunks, converted or pre-normed; strided v
  // heads): a token-per-call into a cache of the activation dtype allocates nothing.
  const hwy::AlignedFreeUniquePtr<T[]> k_rows =
      k_direct ? nullptr : hwy::AllocateAligned<T>(static_cast<size_t>(chunk) * n);
  const hwy::AlignedFreeUniquePtr<T[]> v_row = detail::TokenRowCopies(v) ? hwy::AllocateAligned<T>(n) : nullptr;
  // Each call rotates a chunk of tokens: q from its rows into q_out's (token strides), k into its cache
  // row or the dense scratch rows.
  if (iq >= 0)
    rj.tensors[iq] = {nullptr,
                      nullptr,
                      q.heads,
                      pre_q ? qo.token_stride : q.token_stride,
                      pre_q ? qo.head_stride : q.head_stride,
                      qo.token_stride,
                      qo.head_stride,
                      pre_q ? nullptr : qn,
                      stream_q};
  rj.tensors[ik] = {nullptr,
                    nullptr,
                    k.heads,
                    pre_k ? static_cast<int64_t>(n) : k.token_stride,
                    pre_k ? k.head_dim : k.head_stride,
                    static_cast<int64_t>(n),
                    k.head_dim,
                    pre_k ? nullptr : kn,
                    stream_kv && k_direct};
  const size_t row_lines = detail::CosSinRowLines(*job.rope.table);
  // The scattered rows of tokens [from, to): cos/sin at their positions and their cache rows
  // (kv_cache-inl.hpp's PrefetchCacheRow), the cos/sin rows into L2 where the cache rows go there.
  const bool whole_rows = WholeRowPrefetch(slot_bytes);
  const auto prefetch_rows = [&](int64_t from, int64_t to) {
    for (int64_t t = from; t < std::min(to, end); ++t) {
      detail::PrefetchCosSinRows(*job.rope.table, job.rope.positions[t], row_lines, whole_rows);
      if (stream_kv) continue;
      for (const std::byte* row : {cache.k_row(job.layer, job.slots[t]), cache.v_row(job.layer, job.slots[t])})
        PrefetchCacheRow(row, slot_bytes);
    }
  };
  prefetch_rows(begin, begin + chunk);
  for (int64_t t0 = begin; t0 < end; t0 += chunk) {
    const int64_t m = std::min(chunk, end - t0), next = t0 + m;
    // The next chunk's scattered rows, and the first lines of its first token's q, k and q_out rows, so
    // the L2 streamer has found each stream before it starts.
    prefetch_rows(next, next + chunk);
    if (next < end) {
      PrefetchHead(k.at<const T>(next, 0), kStreamHead);
      if (iq >= 0) {
        PrefetchHead(q.at<const T>(next, 0), kStreamHead);
        if (!stream_q) PrefetchHead(qo.at<T>(next, 0), kStreamHead);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = t0 + i;
      if (pre_q)
        NormTokenRows<T>(*qn, q.at<const T>(t, 0), q.head_stride, qo.at<T>(t, 0), qo.head_stride, q.heads, q.head_dim);
      if (pre_k) {
        NormTokenRows<T>(*kn, k.at<const T>(t, 0), k.head_stride, k_rows.get() + static_cast<size_t>(i) * n, k.head_dim,
                         k.heads, k.head_dim);
      }
    }
    rj.positions = job.rope.positions + t0;
    if (iq >= 0) {
      rj.tensors[iq].in = pre_q ? qo.at<const T>(t0, 0) : q.at<const T>(t0, 0);
      rj.tensors[iq].out = qo.at<T>(t0, 0);
    }
    rj.tensors[ik].in = pre_k ? static_cast<const void*>(k_rows.get()) : k.at<const T>(t0, 0);
    rj.tensors[ik].out =
        k_direct ? static_cast<void*>(cache.k_row(job.layer, job.slots[t0])) : static_cast<void*>(k_rows.get());
    detail::RopeTokens(rj, 0, m);
    // While the cache rows are converted (no loads to hide them behind: the stream would idle), the next
    // token's q heads a lookahead on (zen5, cold, 1 thread, bfloat16 -> q8_0 4.39-4.40 -> 4.01-4.21 ms).
    if (next < end && iq >= 0) PrefetchHeads<T>(q, next, detail::kPrefetchAhead / 2, 3 * detail::kPrefetchAhead / 2);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = t0 + i, slot = job.slots[t];
      if (job.q_scale != nullptr) {
        for (int64_t h = 0; h < qo.heads; ++h)
          ScaleRow(qo.at<T>(t, h), static_cast<size_t>(qo.head_dim), job.q_scale[t]);
      }
      const T* v_src = static_cast<const T*>(detail::TokenRow(v, t, v_row.get()));
      std::byte* k_dst = cache.k_row(job.layer, slot);
      std::byte* v_dst = cache.v_row(job.layer, slot);
      const T* kr = k_direct ? nullptr : k_rows.get() + static_cast<size_t>(i) * n;
      if (!k_direct) CacheRowFrom<T>(kr, cache.type, k_dst, n, detail::KeyScale(cache), stream_kv);
      CacheRowFrom<T>(v_src, cache.type, v_dst, n, detail::ValueScale(cache), stream_kv);
    }
  }
  if (stream_q || stream_kv) hwy::FlushStream();
}

// The exported per-target entry point.
void FusedTokensTarget(const detail::FusedRopeJob& job, int64_t begin, int64_t end) {
  VisitFloatDType(job.q.dtype, [&](auto tag) { FusedTokensT<typename decltype(tag)::type>(job, begin, end); });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
