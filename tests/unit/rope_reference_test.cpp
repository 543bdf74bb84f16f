// The scalar reference RoPE: layouts, partial and offset windows, directions, dtypes, precisions,
// validation errors.
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "posenc/kernels/rope.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

// Rotation by hand in long double, the truth the reference must match.
std::vector<double> RotateTruth(const std::vector<float>& x, int64_t tokens, int64_t heads, const RotaryLayout& L,
                                const std::vector<double>& inv_freq, const std::vector<int64_t>& pos, double scale) {
  std::vector<double> out(x.begin(), x.end());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < L.num_pairs(); ++i) {
        const size_t base = static_cast<size_t>((t * heads + h) * L.head_dim);
        const long double a = x[base + L.first(i)], b = x[base + L.second(i)];
        const long double ang = static_cast<long double>(pos[t]) * static_cast<long double>(inv_freq[i]);
        const long double c = cosl(ang) * scale, s = sinl(ang) * scale;
        out[base + L.first(i)] = static_cast<double>(a * c - b * s);
        out[base + L.second(i)] = static_cast<double>(a * s + b * c);
      }
  return out;
}

TEST(RopeReference, DefaultFrequenciesFollowTheSeed) {
  RopeFrequencies f = DefaultRopeFrequencies(128, 10000.0).value();
  ASSERT_EQ(f.inv_freq.size(), 64u);
  EXPECT_EQ(f.inv_freq[0], 1.0);
  EXPECT_NEAR(f.inv_freq[1], std::pow(10000.0, -2.0 / 128), 1e-18);
  EXPECT_NEAR(f.inv_freq[63], std::pow(10000.0, -126.0 / 128), 1e-18);
  EXPECT_FALSE(DefaultRopeFrequencies(7, 10000.0).ok());
  EXPECT_FALSE(DefaultRopeFrequencies(0, 10000.0).ok());
  EXPECT_FALSE(DefaultRopeFrequencies(8, 0.0).ok());
  EXPECT_FALSE(DefaultRopeFrequencies(8, -1.0).ok());
  EXPECT_FALSE(DefaultRopeFrequencies(8, INFINITY).ok());
}

// Both layouts, partial and offset windows, random sizes: exact precision within 2e-6 * max|x|,
// pass-through dims unchanged bit for bit.
TEST(RopeReference, MatchesLongDoubleTruthOverLayoutsAndWindows) {
  auto rng = testing::MakeRng(2024);
  for (int trial = 0; trial < 60; ++trial) {
    SCOPED_TRACE(::testing::Message() << "seed 2024 trial " << trial);
    const int64_t head_dim = 2 * (1 + static_cast<int64_t>(rng() % 40));
    const int64_t rotary_dim = 2 * (1 + static_cast<int64_t>(rng() % (head_dim / 2)));
    const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(head_dim - rotary_dim + 1));
    const RotaryLayout L{trial % 2 ? RopePairing::kHalf : RopePairing::kInterleaved, head_dim, start, rotary_dim};
    const int64_t tokens = static_cast<int64_t>(rng() % 5), heads = 1 + static_cast<int64_t>(rng() % 3);
    std::vector<int64_t> pos(static_cast<size_t>(tokens));
    for (auto& p : pos) p = static_cast<int64_t>(rng() % (int64_t{1} << 31));
    std::vector<float> x = testing::RandomNormal(rng, static_cast<size_t>(tokens * heads * head_dim));
    RopeFrequencies f = DefaultRopeFrequencies(rotary_dim, 10000.0 + static_cast<double>(rng() % 1000000)).value();
    f.attention_scaling = 1.0 + static_cast<double>(rng() % 100) / 200.0;
    RopeTable table = RopeTable::Build(f, 16, RopePrecision::kExact).value();
    std::vector<float> y = x;
    HeadsView v = HeadsView::Dense(y.data(), DType::kF32, tokens, heads, head_dim);
    ASSERT_TRUE(ApplyRope({L, &table, pos}, v).ok());
    const std::vector<double> want = RotateTruth(x, tokens, heads, L, f.inv_freq, pos, f.attention_scaling);
    float max_abs = 0;
    for (float a : x) max_abs = std::max(max_abs, std::fabs(a));
    for (size_t i = 0; i < y.size(); ++i) {
      const int64_t d = static_cast<int64_t>(i) % head_dim;
      if (d < start || d >= start + rotary_dim) {
        EXPECT_EQ(y[i], x[i]) << "pass-through dim " << d << " changed";
      } else {
        EXPECT_LE(std::fabs(y[i] - want[i]), 2e-6 * max_abs * f.attention_scaling) << "index " << i;
      }
    }
  }
}

TEST(RopeReference, InterleavedAndHalfPairTheRightDims) {
  // One token at position 1 with inv_freq pi/2 on every pair: (a, b) -> (-b, a).
  RopeFrequencies f{{std::numbers::pi / 2, std::numbers::pi / 2}, 1.0};
  RopeTable table = RopeTable::Build(f, 4, RopePrecision::kExact).value();
  const std::vector<int64_t> pos = {1};
  std::vector<float> x = {1, 2, 3, 4};
  HeadsView v = HeadsView::Dense(x.data(), DType::kF32, 1, 1, 4);
  ASSERT_TRUE(ApplyRope({{RopePairing::kInterleaved, 4, 0, 4}, &table, pos}, v).ok());
  EXPECT_NEAR(x[0], -2, 1e-6);  // pairs (0,1), (2,3)
  EXPECT_NEAR(x[1], 1, 1e-6);
  EXPECT_NEAR(x[2], -4, 1e-6);
  EXPECT_NEAR(x[3], 3, 1e-6);
  x = {1, 2, 3, 4};
  ASSERT_TRUE(ApplyRope({{RopePairing::kHalf, 4, 0, 4}, &table, pos}, v).ok());
  EXPECT_NEAR(x[0], -3, 1e-6);  // pairs (0,2), (1,3)
  EXPECT_NEAR(x[1], -4, 1e-6);
  EXPECT_NEAR(x[2], 1, 1e-6);
  EXPECT_NEAR(x[3], 2, 1e-6);
}

TEST(RopeReference, BackwardUndoesForwardAndOutOfPlaceLeavesInput) {
  auto rng = testing::MakeRng(7);
  const RotaryLayout L{RopePairing::kHalf, 64, 0, 48};
  RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(48, 10000.0).value(), 100, RopePrecision::kReference).value();
  std::vector<int64_t> pos = {0, 5, 99, 100, 12345};
  std::vector<float> x = testing::RandomNormal(rng, 5 * 2 * 64);
  std::vector<float> y(x.size()), z(x.size());
  HeadsView vx = HeadsView::Dense(x.data(), DType::kF32, 5, 2, 64);
  HeadsView vy = HeadsView::Dense(y.data(), DType::kF32, 5, 2, 64);
  HeadsView vz = HeadsView::Dense(z.data(), DType::kF32, 5, 2, 64);
  const std::vector<float> x0 = x;
  ASSERT_TRUE(ApplyRope({L, &table, pos}, vx, vy).ok());
  EXPECT_EQ(x, x0);
  ASSERT_TRUE(ApplyRope({L, &table, pos, RopeDirection::kBackward}, vy, vz).ok());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(z[i], x[i], 1e-5f * (1 + std::fabs(x[i])));
}

TEST(RopeReference, HalfPrecisionStorageRoundsTheFloatResult) {
  auto rng = testing::MakeRng(11);
  const RotaryLayout L{RopePairing::kInterleaved, 8, 0, 8};
  RopeTable table = RopeTable::Build(DefaultRopeFrequencies(8, 10000.0).value(), 10, RopePrecision::kReference).value();
  std::vector<int64_t> pos = {3, 9};
  std::vector<float> x = testing::RandomNormal(rng, 16);
  std::vector<f16_t> h(16);
  std::vector<bf16_t> b(16);
  for (size_t i = 0; i < 16; ++i) {
    h[i] = F32ToF16(x[i]);
    b[i] = F32ToBF16(x[i]);
    x[i] = F16ToF32(h[i]);
  }
  std::vector<float> want = x;
  ASSERT_TRUE(ApplyRope({L, &table, pos}, HeadsView::Dense(want.data(), DType::kF32, 2, 1, 8)).ok());
  ASSERT_TRUE(ApplyRope({L, &table, pos}, HeadsView::Dense(h.data(), DType::kF16, 2, 1, 8)).ok());
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(h[i].bits, F32ToF16(want[i]).bits) << i;
  ASSERT_TRUE(ApplyRope({L, &table, pos}, HeadsView::Dense(b.data(), DType::kBF16, 2, 1, 8)).ok());
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(BF16ToF32(b[i]), want[i], 0.02 * (1 + std::fabs(want[i]))) << i;
}

TEST(RopeReference, ZeroTokensAndStridedViews) {
  RopeTable table = RopeTable::Build(DefaultRopeFrequencies(4, 10000.0).value(), 0, RopePrecision::kExact).value();
  const RotaryLayout L{RopePairing::kHalf, 4, 0, 4};
  EXPECT_TRUE(ApplyRope({L, &table, {}}, HeadsView::Dense(nullptr, DType::kF32, 0, 2, 4)).ok());
  // A fused QKV row: [q (2 heads) | k (1 head) | v (1 head)] per token; rotating q and k leaves v.
  std::vector<float> qkv(3 * 4 * 4, 1.0f);
  const std::vector<int64_t> pos = {1, 2, 3};
  HeadsView q{qkv.data(), DType::kF32, 3, 2, 4, 16, 4};
  HeadsView k{qkv.data() + 8, DType::kF32, 3, 1, 4, 16, 4};
  ASSERT_TRUE(ApplyRopeQK({L, &table, pos}, q, k).ok());
  for (int t = 0; t < 3; ++t)
    for (int d = 0; d < 4; ++d) EXPECT_EQ(qkv[t * 16 + 12 + d], 1.0f) << "value changed";
  EXPECT_NE(qkv[16], 1.0f);
  EXPECT_NE(qkv[16 + 8], 1.0f);
}

// Head-major storage ([heads, tokens, head_dim], as a [batch, heads, seq, head_dim] tensor holds q
// and k) is a valid view and rotates like the token-major copy of the same rows; strides that make
// rows overlap in both nestings are refused with the strides named.
TEST(RopeReference, HeadMajorViewsAndOverlappingStrides) {
  RopeTable table = RopeTable::Build(DefaultRopeFrequencies(4, 10000.0).value(), 8, RopePrecision::kExact).value();
  const RotaryLayout L{RopePairing::kHalf, 4, 0, 4};
  const std::vector<int64_t> pos = {1, 5, 2};
  std::vector<float> head_major(2 * 3 * 4), token_major(3 * 2 * 4);
  for (size_t i = 0; i < head_major.size(); ++i) head_major[i] = 0.25f * static_cast<float>(i) - 1.0f;
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 3; ++t)
      for (int d = 0; d < 4; ++d) token_major[(t * 2 + h) * 4 + d] = head_major[(h * 3 + t) * 4 + d];
  const HeadsView hm{head_major.data(), DType::kF32, 3, 2, 4, /*token_stride=*/4, /*head_stride=*/12};
  ASSERT_TRUE(hm.Validate("x").ok());
  ASSERT_TRUE(ApplyRopeReference({L, &table, pos}, hm, hm).ok());
  ASSERT_TRUE(ApplyRopeReference({L, &table, pos}, HeadsView::Dense(token_major.data(), DType::kF32, 3, 2, 4),
                                 HeadsView::Dense(token_major.data(), DType::kF32, 3, 2, 4))
                  .ok());
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 3; ++t)
      for (int d = 0; d < 4; ++d) EXPECT_EQ(head_major[(h * 3 + t) * 4 + d], token_major[(t * 2 + h) * 4 + d]);
  // Token stride 4 and head stride 8 with 3 tokens: head 1 starts inside token 2 of head 0.
  const HeadsView bad{head_major.data(), DType::kF32, 3, 2, 4, 4, 8};
  const Status s = ApplyRopeReference({L, &table, pos}, bad, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("strides (token 4, head 8) overlap rows of head_dim 4 with 3 tokens and 2 heads"),
            std::string::npos)
      << s.message();
  // Products past int64 are refused, not wrapped into a pass.
  const HeadsView huge{head_major.data(), DType::kF32, 3, 3, 4, int64_t{1} << 62, int64_t{1} << 62};
  EXPECT_EQ(huge.Validate("x").code(), StatusCode::kInvalidArgument);
  // Rows apart, but the view would span 2^64 bytes: no int64 offset reaches its end.
  const HeadsView vast{head_major.data(), DType::kF32, 3, 2, 4, int64_t{1} << 61, 4};
  const Status v = vast.Validate("x");
  EXPECT_EQ(v.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.message().find("span more than 2^63 bytes"), std::string::npos) << v.message();
}

TEST(RopeReference, ErrorsNameTheFault) {
  RopeTable table = RopeTable::Build(DefaultRopeFrequencies(4, 10000.0).value(), 0, RopePrecision::kExact).value();
  std::vector<float> x(2 * 4);
  HeadsView v = HeadsView::Dense(x.data(), DType::kF32, 2, 1, 4);
  std::vector<int64_t> pos = {0, -3};
  Status s = ApplyRope({{RopePairing::kHalf, 4, 0, 4}, &table, pos}, v);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("position -3 at index 1"), std::string::npos) << s.message();
  pos = {0, int64_t{1} << 31};
  s = ApplyRope({{RopePairing::kHalf, 4, 0, 4}, &table, pos}, v);
  EXPECT_NE(s.message().find("2147483648 at index 1"), std::string::npos) << s.message();
  pos = {0};
  s = ApplyRope({{RopePairing::kHalf, 4, 0, 4}, &table, pos}, v);
  EXPECT_NE(s.message().find("1 positions for 2 tokens"), std::string::npos) << s.message();
  pos = {0, 1};
  s = ApplyRope({{RopePairing::kHalf, 4, 0, 3}, &table, pos}, v);
  EXPECT_NE(s.message().find("rotary_dim 3"), std::string::npos) << s.message();
  s = ApplyRope({{RopePairing::kHalf, 4, 2, 4}, &table, pos}, v);
  EXPECT_NE(s.message().find("does not fit head_dim 4"), std::string::npos) << s.message();
  s = ApplyRope({{RopePairing::kHalf, 6, 0, 4}, &table, pos}, v);
  EXPECT_NE(s.message().find("head_dim 4, layout says 6"), std::string::npos) << s.message();
  std::vector<float> k(2 * 3 * 4), q(2 * 4 * 4);
  s = ApplyRopeQK({{RopePairing::kHalf, 4, 0, 4}, &table, pos}, HeadsView::Dense(q.data(), DType::kF32, 2, 4, 4),
                  HeadsView::Dense(k.data(), DType::kF32, 2, 3, 4));
  EXPECT_NE(s.message().find("4 query heads are not a multiple of 3 key heads"), std::string::npos) << s.message();
  RopeTable wide = RopeTable::Build(DefaultRopeFrequencies(8, 10000.0).value(), 0, RopePrecision::kExact).value();
  s = ApplyRope({{RopePairing::kHalf, 4, 0, 4}, &wide, pos}, v);
  EXPECT_NE(s.message().find("table has 4 frequency pairs"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace posenc
