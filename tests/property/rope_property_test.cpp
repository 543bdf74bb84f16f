// RoPE's two properties from the seed, over random heads, layouts and positions: a rotation keeps
// the norm of every pair (and leaves the non-rotated dims alone), and q_m . k_n depends only on m - n,
// so shifting both positions by s (up to 10^6) keeps the score, within 1e-5 of |q||k| in exact precision.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/kernels/rope.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

struct Case {
  RotaryLayout layout;
  double base;
};

// A random layout: head_dim 2..128 (even and odd head dims when partial), rotary window anywhere.
Case RandomCase(std::mt19937_64& rng) {
  static const int64_t kDims[] = {2, 4, 6, 8, 10, 16, 32, 48, 64, 80, 96, 128, 7, 33};
  const int64_t head_dim = kDims[rng() % std::size(kDims)];
  const int64_t max_pairs = head_dim / 2;
  const bool partial = rng() % 3 == 0;
  const int64_t pairs = partial ? 1 + static_cast<int64_t>(rng() % max_pairs) : max_pairs;
  const int64_t start = static_cast<int64_t>(rng() % (head_dim - 2 * pairs + 1));
  static const double kBases[] = {10000.0, 500000.0, 1e6, 100.0};
  return {{rng() % 2 ? RopePairing::kHalf : RopePairing::kInterleaved, head_dim, start, 2 * pairs},
          kBases[rng() % std::size(kBases)]};
}

// Rotates `tokens` copies of `vec` to the given positions; returns [tokens * head_dim].
std::vector<float> Rotate(const Case& c, RopePrecision precision, const std::vector<float>& vec,
                          const std::vector<int64_t>& positions) {
  const int64_t d = c.layout.head_dim, t_count = static_cast<int64_t>(positions.size());
  std::vector<float> buf(static_cast<size_t>(t_count * d));
  for (int64_t t = 0; t < t_count; ++t) std::copy(vec.begin(), vec.end(), buf.begin() + t * d);
  const RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(c.layout.rotary_dim, c.base).value(), 16, precision).value();
  Status s = ApplyRope({c.layout, &table, positions}, HeadsView::Dense(buf.data(), DType::kF32, t_count, 1, d));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return buf;
}

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double{a[i]} * b[i];
  return s;
}

class RopeProperty : public ::testing::TestWithParam<RopePrecision> {};

TEST_P(RopeProperty, EveryPairKeepsItsNorm) {
  const RopePrecision precision = GetParam();
  const uint64_t seed = 31337;
  auto rng = testing::MakeRng(seed);
  for (int trial = 0; trial < 60; ++trial) {
    const Case c = RandomCase(rng);
    const std::vector<float> x = testing::RandomNormal(rng, static_cast<size_t>(c.layout.head_dim), 3.0f);
    std::vector<int64_t> pos = {0,
                                1,
                                2,
                                static_cast<int64_t>(rng() % 100000),
                                static_cast<int64_t>(rng() % kMaxRopePosition),
                                kMaxRopePosition - 1};
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " trial " << trial << " " << ToString(precision) << " "
                                      << ToString(c.layout.pairing) << " head_dim " << c.layout.head_dim << " rotary ["
                                      << c.layout.rotary_start << ", +" << c.layout.rotary_dim << ") base " << c.base);
    const std::vector<float> y = Rotate(c, precision, x, pos);
    const int64_t d = c.layout.head_dim;
    for (size_t t = 0; t < pos.size(); ++t) {
      const float* yt = y.data() + t * d;
      std::vector<bool> rotated(static_cast<size_t>(d), false);
      for (int64_t i = 0; i < c.layout.num_pairs(); ++i) {
        const int64_t a = c.layout.first(i), b = c.layout.second(i);
        rotated[a] = rotated[b] = true;
        const double before = std::hypot(double{x[a]}, double{x[b]});
        const double after = std::hypot(double{yt[a]}, double{yt[b]});
        // cos and sin rounded to float32 (cos^2 + sin^2 = 1 within 2^-23) and the outputs rounded
        // to float32 (2^-24 each): 4e-7 of the pair's norm covers both.
        EXPECT_NEAR(after, before, 4e-7 * before) << "position " << pos[t] << " pair " << i;
      }
      for (int64_t j = 0; j < d; ++j) {
        if (rotated[j]) continue;
        EXPECT_EQ(yt[j], x[j]) << "pass-through dim " << j << " changed at position " << pos[t];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothPrecisions, RopeProperty,
                         ::testing::Values(RopePrecision::kReference, RopePrecision::kExact),
                         [](const ::testing::TestParamInfo<RopePrecision>& p) {
                           return std::string(ToString(p.param));
                         });

// q_m . k_n and q_{m+s} . k_{n+s}, for random q, k, m, n and the given shift; returns the largest
// |difference| / (|q| |k|) over `trials` random cases.
double WorstShiftError(RopePrecision precision, int64_t shift, uint64_t seed, int trials) {
  auto rng = testing::MakeRng(seed);
  double worst = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const Case c = RandomCase(rng);
    const int64_t d = c.layout.head_dim;
    const std::vector<float> q = testing::RandomNormal(rng, static_cast<size_t>(d));
    const std::vector<float> k = testing::RandomNormal(rng, static_cast<size_t>(d));
    const int64_t m = static_cast<int64_t>(rng() % 4096), n = static_cast<int64_t>(rng() % 4096);
    const std::vector<float> qr = Rotate(c, precision, q, {m, m + shift});
    const std::vector<float> kr = Rotate(c, precision, k, {n, n + shift});
    const double before = Dot(qr.data(), kr.data(), d);
    const double after = Dot(qr.data() + d, kr.data() + d, d);
    const double norm = std::sqrt(Dot(q.data(), q.data(), d) * Dot(k.data(), k.data(), d));
    const double err = std::fabs(after - before) / norm;
    EXPECT_TRUE(std::isfinite(err));
    worst = std::max(worst, err);
  }
  return worst;
}

TEST(RopeRelativeProperty, ScoreDependsOnlyOnDistanceInExactPrecision) {
  for (int64_t shift :
       {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{65536}, int64_t{123457}, int64_t{999999}, int64_t{1000000}}) {
    const uint64_t seed = 4242 + static_cast<uint64_t>(shift);
    const double worst = WorstShiftError(RopePrecision::kExact, shift, seed, 80);
    std::printf("exact precision, shift %lld: worst |q_m.k_n - q_(m+s).k_(n+s)| / (|q||k|) = %.3g (seed %llu)\n",
                static_cast<long long>(shift), worst, static_cast<unsigned long long>(seed));
    EXPECT_LT(worst, 1e-5) << "shift " << shift << " seed " << seed;
  }
}

TEST(RopeRelativeProperty, Float32AnglesLoseItAtLargeShifts) {
  // The contrast that makes `exact` necessary: angles position * inv_freq in float32 are off by up
  // to about position * 2^-24 radians, 0.06 rad at 10^6, so the shifted score drifts far past 1e-5.
  const double worst = WorstShiftError(RopePrecision::kReference, 1000000, 777, 80);
  std::printf("reference precision, shift 1000000: worst relative difference %.3g\n", worst);
  EXPECT_GT(worst, 1e-4);
  // ... while small shifts stay within float32 rounding in both precisions.
  EXPECT_LT(WorstShiftError(RopePrecision::kReference, 3, 778, 40), 1e-5);
}

TEST(RopeRelativeProperty, ScoreEqualsCosineOfDistanceForUnitPairs) {
  // The seed's derivation: for q = k = e_pair (one pair, first coordinate), q_m . k_n = cos((m - n) theta_i).
  auto rng = testing::MakeRng(5);
  for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved}) {
    const Case c{{pairing, 16, 0, 16}, 10000.0};
    const std::vector<double> inv_freq = DefaultRopeFrequencies(16, 10000.0)->inv_freq;
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t pair = static_cast<int64_t>(rng() % 8);
      std::vector<float> e(16, 0.0f);
      e[c.layout.first(pair)] = 1.0f;
      const int64_t m = static_cast<int64_t>(rng() % 1000000), n = static_cast<int64_t>(rng() % 1000000);
      const std::vector<float> qr = Rotate(c, RopePrecision::kExact, e, {m});
      const std::vector<float> kr = Rotate(c, RopePrecision::kExact, e, {n});
      EXPECT_NEAR(Dot(qr.data(), kr.data(), 16), std::cos(static_cast<double>(m - n) * inv_freq[pair]), 2e-7)
          << ToString(pairing) << " pair " << pair << " m " << m << " n " << n;
    }
  }
}

}  // namespace
}  // namespace posenc
