// Small helpers shared by the file readers (internal: not part of the public API).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "posenc/core/message.hpp"

namespace posenc::io {

// a * b into *out; false on overflow of uint64.
inline bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
inline bool AddOverflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }

// Little-endian loads from unaligned bytes (the host is little-endian; checked at compile time).
static_assert(std::endian::native == std::endian::little, "posenc readers assume a little-endian host");
template <typename T>
inline T LoadLE(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// A printable form of a possibly binary name (for messages): posenc::EscapeForMessage (control
// bytes and ANSI escapes escaped, invalid UTF-8 as \xNN, capped with a note of the full length).
inline std::string Printable(std::string_view s) { return EscapeForMessage(s); }

}  // namespace posenc::io
