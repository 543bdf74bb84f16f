// The element types: names, the traits table and the row conversions of the float and float8 types
// and Q8_0 (the other ggml block types decode in dtype_blocks.cpp).
#include "posenc/core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "core/dtype_blocks.hpp"
#include "core/enum_names.hpp"

namespace posenc {

void QuantizeRowQ8_0Reference(const float* x, int64_t n, BlockQ8_0* out) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b, x += kQ8_0Block) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8_0Block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = F32ToF16(d);
    for (int64_t j = 0; j < kQ8_0Block; ++j) out[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

namespace {

// Rows of an element type through its LoadAsF32 / StoreFromF32. A row may sit at any byte address (a
// GGUF table's rows follow its header bytes), so each element is copied through an aligned local.
template <typename T>
void ToFloatRow(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const std::byte*>(src);
  for (int64_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, s + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    dst[i] = LoadAsF32(&x);
  }
}
template <typename T>
void FromFloatRow(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<std::byte*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    T x;
    StoreFromF32(src[i], &x);
    std::memcpy(d + i * static_cast<int64_t>(sizeof(T)), &x, sizeof(T));
  }
}
template <>
void ToFloatRow<float>(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
template <>
void FromFloatRow<float>(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void F64ToFloatRow(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<const double*>(src)[i]);
}
void F64FromFloatRow(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) static_cast<double*>(dst)[i] = src[i];
}
void Q8_0ToFloat(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);  // 2-byte aligned: callers decode aligned rows
  for (int64_t i = 0; i < n / kQ8_0Block; ++i) {
    BlockQ8_0 blk;
    std::memcpy(&blk, b + i, sizeof(blk));
    const float d = F16ToF32(blk.d);
    for (int64_t j = 0; j < kQ8_0Block; ++j) dst[i * kQ8_0Block + j] = d * static_cast<float>(blk.qs[j]);
  }
}
void Q8_0FromFloat(const float* src, void* dst, int64_t n) {
  QuantizeRowQ8_0Reference(src, n, static_cast<BlockQ8_0*>(dst));
}

// Indexed by DType (checked below).
constexpr DTypeTraits kTraits[] = {
    {DType::kF32, "float32", 1, 4, true, ToFloatRow<float>, FromFloatRow<float>},
    {DType::kF16, "float16", 1, 2, true, ToFloatRow<f16_t>, FromFloatRow<f16_t>},
    {DType::kBF16, "bfloat16", 1, 2, true, ToFloatRow<bf16_t>, FromFloatRow<bf16_t>},
    {DType::kF64, "float64", 1, 8, true, F64ToFloatRow, F64FromFloatRow},
    {DType::kI32, "int32", 1, 4, false, nullptr, nullptr},
    {DType::kI64, "int64", 1, 8, false, nullptr, nullptr},
    {DType::kU8, "uint8", 1, 1, false, nullptr, nullptr},
    {DType::kI8, "int8", 1, 1, false, nullptr, nullptr},
    {DType::kF8E4M3, "float8_e4m3fn", 1, 1, true, ToFloatRow<f8e4m3_t>, FromFloatRow<f8e4m3_t>},
    {DType::kF8E5M2, "float8_e5m2", 1, 1, true, ToFloatRow<f8e5m2_t>, FromFloatRow<f8e5m2_t>},
    {DType::kQ8_0, "q8_0", 32, 34, true, Q8_0ToFloat, Q8_0FromFloat},
    {DType::kQ4_0, "q4_0", 32, 18, true, detail::Q4_0ToFloat, nullptr},
    {DType::kQ4_1, "q4_1", 32, 20, true, detail::Q4_1ToFloat, nullptr},
    {DType::kQ5_0, "q5_0", 32, 22, true, detail::Q5_0ToFloat, nullptr},
    {DType::kQ5_1, "q5_1", 32, 24, true, detail::Q5_1ToFloat, nullptr},
    {DType::kQ4_K, "q4_k", 256, 144, true, detail::Q4_KToFloat, nullptr},
    {DType::kQ5_K, "q5_k", 256, 176, true, detail::Q5_KToFloat, nullptr},
    {DType::kQ6_K, "q6_k", 256, 210, true, detail::Q6_KToFloat, nullptr},
};
constexpr bool TraitsInOrder() {
  for (size_t i = 0; i < std::size(kTraits); ++i)
    if (static_cast<size_t>(kTraits[i].dtype) != i) return false;
  return std::size(kTraits) == static_cast<size_t>(DType::kQ6_K) + 1;
}
static_assert(TraitsInOrder(), "kTraits lists every DType in enum order");
static_assert(sizeof(f8e4m3_t) == 1 && sizeof(f8e5m2_t) == 1);

// The name ToString gives (kTraits), then the other names ParseDType accepts.
constexpr detail::EnumName<DType> kDTypeAliases[] = {
    {DType::kF32, "f32"},        {DType::kF16, "f16"},        {DType::kBF16, "bf16"},     {DType::kF64, "f64"},
    {DType::kI32, "i32"},        {DType::kI64, "i64"},        {DType::kU8, "u8"},         {DType::kI8, "i8"},
    {DType::kF8E4M3, "f8e4m3"},  {DType::kF8E4M3, "e4m3"},    {DType::kF8E5M2, "f8e5m2"}, {DType::kF8E5M2, "e5m2"},
    {DType::kQ8_0, "Q8_0"},      {DType::kQ4_0, "Q4_0"},      {DType::kQ4_1, "Q4_1"},     {DType::kQ5_0, "Q5_0"},
    {DType::kQ5_1, "Q5_1"},      {DType::kQ4_K, "Q4_K"},      {DType::kQ5_K, "Q5_K"},     {DType::kQ6_K, "Q6_K"}};

}  // namespace

const DTypeTraits& TraitsOf(DType dtype) {
  const size_t i = static_cast<size_t>(dtype);
  return kTraits[i < std::size(kTraits) ? i : 0];  // an enum value outside the list is a caller's cast
}

std::string_view ToString(DType dtype) {
  const size_t i = static_cast<size_t>(dtype);
  return i < std::size(kTraits) ? kTraits[i].name : std::string_view("unknown");
}

size_t SizeOf(DType dtype) {
  const size_t i = static_cast<size_t>(dtype);
  return i < std::size(kTraits) ? kTraits[i].type_size : 0;
}

bool ParseDType(std::string_view name, DType* out) {
  for (const DTypeTraits& t : kTraits) {
    if (t.name == name) {
      *out = t.dtype;
      return true;
    }
  }
  return detail::ValueOf(name, kDTypeAliases, out);
}

}  // namespace posenc
