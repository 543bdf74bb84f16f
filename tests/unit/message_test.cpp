// EscapeForMessage / QuoteForMessage: every kind of hostile byte ends up printable and on one line.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/checked_math.hpp"
#include "posenc/core/message.hpp"

namespace posenc {
namespace {

TEST(Message, PlainTextIsUnchanged) {
  EXPECT_EQ(EscapeForMessage("llama.rope.freq_base"), "llama.rope.freq_base");
  EXPECT_EQ(QuoteForMessage("abc"), "'abc'");
  EXPECT_EQ(EscapeForMessage("caf\xc3\xa9 \xe4\xb8\xad"), "caf\xc3\xa9 \xe4\xb8\xad");  // valid UTF-8 kept
}

// Each row's input escaped by EscapeForMessage.
struct Escape {
  std::string input, escaped;
};

void ExpectEscapes(const std::vector<Escape>& rows) {
  for (const Escape& r : rows)
    EXPECT_EQ(EscapeForMessage(r.input), r.escaped) << "input " << ::testing::PrintToString(r.input);
}

TEST(Message, ControlBytesEscapesAndNulAreShown) {
  ExpectEscapes({
      {std::string("a\nb\r\tc", 6), "a\\nb\\r\\tc"},
      {std::string("a\0b", 3), "a\\0b"},
      {"\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"},
      {"\x7f\x01", "\\x7f\\x01"},
      {"back\\slash", "back\\\\slash"},
      // C1 controls, line separators and bidi overrides are valid UTF-8 but move text: escaped.
      {"\xc2\x9b"
       "2J",
       "\\u{009b}2J"},
      {"\xe2\x80\xae"
       "abc",
       "\\u{202e}abc"},
      {"\xe2\x80\xa8", "\\u{2028}"},
  });
}

TEST(Message, InvalidUtf8IsShownAsHex) {
  ExpectEscapes({
      {"bad\xc3(key", "bad\\xc3(key"},
      {"\xff\xfe", "\\xff\\xfe"},
      {"\xc0\x80", "\\xc0\\x80"},           // overlong NUL
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},  // surrogate
      {"\xe4\xb8", "\\xe4\\xb8"},           // cut sequence
  });
}

TEST(Message, LongValuesAreCappedWithTheFullLength) {
  const std::string big(10 << 20, 'x');
  const std::string e = EscapeForMessage(big);
  EXPECT_LE(e.size(), kMessageQuoteCap + 40);
  EXPECT_NE(e.find("... (10485760 bytes in all)"), std::string::npos) << e;
  // The cap counts output bytes: escapes are never cut in half.
  const std::string ctl(1000, '\x01');
  const std::string c = EscapeForMessage(ctl, 10);
  EXPECT_EQ(c.substr(0, 8), "\\x01\\x01");
  EXPECT_NE(c.find("... (1000 bytes in all)"), std::string::npos) << c;
  EXPECT_EQ(c.find('\x01'), std::string::npos);
}

TEST(CheckedMath, ProductsAndSums) {
  int64_t p = 0;
  const int64_t ok_dims[] = {1 << 20, 1 << 20, 1 << 20};
  EXPECT_TRUE(CheckedProduct(ok_dims, &p));
  EXPECT_EQ(p, int64_t{1} << 60);
  const int64_t big[] = {int64_t{1} << 32, int64_t{1} << 31};
  EXPECT_FALSE(CheckedProduct(big, &p));
  const int64_t neg[] = {4, -1};
  EXPECT_FALSE(CheckedProduct(neg, &p));
  int64_t s = 0;
  EXPECT_FALSE(CheckedAdd<int64_t>(INT64_MAX, 1, &s));
  EXPECT_TRUE(CheckedMul<int64_t>(3, 5, &s));
  EXPECT_EQ(s, 15);
}

}  // namespace
}  // namespace posenc
