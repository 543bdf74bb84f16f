// Internal to the KV-cache writers (kv_cache.cpp, kv_cache_ref.cpp, the fused RoPE kernels): the
// validated job of one cache write and the scalar row conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "posenc/kernels/kv_cache.hpp"

namespace posenc::detail {

// Checks k and v against the cache for StoreKvCache and the fused kernels: float storage views of
// [slots.size(), kv_heads, head_dim] (either may be empty), one dtype, a layer in range, the slots.
Status ValidateKvWrite(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, const HeadsView& k,
                       const HeadsView& v);

// The scalar conversion of one row of n values of `src_dtype` into the cache type at dst (float
// types element by element, a copy when the types match; Q8_0: widened to float32, then
// QuantizeRowQ8_0Reference, n a multiple of 32).
void StoreRowReference(DType src_dtype, const void* src, KvCacheType type, void* dst, int64_t n);

// Copies token t's heads of `x` into `row` (kv_heads * head_dim contiguous elements); returns a
// pointer to the token's row, which is x's own memory when its heads are contiguous already.
const void* TokenRow(const HeadsView& x, int64_t t, void* row);

// Tokens [begin, end) of StoreKvCache with the best enabled SIMD target (kv_cache.cpp).
void StoreKvTokens(const KvCacheView& cache, int64_t layer, const int64_t* slots, const HeadsView& k,
                   const HeadsView& v, int64_t begin, int64_t end);

}  // namespace posenc::detail
