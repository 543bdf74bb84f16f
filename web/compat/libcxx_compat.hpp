// Force-included into the WebAssembly build (web/CMakeLists.txt): C++20 library pieces that Debian 12's
// Emscripten 3.1.6 (its libc++ predates them) lacks, written on the compiler's builtins. Nothing here
// is used when the library has them.
#pragma once
#include <bit>
#include <type_traits>

#if !defined(__cpp_lib_bit_cast)
namespace std {
template <class To, class From>
constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From) && is_trivially_copyable_v<To> && is_trivially_copyable_v<From>,
                "bit_cast: the types differ in size or are not trivially copyable");
  return __builtin_bit_cast(To, from);
}
}  // namespace std
#endif
