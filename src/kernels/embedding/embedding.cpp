// Fast embedding lookup (gather rows, scale, optional fused position add, round to the output type)
// and its deterministic scatter-add gradient: Highway per-target code plus the validated entry points.
// Same float32 operations in the same order as the references in embedding_ref.cpp (multiply, then
// add, no fused multiply-add), so results are bit-identical to them. Decoded tables (ggml block types,
// unaligned rows) decode a tile of rows to float32 scratch and run the float32 gather over it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/embedding/embedding.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd/convert-inl.hpp"

#if defined(POSENC_KERNELS_GATHER_TOGGLE_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_GATHER_TOGGLE_
#undef POSENC_KERNELS_GATHER_TOGGLE_
#else
#define POSENC_KERNELS_GATHER_TOGGLE_
#endif

#include <cstring>
#include <type_traits>

#include <hwy/cache_control.h>

#include "posenc/kernels/embedding.hpp"
#include "posenc/kernels/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kStream, class D, class V, typename T>
HWY_INLINE void StoreOut(D d, V v, T* p) {
  if constexpr (kStream) {
    hn::Stream(v, d, p);
  } else {
    hn::StoreU(v, d, p);
  }
}

// Destination lines are prefetched this many bytes ahead of the stores where StorePrefetchPolicy() says
// so (not with streaming stores, which skip reading the lines).
inline constexpr size_t kStoreAhead = 4096;

// Row i of a lookup of rows [.., end): its table row, its output row (d_model values), and the table row to
// fetch while it is copied: rows are scattered, so the next row is fetched at the same column, and the
// hardware prefetcher (which stops at page boundaries) is not the only source of reads ahead. The last
// row fetches itself.
template <typename In, typename Out>
struct GatherRow {
  const In* src;
  Out* dst;
  const char* next;
};

template <typename In, typename Out>
HWY_INLINE GatherRow<In, Out> RowAt(const EmbeddingTable& table, const int64_t* ids, int64_t i, int64_t end, Out* out) {
  const In* base = static_cast<const In*>(table.data);
  const In* src = base + ids[i] * table.row_stride;
  Out* dst = out + static_cast<size_t>(i) * static_cast<size_t>(table.d_model);
  return {src, dst, reinterpret_cast<const char*>(i + 1 < end ? base + ids[i + 1] * table.row_stride : src)};
}

template <typename In, typename Out, bool kStream>
void GatherRowsT(const EmbeddingTable& table, const int64_t* ids, int64_t begin, int64_t end, float multiplier,
                 const float* add, bool prefetch_dst, Out* out) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  const size_t d = static_cast<size_t>(table.d_model);
  const auto m = hn::Set(df, multiplier);
  for (int64_t i = begin; i < end; ++i) {
    const auto [src, dst, next] = RowAt<In>(table, ids, i, end, out);
    const float* p = add != nullptr ? add + static_cast<size_t>(i) * d : nullptr;
    size_t c = 0;
    if constexpr (kStream && std::is_same_v<Out, float>) {  // float32 output, aligned rows
      if (p == nullptr) {
        for (; c + N <= d; c += N) {
          hwy::Prefetch(next + c * sizeof(In));
          hn::Stream(hn::Mul(LoadF(df, src + c), m), df, dst + c);
        }
      } else {
        for (; c + N <= d; c += N) {
          hwy::Prefetch(next + c * sizeof(In));
          hn::Stream(hn::Add(hn::Mul(LoadF(df, src + c), m), hn::LoadU(df, p + c)), df, dst + c);
        }
      }
    } else if (p == nullptr) {
      for (; c + N <= d; c += N) {
        hwy::Prefetch(next + c * sizeof(In));
        if (prefetch_dst) hwy::Prefetch(reinterpret_cast<const char*>(dst + c) + kStoreAhead);
        StoreF(df, hn::Mul(LoadF(df, src + c), m), dst + c);
      }
    } else {
      for (; c + N <= d; c += N) {
        hwy::Prefetch(next + c * sizeof(In));
        if (prefetch_dst) hwy::Prefetch(reinterpret_cast<const char*>(dst + c) + kStoreAhead);
        StoreF(df, hn::Add(hn::Mul(LoadF(df, src + c), m), hn::LoadU(df, p + c)), dst + c);
      }
    }
    for (; c < d; ++c) {  // tail: the reference's scalar code
      float v = LoadAsF32(src + c) * multiplier;
      if (p != nullptr) v += p[c];
      StoreFromF32(v, dst + c);
    }
  }
}

#if HWY_TARGET != HWY_SCALAR
// bfloat16 table to bfloat16 rows (no position add): two values per 32-bit lane, as the RoPE kernels
// (convert-inl.hpp), so neither widening loads nor narrowing packs are needed.
template <bool kStream>
void GatherRowsBF16Packed(const EmbeddingTable& table, const int64_t* ids, int64_t begin, int64_t end, float multiplier,
                          bool prefetch_dst, bf16_t* out) {
  const DF df;
  const DU du;
  const size_t N = hn::Lanes(df);  // 32-bit lanes; 2N bfloat16 per vector
  const size_t d = static_cast<size_t>(table.d_model);
  const auto m = hn::Set(df, multiplier);
  for (int64_t i = begin; i < end; ++i) {
    const auto [src, dst, next] = RowAt<bf16_t>(table, ids, i, end, out);
    size_t c = 0;
    for (; c + 4 * N <= d; c += 4 * N) {
      hwy::Prefetch(next + 2 * c);
      if (!kStream && prefetch_dst) hwy::Prefetch(reinterpret_cast<const char*>(dst + c) + kStoreAhead);
      const auto x0 = hn::LoadU(du, reinterpret_cast<const uint32_t*>(src + c));
      const auto x1 = hn::LoadU(du, reinterpret_cast<const uint32_t*>(src + c + 2 * N));
      const auto lo0 = hn::Mul(LowBF16(x0), m), hi0 = hn::Mul(HighBF16(x0), m);
      const auto lo1 = hn::Mul(LowBF16(x1), m), hi1 = hn::Mul(HighBF16(x1), m);
      uint32_t* o = reinterpret_cast<uint32_t*>(dst + c);
      StoreOut<kStream>(du, PackBF16Computed(lo0, hi0), o);
      StoreOut<kStream>(du, PackBF16Computed(lo1, hi1), o + N);
    }
    for (; c < d; ++c) StoreFromF32(LoadAsF32(src + c) * multiplier, dst + c);
  }
}
#endif

// Rows [begin, end) of a lookup of `total_rows` rows.
void GatherTarget(const EmbeddingTable& table, const int64_t* ids, int64_t begin, int64_t end, int64_t total_rows,
                  const LookupOptions& o, void* out) {
  const bool bf16_out = o.out_dtype == DType::kBF16;
  const size_t d = static_cast<size_t>(table.d_model);
  const size_t out_row_bytes = d * (bf16_out ? 2 : 4);
  const size_t vec_bytes = hn::Lanes(hn::ScalableTag<float>()) * 4;
  // Streaming (StreamStoreMinBytes) needs every row start aligned to the vector size, and whole vectors per row.
  const bool stream = HWY_TARGET != HWY_SCALAR &&
                      static_cast<size_t>(total_rows) * out_row_bytes >= StreamStoreMinBytes() &&
                      reinterpret_cast<uintptr_t>(out) % vec_bytes == 0 && out_row_bytes % vec_bytes == 0;
  const bool pf = StorePrefetchPolicy().gather_rows;
#if HWY_TARGET != HWY_SCALAR
  if (bf16_out && table.dtype == DType::kBF16 && o.add_rows == nullptr) {
    if (stream)
      GatherRowsBF16Packed<true>(table, ids, begin, end, o.multiplier, false, static_cast<bf16_t*>(out));
    else
      GatherRowsBF16Packed<false>(table, ids, begin, end, o.multiplier, pf, static_cast<bf16_t*>(out));
    if (stream) hwy::FlushStream();
    return;
  }
#endif
#define POSENC_GATHER_CASE(In)                                                                                       \
  if (bf16_out)                                                                                                      \
    GatherRowsT<In, bf16_t, false>(table, ids, begin, end, o.multiplier, o.add_rows, pf, static_cast<bf16_t*>(out)); \
  else if (stream)                                                                                                   \
    GatherRowsT<In, float, true>(table, ids, begin, end, o.multiplier, o.add_rows, false, static_cast<float*>(out)); \
  else                                                                                                               \
    GatherRowsT<In, float, false>(table, ids, begin, end, o.multiplier, o.add_rows, pf, static_cast<float*>(out));
  switch (table.dtype) {
    case DType::kF32: POSENC_GATHER_CASE(float) break;
    case DType::kF16: POSENC_GATHER_CASE(f16_t) break;
    case DType::kBF16: POSENC_GATHER_CASE(bf16_t) break;
    default: break;  // validated at the boundary
  }
#undef POSENC_GATHER_CASE
  if (stream) hwy::FlushStream();
}

// Columns [c0, c1) of the gradient: every id in order, so repeated ids accumulate in index order.
void ScatterAddTarget(const int64_t* ids, int64_t count, const float* grad_out, int64_t d_model, float multiplier,
                      float* grad_table, int64_t c0, int64_t c1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto m = hn::Set(df, multiplier);
  for (int64_t i = 0; i < count; ++i) {
    const float* g = grad_out + i * d_model;
    float* t = grad_table + ids[i] * d_model;
    int64_t c = c0;
    for (; c + N <= c1; c += N) hn::StoreU(hn::Add(hn::LoadU(df, t + c), hn::Mul(m, hn::LoadU(df, g + c))), df, t + c);
    for (; c < c1; ++c) {
      const float v = multiplier * g[c];
      t[c] = t[c] + v;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/parallel.hpp"

namespace posenc {
HWY_EXPORT(GatherTarget);
HWY_EXPORT(ScatterAddTarget);

namespace {

// Decoded tables: rows [begin, end) of the lookup decoded a tile at a time into float32 scratch (at most
// kDecodeTileBytes, so the tile stays in L1/L2 between the decode and the gather), then the float32
// table's gather over the tile with ids 0, 1, ...: the same operations per element as a float32 table,
// so the result does not depend on the tiling or the thread split.
inline constexpr int64_t kDecodeTileBytes = int64_t{32} << 10;

void GatherDecoded(const EmbeddingTable& table, std::span<const int64_t> ids, int64_t begin, int64_t end,
                   const LookupOptions& options, void* out) {
  const int64_t d = table.d_model;
  const int64_t tile = std::min(std::max<int64_t>(1, kDecodeTileBytes / (4 * d)), end - begin);
  const int64_t n = static_cast<int64_t>(ids.size());
  const size_t out_row_bytes = static_cast<size_t>(d) * SizeOf(options.out_dtype);
  std::vector<float> scratch(static_cast<size_t>(tile * d));
  std::vector<int64_t> local(static_cast<size_t>(tile));
  for (size_t k = 0; k < local.size(); ++k) local[k] = static_cast<int64_t>(k);
  for (int64_t t0 = begin; t0 < end; t0 += tile) {
    const int64_t rows = std::min(tile, end - t0);
    for (int64_t r = 0; r < rows; ++r) table.decode_row(ids[static_cast<size_t>(t0 + r)], scratch.data() + r * d);
    const EmbeddingTable view = EmbeddingTable::View(scratch.data(), DType::kF32, rows, d);
    LookupOptions o = options;
    o.add_rows = options.add_rows != nullptr ? options.add_rows + t0 * d : nullptr;
    HWY_DYNAMIC_DISPATCH(GatherTarget)
    (view, local.data(), 0, rows, n, o, static_cast<char*>(out) + static_cast<size_t>(t0) * out_row_bytes);
  }
}

// The validated lookup's work (ValidateLookup passed, ids and d_model non-empty, out non-null).
void RunLookup(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options, void* out) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t in_bytes = static_cast<int64_t>(table.decoded() ? 4 : SizeOf(table.dtype));
  const int64_t bytes = n * table.d_model * (in_bytes + static_cast<int64_t>(SizeOf(options.out_dtype)));
  ParallelFor(options.parallel, n, bytes, [&](int64_t b, int64_t e) {
    if (table.decoded())
      GatherDecoded(table, ids, b, e, options, out);
    else
      HWY_DYNAMIC_DISPATCH(GatherTarget)(table, ids.data(), b, e, n, options, out);
  });
}

}  // namespace

Status LookupEmbeddingsInto(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options,
                            void* out) {
  POSENC_RETURN_IF_ERROR(ValidateLookup(table, ids, options));
  if (ids.empty() || table.d_model == 0) return OkStatus();
  if (out == nullptr) return InvalidArgumentError("embedding lookup: null output for a non-empty lookup");
  RunLookup(table, ids, options, out);
  return OkStatus();
}

Result<Array> LookupEmbeddings(const EmbeddingTable& table, std::span<const int64_t> ids,
                               const LookupOptions& options) {
  POSENC_RETURN_IF_ERROR(ValidateLookup(table, ids, options));
  POSENC_ASSIGN_OR_RETURN(Array out,
                          Array::Zeros(options.out_dtype, {static_cast<int64_t>(ids.size()), table.d_model}));
  if (!ids.empty() && table.d_model > 0) RunLookup(table, ids, options, out.bytes());
  return out;
}

Status EmbeddingBackward(std::span<const int64_t> ids, const float* grad_out, int64_t d_model, float multiplier,
                         float* grad_table, int64_t vocab, ParallelRunner* parallel) {
  if (d_model <= 0)
    return InvalidArgumentError(fmt::format("embedding backward: d_model {} must be positive", d_model));
  POSENC_RETURN_IF_ERROR(ValidateTokenIds(ids, vocab));
  if (ids.empty()) return OkStatus();
  if (grad_out == nullptr || grad_table == nullptr)
    return InvalidArgumentError("embedding backward: null grad_out or grad_table");
  // Threads own column blocks of 64 floats (whole cache lines), never rows: no two threads touch the
  // same element, and each element sums its contributions in index order.
  const int64_t block = 64;
  const int64_t blocks = (d_model + block - 1) / block;
  const int64_t count = static_cast<int64_t>(ids.size());
  ParallelFor(parallel, blocks, 3 * count * d_model * 4, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(ScatterAddTarget)
    (ids.data(), count, grad_out, d_model, multiplier, grad_table, b * block, std::min(e * block, d_model));
  });
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
