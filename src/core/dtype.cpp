// DType names and sizes.
#include "posenc/core/dtype.hpp"
#include "core/enum_names.hpp"

namespace posenc {

// The name ToString gives, then the short one ParseDType accepts too.
constexpr detail::EnumName<DType> kDTypeNames[] = {
    {DType::kF32, "float32"}, {DType::kF16, "float16"}, {DType::kBF16, "bfloat16"}, {DType::kF64, "float64"},
    {DType::kI32, "int32"},   {DType::kI64, "int64"},   {DType::kU8, "uint8"},      {DType::kI8, "int8"},
    {DType::kF32, "f32"},     {DType::kF16, "f16"},     {DType::kBF16, "bf16"},     {DType::kF64, "f64"},
    {DType::kI32, "i32"},     {DType::kI64, "i64"},     {DType::kU8, "u8"},         {DType::kI8, "i8"}};

std::string_view ToString(DType dtype) { return detail::NameOf(dtype, kDTypeNames); }

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

bool ParseDType(std::string_view name, DType* out) { return detail::ValueOf(name, kDTypeNames, out); }

}  // namespace posenc
