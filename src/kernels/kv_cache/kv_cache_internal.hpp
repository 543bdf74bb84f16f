// Internal to the KV-cache writers (kv_cache.cpp, kv_cache_ref.cpp, the fused RoPE kernels): the
// validated job of one cache write and the scalar row conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/simd/memory.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc::detail {

// Checks k and v against the cache for StoreKvCache and the fused kernels: float storage views of
// [slots.size(), kv_heads, head_dim] (either may be empty), one dtype, a layer in range, the slots.
Status ValidateKvWrite(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, const HeadsView& k,
                       const HeadsView& v);

// The bytes a view spans, first element to one past the last (0 when empty), and whether two byte ranges
// share a byte: the cache writers' rule that no output shares memory with an input (fused_rope_ref.cpp,
// mla_cache_ref.cpp).
size_t SpanBytes(const HeadsView& v);
bool BytesOverlap(const void* a, size_t an, const void* b, size_t bn);

// A cache view's first checks, one rule for the KV and the MLA cache (`cache` names it in messages):
// `type` is a cache type, and `scale` (called `name`) is empty or, on float8 caches only, 1 value or
// `per_head` values (per_head 0: 1 value only), each finite and > 0.
Status CheckCacheTypeAndScale(const char* cache, KvCacheType type, const char* name, std::span<const float> scale,
                              int64_t per_head);

// A float8 row's divisors: none (1), one per tensor, or one per head of head_dim values.
struct RowScale {
  const float* scales = nullptr;
  size_t count = 0;
  int64_t head_dim = 1;
  float of_head(int64_t h) const { return count == 0 ? 1.0f : scales[count == 1 ? 0 : h]; }
};
inline RowScale KeyScale(const KvCacheView& c) { return {c.k_scale.data(), c.k_scale.size(), c.head_dim}; }
inline RowScale ValueScale(const KvCacheView& c) { return {c.v_scale.data(), c.v_scale.size(), c.head_dim}; }

// Whether a cache of `type` holds `dtype` values unchanged (float32, float16 or bfloat16 in the same type),
// so a kernel may write its results straight into the cache row.
inline bool StoresAsIs(KvCacheType type, DType dtype) {
  return (type == KvCacheType::kF32 && dtype == DType::kF32) || (type == KvCacheType::kF16 && dtype == DType::kF16) ||
         (type == KvCacheType::kBF16 && dtype == DType::kBF16);
}

// Bytes touched (computed in double: no overflow for any validated size) as ParallelFor's cost, saturated
// at INT64_MAX; for the threads-or-inline choice only.
inline int64_t TouchedBytes(double touched) { return touched > 9e18 ? INT64_MAX : static_cast<int64_t>(touched); }

// The scalar conversion of one row of n values of `src_dtype` into the cache type at dst (float
// types element by element, a copy when the types match; Q8_0: widened to float32, then
// QuantizeRowQ8_0Reference, n a multiple of 32; float8: F32ToF8*(float32(x) / scale of x's head)).
void StoreRowReference(DType src_dtype, const void* src, KvCacheType type, void* dst, int64_t n, RowScale scale = {});

// Copies token t's heads of `x` into `row` (kv_heads * head_dim contiguous elements); returns a
// pointer to the token's row, which is x's own memory when its heads are contiguous already
// (!TokenRowCopies(x): then `row` is not touched and may be null).
const void* TokenRow(const HeadsView& x, int64_t t, void* row);
inline bool TokenRowCopies(const HeadsView& x) { return x.heads > 1 && x.head_stride != x.head_dim; }

// Tokens [begin, end) of StoreKvCache with the best enabled SIMD target (kv_cache.cpp); `stream`:
// with streaming stores (StreamsCacheRows).
void StoreKvTokens(const KvCacheView& cache, int64_t layer, const int64_t* slots, const HeadsView& k,
                   const HeadsView& v, int64_t begin, int64_t end, bool stream);

// Whether a call writing `bytes` bytes of cache rows streams them (StoreKvCache, the fused kernel): a large
// write (StreamStoreMinBytes) into a cache whose heads (Q8_0: rows, staged per 64 blocks) are whole
// aligned lines.
inline bool StreamsCacheRows(const KvCacheView& c, double bytes) {
  const int64_t head =
      c.type == KvCacheType::kQ8_0 ? c.slot_bytes() : c.head_dim * static_cast<int64_t>(SizeOf(c.type));
  return bytes >= static_cast<double>(StreamStoreMinBytes()) &&
         StreamableRows(c.k, head, head) && StreamableRows(c.v, head, head);
}

}  // namespace posenc::detail
