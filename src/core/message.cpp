// EscapeForMessage / QuoteForMessage: file strings made safe for a one-line message.
#include "posenc/core/message.hpp"

#include <cstdio>

namespace posenc {
namespace {

// Length of the well-formed UTF-8 sequence at s[i] (2..4) and its code point, or 0.
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len;
  uint32_t v;
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    v = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    v = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    v = c & 0x07;
  } else
    return 0;
  if (s.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    v = (v << 6) | (cc & 0x3f);
  }
  if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) || (len == 4 && v < 0x10000)) return 0;  // overlong
  if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

// Code points that move or reorder text on a terminal although they are valid UTF-8.
bool EscapedCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  uint32_t cp = 0;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8Sequence(s, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string EscapeForMessage(std::string_view s, size_t cap) {
  std::string out;
  out.reserve(s.size() < cap ? s.size() + 8 : cap + 32);
  char buf[16];
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    std::string_view piece;
    size_t used = 1;
    if (c >= 0x20 && c < 0x7f) {
      if (c == '\\')
        piece = "\\\\";
      else
        piece = std::string_view(s.data() + i, 1);
    } else if (c == '\n') {
      piece = "\\n";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c == 0) {
      piece = "\\0";
    } else if (c < 0x80) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      piece = buf;
    } else {
      uint32_t cp = 0;
      const size_t len = Utf8Sequence(s, i, &cp);
      if (len == 0) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        piece = buf;
      } else if (EscapedCodePoint(cp)) {
        std::snprintf(buf, sizeof(buf), "\\u{%04x}", static_cast<unsigned>(cp));
        piece = buf;
        used = len;
      } else {
        piece = std::string_view(s.data() + i, len);
        used = len;
      }
    }
    if (out.size() + piece.size() > cap) {
      out += "... (";
      out += std::to_string(s.size());
      out += " bytes in all)";
      return out;
    }
    out += piece;
    i += used;
  }
  return out;
}

std::string QuoteForMessage(std::string_view s, size_t cap) { return "'" + EscapeForMessage(s, cap) + "'"; }

}  // namespace posenc
