// DType names and sizes.
#include "posenc/core/dtype.hpp"

namespace posenc {

std::string_view ToString(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kF64: return "float64";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kU8: return "uint8";
    case DType::kI8: return "int8";
  }
  return "unknown";
}

size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kU8:
    case DType::kI8: return 1;
  }
  return 0;
}

bool ParseDType(std::string_view name, DType* out) {
  struct Entry {
    std::string_view a, b;
    DType t;
  };
  static constexpr Entry kNames[] = {{"float32", "f32", DType::kF32},    {"float16", "f16", DType::kF16},
                                     {"bfloat16", "bf16", DType::kBF16}, {"float64", "f64", DType::kF64},
                                     {"int32", "i32", DType::kI32},      {"int64", "i64", DType::kI64},
                                     {"uint8", "u8", DType::kU8},        {"int8", "i8", DType::kI8}};
  for (const Entry& e : kNames) {
    if (name == e.a || name == e.b) {
      *out = e.t;
      return true;
    }
  }
  return false;
}

}  // namespace posenc
