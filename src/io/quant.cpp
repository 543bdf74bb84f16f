// Checked row dequantization of ggml block types: the decoders are DTypeTraits::to_float
// (posenc/core/dtype.hpp, src/core/dtype_blocks.cpp); this file checks sizes and rows.
#include "posenc/io/quant.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include <string>

#include "io/io_util.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/io/gguf.hpp"

namespace posenc {
namespace {

constexpr const char* kSupported = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";

// The name a message gives a row type: GGUF's ("Q4_K") for the ggml types, else posenc's.
std::string TypeName(DType dtype) {
  uint32_t id;
  return GgmlTypeOfDType(dtype, &id) ? GgmlTypeName(id) : std::string(ToString(dtype));
}

}  // namespace

bool IsDequantizable(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return true;
    default: return false;
  }
}

void DequantizeRowUnchecked(DType dtype, const std::byte* row, int64_t n, float* out) {
  TraitsOf(dtype).to_float(row, out, n);
}

Status QuantizedTable::Validate() const {
  if (!IsDequantizable(dtype)) {
    return UnimplementedError(fmt::format("dequantizing rows of ggml type {}: not supported (supported: {})",
                                          TypeName(dtype), kSupported));
  }
  const DTypeTraits& t = TraitsOf(dtype);
  const std::string name = TypeName(dtype);
  if (row_length <= 0 || row_length % t.block_size != 0) {
    return InvalidArgumentError(
        fmt::format("dequantizing {} rows: row length {} is not a positive multiple of the "
                    "block size {}",
                    name, row_length, t.block_size));
  }
  if (rows < 0) return InvalidArgumentError(fmt::format("dequantizing {} rows: negative row count {}", name, rows));
  const uint64_t row_bytes = static_cast<uint64_t>(row_length / t.block_size) * t.type_size;
  uint64_t need = 0;
  if (io::MulOverflows(row_bytes, static_cast<uint64_t>(rows), &need) || need > data.size()) {
    return OutOfRangeError(fmt::format("dequantizing {} rows: {} rows of {} bytes do not fit the {} bytes given",
                                       name, rows, row_bytes, data.size()));
  }
  return OkStatus();
}

Status DequantizeRows(DType dtype, std::span<const std::byte> data, int64_t row_length, int64_t row_begin,
                      int64_t row_count, float* out) {
  QuantizedTable table{data, dtype, 0, row_length};
  POSENC_RETURN_IF_ERROR(table.Validate());
  if (row_begin < 0 || row_count < 0) {
    return InvalidArgumentError(
        fmt::format("dequantizing rows [{}, +{}): negative row index or count", row_begin, row_count));
  }
  const DTypeTraits& t = TraitsOf(dtype);
  const uint64_t row_bytes = static_cast<uint64_t>(row_length / t.block_size) * t.type_size;
  const uint64_t available = data.size() / row_bytes;
  const uint64_t end = static_cast<uint64_t>(row_begin) + static_cast<uint64_t>(row_count);
  if (end > available) {
    return OutOfRangeError(fmt::format("dequantizing {} rows [{}, {}): row {} is past the {} rows in the data",
                                       TypeName(dtype), row_begin, end,
                                       std::max<uint64_t>(available, static_cast<uint64_t>(row_begin)), available));
  }
  for (int64_t r = 0; r < row_count; ++r) {
    DequantizeRowUnchecked(dtype, data.data() + static_cast<size_t>(row_begin + r) * row_bytes, row_length,
                           out + r * row_length);
  }
  return OkStatus();
}

Result<EmbeddingTable> QuantizedTable::AsEmbeddingTable() const {
  POSENC_RETURN_IF_ERROR(Validate());
  const bool is_float = dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
  if (is_float && reinterpret_cast<uintptr_t>(data.data()) % SizeOf(dtype) == 0)
    return EmbeddingTable::View(data.data(), dtype, rows, row_length);
  const DTypeTraits& t = TraitsOf(dtype);
  const size_t row_bytes = static_cast<size_t>(row_length / t.block_size) * t.type_size;
  const std::byte* base = data.data();
  const auto to_float = t.to_float;
  const int64_t n = row_length;
  return EmbeddingTable::Decoded(rows, row_length, [base, row_bytes, to_float, n](int64_t row, float* out) {
    to_float(base + static_cast<size_t>(row) * row_bytes, out, n);
  });
}

Result<Array> LookupRows(const QuantizedTable& table, std::span<const int64_t> ids, const LookupOptions& options) {
  POSENC_ASSIGN_OR_RETURN(EmbeddingTable e, table.AsEmbeddingTable());
  return LookupEmbeddings(e, ids, options);
}

}  // namespace posenc
