// RoPE backward (RopeDirection::kBackward): the gradient of a rotation is the rotation by -angle.
// Checked against central finite differences of a linear loss and as forward-then-backward = identity.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "posenc/kernels/rope.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

struct Case {
  RopePairing pairing;
  int64_t head_dim, rotary_start, rotary_dim;
};

const Case kCases[] = {{RopePairing::kHalf, 16, 0, 16},
                       {RopePairing::kInterleaved, 16, 0, 16},
                       {RopePairing::kHalf, 20, 4, 10},
                       {RopePairing::kInterleaved, 24, 6, 14}};

// L(x) = sum_j w_j * RoPE(x)_j, so dL/dx = RoPE^T(w) = backward(w). RoPE is linear, so central
// differences are exact up to float rounding: |fd - grad| <= 4 * 2^-24 * sum|w| * max|x| / h.
TEST(RopeBackward, MatchesFiniteDifferences) {
  const int64_t T = 3, H = 2;
  for (const Case& c : kCases) {
    SCOPED_TRACE(
        fmt::format("{} head_dim {} window {}@{}", ToString(c.pairing), c.head_dim, c.rotary_dim, c.rotary_start));
    RotaryLayout layout{c.pairing, c.head_dim, c.rotary_start, c.rotary_dim};
    auto table =
        RopeTable::Build(DefaultRopeFrequencies(c.rotary_dim, 10000.0).value(), 4, RopePrecision::kExact).value();
    std::vector<int64_t> pos = {1, 3, 1234};  // the last is computed on the fly
    auto rng = testing::MakeRng(5);
    const size_t n = static_cast<size_t>(T * H * c.head_dim);
    auto x = testing::RandomNormal(rng, n), w = testing::RandomNormal(rng, n);
    auto loss = [&](const std::vector<float>& in) {
      std::vector<float> y = in;
      RopeArgs args{layout, &table, pos};
      EXPECT_TRUE(ApplyRope(args, HeadsView::Dense(y.data(), DType::kF32, T, H, c.head_dim)).ok());
      double l = 0;
      for (size_t j = 0; j < n; ++j) l += static_cast<double>(w[j]) * y[j];
      return l;
    };
    std::vector<float> grad = w;
    RopeArgs back{layout, &table, pos, RopeDirection::kBackward};
    ASSERT_TRUE(ApplyRope(back, HeadsView::Dense(grad.data(), DType::kF32, T, H, c.head_dim)).ok());
    double sum_w = 0, max_x = 0;
    for (size_t j = 0; j < n; ++j)
      sum_w += std::fabs(w[j]), max_x = std::max(max_x, std::fabs(static_cast<double>(x[j])));
    const float h = 0.5f;  // exact in float; linearity makes the step size free
    const double tol = 4 * std::ldexp(1.0, -24) * sum_w * (max_x + h) / h;
    for (size_t j = 0; j < n; ++j) {
      auto xp = x, xm = x;
      xp[j] += h;
      xm[j] -= h;
      const double fd = (loss(xp) - loss(xm)) / (2.0 * h);
      EXPECT_NEAR(fd, grad[j], tol) << "element " << j;
    }
  }
}

// backward(forward(x)) = x: per output, within 4 ulp of the pair's magnitude (two kernels, each
// within 1.5 ulp, plus the rounding of cos^2 + sin^2 = 1 in float32).
TEST(RopeBackward, ForwardThenBackwardIsIdentity) {
  const int64_t T = 5, H = 3;
  for (const Case& c : kCases) {
    for (DType dtype : {DType::kF32}) {
      RotaryLayout layout{c.pairing, c.head_dim, c.rotary_start, c.rotary_dim};
      auto table =
          RopeTable::Build(DefaultRopeFrequencies(c.rotary_dim, 500000.0).value(), 64, RopePrecision::kExact).value();
      std::vector<int64_t> pos = {0, 1, 63, 64, 100000};
      auto rng = testing::MakeRng(9);
      const size_t n = static_cast<size_t>(T * H * c.head_dim);
      const auto x = testing::RandomNormal(rng, n);
      auto y = x;
      RopeArgs fwd{layout, &table, pos}, bwd{layout, &table, pos, RopeDirection::kBackward};
      auto view = HeadsView::Dense(y.data(), dtype, T, H, c.head_dim);
      ASSERT_TRUE(ApplyRope(fwd, view).ok());
      ASSERT_TRUE(ApplyRope(bwd, view).ok());
      for (int64_t r = 0; r < T * H; ++r)
        for (int64_t i = 0; i < layout.num_pairs(); ++i) {
          const size_t a = static_cast<size_t>(r * c.head_dim + layout.first(i)),
                       b = static_cast<size_t>(r * c.head_dim + layout.second(i));
          const double mag = std::hypot(x[a], x[b]);
          const double tol = 4 * std::ldexp(1.0, std::ilogb(std::max(mag, 1e-30)) - 23);
          EXPECT_NEAR(y[a], x[a], tol) << "row " << r << " pair " << i;
          EXPECT_NEAR(y[b], x[b], tol) << "row " << r << " pair " << i;
        }
      // Dims outside the window never change.
      for (size_t j = 0; j < n; ++j) {
        const int64_t d = static_cast<int64_t>(j) % c.head_dim;
        if (d < c.rotary_start || d >= c.rotary_start + c.rotary_dim) { EXPECT_EQ(y[j], x[j]); }
      }
    }
  }
}

}  // namespace
}  // namespace posenc
