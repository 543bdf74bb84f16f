// The seed's three hands-on exercises, computed with posenc's RoPE and checked to the digits the
// seed prints (0.7071, 1.0000, [-3.0, -4.0], 5.0). A 2-dim head has one pair, whose frequency is
// the exercise's theta: a RopeFrequencies built directly with inv_freq = {theta}.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "posenc/kernels/rope.hpp"

namespace posenc {
namespace {

// Rotates the 2-vector `v` at `position` with frequency `theta`, in the given pairing and precision.
std::vector<float> Rotate2(std::vector<float> v, int64_t position, double theta, RopePairing pairing,
                           RopePrecision precision) {
  const RopeTable table = RopeTable::Build(RopeFrequencies{{theta}, 1.0}, 4, precision).value();
  const RotaryLayout layout{pairing, 2, 0, 2};
  const std::vector<int64_t> pos = {position};
  Status s = ApplyRope({layout, &table, pos}, HeadsView::Dense(v.data(), DType::kF32, 1, 1, 2));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return v;
}

double Norm(const std::vector<float>& v) { return std::hypot(double{v[0]}, double{v[1]}); }
std::string F4(double x) { return fmt::format("{:.4f}", x); }
std::string F1(double x) { return fmt::format("{:.1f}", x); }

// The seed's printout of `before` rotated into `after`, to `digits` decimals: both components, and the
// norm, the same before and after.
void ExpectPrinted(const std::vector<float>& before, const std::vector<float>& after, int digits, const char* x,
                   const char* y, const char* norm) {
  const auto print = [digits](double d) { return fmt::format("{:.{}f}", d, digits); };
  EXPECT_EQ(print(after[0]), x);
  EXPECT_EQ(print(after[1]), y);
  EXPECT_EQ(print(Norm(before)), norm);
  EXPECT_EQ(print(Norm(after)), norm);
}

struct Setting {
  RopePairing pairing;
  RopePrecision precision;
};

class SeedExercises : public ::testing::TestWithParam<Setting> {};

TEST_P(SeedExercises, Exercise1RotateByFortyFiveDegrees) {
  // v = [1, 0] at m = 1, theta = pi/4 -> v' = [0.7071, 0.7071], norm 1.0000.
  const auto [pairing, precision] = GetParam();
  const std::vector<float> v = Rotate2({1.0f, 0.0f}, 1, std::numbers::pi / 4, pairing, precision);
  ExpectPrinted({1.0f, 0.0f}, v, 4, "0.7071", "0.7071", "1.0000");
  EXPECT_NEAR(v[0], std::sqrt(0.5), 1e-7);
}

TEST_P(SeedExercises, Exercise2DotProductIsCosineOfDistance) {
  // q = k = [1, 0], m = 2, n = 1, theta = pi/4: q' = [0, 1], k' = [0.7071, 0.7071],
  // q'.k' = 0.7071 = cos((m - n) theta).
  const auto [pairing, precision] = GetParam();
  const double theta = std::numbers::pi / 4;
  const std::vector<float> q = Rotate2({1.0f, 0.0f}, 2, theta, pairing, precision);
  const std::vector<float> k = Rotate2({1.0f, 0.0f}, 1, theta, pairing, precision);
  EXPECT_NEAR(q[0], 0.0, 1e-7);  // float32 angles: cos(float(pi/2)) = -4.4e-8, printed "-0.0"
  EXPECT_EQ(F1(q[1]), "1.0");
  EXPECT_EQ(F4(k[0]), "0.7071");
  EXPECT_EQ(F4(k[1]), "0.7071");
  const double dot = double{q[0]} * k[0] + double{q[1]} * k[1];
  EXPECT_EQ(F4(dot), "0.7071");
  EXPECT_EQ(F4(std::cos((2 - 1) * theta)), "0.7071");
  EXPECT_NEAR(dot, std::cos(theta), 2e-7);
}

TEST_P(SeedExercises, Exercise3HalfTurnFlipsTheVectorKeepsTheNorm) {
  // w = [3, 4] at m = 2, theta = pi/2 (a 180 degree turn) -> w' = [-3.0, -4.0], norm 5.0.
  const auto [pairing, precision] = GetParam();
  const std::vector<float> w = Rotate2({3.0f, 4.0f}, 2, std::numbers::pi / 2, pairing, precision);
  ExpectPrinted({3.0f, 4.0f}, w, 1, "-3.0", "-4.0", "5.0");
  EXPECT_NEAR(w[0], -3.0, 2e-6);
  EXPECT_NEAR(w[1], -4.0, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndPrecisions, SeedExercises,
                         ::testing::Values(Setting{RopePairing::kInterleaved, RopePrecision::kExact},
                                           Setting{RopePairing::kInterleaved, RopePrecision::kReference},
                                           Setting{RopePairing::kHalf, RopePrecision::kExact},
                                           Setting{RopePairing::kHalf, RopePrecision::kReference}),
                         [](const ::testing::TestParamInfo<Setting>& p) {
                           return std::string(ToString(p.param.pairing)) + "_" +
                                  std::string(ToString(p.param.precision));
                         });

}  // namespace
}  // namespace posenc
