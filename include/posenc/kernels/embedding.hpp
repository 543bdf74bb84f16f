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
#include <span>
#include <string_view>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class ParallelRunner;  // posenc/parallel.hpp

// A read-only view of an embedding table in its stored format: rows of `d_model` elements, row r at
// data + r * row_stride elements (float types). Quantized tables (GGUF block types) are read by the
// io layer, which dequantizes only the rows asked for. The memory must outlive the view.
struct EmbeddingTable {
  const void* data = nullptr;
  DType dtype = DType::kF32;  // kF32, kF16 or kBF16
  int64_t vocab = 0;
  int64_t d_model = 0;
  int64_t row_stride = 0;  // elements between rows; d_model for a dense table

  static EmbeddingTable View(const void* data, DType dtype, int64_t vocab, int64_t d_model) {
    return {data, dtype, vocab, d_model, d_model};
  }
  static Result<EmbeddingTable> Of(const Array& a, const char* what);  // a 2-d float array
  Status Validate() const;
};

struct LookupOptions {
  float multiplier = 1.0f;           // Gemma scales rows by sqrt(d_model); applied in float32
  DType out_dtype = DType::kF32;     // kF32 or kBF16
  // Fused absolute positions: when set, [ids.size(), d_model] float32 rows p added after the
  // multiplier in float32, x_t = e_t * multiplier + p_t, in the same pass (then rounded once to
  // out_dtype). Equals LookupEmbeddings followed by AddPositions for float32 output.
  const float* add_rows = nullptr;
  // Threads for the fast path: nullptr uses posenc's internal pool; results are bit-identical for
  // every runner. The reference ignores it.
  ParallelRunner* parallel = nullptr;
};

// out[i] = table[ids[i]] * multiplier. An id outside [0, vocab) is kOutOfRange naming the id, its
// index in `ids` and the vocabulary size; nothing is returned then. Result shape [ids.size(), d_model].
Result<Array> LookupEmbeddings(const EmbeddingTable& table, std::span<const int64_t> ids,
                               const LookupOptions& options = {});
// Checks every id (one pass) and reports the first bad one, as above.
Status ValidateTokenIds(std::span<const int64_t> ids, int64_t vocab);
// Writes into caller memory out[ids.size() * d_model] of options.out_dtype (no validation of ids:
// call ValidateTokenIds first). The scalar reference of the lookup kernel.
void LookupEmbeddingsReference(const EmbeddingTable& table, std::span<const int64_t> ids,
                               const LookupOptions& options, void* out);
// The fast (SIMD, threaded) lookup into caller memory out[ids.size() * d_model] of
// options.out_dtype, which must not overlap the table or add_rows. Validates as LookupEmbeddings
// (nothing is written on error). Bit-identical to LookupEmbeddingsReference.
Status LookupEmbeddingsInto(const EmbeddingTable& table, std::span<const int64_t> ids,
                            const LookupOptions& options, void* out);

// The lookup's gradient, a deterministic scatter-add: for i = 0, 1, ... in order,
//   grad_table[ids[i], :] += multiplier * grad_out[i, :]      (float32, multiply then add)
// grad_out is [ids.size(), d_model] float32, grad_table [vocab, d_model] float32 (accumulated into).
// Repeated ids accumulate in index order whatever the thread count (threads split the columns), so
// the result is bit-identical for any runner and equals EmbeddingBackwardReference. kOutOfRange for
// a bad id (nothing written), kInvalidArgument for d_model <= 0 or null pointers with work to do.
Status EmbeddingBackward(std::span<const int64_t> ids, const float* grad_out, int64_t d_model, float multiplier,
                         float* grad_table, int64_t vocab, ParallelRunner* parallel = nullptr);
void EmbeddingBackwardReference(std::span<const int64_t> ids, const float* grad_out, int64_t d_model,
                                float multiplier, float* grad_table);

// The learned table's rows p_t (GPT-2 wpe): a position at or past the table's rows is kOutOfRange
// naming the position, its index and the table size (never a wrap).
Result<Array> LookupLearnedPositions(const EmbeddingTable& wpe, std::span<const int64_t> positions);

// x += p for two float32 [T, d_model] arrays; kInvalidArgument if the shapes differ.
Status AddPositions(const Array& p, Array& x);

}  // namespace posenc
