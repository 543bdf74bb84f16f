// Rows of ggml tensors in their stored types, dequantized to float32 one row at a time.
//
// A ggml tensor with dims [ne0, ne1, ...] is a row-major stack of rows of ne0 elements; each row is
// ne0 / block_size blocks of type_size bytes (TraitsOf(dtype), core/dtype.hpp; a GGUF tensor's type id
// maps to its DType at the reader, DTypeOfGgmlType). An embedding table
// `token_embd.weight` dims [d_model, vocab] is vocab rows of d_model values. Only the rows asked for
// are read and dequantized, so looking up T ids from a table of any size touches T rows.
//
// Supported types (the ones token-embedding tables ship in): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K. Any other type is kUnimplemented naming the type. The block layouts are
// those of ggml's ggml-common.h; values are computed in float32 as ggml's reference dequantizers do,
// so the rows equal what llama.cpp reads.
//
// Thread-safety: pure functions of their inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "posenc/core/array.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// True for the types listed above.
bool IsDequantizable(DType dtype);

// Dequantizes one row of `row_length` elements from `row` (row_length / block_size whole blocks).
// Trusts its inputs (the scalar path behind the checked functions below); `type` must be dequantizable
// and row_length a multiple of the block size.
void DequantizeRowUnchecked(DType dtype, const std::byte* row, int64_t row_length, float* out);

// out[(r - row_begin) * row_length + j] = element j of row r, for r in [row_begin, row_begin + row_count).
// `data` is the whole tensor. kUnimplemented for a type not listed; kInvalidArgument when row_length is
// not a positive multiple of the block size; kOutOfRange when the rows lie past `data` (naming the row).
Status DequantizeRows(DType dtype, std::span<const std::byte> data, int64_t row_length, int64_t row_begin,
                      int64_t row_count, float* out);

// A read-only table of rows in any ggml type (an embedding or position table inside a model file).
struct QuantizedTable {
  std::span<const std::byte> data;  // the whole tensor
  DType dtype = DType::kF32;
  int64_t rows = 0;        // vocab (or positions)
  int64_t row_length = 0;  // d_model

  // Checks the type is dequantizable, row_length is a multiple of its block size and rows fit `data`.
  Status Validate() const;
  // These rows as an EmbeddingTable for every lookup in kernels/embedding.hpp (after Validate): F32,
  // F16 and BF16 rows at addresses aligned for their type are a plain float table read in place;
  // every other type, and float rows at unaligned addresses (a safetensors offset may be odd), is a
  // decoded table whose rows DequantizeRowUnchecked decodes. `data` must outlive the result (this
  // struct need not).
  Result<EmbeddingTable> AsEmbeddingTable() const;
};

// out[i] = row ids[i] * multiplier (+ options.add_rows[i]), shape [ids.size(), row_length], in
// options.out_dtype: LookupEmbeddings(AsEmbeddingTable(), ids, options), so every option means the
// same as for a float table and is checked the same way (ValidateLookup: a non-finite multiplier,
// an output dtype other than float32 or bfloat16 and a bad id are errors naming the value); rows are
// dequantized to float32, then multiplied, added and rounded once exactly as a float32 table's rows,
// split over options.parallel. Memory: the output plus a small scratch tile per thread.
Result<Array> LookupRows(const QuantizedTable& table, std::span<const int64_t> ids, const LookupOptions& options = {});

}  // namespace posenc
