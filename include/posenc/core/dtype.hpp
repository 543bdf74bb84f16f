// Element types posenc stores and the conversions between them: the one vocabulary for bytes, used by
// tensors, embedding tables, quantized rows and KV caches alike (ggml's type_traits is the model).
//
// float16 (IEEE binary16) and bfloat16 are storage formats: posenc computes in float32 (or float64)
// and rounds to nearest, ties to even, on the way back. NaN stays NaN (quiet), infinities stay
// infinite, and values past the format's range round to infinity, as IEEE requires.
//
// float8 (PyTorch's float8_e4m3fn and float8_e5m2, bit for bit c10/util/Float8_e4m3fn.h and
// Float8_e5m2.h): 1 sign bit, 4 (5) exponent bits of bias 7 (15), 3 (2) mantissa bits, subnormals.
// From float32, round to nearest even, then:
//   e4m3fn: no infinity; 0x7f / 0xff are NaN; the largest finite value is 448 (0x7e). |x| > 464 (the
//           midpoint of 448 and the missing 480), infinity and NaN all give NaN (0x7f | sign):
//           overflow is NaN, never saturation. |x| = 464 is a tie and goes to the even 448.
//   e5m2:   IEEE-like; largest finite 57344 (0x7b); |x| >= 61440 rounds to infinity (0x7c | sign);
//           NaN gives 0x7f | sign.
// -0 stays -0; values below half the smallest subnormal (2^-10 for e4m3fn, 2^-17 for e5m2) go to
// signed zero. To float32 is exact (NaN: e4m3fn 0x7fc... as PyTorch's bit trick gives 0x7ff00000,
// e5m2 as float16's NaN 0x7fe00000, with the sign).
//
// Block types (ggml-common.h's layouts): block_size values in type_size bytes. Q8_0 is stated here
// once (BlockQ8_0); the others' layouts are written beside their decoders (src/core/dtype_blocks.cpp).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace posenc {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kF64, kI32, kI64, kU8, kI8,  // element types
  kF8E4M3, kF8E5M2,                                // float8_e4m3fn, float8_e5m2
  kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K, kQ5_K, kQ6_K,  // ggml block types
};

// What a type is: ggml's type_traits. Rows convert n values (a multiple of block_size).
struct DTypeTraits {
  DType dtype;
  std::string_view name;    // ToString: "float32", "float8_e4m3fn", "q8_0", ...
  int64_t block_size;       // values per block: 1 for element types
  size_t type_size;         // bytes per block
  bool is_float;            // its values are real numbers a row of float32 holds (not the integers)
  // src -> float32 (exact for every type but none); nullptr for the integer types.
  void (*to_float)(const void* src, float* dst, int64_t n);
  // float32 -> the type, rounding as the type's definition says; nullptr where posenc has no
  // writer (the integer types and the ggml block types but Q8_0).
  void (*from_float)(const float* src, void* dst, int64_t n);
};
const DTypeTraits& TraitsOf(DType dtype);

// "float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8", "float8_e4m3fn",
// "float8_e5m2", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k".
std::string_view ToString(DType dtype);
// Bytes of one element, or of one block for the block types (TraitsOf(d).type_size).
size_t SizeOf(DType dtype);
// True for the types of block size 1 (an Array or a view holds them).
inline bool IsElementType(DType dtype) { return dtype < DType::kQ8_0; }
// Parses the names above, the short forms "f32", "f16", "bf16", "f64", "i32", "i64", "u8", "i8",
// "f8e4m3", "e4m3", "f8e5m2", "e5m2", and the block names in capitals ("Q8_0", "Q4_K").
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

// float8 codes: the raw byte, so they cannot be mixed up with integers.
struct f8e4m3_t {
  uint8_t bits;
};
struct f8e5m2_t {
  uint8_t bits;
};

// float32 -> float8_e4m3fn as PyTorch's fp8e4m3fn_from_fp32_value (see the top of this file).
inline f8e4m3_t F32ToF8E4M3(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint8_t r;
  if (u >= 0x43f00000u) {  // 480 and up, infinity, NaN: NaN
    r = 0x7f;
  } else if (u < 0x3c800000u) {  // below 2^-6, the smallest normal: a multiple of 2^-9 by float addition
    // 2^14 + |x| rounds (nearest even) to 2^14 + k * 2^-9; the low bits are k, 0..8 (8: 2^-6, normal).
    r = static_cast<uint8_t>(std::bit_cast<uint32_t>(std::bit_cast<float>(u) + 16384.0f) - 0x46800000u);
  } else {  // rebias the exponent (127 -> 7) and round the 20 dropped bits to nearest even
    u += 0xc407ffffu + ((u >> 20) & 1u);  // (7 - 127) << 23 + 0x7ffff, wrapping
    r = static_cast<uint8_t>(u >> 20);
  }
  return f8e4m3_t{static_cast<uint8_t>(r | (sign >> 24))};
}

// float32 -> float8_e5m2 as PyTorch's fp8e5m2_from_fp32_value.
inline f8e5m2_t F32ToF8E5M2(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint8_t r;
  if (u >= 0x47800000u) {  // 65536 and up: infinity; NaN: NaN
    r = u > 0x7f800000u ? 0x7f : 0x7c;
  } else if (u < 0x38800000u) {  // below 2^-14: 2^7 + |x| rounds to 2^7 + k * 2^-16
    r = static_cast<uint8_t>(std::bit_cast<uint32_t>(std::bit_cast<float>(u) + 128.0f) - 0x43000000u);
  } else {  // 127 -> 15, 21 dropped bits; 61440 and up carry into 0x7c (infinity)
    u += 0xc80fffffu + ((u >> 21) & 1u);
    r = static_cast<uint8_t>(u >> 21);
  }
  return f8e5m2_t{static_cast<uint8_t>(r | (sign >> 24))};
}

inline float F8E5M2ToF32(f8e5m2_t h) { return F16ToF32(f16_t{static_cast<uint16_t>(h.bits << 8)}); }

inline float F8E4M3ToF32(f8e4m3_t h) {
  const uint32_t sign = uint32_t{h.bits & 0x80u} << 24;
  const uint32_t exp = (h.bits >> 3) & 0xfu;
  const uint32_t man = h.bits & 0x7u;
  if ((h.bits & 0x7f) == 0x7f) return std::bit_cast<float>(sign | 0x7ff00000u);  // NaN, PyTorch's bits
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (man << 20));
  const float mag = static_cast<float>(man) * 0.001953125f;  // subnormal: man * 2^-9, exact
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
}

// ggml's block_q8_0 (ggml-common.h): 32 values x = d * q, d float16. The one statement of the layout.
inline constexpr int64_t kQ8_0Block = 32;
struct BlockQ8_0 {
  f16_t d;
  int8_t qs[kQ8_0Block];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes");

// The scalar definition, ggml's quantize_row_q8_0_ref: per block of 32 values, amax = max |x|
// (float32), d = amax / 127, id = d != 0 ? 1 / d : 0 (from the float32 d), stored d = float16(d)
// (nearest even), q[j] = roundf(x[j] * id) (halves away from zero). n a multiple of 32.
void QuantizeRowQ8_0Reference(const float* x, int64_t n, BlockQ8_0* out);

// Storage traits: Load widens one element to float, Store rounds a float into one element.
inline float LoadAsF32(const float* p) { return *p; }
inline float LoadAsF32(const f16_t* p) { return F16ToF32(*p); }
inline float LoadAsF32(const bf16_t* p) { return BF16ToF32(*p); }
inline void StoreFromF32(float v, float* p) { *p = v; }
inline void StoreFromF32(float v, f16_t* p) { *p = F32ToF16(v); }
inline void StoreFromF32(float v, bf16_t* p) { *p = F32ToBF16(v); }
inline float LoadAsF32(const f8e4m3_t* p) { return F8E4M3ToF32(*p); }
inline float LoadAsF32(const f8e5m2_t* p) { return F8E5M2ToF32(*p); }
inline void StoreFromF32(float v, f8e4m3_t* p) { *p = F32ToF8E4M3(v); }
inline void StoreFromF32(float v, f8e5m2_t* p) { *p = F32ToF8E5M2(v); }

namespace detail {
// Where T stands among Ts (sizeof...(Ts) when it is none of them).
template <typename T, typename... Ts>
constexpr size_t IndexOfType() {
  constexpr bool same[] = {std::is_same_v<T, Ts>...};
  size_t i = 0;
  while (i < sizeof...(Ts) && !same[i]) ++i;
  return i;
}
}  // namespace detail

// The element type a C++ type stores: float -> kF32, f16_t -> kF16, ..., f8e5m2_t -> kF8E5M2.
template <typename T>
constexpr DType DTypeOf() {
  // The storage type of each element type, in DType order.
  constexpr size_t i =
      detail::IndexOfType<T, float, f16_t, bf16_t, double, int32_t, int64_t, uint8_t, int8_t, f8e4m3_t, f8e5m2_t>();
  static_assert(i < static_cast<size_t>(DType::kQ8_0), "DTypeOf: not the storage type of an element type");
  return static_cast<DType>(i);
}
static_assert(DTypeOf<f8e5m2_t>() == DType::kF8E5M2, "DTypeOf's list follows DType's element types");

}  // namespace posenc
