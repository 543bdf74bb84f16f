// Per-target fused RoPE + KV-cache write, included once per SIMD target by fused_rope.cpp
// (foreach_target.h). Per token, one pass over its bytes: q and k rotated by one call of the RoPE
// kernels (rope-inl.hpp through detail::RopeTokens, the same code ApplyRope runs, so the rotation is
// bit for bit ApplyRope's; with QK-norm each head is normed on the way, in the rotation's registers
// where the head is the whole window), k straight into its cache row when the cache has the activation dtype,
// else into an L1-resident row that is converted / quantized into the cache (kv_cache-inl.hpp), v
// converted from the input row to its cache row, and the query temperature multiplied into the
// just-written q row.
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

// The first min(bytes, kStreamHead) bytes of a row.
constexpr size_t kStreamHead = 256;
HWY_INLINE void PrefetchHead(const void* row, size_t bytes) {
  PrefetchLines(row, std::min(bytes, kStreamHead));
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
  const RopeTable& table = *job.rope.table;
  const size_t slot_bytes = static_cast<size_t>(cache.slot_bytes());
  const size_t row_lines = (static_cast<size_t>(table.num_pairs()) * sizeof(float) + 63) / 64;
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
  // Scratch rows only where a row must be staged (a converted or pre-normed k, strided v heads): the
  // common decode call into a cache of the activation dtype allocates nothing.
  const hwy::AlignedFreeUniquePtr<T[]> k_row = !job.k_direct || pre_k ? hwy::AllocateAligned<T>(n) : nullptr;
  const hwy::AlignedFreeUniquePtr<T[]> v_row = detail::TokenRowCopies(v) ? hwy::AllocateAligned<T>(n) : nullptr;
  // Large calls stream their q rows and cache rows from registers (job.stream_q, job.stream_cache; see
  // fused_rope.cpp), and do not prefetch those lines.
  const bool stream_q = job.stream_q && iq >= 0 && !pre_q, stream_kv = job.stream_cache;
  // One token per RopeTokens call; the token strides tell the QK-norm where the next token's heads are.
  if (iq >= 0)
    rj.tensors[iq] = {nullptr, nullptr, q.heads, pre_q ? qo.token_stride : q.token_stride,
                      pre_q ? qo.head_stride : q.head_stride, 0, qo.head_stride, pre_q ? nullptr : qn, stream_q};
  rj.tensors[ik] = {nullptr, nullptr, k.heads, pre_k ? 0 : k.token_stride, pre_k ? k.head_dim : k.head_stride, 0,
                    k.head_dim, pre_k ? nullptr : kn, stream_kv && job.k_direct};
  for (int64_t t = begin; t < end; ++t) {
    // The next token's streams: its cos/sin rows whole, and the first lines of each other row it
    // touches (its cache rows, scattered in decode; its q and k input rows; its q output row), so the
    // L2 streamer has found each stream before the token starts. Prefetching the whole cache rows
    // instead takes a fill buffer per line and measured the same or lower on cold decode (64 scattered
    // tokens, 1 thread, bfloat16 0.64 -> 0.72 of the roofline; 2026-12-01).
    if (t + 1 < end) {
      detail::PrefetchCosSinRows(table, job.rope.positions[t + 1], row_lines);
      if (!stream_kv) {
        PrefetchHead(cache.k_row(job.layer, job.slots[t + 1]), slot_bytes);
        PrefetchHead(cache.v_row(job.layer, job.slots[t + 1]), slot_bytes);
      }
      PrefetchHead(k.at<const T>(t + 1, 0), kStreamHead);
      if (iq >= 0) {
        PrefetchHead(q.at<const T>(t + 1, 0), kStreamHead);
        if (!stream_q) PrefetchHead(qo.at<T>(t + 1, 0), kStreamHead);
      }
    }
    const int64_t slot = job.slots[t];
    std::byte* k_dst = cache.k_row(job.layer, slot);
    rj.positions = job.rope.positions + t;
    if (iq >= 0) {
      rj.tensors[iq].in = q.at<const T>(t, 0);
      rj.tensors[iq].out = qo.at<T>(t, 0);
      if (pre_q) {
        NormTokenRows<T>(*qn, q.at<const T>(t, 0), q.head_stride, qo.at<T>(t, 0), qo.head_stride, q.heads, q.head_dim);
        rj.tensors[iq].in = qo.at<const T>(t, 0);
      }
    }
    rj.tensors[ik].in = k.at<const T>(t, 0);
    if (pre_k) {
      NormTokenRows<T>(*kn, k.at<const T>(t, 0), k.head_stride, k_row.get(), k.head_dim, k.heads, k.head_dim);
      rj.tensors[ik].in = k_row.get();
    }
    rj.tensors[ik].out = job.k_direct ? static_cast<void*>(k_dst) : static_cast<void*>(k_row.get());
    detail::RopeTokens(rj, 0, 1);
    if (job.q_scale != nullptr) {
      for (int64_t h = 0; h < qo.heads; ++h) ScaleRow(qo.at<T>(t, h), static_cast<size_t>(qo.head_dim), job.q_scale[t]);
    }
    // While the cache rows are converted (no loads to hide them behind: the stream would idle), the next
    // token's q heads a lookahead on: the rotation of k asked for up to about kPrefetchAhead / 2 into it
    // where q, k and v share a row (the projection output), and its own rotation starts kPrefetchAhead
    // ahead. zen5, cold, 1 thread, three runs alternating: bfloat16 -> q8_0 4.39-4.40 -> 4.01-4.21 ms,
    // -> float8 3.81-3.95 -> 3.50-3.78; the first 4 or 8 KiB of the row instead measured between.
    if (t + 1 < end && iq >= 0) PrefetchHeads<T>(q, t + 1, detail::kPrefetchAhead / 2, 3 * detail::kPrefetchAhead / 2);
    const T* v_src = static_cast<const T*>(detail::TokenRow(v, t, v_row.get()));
    std::byte* v_dst = cache.v_row(job.layer, slot);
    if (!job.k_direct) CacheRowFrom<T>(k_row.get(), cache.type, k_dst, n, detail::KeyScale(cache), stream_kv);
    CacheRowFrom<T>(v_src, cache.type, v_dst, n, detail::ValueScale(cache), stream_kv);
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
