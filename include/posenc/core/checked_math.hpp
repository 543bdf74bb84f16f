// Checked integer arithmetic for sizes that come from files and flags: every product of dims, every
// byte count, every offset plus length is computed through these, so a hostile value is refused
// instead of wrapping (UBSan-clean for signed types, never a silently small allocation).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

namespace posenc {

// *out = a * b (a + b); false, with *out unspecified, on overflow of T.
template <typename T>
[[nodiscard]] inline bool CheckedMul(T a, T b, T* out) {
  return !__builtin_mul_overflow(a, b, out);
}
template <typename T>
[[nodiscard]] inline bool CheckedAdd(T a, T b, T* out) {
  return !__builtin_add_overflow(a, b, out);
}

// The product of `dims` into *out; false if a dim is negative or the product passes INT64_MAX.
[[nodiscard]] inline bool CheckedProduct(std::span<const int64_t> dims, int64_t* out) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(p, d, &p)) return false;
  }
  *out = p;
  return true;
}

// Whether a value read in float64 (JSON, a GGUF float64 key) survives use as a float32 normal number:
// finite, and 0 or of magnitude in [FLT_MIN, FLT_MAX]. A value that overflows to Inf, or flushes to 0
// or a denormal in float32, is refused where it is read (the error quotes the file's value).
[[nodiscard]] inline bool FitsFloat32(double v) {
  if (!std::isfinite(v)) return false;
  const double a = std::abs(v);
  return a == 0.0 || (a >= static_cast<double>(std::numeric_limits<float>::min()) &&
                      a <= static_cast<double>(std::numeric_limits<float>::max()));
}

}  // namespace posenc
