// Checked integer arithmetic for sizes that come from files and flags: every product of dims, every
// byte count, every offset plus length is computed through these, so a hostile value is refused
// instead of wrapping (UBSan-clean for signed types, never a silently small allocation).
#pragma once

#include <cstdint>
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

}  // namespace posenc
