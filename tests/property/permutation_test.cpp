// The seed's first claim over random inputs: self-attention without positions is permutation-
// equivariant (reorder the tokens and the outputs are the same vectors, reordered the same way), and
// every positional scheme breaks that: sinusoidal (both layouts) and learned absolute positions added
// to x, RoPE on q and k (both pairings, partial rotary), ALiBi, T5 buckets and Shaw embeddings.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/math/attention.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/math/relative.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/sinusoidal.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

enum class Scheme {
  kNone,
  kSinusoidalInterleaved,
  kSinusoidalConcat,
  kLearned,
  kRopeHalf,
  kRopeInterleaved,
  kRopePartial,
  kAlibi,
  kT5,
  kShaw
};

const char* Name(Scheme s) {
  switch (s) {
    case Scheme::kNone: return "none";
    case Scheme::kSinusoidalInterleaved: return "sinusoidal-interleaved";
    case Scheme::kSinusoidalConcat: return "sinusoidal-concat";
    case Scheme::kLearned: return "learned";
    case Scheme::kRopeHalf: return "rope-half";
    case Scheme::kRopeInterleaved: return "rope-interleaved";
    case Scheme::kRopePartial: return "rope-partial";
    case Scheme::kAlibi: return "alibi";
    case Scheme::kT5: return "t5";
    case Scheme::kShaw: return "shaw";
  }
  return "?";
}

// A one-layer toy: x [T, d_model] -> q, k, v = x W_q, x W_k, x W_v -> attention, with the scheme's
// positions 0..T-1 injected where that scheme injects them.
struct Toy {
  int64_t d_model, heads, kv_heads, head_dim, max_positions = 64;
  std::vector<float> wq, wk, wv, wpe;
  std::vector<double> slopes;
  T5RelativeBias t5;
  ShawRelativeEmbeddings shaw;

  Toy(std::mt19937_64& rng, int64_t dm, int64_t h, int64_t hkv, int64_t d, uint64_t seed)
      : d_model(dm), heads(h), kv_heads(hkv), head_dim(d) {
    const float w = 1.0f / std::sqrt(static_cast<float>(dm));
    wq = testing::RandomNormal(rng, static_cast<size_t>(dm * h * d), w);
    wk = testing::RandomNormal(rng, static_cast<size_t>(dm * hkv * d), w);
    wv = testing::RandomNormal(rng, static_cast<size_t>(dm * hkv * d), w);
    wpe = testing::RandomNormal(rng, static_cast<size_t>(max_positions * dm));
    slopes = AlibiSlopes(h, AlibiVariant::kBloom).value();
    t5 = RandomT5Bias({true, 16, 32}, h, seed).value();
    shaw = RandomShawEmbeddings(4, d, seed, 0.7).value();
  }

  static Array Project(const Array& x, const std::vector<float>& w, int64_t heads, int64_t d) {
    return ProjectHeads(x, w, heads, d).value();
  }

  Array Forward(Array x, Scheme scheme) const {
    const int64_t t_count = x.dim(0);
    std::vector<int64_t> pos(static_cast<size_t>(t_count));
    std::iota(pos.begin(), pos.end(), 0);
    if (scheme == Scheme::kSinusoidalInterleaved || scheme == Scheme::kSinusoidalConcat) {
      const auto layout =
          scheme == Scheme::kSinusoidalConcat ? SinusoidalLayout::kConcat : SinusoidalLayout::kInterleaved;
      Array p = SinusoidalTable(pos, d_model, layout).value();
      EXPECT_TRUE(AddPositions(p, x).ok());
    }
    if (scheme == Scheme::kLearned) {
      Array p =
          LookupLearnedPositions(EmbeddingTable::View(wpe.data(), DType::kF32, max_positions, d_model), pos).value();
      EXPECT_TRUE(AddPositions(p, x).ok());
    }
    Array q = Project(x, wq, heads, head_dim), k = Project(x, wk, kv_heads, head_dim),
          v = Project(x, wv, kv_heads, head_dim);
    if (scheme == Scheme::kRopeHalf || scheme == Scheme::kRopeInterleaved || scheme == Scheme::kRopePartial) {
      RotaryLayout layout{scheme == Scheme::kRopeHalf ? RopePairing::kHalf : RopePairing::kInterleaved, head_dim, 0,
                          head_dim};
      if (scheme == Scheme::kRopePartial) layout.rotary_dim = 2 * std::max<int64_t>(1, head_dim / 4);
      const RopeTable table =
          RopeTable::Build(DefaultRopeFrequencies(layout.rotary_dim, 10000.0).value(), 64, RopePrecision::kReference)
              .value();
      const RopeArgs args{layout, &table, pos};
      EXPECT_TRUE(ApplyRopeQK(args, HeadsView::Of(q, "q").value(), HeadsView::Of(k, "k").value()).ok());
    }
    AttentionOptions o;  // no causal mask: the mask itself is positional
    if (scheme == Scheme::kAlibi) o.bias = AttentionBias::Alibi(slopes);
    if (scheme == Scheme::kT5) o.bias = AttentionBias::T5(t5);
    if (scheme == Scheme::kShaw) o.bias = AttentionBias::Shaw(shaw);
    return AttentionReference(q, k, v, o).value();
  }
};

// max over t of |out_perm[t] - out[perm[t]]|, relative to max |out|.
double EquivarianceGap(const Array& out, const Array& out_perm, const std::vector<int64_t>& perm) {
  const int64_t row = out.dim(1) * out.dim(2);
  double gap = 0, scale = 0;
  for (int64_t t = 0; t < out.dim(0); ++t)
    for (int64_t c = 0; c < row; ++c) {
      const double a = out_perm.data<float>()[t * row + c], b = out.data<float>()[perm[t] * row + c];
      gap = std::max(gap, std::fabs(a - b));
      scale = std::max(scale, std::fabs(b));
    }
  return gap / std::max(scale, 1e-30);
}

class Permutation : public ::testing::TestWithParam<Scheme> {};

TEST_P(Permutation, EquivariantOnlyWithoutPositions) {
  const Scheme scheme = GetParam();
  const uint64_t seed = 0xC0FFEE + static_cast<uint64_t>(scheme);
  auto rng = testing::MakeRng(seed);
  double min_gap = INFINITY, max_gap = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t kv_heads = 1 + static_cast<int64_t>(rng() % 2);
    const int64_t heads = kv_heads * (1 + static_cast<int64_t>(rng() % 3));
    const int64_t head_dim = 2 * (1 + static_cast<int64_t>(rng() % 16));
    const int64_t d_model = 2 * (2 + static_cast<int64_t>(rng() % 15));
    const int64_t tokens = 3 + static_cast<int64_t>(rng() % 14);
    Toy toy(rng, d_model, heads, kv_heads, head_dim, seed + trial);
    Array x = Array::Zeros(DType::kF32, {tokens, d_model}).value();
    const std::vector<float> e = testing::RandomNormal(rng, static_cast<size_t>(x.size()));
    std::copy(e.begin(), e.end(), x.data<float>());
    std::vector<int64_t> perm(static_cast<size_t>(tokens));
    std::iota(perm.begin(), perm.end(), 0);
    while (std::is_sorted(perm.begin(), perm.end())) std::shuffle(perm.begin(), perm.end(), rng);
    Array x_perm = x;
    for (int64_t t = 0; t < tokens; ++t)
      std::copy_n(x.data<float>() + perm[t] * d_model, d_model, x_perm.data<float>() + t * d_model);

    const double gap = EquivarianceGap(toy.Forward(x, scheme), toy.Forward(x_perm, scheme), perm);
    min_gap = std::min(min_gap, gap);
    max_gap = std::max(max_gap, gap);
    SCOPED_TRACE(::testing::Message() << "scheme " << Name(scheme) << " seed " << seed << " trial " << trial
                                      << " tokens " << tokens << " d_model " << d_model << " heads " << heads << "/"
                                      << kv_heads << " head_dim " << head_dim << " relative gap " << gap);
    if (scheme == Scheme::kNone) {
      // Same sums in another order: float64 accumulation, float32 inputs and outputs.
      EXPECT_LT(gap, 1e-6);
    } else {
      // A scheme that encodes position makes the reordered sentence give different vectors.
      EXPECT_GT(gap, 1e-3);
    }
  }
  std::printf("%s: relative equivariance gap over 12 random models and permutations, min %.3g max %.3g (seed %llu)\n",
              Name(scheme), min_gap, max_gap, static_cast<unsigned long long>(seed));
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, Permutation,
                         ::testing::Values(Scheme::kNone, Scheme::kSinusoidalInterleaved, Scheme::kSinusoidalConcat,
                                           Scheme::kLearned, Scheme::kRopeHalf, Scheme::kRopeInterleaved,
                                           Scheme::kRopePartial, Scheme::kAlibi, Scheme::kT5, Scheme::kShaw),
                         [](const ::testing::TestParamInfo<Scheme>& param_info) {
                           std::string n = Name(param_info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(Permutation, SetOfDotProductsIsUnchangedWithoutPositions) {
  // The seed's wording: swapping words leaves the set of pairwise dot products unchanged.
  auto rng = testing::MakeRng(99);
  const int64_t tokens = 6, d = 8;
  std::vector<float> x = testing::RandomNormal(rng, tokens * d);
  std::vector<int64_t> perm = {3, 0, 5, 1, 4, 2};
  auto dots = [&](const std::vector<int64_t>& order) {
    std::vector<double> out;
    for (int64_t a : order)
      for (int64_t b : order) {
        double s = 0;
        for (int64_t c = 0; c < d; ++c) s += double{x[a * d + c]} * x[b * d + c];
        out.push_back(s);
      }
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<int64_t> id(tokens);
  std::iota(id.begin(), id.end(), 0);
  EXPECT_EQ(dots(id), dots(perm));
}

}  // namespace
}  // namespace posenc
