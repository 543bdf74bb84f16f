// DescribeRopePairs: the per-pair table `posenc inspect` prints and Python's Scheme.pairs returns.
#include "posenc/math/rope_pairs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "posenc/config/hf_config.hpp"

namespace posenc {
namespace {

RopeConfig Config(const std::string& json) {
  Result<PositionScheme> s = ParseHfConfig(json, "test");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? s->rope : RopeConfig{};
}

TEST(DescribeRopePairs, Llama3KeepsHighFrequenciesAndDividesLowOnesByTheFactor) {
  const RopeConfig rc = Config(
      R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
          "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  Result<RopePairTable> t = DescribeRopePairs(rc, 131072);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->pairs.size(), 64u);
  const RopePairInfo& first = t->pairs.front();
  const RopePairInfo& last = t->pairs.back();
  EXPECT_EQ(first.first_dim, 0);
  EXPECT_EQ(first.second_dim, 64);  // half pairing: (i, i + 64)
  EXPECT_EQ(last.first_dim, 63);
  EXPECT_EQ(first.regime, PairRegime::kExtrapolated);
  EXPECT_DOUBLE_EQ(*first.divisor, 1.0);
  EXPECT_EQ(last.regime, PairRegime::kInterpolated);
  EXPECT_NEAR(*last.divisor, 8.0, 1e-12);
  EXPECT_DOUBLE_EQ(*last.wavelength, 2.0 * std::numbers::pi / last.frequency);
  EXPECT_EQ(first.component, -1);
  EXPECT_DOUBLE_EQ(t->attention_scaling, 1.0);
}

TEST(DescribeRopePairs, MultiAxisPairsCarryTheirComponent) {
  const RopeConfig rc = Config(
      R"({"model_type": "qwen2_vl", "hidden_size": 1536, "num_attention_heads": 12, "max_position_embeddings": 32768,
          "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})");
  Result<RopePairTable> t = DescribeRopePairs(rc, 32768);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->pairs.size(), 64u);
  EXPECT_EQ(t->pairs[0].component, 0);
  EXPECT_EQ(t->pairs[16].component, 1);
  EXPECT_EQ(t->pairs[63].component, 2);
}

TEST(DescribeRopePairs, ErrorsAreTheFrequencyFunctions) {
  RopeConfig rc = Config(R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2,
                             "max_position_embeddings": 4096, "rope_theta": 10000.0,
                             "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})");
  EXPECT_FALSE(DescribeRopePairs(rc, -5).ok());
}

}  // namespace
}  // namespace posenc
