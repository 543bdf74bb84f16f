// Token embeddings e_t (a table [vocab, d_model] looked up by token id) and absolute positions
// x_t = e_t + p_t: the sinusoidal tables of Vaswani et al. (2017) and the learned table of GPT-2.
//
// Example:
//   EmbeddingTable table = EmbeddingTable::View(weights, DType::kF32, vocab, d_model);
//   Array x = LookupEmbeddings(table, ids).value();            // [ids.size(), d_model] float32
//   Array p = SinusoidalTable(positions, d_model, SinusoidalLayout::kInterleaved).value();  // math/sinusoidal.hpp
//   Status s = AddPositions(p, x);                               // x_t += p_t
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <utility>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class ParallelRunner;  // posenc/core/parallel.hpp

// A read-only view of an embedding table: rows of `d_model` elements, either stored as float rows the
// kernels read directly (row r at data + r * row_stride elements of dtype), or decoded to float32 one
// row at a time by `decode_row` (ggml block types such as Q8_0 or Q4_K, and float rows at unaligned
// addresses: io/quant.hpp's QuantizedTable::AsEmbeddingTable builds these). Every lookup below takes
// either kind with the same options and the same validation. The memory must outlive the view.
struct EmbeddingTable {
  const void* data = nullptr;
  DType dtype = DType::kF32;  // kF32, kF16 or kBF16 (unused when decode_row is set)
  int64_t vocab = 0;
  int64_t d_model = 0;
  int64_t row_stride = 0;  // elements between rows; d_model for a dense table (unused when decoded)
  // When set: writes the d_model float32 values of row `row` (in [0, vocab), already checked) to
  // `out`. Called from several threads at once for different rows, so it must be thread-safe; the
  // float32 row then goes through the same multiplier, position add and rounding as a float32 table.
  std::function<void(int64_t row, float* out)> decode_row;

  static EmbeddingTable View(const void* data, DType dtype, int64_t vocab, int64_t d_model) {
    return {data, dtype, vocab, d_model, d_model, nullptr};
  }
  // Rows `row_stride` elements apart (a padded or interleaved table).
  static EmbeddingTable Strided(const void* data, DType dtype, int64_t vocab, int64_t d_model, int64_t row_stride) {
    return {data, dtype, vocab, d_model, row_stride, nullptr};
  }
  // A table of `vocab` rows decoded by `decode` (see decode_row).
  static EmbeddingTable Decoded(int64_t vocab, int64_t d_model, std::function<void(int64_t, float*)> decode) {
    return {nullptr, DType::kF32, vocab, d_model, d_model, std::move(decode)};
  }
  static Result<EmbeddingTable> Of(const Array& a, const char* what);  // a 2-d float array
  bool decoded() const { return static_cast<bool>(decode_row); }
  Status Validate() const;
};

struct LookupOptions {
  float multiplier = 1.0f;        // Gemma scales rows by sqrt(d_model); applied in float32; finite
  DType out_dtype = DType::kF32;  // kF32 or kBF16
  // Fused absolute positions: when set, [ids.size(), d_model] float32 rows p added after the
  // multiplier in float32, x_t = e_t * multiplier + p_t, in the same pass (then rounded once to
  // out_dtype). Equals LookupEmbeddings followed by AddPositions for float32 output.
  const float* add_rows = nullptr;
  // Threads for the fast path: nullptr uses posenc's internal pool; results are bit-identical for
  // every runner. The reference ignores it.
  ParallelRunner* parallel = nullptr;
};

// The one check behind every lookup entry point (float, decoded and strided tables alike): the table
// (EmbeddingTable::Validate), then the options (multiplier finite, else kInvalidArgument naming the
// value; out_dtype float32 or bfloat16, else kInvalidArgument naming it), then the ids
// (ValidateTokenIds). add_rows and parallel are honoured by every table kind, so they need no check.
Status ValidateLookup(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options);
// Checks every id (one pass) and reports the first bad one: kOutOfRange "token id ID at index I is
// outside the vocabulary [0, VOCAB)".
Status ValidateTokenIds(std::span<const int64_t> ids, int64_t vocab);

// out[i] = table[ids[i]] * multiplier (+ add_rows[i]). Validated by ValidateLookup; nothing is
// returned on error. Result shape [ids.size(), d_model] of options.out_dtype. The fast path.
Result<Array> LookupEmbeddings(const EmbeddingTable& table, std::span<const int64_t> ids,
                               const LookupOptions& options = {});
// Writes into caller memory out[ids.size() * d_model] of options.out_dtype (no validation: call
// ValidateLookup first). The scalar reference of the lookup kernel, for float and decoded tables:
// a decoded row is decoded to float32, then treated as a float32 table's row.
void LookupEmbeddingsReference(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options,
                               void* out);
// The fast (SIMD, threaded) lookup into caller memory out[ids.size() * d_model] of
// options.out_dtype, which must not overlap the table or add_rows. Validates as LookupEmbeddings
// (nothing is written on error). Bit-identical to LookupEmbeddingsReference for any runner.
Status LookupEmbeddingsInto(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options,
                            void* out);

// The lookup's gradient, a deterministic scatter-add: for i = 0, 1, ... in order,
//   grad_table[ids[i], :] += multiplier * grad_out[i, :]      (float32, multiply then add)
// grad_out is [ids.size(), d_model] float32, grad_table [vocab, d_model] float32 (accumulated into).
// Repeated ids accumulate in index order whatever the thread count (threads split the columns), so
// the result is bit-identical for any runner and equals EmbeddingBackwardReference. kOutOfRange for
// a bad id (nothing written), kInvalidArgument for d_model <= 0 or null pointers with work to do.
Status EmbeddingBackward(std::span<const int64_t> ids, const float* grad_out, int64_t d_model, float multiplier,
                         float* grad_table, int64_t vocab, ParallelRunner* parallel = nullptr);
void EmbeddingBackwardReference(std::span<const int64_t> ids, const float* grad_out, int64_t d_model, float multiplier,
                                float* grad_table);

// The learned table's rows p_t (GPT-2 wpe): a position at or past the table's rows is kOutOfRange
// naming the position, its index and the table size (never a wrap).
Result<Array> LookupLearnedPositions(const EmbeddingTable& wpe, std::span<const int64_t> positions);

// x += p for two float32 [T, d_model] arrays; kInvalidArgument if the shapes differ.
Status AddPositions(const Array& p, Array& x);

}  // namespace posenc
