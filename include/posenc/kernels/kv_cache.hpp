// KV caches as engines hold them, and the write of keys and values into one.
//
// A cache holds, per layer, `slots` token rows for keys and as many for values; a row is a token's
// kv_heads x head_dim values in the cache type: [layers][slots][kv_heads][head_dim] for float32,
// float16 and bfloat16, and for Q8_0 the same kv_heads * head_dim values as blocks of 32 (ggml's
// block_q8_0, consecutive along the row as llama.cpp quantizes a K/V cache row, so a block may span
// two heads). Both of the usual arrangements are this one array, addressed by slot:
//   * contiguous: sequence s owns slots [s * max_seq_len, (s + 1) * max_seq_len), a token at cache
//     offset p of sequence s is slot s * max_seq_len + p (ContiguousKvSlots);
//   * paged (vLLM's block tables, llama.cpp's unified cache): slots are pages of page_size rows; a
//     sequence's block table names its pages, a token at position p of sequence s is slot
//     block_table[s][p / page_size] * page_size + p % page_size (PagedKvSlots).
// Kernels take one slot per token, so packed batches, left padding and scattered decode are the
// caller's choice of slots, never a special case.
//
// Float8 caches (float8_e4m3fn, float8_e5m2: one byte per value, [layers][slots][kv_heads][head_dim])
// store fp8(x / scale) with PyTorch's conversion (core/dtype.hpp: round to nearest even; e4m3fn has no
// infinity, so |x / scale| > 464 and infinities become NaN; e5m2 overflows to infinity), the division
// in float32. The scale is per tensor (k_scale / v_scale of one value) or per head (kv_heads values,
// head h's values divided by scale[h]), as vLLM's and FlashInfer's k_scale / v_scale; an empty span
// means 1. Reading back: x ~ float(code) * scale.
// Q8_0 quantizes as ggml's quantize_row_q8_0_ref (QuantizeRowQ8_0Reference, core/dtype.hpp).
// Non-finite values give an unspecified block (as in ggml). Float16/bfloat16 inputs are widened
// exactly to float32 first.
//
// Example (paged cache, 16-row pages, float16):
//   KvCacheView cache{k_mem, v_mem, KvCacheType::kF16, /*layers=*/32, /*slots=*/pages * 16, 8, 128};
//   auto slots = PagedKvSlots(table, seq_ids, positions).value();
//   Status s = StoreKvCache(cache, layer, slots, k_view, v_view);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/core/array.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class ParallelRunner;  // posenc/core/parallel.hpp

// A cache's element type is a DType (core/dtype.hpp), one of IsKvCacheType's.
using KvCacheType = DType;
// float32, float16, bfloat16, q8_0, float8_e4m3fn, float8_e5m2.
bool IsKvCacheType(DType type);
// ParseDType's names of the types IsKvCacheType accepts.
bool ParseKvCacheType(std::string_view name, KvCacheType* out);

// One layer-major cache of keys and values over caller memory (not owned).
struct KvCacheView {
  void* k = nullptr;
  void* v = nullptr;
  KvCacheType type = KvCacheType::kF32;
  int64_t layers = 1;
  int64_t slots = 0;  // token rows per layer
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // Float8 caches only: the divisors of keys and values, 1 (per tensor) or kv_heads (per head) finite
  // values > 0, or empty (1). Not owned; read by every write.
  std::span<const float> k_scale = {};
  std::span<const float> v_scale = {};

  // Bytes of one token row (kv_heads * head_dim values; Q8_0: / 32 blocks of 34 bytes).
  int64_t slot_bytes() const;
  // Bytes of all of k (or of v): layers * slots * slot_bytes().
  int64_t bytes() const;
  std::byte* k_row(int64_t layer, int64_t slot) const {
    return static_cast<std::byte*>(k) + (layer * slots + slot) * slot_bytes();
  }
  std::byte* v_row(int64_t layer, int64_t slot) const {
    return static_cast<std::byte*>(v) + (layer * slots + slot) * slot_bytes();
  }
  // k and v set and disjoint, dims >= 0 (layers, kv_heads, head_dim > 0), sizes that fit in
  // int64, for Q8_0 kv_heads * head_dim a multiple of 32, and scales only on float8 caches, each
  // finite and > 0, 0, 1 or kv_heads of them; the error names the field and value.
  Status Validate() const;
};

// Slots of a contiguous cache: slot = seq_ids[i] * max_seq_len + offsets[i]. Errors name the token
// index and value: a sequence outside [0, num_sequences), an offset outside [0, max_seq_len).
Result<std::vector<int64_t>> ContiguousKvSlots(int64_t num_sequences, int64_t max_seq_len,
                                               std::span<const int64_t> seq_ids, std::span<const int64_t> offsets);

// Block tables of a paged cache: block_table[s * max_pages_per_seq + j] is page j of sequence s (-1:
// none); the cache has num_pages * page_size slots.
struct PagedKvTable {
  int64_t page_size = 16;
  int64_t num_pages = 0;
  int64_t max_pages_per_seq = 0;
  std::span<const int32_t> block_table;  // [sequences, max_pages_per_seq]
  int64_t num_sequences() const { return max_pages_per_seq > 0 ? int64_t(block_table.size()) / max_pages_per_seq : 0; }
};
// slot = block_table[s][p / page_size] * page_size + p % page_size per token. Errors name the token
// index and the value: a sequence outside the table, a position past its pages, a page that is -1 or
// outside [0, num_pages); page_size <= 0 or a table of the wrong size is InvalidArgument.
Result<std::vector<int64_t>> PagedKvSlots(const PagedKvTable& table, std::span<const int64_t> seq_ids,
                                          std::span<const int64_t> positions);

// Every slot in [0, cache.slots) (OutOfRange naming the token index and slot) and no slot written
// twice (InvalidArgument naming both token indices and the slot). Used by every cache write.
Status ValidateKvSlots(const KvCacheView& cache, std::span<const int64_t> slots);

// The unfused write: row `slots[t]` of layer `layer` gets k[t] (and v[t]), converted to the cache
// type (float types: rounding to nearest even, a plain copy when the types match; Q8_0 as above).
// k and v: [T, cache.kv_heads, cache.head_dim] views of float32/float16/bfloat16 (one dtype); either
// may be empty (tokens == 0) to write only the other. Nothing is written on error. Split over
// `parallel` (nullptr: the internal pool); results do not depend on it.
Status StoreKvCache(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, HeadsView k, HeadsView v,
                    ParallelRunner* parallel = nullptr);
// The scalar reference of StoreKvCache: plain loops, the oracle the fast path is tested against.
Status StoreKvCacheReference(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, HeadsView k,
                             HeadsView v);

}  // namespace posenc
