// float16 / bfloat16 conversions: round to nearest even, NaN and Inf kept, exhaustive round trips.
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "posenc/core/dtype.hpp"

namespace posenc {
namespace {

// Every 16-bit pattern widens to float32 and narrows back to itself; a NaN comes back a NaN.
template <typename Half>
void ExpectEveryPatternRoundTrips(float (*widen)(Half), Half (*narrow)(float)) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const Half h{static_cast<uint16_t>(b)};
    const float f = widen(h);
    const Half back = narrow(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(widen(back))) << b;
    } else {
      EXPECT_EQ(back.bits, h.bits) << "pattern " << b;
    }
  }
}

TEST(DType, F16RoundTripsEveryPattern) { ExpectEveryPatternRoundTrips<f16_t>(F16ToF32, F32ToF16); }

TEST(DType, BF16RoundTripsEveryPattern) { ExpectEveryPatternRoundTrips<bf16_t>(BF16ToF32, F32ToBF16); }

// Rounding checked against float64 arithmetic: the result is the nearest representable value, and
// on a tie the one with an even last bit.
TEST(DType, F16RoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(1.0f).bits, 0x3c00);
  EXPECT_EQ(F32ToF16(1.0f + 1.0f / 2048).bits, 0x3c00);                 // tie, even stays
  EXPECT_EQ(F32ToF16(1.0f + 3.0f / 2048).bits, 0x3c02);                 // tie, odd rounds up
  EXPECT_EQ(F32ToF16(1.0f + 1.0f / 2048 + 1.0f / 65536).bits, 0x3c01);  // past the tie
  EXPECT_EQ(F32ToF16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(F32ToF16(65519.99f).bits, 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f).bits, 0x7c00);  // rounds to infinity
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(std::nanf("")))));
  EXPECT_EQ(F32ToF16(5.9604644775390625e-8f).bits, 0x0001);   // smallest subnormal
  EXPECT_EQ(F32ToF16(2.98023223876953125e-8f).bits, 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(F32ToF16(8.94069671630859375e-8f).bits, 0x0002);  // 1.5 ulp: tie to even (2)
  EXPECT_EQ(F32ToF16(-0.0f).bits, 0x8000);
}

TEST(DType, F16MatchesNearestOverRandomFloats) {
  uint32_t state = 12345;
  for (int k = 0; k < 200000; ++k) {
    state = state * 1664525u + 1013904223u;
    const uint32_t bits = (state & 0x8fffffffu) | 0x30000000u;  // magnitudes around f16's range
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isfinite(f) || std::fabs(f) >= 65520.0f) continue;
    const float got = F16ToF32(F32ToF16(f));
    // Neighbours in float16 around got: nothing representable lies strictly closer to f.
    const uint16_t gb = F32ToF16(f).bits;
    for (int d : {-1, 1}) {
      const uint16_t nb = static_cast<uint16_t>(gb + d);
      if ((nb & 0x7c00) == 0x7c00) continue;
      const float other = F16ToF32(f16_t{nb});
      if (std::signbit(other) != std::signbit(got) && other != 0.0f) continue;
      const double eg = std::fabs(static_cast<double>(got) - f), eo = std::fabs(static_cast<double>(other) - f);
      ASSERT_TRUE(eg < eo || (eg == eo && (gb & 1) == 0)) << "f=" << f << " got " << got << " other " << other;
    }
  }
}

TEST(DType, BF16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.0f).bits, 0x3f80);
  EXPECT_EQ(F32ToBF16(1.0f + 1.0f / 256).bits, 0x3f80);  // tie, even
  EXPECT_EQ(F32ToBF16(1.0f + 3.0f / 256).bits, 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(F32ToBF16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds up to infinity
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::nanf("")))));
  // A NaN whose payload sits only in the low 16 bits must stay NaN, not become infinity.
  uint32_t nan_low = 0x7f800001u;
  float f;
  std::memcpy(&f, &nan_low, 4);
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(f))));
}

TEST(DType, NamesRoundTrip) {
  for (DType t :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kI8}) {
    DType back;
    ASSERT_TRUE(ParseDType(ToString(t), &back));
    EXPECT_EQ(back, t);
  }
  DType x;
  EXPECT_FALSE(ParseDType("float8", &x));
}

}  // namespace
}  // namespace posenc
