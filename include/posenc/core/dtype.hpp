// Element types posenc stores and the conversions between them.
//
// float16 (IEEE binary16) and bfloat16 are storage formats: posenc computes in float32 (or float64)
// and rounds to nearest, ties to even, on the way back. NaN stays NaN (quiet), infinities stay
// infinite, and values past the format's range round to infinity, as IEEE requires.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace posenc {

enum class DType : uint8_t { kF32, kF16, kBF16, kF64, kI32, kI64, kU8, kI8 };

// "float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8".
std::string_view ToString(DType dtype);
// Size of one element in bytes.
size_t SizeOf(DType dtype);
// Parses the names above and the short forms "f32", "f16", "bf16", "f64", "i32", "i64".
bool ParseDType(std::string_view name, DType* out);

// Storage types: a 16-bit pattern, so they cannot be mixed up with integers.
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

inline float BF16ToF32(bf16_t h) { return std::bit_cast<float>(uint32_t{h.bits} << 16); }

inline bf16_t F32ToBF16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even; carries into the exponent correctly
  return bf16_t{static_cast<uint16_t>(u >> 16)};
}

inline float F16ToF32(f16_t h) {
  const uint32_t sign = uint32_t{h.bits & 0x8000u} << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t man = h.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
  // zero or subnormal: man * 2^-24, exact in float32
  const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
}

inline f16_t F32ToF16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16_t{static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};  // nan
  if (abs >= 0x477ff000u) return f16_t{static_cast<uint16_t>(sign | 0x7c00u)};                          // >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to nearest even by float addition.
    const float mag = std::bit_cast<float>(abs);
    const float scaled = mag * 16777216.0f;  // exact (power of two)
    // Adding 2^23 to a value < 2^10 rounds it to an integer with ties to even.
    const uint32_t r = std::bit_cast<uint32_t>(scaled + 8388608.0f) - 0x4b000000u;
    return f16_t{static_cast<uint16_t>(sign | r)};
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t v = abs - 0x38000000u;  // exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return f16_t{static_cast<uint16_t>(sign | (v >> 13))};
}

// Storage traits: Load widens one element to float, Store rounds a float into one element.
inline float LoadAsF32(const float* p) { return *p; }
inline float LoadAsF32(const f16_t* p) { return F16ToF32(*p); }
inline float LoadAsF32(const bf16_t* p) { return BF16ToF32(*p); }
inline void StoreFromF32(float v, float* p) { *p = v; }
inline void StoreFromF32(float v, f16_t* p) { *p = F32ToF16(v); }
inline void StoreFromF32(float v, bf16_t* p) { *p = F32ToBF16(v); }

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<f16_t>() {
  return DType::kF16;
}
template <>
constexpr DType DTypeOf<bf16_t>() {
  return DType::kBF16;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kF64;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kU8;
}
template <>
constexpr DType DTypeOf<int8_t>() {
  return DType::kI8;
}

}  // namespace posenc
