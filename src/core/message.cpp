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

std::string QuoteForMessage(std::string_view s, size_t cap) {
  std::string out(1, '\'');  // built with append (GCC 12 warns falsely on "literal" + std::string&&)
  out.append(EscapeForMessage(s, cap)).push_back('\'');
  return out;
}

namespace {
std::string KeyPart(std::string_view where, std::string_view key) {
  std::string out;
  if (!where.empty()) out.append(where).append(": ");
  out.append("key ").append(QuoteForMessage(key, 120));
  return out;
}
}  // namespace

std::string KeyValueMessage(std::string_view where, std::string_view key, std::string_view value,
                            std::string_view why) {
  std::string out = KeyPart(where, key);
  out.append(" is ").append(QuoteForMessage(value));
  if (!why.empty()) out.append(", ").append(why);
  return OneLineMessage(std::move(out));
}

std::string KeyShownMessage(std::string_view where, std::string_view key, std::string_view shown,
                            std::string_view why) {
  std::string out = KeyPart(where, key);
  out.append(" is ").append(shown.size() <= kMessageQuoteCap ? std::string(shown) : EscapeForMessage(shown));
  if (!why.empty()) out.append(", ").append(why);
  return OneLineMessage(std::move(out));
}

namespace {
// The first byte at or after `i` that starts a UTF-8 sequence (not a continuation byte).
size_t Utf8Boundary(std::string_view s, size_t i) {
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80) ++i;
  return i;
}
}  // namespace

std::string OneLineMessage(std::string message) {
  bool clean = message.size() <= kMaxMessageBytes;
  for (size_t i = 0; clean && i < message.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    clean = c >= 0x20 && c < 0x7f;
  }
  if (clean) return message;
  // Escape what must not reach a terminal, keeping backslashes as they are.
  std::string out;
  out.reserve(message.size() + 16);
  char buf[16];
  for (size_t i = 0; i < message.size();) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    if (c == '\\' || (c >= 0x20 && c < 0x7f)) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x80) {
      out += EscapeForMessage(std::string_view(message.data() + i, 1), 16);
      ++i;
    } else {
      uint32_t cp = 0;
      const size_t len = Utf8Sequence(message, i, &cp);
      if (len == 0) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        out += buf;
        ++i;
      } else if (EscapedCodePoint(cp)) {
        std::snprintf(buf, sizeof(buf), "\\u{%04x}", static_cast<unsigned>(cp));
        out += buf;
        i += len;
      } else {
        out.append(message, i, len);
        i += len;
      }
    }
  }
  if (out.size() <= kMaxMessageBytes) return out;
  // Keep the head and the tail; the cut names the full length.
  const std::string cut = " ... (" + std::to_string(out.size()) + " bytes in all) ... ";
  const size_t tail_len = 200;
  const size_t head_len = kMaxMessageBytes - tail_len - cut.size();
  size_t h = head_len;
  while (h > 0 && (static_cast<unsigned char>(out[h]) & 0xc0) == 0x80) --h;
  const size_t t = Utf8Boundary(out, out.size() - tail_len);
  return out.substr(0, h) + cut + out.substr(t);
}

}  // namespace posenc
