// The embedding lookup's scalar reference (float tables and decoded ones) and the validation shared by
// every lookup entry point, beside the fast kernels in embedding.cpp (as rope_ref.cpp is beside
// rope.cpp); the gradient's reference; learned position rows and the position add.
#include "posenc/kernels/embedding.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace posenc {

Status EmbeddingTable::Validate() const {
  if (decoded()) {
    if (vocab < 0 || d_model < 0)
      return InvalidArgumentError(fmt::format("embedding table: negative shape [{}, {}]", vocab, d_model));
    return OkStatus();
  }
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    return InvalidArgumentError(
        fmt::format("embedding table: dtype {} is not float32, float16 or bfloat16", ToString(dtype)));
  if (vocab < 0 || d_model < 0)
    return InvalidArgumentError(fmt::format("embedding table: negative shape [{}, {}]", vocab, d_model));
  if (vocab > 1 && row_stride < d_model)
    return InvalidArgumentError(
        fmt::format("embedding table: row_stride {} is smaller than d_model {}", row_stride, d_model));
  if (vocab > 0 && d_model > 0 && data == nullptr)
    return InvalidArgumentError("embedding table: null data for a non-empty table");
  return OkStatus();
}

Result<EmbeddingTable> EmbeddingTable::Of(const Array& a, const char* what) {
  if (a.ndim() != 2)
    return InvalidArgumentError(
        fmt::format("{}: expected shape [vocab, d_model], got {}", what, ShapeToString(a.shape())));
  EmbeddingTable t = View(a.bytes(), a.dtype(), a.dim(0), a.dim(1));
  POSENC_RETURN_IF_ERROR(t.Validate().WithContext(what));
  return t;
}

Status ValidateTokenIds(std::span<const int64_t> ids, int64_t vocab) {
  // One pass for the common case (all valid), then locate the first bad one for the message.
  int64_t lo = 0, hi = 0;
  if (!ids.empty()) lo = hi = ids[0];
  for (int64_t id : ids) {
    lo = id < lo ? id : lo;
    hi = id > hi ? id : hi;
  }
  if (ids.empty() || (lo >= 0 && hi < vocab)) return OkStatus();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return OutOfRangeError(
          fmt::format("token id {} at index {} is outside the vocabulary [0, {})", ids[i], i, vocab));
  return OkStatus();
}

Status ValidateLookup(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options) {
  POSENC_RETURN_IF_ERROR(table.Validate());
  if (options.out_dtype != DType::kF32 && options.out_dtype != DType::kBF16)
    return InvalidArgumentError(
        fmt::format("embedding lookup: output dtype {} (supported: float32, bfloat16)", ToString(options.out_dtype)));
  if (!std::isfinite(options.multiplier))
    return InvalidArgumentError(fmt::format("embedding lookup: multiplier {} is not finite", options.multiplier));
  return ValidateTokenIds(ids, table.vocab);
}

namespace {

template <typename In, typename Out>
void GatherRows(const EmbeddingTable& table, std::span<const int64_t> ids, float multiplier, const float* add,
                Out* out) {
  const In* base = static_cast<const In*>(table.data);
  const int64_t d = table.d_model;
  for (size_t i = 0; i < ids.size(); ++i) {
    const In* row = base + ids[i] * table.row_stride;
    Out* dst = out + static_cast<int64_t>(i) * d;
    const float* p = add != nullptr ? add + static_cast<int64_t>(i) * d : nullptr;
    for (int64_t c = 0; c < d; ++c) {
      float v = LoadAsF32(row + c) * multiplier;
      if (p != nullptr) v += p[c];  // fused position add, in float32 after the multiplier
      StoreFromF32(v, dst + c);
    }
  }
}

template <typename In>
void GatherTo(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& o, void* out) {
  if (o.out_dtype == DType::kBF16)
    GatherRows<In>(table, ids, o.multiplier, o.add_rows, static_cast<bf16_t*>(out));
  else
    GatherRows<In>(table, ids, o.multiplier, o.add_rows, static_cast<float*>(out));
}

}  // namespace

void LookupEmbeddingsReference(const EmbeddingTable& table, std::span<const int64_t> ids, const LookupOptions& options,
                               void* out) {
  if (table.decoded()) {
    // Each row decoded to float32, then the float32 table's code on that one row.
    std::vector<float> row(static_cast<size_t>(table.d_model));
    const EmbeddingTable one = EmbeddingTable::View(row.data(), DType::kF32, 1, table.d_model);
    const int64_t zero = 0;
    const size_t out_row_bytes = static_cast<size_t>(table.d_model) * SizeOf(options.out_dtype);
    LookupOptions o = options;
    for (size_t i = 0; i < ids.size(); ++i) {
      table.decode_row(ids[i], row.data());
      o.add_rows = options.add_rows != nullptr ? options.add_rows + i * static_cast<size_t>(table.d_model) : nullptr;
      GatherTo<float>(one, std::span<const int64_t>(&zero, 1), o, static_cast<char*>(out) + i * out_row_bytes);
    }
    return;
  }
  switch (table.dtype) {
    case DType::kF32: GatherTo<float>(table, ids, options, out); break;
    case DType::kF16: GatherTo<f16_t>(table, ids, options, out); break;
    case DType::kBF16: GatherTo<bf16_t>(table, ids, options, out); break;
    default: break;
  }
}

void EmbeddingBackwardReference(std::span<const int64_t> ids, const float* grad_out, int64_t d_model, float multiplier,
                                float* grad_table) {
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < d_model; ++c) {
      const float v = multiplier * grad_out[static_cast<int64_t>(i) * d_model + c];
      float& t = grad_table[ids[i] * d_model + c];
      t = t + v;
    }
}

Result<Array> LookupLearnedPositions(const EmbeddingTable& wpe, std::span<const int64_t> positions) {
  POSENC_RETURN_IF_ERROR(wpe.Validate().WithContext("learned positions"));
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] < 0 || positions[i] >= wpe.vocab)
      return OutOfRangeError(
          fmt::format("learned positions: position {} at index {} is outside the table's {} positions [0, {})",
                      positions[i], i, wpe.vocab, wpe.vocab));
  POSENC_ASSIGN_OR_RETURN(Array out, Array::Zeros(DType::kF32, {static_cast<int64_t>(positions.size()), wpe.d_model}));
  LookupEmbeddingsReference(wpe, positions, LookupOptions{}, out.bytes());
  return out;
}

Status AddPositions(const Array& p, Array& x) {
  if (p.dtype() != DType::kF32 || x.dtype() != DType::kF32 || p.shape() != x.shape() || x.ndim() != 2)
    return InvalidArgumentError(
        fmt::format("add positions: p {} {} and x {} {} must be float32 [T, d_model] of one shape",
                    ShapeToString(p.shape()), ToString(p.dtype()), ShapeToString(x.shape()), ToString(x.dtype())));
  const float* ps = p.data<float>();
  float* xs = x.data<float>();
  for (int64_t i = 0; i < x.size(); ++i) xs[i] += ps[i];
  return OkStatus();
}

}  // namespace posenc
