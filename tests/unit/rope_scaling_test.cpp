// Each RoPE scaling at its edges: first and last pairs, YaRN's ramp ends, the LongRoPE switch at
// exactly original_max_position_embeddings and one past, dynamic NTK below / at / above the
// original length, proportional's zero tail, ggml's parameters; and the validation of each field.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_table.hpp"
#include "math/rope_scaling_table.hpp"

// The configs below name only the RopeScaling fields they set ({.factor = 8.0, ...}); the others keep
// their defaults, which g++ 12 would otherwise warn about for the fields with no default initializer.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace posenc {
namespace {

// A half-layout config over the whole head; the scaling's fields as given (designated initializers,
// in RopeScaling's order), the rest at their defaults.
RopeConfig Config(RopeScalingType type, int64_t rotary_dim, double base, RopeScaling scaling = {}) {
  RopeConfig c;
  c.layout = {RopePairing::kHalf, rotary_dim, 0, rotary_dim};
  c.base = base;
  c.scaling = std::move(scaling);
  c.scaling.type = type;
  return c;
}

double Plain(double base, int64_t i, int64_t dim) {
  return std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
}

RopeFrequencies Freqs(const RopeConfig& c, int64_t seq_len) {
  Result<RopeFrequencies> f = ComputeRopeFrequencies(c, seq_len);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : RopeFrequencies{};
}

TEST(RopeScaling, LinearDividesEveryPair) {
  RopeConfig c = Config(RopeScalingType::kLinear, 128, 10000.0);
  c.scaling.factor = 4.0;
  RopeFrequencies f = Freqs(c, 10);
  ASSERT_EQ(f.inv_freq.size(), 64u);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 0.25);
  EXPECT_DOUBLE_EQ(f.inv_freq[63], Plain(10000.0, 63, 128) / 4.0);
  EXPECT_EQ(f.attention_scaling, 1.0);
}

TEST(RopeScaling, StaticNtkKeepsFirstPairAndInterpolatesLastByFactor) {
  RopeConfig c = Config(RopeScalingType::kNtk, 128, 10000.0);
  c.scaling.factor = 4.0;
  RopeFrequencies f = Freqs(c, 10);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  // base' = base * factor^(R/(R-2)) makes the last pair exactly factor times slower.
  EXPECT_NEAR(f.inv_freq[63] / (Plain(10000.0, 63, 128) / 4.0), 1.0, 1e-13);
}

TEST(RopeScaling, DynamicNtkBelowAtAndAboveMax) {
  RopeConfig c = Config(RopeScalingType::kDynamicNtk, 128, 10000.0);
  c.scaling.factor = 2.0;
  c.max_position_embeddings = 4096;
  for (int64_t seq : {0, 3000, 4096}) {
    RopeFrequencies f = Freqs(c, seq);
    for (int64_t i : {0, 1, 63})
      EXPECT_DOUBLE_EQ(f.inv_freq[i], Plain(10000.0, i, 128)) << "seq " << seq << " pair " << i;
  }
  RopeFrequencies f = Freqs(c, 4097);
  const double base = 10000.0 * std::pow(2.0 * 4097.0 / 4096.0 - 1.0, 128.0 / 126.0);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  EXPECT_NEAR(f.inv_freq[63] / Plain(base, 63, 128), 1.0, 1e-13);
  EXPECT_LT(f.inv_freq[63], Plain(10000.0, 63, 128));
  // Pure function of seq_len: short again -> original frequencies again.
  EXPECT_DOUBLE_EQ(Freqs(c, 100).inv_freq[63], Plain(10000.0, 63, 128));
}

TEST(RopeScaling, YarnRampEnds) {
  // head_dim 128, theta 1e6, factor 8, original 8192, betas 16/2: ramp from pair 20 to pair 31.
  RopeConfig c = Config(RopeScalingType::kYarn, 128, 1e6,
                        {.factor = 8.0, .original_max_position_embeddings = 8192, .beta_fast = 16.0, .beta_slow = 2.0});
  RopeFrequencies f = Freqs(c, 1);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);                         // first pair: extrapolated
  EXPECT_DOUBLE_EQ(f.inv_freq[20], Plain(1e6, 20, 128));        // ramp start: still extrapolated
  EXPECT_DOUBLE_EQ(f.inv_freq[31], Plain(1e6, 31, 128) / 8.0);  // ramp end: interpolated
  EXPECT_DOUBLE_EQ(f.inv_freq[63], Plain(1e6, 63, 128) / 8.0);  // last pair
  const double ramp = 5.0 / 11.0;                               // pair 25
  EXPECT_NEAR(f.inv_freq[25], Plain(1e6, 25, 128) * (ramp / 8.0 + (1.0 - ramp)), 1e-15);
  EXPECT_DOUBLE_EQ(f.attention_scaling, 0.1 * std::log(8.0) + 1.0);
}

TEST(RopeScaling, YarnWithoutTruncateUsesFractionalBounds) {
  RopeConfig c = Config(RopeScalingType::kYarn, 128, 1e6,
                        {.factor = 8.0, .original_max_position_embeddings = 8192, .truncate = false});
  const double low = 128.0 * std::log(8192.0 / (32.0 * 2 * std::numbers::pi)) / (2 * std::log(1e6));
  const double high = 128.0 * std::log(8192.0 / (1.0 * 2 * std::numbers::pi)) / (2 * std::log(1e6));
  RopeFrequencies f = Freqs(c, 1);
  const int64_t i = static_cast<int64_t>(std::ceil(low));
  const double ramp = (static_cast<double>(i) - low) / (high - low);
  EXPECT_NEAR(f.inv_freq[i], Plain(1e6, i, 128) * (ramp / 8.0 + (1.0 - ramp)), 1e-15);
  c.scaling.truncate = true;
  EXPECT_NE(Freqs(c, 1).inv_freq[i], f.inv_freq[i]);
}

TEST(RopeScaling, YarnAttentionFactorVariants) {
  RopeConfig c =
      Config(RopeScalingType::kYarn, 64, 10000.0,
             {.factor = 40.0, .original_max_position_embeddings = 4096, .mscale = 0.707, .mscale_all_dim = 0.707});
  EXPECT_DOUBLE_EQ(Freqs(c, 1).attention_scaling, 1.0);  // DeepSeek-V3: equal mscales cancel
  c.scaling.mscale = 1.0;
  c.scaling.mscale_all_dim = 0.5;
  EXPECT_DOUBLE_EQ(Freqs(c, 1).attention_scaling, (0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1));
  c.scaling.attention_factor = 1.25;
  EXPECT_EQ(Freqs(c, 1).attention_scaling, 1.25);
}

TEST(RopeScaling, Llama3Bands) {
  RopeConfig c = Config(
      RopeScalingType::kLlama3, 128, 500000.0,
      {.factor = 8.0, .original_max_position_embeddings = 8192, .low_freq_factor = 1.0, .high_freq_factor = 4.0});
  RopeFrequencies f = Freqs(c, 1);
  for (int64_t i = 0; i < 64; ++i) {
    const double w = Plain(500000.0, i, 128);
    const double wavelen = 2 * std::numbers::pi / w;
    double want = w;
    if (wavelen > 8192.0)
      want = w / 8.0;
    else if (wavelen >= 2048.0) {
      const double s = (8192.0 / wavelen - 1.0) / 3.0;
      want = (1 - s) * w / 8.0 + s * w;
    }
    EXPECT_NEAR(f.inv_freq[i], want, 1e-15 * w) << "pair " << i;
  }
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(f.inv_freq[63], Plain(500000.0, 63, 128) / 8.0);
}

RopeConfig LongRope() {
  return Config(RopeScalingType::kLongRope, 8, 10000.0,
                {.factor = 32.0,
                 .original_max_position_embeddings = 4096,
                 .short_factor = {1.0, 1.5, 2.0, 2.5},
                 .long_factor = {3.0, 4.0, 5.0, 6.0}});
}

TEST(RopeScaling, LongRopeSwitchAtOriginalAndOnePast) {
  RopeConfig c = LongRope();
  RopeFrequencies at = Freqs(c, 4096), past = Freqs(c, 4097);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(at.inv_freq[i], Plain(10000.0, i, 8) / c.scaling.short_factor[i]) << i;
    EXPECT_DOUBLE_EQ(past.inv_freq[i], Plain(10000.0, i, 8) / c.scaling.long_factor[i]) << i;
  }
  const double want = std::sqrt(1 + std::log(32.0) / std::log(4096.0));
  EXPECT_DOUBLE_EQ(at.attention_scaling, want);  // applied in both regimes
  EXPECT_DOUBLE_EQ(past.attention_scaling, want);
  c.scaling.attention_factor = 1.1;
  EXPECT_EQ(Freqs(c, 1).attention_scaling, 1.1);
  c.scaling.attention_factor.reset();
  c.scaling.factor = 1.0;
  EXPECT_EQ(Freqs(c, 1).attention_scaling, 1.0);
}

TEST(RopeScaling, ProportionalZeroTailOverWholeHead) {
  RopeConfig c = Config(RopeScalingType::kProportional, 16, 1e6);
  c.scaling.partial_rotary_factor = 0.25;  // floor(0.25 * 16 / 2) = 2 rotating pairs of 8
  RopeFrequencies f = Freqs(c, 1);
  ASSERT_EQ(f.inv_freq.size(), 8u);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(f.inv_freq[1], std::pow(1e6, -2.0 / 16.0));  // exponent over head_dim, not 2*rotated
  for (int i = 2; i < 8; ++i) EXPECT_EQ(f.inv_freq[i], 0.0) << i;
  // pairs (i, i + head_dim/2)
  EXPECT_EQ(c.layout.second(1), 9);
  c.scaling.factor = 2.0;
  EXPECT_DOUBLE_EQ(Freqs(c, 1).inv_freq[1], std::pow(1e6, -2.0 / 16.0) / 2.0);
  const std::vector<PairRegime> r = ClassifyPairs(c, Freqs(c, 1));
  EXPECT_EQ(r[1], PairRegime::kInterpolated);
  EXPECT_EQ(r[7], PairRegime::kUnrotated);
}

TEST(RopeScaling, GgmlParameters) {
  RopeConfig c = Config(RopeScalingType::kGgml, 64, 10000.0);
  c.scaling.freq_scale = 0.25;
  c.scaling.attn_factor = 0.8;
  RopeFrequencies f = Freqs(c, 1);
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 0.25);
  EXPECT_DOUBLE_EQ(f.inv_freq[31], 0.25 * Plain(10000.0, 31, 64));
  EXPECT_EQ(f.attention_scaling, 0.8);  // no YaRN: attn_factor alone
  c.scaling.freq_factors.assign(32, 2.0);
  EXPECT_DOUBLE_EQ(Freqs(c, 1).inv_freq[31], 0.25 * Plain(10000.0, 31, 64) / 2.0);
  c.scaling.freq_factors.clear();
  c.scaling.ext_factor = 1.0;
  c.scaling.original_max_position_embeddings = 4096;
  f = Freqs(c, 1);
  EXPECT_DOUBLE_EQ(f.attention_scaling, 0.8 * (1 + 0.1 * std::log(4.0)));
  EXPECT_DOUBLE_EQ(f.inv_freq[0], 1.0);                             // below the ramp: extrapolated
  EXPECT_DOUBLE_EQ(f.inv_freq[31], 0.25 * Plain(10000.0, 31, 64));  // above: interpolated
}

// ggml's rope_yarn with beta_fast == beta_slow: corr dims floor/ceil of one value (float32), the ramp
// over max(0.001, high - low); as ggml_rope_yarn_corr_dims / rope_yarn_ramp describe it.
TEST(RopeScaling, GgmlEqualBetas) {
  RopeConfig c = Config(RopeScalingType::kGgml, 64, 10000.0,
                        {.original_max_position_embeddings = 4096,
                         .beta_fast = 8.0,
                         .beta_slow = 8.0,
                         .freq_scale = 0.25,
                         .ext_factor = 1.0});
  RopeFrequencies f = Freqs(c, 1);
  const float d = 64.0f * std::log(4096.0f / (8.0f * 2.0f * std::numbers::pi_v<float>)) / (2.0f * std::log(10000.0f));
  const double low = std::max(0.0f, std::floor(d)), high = std::min(63.0f, std::ceil(d));
  for (int64_t i = 0; i < 32; ++i) {
    const double w = Plain(10000.0, i, 64);
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double mix = 1.0 - std::clamp(y, 0.0, 1.0);
    EXPECT_NEAR(f.inv_freq[i], 0.25 * w * (1 - mix) + w * mix, 1e-15 * w) << "pair " << i;
  }
}

// ---- validation: each error names the key and the value ----

void ExpectError(const RopeConfig& c, const std::string& key, const std::string& value) {
  Result<RopeFrequencies> f = ComputeRopeFrequencies(c, 1);
  ASSERT_FALSE(f.ok()) << "expected an error naming " << key;
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find(key), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find(value), std::string::npos) << f.status().message();
}

TEST(RopeScalingValidation, FactorMissingOrNotPositive) {
  RopeConfig c = Config(RopeScalingType::kLinear, 64, 10000.0);
  c.scaling.factor = 0.0;
  ExpectError(c, "factor", "0");
  c.scaling.factor = -2.0;
  ExpectError(c, "factor", "-2");
}

TEST(RopeScalingValidation, LongRopeListLengths) {
  RopeConfig c = LongRope();
  c.scaling.short_factor.pop_back();
  ExpectError(c, "short_factor", "3 values");
  c = LongRope();
  c.scaling.long_factor.push_back(1.0);
  ExpectError(c, "long_factor", "5 values");
  c = LongRope();
  c.scaling.long_factor[2] = -1.0;
  ExpectError(c, "long_factor[2]", "-1");
}

// beta_fast below beta_slow would swap YaRN's bands: refused. (Equal betas were refused too until
// Kimi K2's beta_fast = beta_slow = 1: Hugging Face computes them, YarnEqualBetas below.)
TEST(RopeScalingValidation, BetaFastBelowBetaSlow) {
  RopeConfig c = Config(RopeScalingType::kYarn, 64, 10000.0,
                        {.factor = 4.0, .original_max_position_embeddings = 4096, .beta_fast = 1.0, .beta_slow = 2.0});
  ExpectError(c, "beta_fast", "1 (beta_slow 2)");
}

// Hugging Face's _compute_yarn_parameters with beta_fast == beta_slow: low = floor(d), high = ceil(d)
// of the same correction dim d, + 0.001 when they meet; computed here from that description.
TEST(RopeScaling, YarnEqualBetas) {
  for (double beta : {1.0, 4.0}) {
    RopeConfig c =
        Config(RopeScalingType::kYarn, 64, 50000.0,
               {.factor = 32.0, .original_max_position_embeddings = 4096, .beta_fast = beta, .beta_slow = beta});
    RopeFrequencies f = Freqs(c, 1);
    ASSERT_EQ(f.inv_freq.size(), 32u);
    const double d = 64.0 * std::log(4096.0 / (beta * 2 * std::numbers::pi)) / (2 * std::log(50000.0));
    double low = std::max(std::floor(d), 0.0), high = std::min(std::ceil(d), 63.0);
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < 32; ++i) {
      const double w = Plain(50000.0, i, 64);
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      EXPECT_NEAR(f.inv_freq[i], w / 32.0 * ramp + w * (1 - ramp), 1e-15 * w) << "beta " << beta << " pair " << i;
    }
    // One pair at most sits strictly between the two regimes.
    EXPECT_EQ(f.inv_freq[0], 1.0);
    EXPECT_DOUBLE_EQ(f.inv_freq[31], Plain(50000.0, 31, 64) / 32.0);
  }
}

TEST(RopeScalingValidation, YarnWithoutOriginalLength) {
  RopeConfig c = Config(RopeScalingType::kYarn, 64, 10000.0);
  c.scaling.factor = 4.0;
  ExpectError(c, "original_max_position_embeddings", "0");
}

// high_freq_factor below low_freq_factor is refused. (Equal factors were refused too until Llama 4,
// which ships low = high = 1: Hugging Face warns and computes them, Llama3EqualBandFactors below.)
TEST(RopeScalingValidation, Llama3HighBelowLow) {
  RopeConfig c = Config(
      RopeScalingType::kLlama3, 64, 10000.0,
      {.factor = 8.0, .original_max_position_embeddings = 8192, .low_freq_factor = 4.0, .high_freq_factor = 2.0});
  ExpectError(c, "high_freq_factor", "2 (low_freq_factor 4)");
}

// Hugging Face's _compute_llama3_parameters as written (torch.where twice, the smooth factor
// computed for every pair and selected by is_medium), in float64, for comparison.
std::vector<double> HfLlama3(double base, int64_t dim, double factor, double low, double high, double old_len) {
  std::vector<double> out;
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double w = Plain(base, i, dim);
    const double wavelen = 2 * std::numbers::pi / w;
    const double low_wl = old_len / low, high_wl = old_len / high;
    const double llama = wavelen > low_wl ? w / factor : w;
    const double smooth = (old_len / wavelen - low) / (high - low);
    const double smoothed = (1 - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
    out.push_back(medium ? smoothed : llama);
  }
  return out;
}

TEST(RopeScaling, Llama3EqualBandFactors) {
  // Llama-4-Scout: factor 16, low = high = 1, original 8192, theta 5e5, head_dim 128.
  RopeConfig c = Config(
      RopeScalingType::kLlama3, 128, 500000.0,
      {.factor = 16.0, .original_max_position_embeddings = 8192, .low_freq_factor = 1.0, .high_freq_factor = 1.0});
  RopeFrequencies f = Freqs(c, 1);
  const std::vector<double> hf = HfLlama3(500000.0, 128, 16.0, 1.0, 1.0, 8192.0);
  ASSERT_EQ(f.inv_freq.size(), hf.size());
  for (size_t i = 0; i < hf.size(); ++i) EXPECT_EQ(f.inv_freq[i], hf[i]) << "pair " << i;
  // The step: pairs 0..34 (wavelength up to 6695) kept, 35..63 (from 8219) divided by 16.
  EXPECT_EQ(f.inv_freq[34], Plain(500000.0, 34, 128));
  EXPECT_EQ(f.inv_freq[35], Plain(500000.0, 35, 128) / 16.0);
  const std::vector<PairRegime> r = ClassifyPairs(c, f);
  EXPECT_EQ(std::count(r.begin(), r.end(), PairRegime::kBlended), 0);
  EXPECT_EQ(std::count(r.begin(), r.end(), PairRegime::kInterpolated), 29);
  // Another band edge: low = high = 4 (edge at 2048), against the same formula.
  c.scaling.low_freq_factor = c.scaling.high_freq_factor = 4.0;
  f = Freqs(c, 1);
  const std::vector<double> hf4 = HfLlama3(500000.0, 128, 16.0, 4.0, 4.0, 8192.0);
  for (size_t i = 0; i < hf4.size(); ++i) EXPECT_EQ(f.inv_freq[i], hf4[i]) << "pair " << i;
}

// With low == high, a wavelength exactly on the edge makes Hugging Face's smooth factor 0/0 (NaN):
// refused, naming the pair. Pair 0 has inv_freq 1, wavelength 2 pi; find an original length whose
// edge old / low is exactly 2 pi in float64.
TEST(RopeScalingValidation, Llama3EqualFactorsWavelengthOnTheEdge) {
  RopeConfig c = Config(RopeScalingType::kLlama3, 64, 10000.0);
  c.scaling.factor = 8.0;
  bool found = false;
  for (int64_t old = 7; old < 1000 && !found; ++old) {
    const double low = static_cast<double>(old) / (2 * std::numbers::pi);
    if (static_cast<double>(old) / low != 2 * std::numbers::pi) continue;
    found = true;
    c.scaling.original_max_position_embeddings = old;
    c.scaling.low_freq_factor = c.scaling.high_freq_factor = low;
  }
  ASSERT_TRUE(found);
  Result<RopeFrequencies> f = ComputeRopeFrequencies(c, 1);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("low_freq_factor"), std::string::npos) << f.status().ToString();
  EXPECT_NE(f.status().message().find("pair 0"), std::string::npos) << f.status().ToString();
}

TEST(RopeScalingValidation, DynamicWithoutMaxPositions) {
  RopeConfig c = Config(RopeScalingType::kDynamicNtk, 64, 10000.0);
  c.scaling.factor = 2.0;
  ExpectError(c, "max_position_embeddings", "0");
}

// Dynamic NTK's base grows with the length: a config whose base overflows float64 before 2^31 tokens is
// refused when it is read (not at the first long call), naming the scaled base; one that holds is
// answered up to 2^31 and refused past it. The Qwen alpha variant is the same rule.
TEST(RopeScalingValidation, DynamicBaseMustHoldToTheLongestSequence) {
  for (RopeScalingType type : {RopeScalingType::kDynamicNtk, RopeScalingType::kQwenDynamicNtk}) {
    SCOPED_TRACE(ToString(type));
    RopeConfig c = Config(type, 64, 1e305);
    c.scaling.factor = 2.0;
    c.max_position_embeddings = 2048;
    c.scaling.original_max_position_embeddings = 2048;
    const Status s = ValidateRopeConfig(c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("seq_len 2147483648"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rope_theta 1e+305"), std::string::npos) << s.message();
    EXPECT_FALSE(ComputeRopeFrequencies(c, 1).ok());

    c.base = 10000.0;
    ASSERT_TRUE(ValidateRopeConfig(c).ok());
    EXPECT_TRUE(ComputeRopeFrequencies(c, kMaxRopePosition).ok());
    const Result<RopeFrequencies> past = ComputeRopeFrequencies(c, kMaxRopePosition + 1);
    ASSERT_FALSE(past.ok());
    EXPECT_NE(past.status().message().find("seq_len 2147483649 is past 2^31"), std::string::npos)
        << past.status().message();
  }
}

TEST(RopeScalingValidation, ProportionalRotatingNothing) {
  RopeConfig c = Config(RopeScalingType::kProportional, 16, 10000.0);
  c.scaling.partial_rotary_factor = 0.1;  // floor(0.8) = 0 pairs
  ExpectError(c, "partial_rotary_factor", "0.1");
}

TEST(RopeScalingValidation, GgmlFreqScaleAndBase) {
  RopeConfig c = Config(RopeScalingType::kGgml, 64, 10000.0);
  c.scaling.freq_scale = 0.0;
  ExpectError(c, "freq_scale", "0");
  c = Config(RopeScalingType::kNone, 64, -5.0);
  ExpectError(c, "rope_theta", "-5");
}

// Keys each in range whose product is not: the frequencies themselves must give finite float32
// angles for every position below 2^31 (found by the config fuzzer: a ggml freq_scale of 7.8e52
// parsed, then built a table of NaN). The parsers call ValidateRopeConfig, so such a config is
// refused where it is read, naming the scaling, the pair and its frequency.
TEST(RopeScalingValidation, FrequenciesBeyondFloat32AnglesAreRefused) {
  RopeConfig c = Config(RopeScalingType::kGgml, 64, 10000.0);
  c.source = "model.json";
  // 7.8e52 itself is outside float32, the type ggml_rope_ext takes freq_scale in (issue 32: every
  // float key of the ggml row), so the key is refused by name; 1e30 is a float32 value whose
  // frequencies still break the angle bound.
  c.scaling.freq_scale = 7.8e52;
  const Status key = ValidateRopeConfig(c);
  EXPECT_NE(key.message().find("'freq_scale' = 7.8e+52 is outside float32"), std::string::npos) << key.message();
  c.scaling.freq_scale = 1e30;
  for (const Status& s : {ValidateRopeConfig(c), ComputeRopeFrequencies(c, 16).status()}) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    for (const char* needle : {"model.json", "ggml", "inv_freq[0] = 1e+30", "2^31"})
      EXPECT_NE(s.message().find(needle), std::string::npos) << needle << " in: " << s.message();
  }
  c.scaling.freq_scale = 1e20;  // 1e20 rad/token: angles of 2^31 positions still fit a float32
  EXPECT_TRUE(ValidateRopeConfig(c).ok());
  c.scaling.freq_scale = 1e30;
  EXPECT_EQ(ValidateRopeConfig(c).code(), StatusCode::kInvalidArgument);
  // The same bound where a table is built from frequencies handed in directly.
  RopeFrequencies f;
  f.inv_freq = {1.0, -2e29};
  const Status t = RopeTable::Build(f, 4, RopePrecision::kReference).status();
  EXPECT_EQ(t.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.message().find("inv_freq[1]"), std::string::npos) << t.message();
  f.inv_freq = {1.0, -1e29};
  auto ok = RopeTable::Build(f, 4, RopePrecision::kReference);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  for (int64_t p = 0; p < 4; ++p) EXPECT_TRUE(std::isfinite(ok->cos_row(p)[1]) && std::isfinite(ok->sin_row(p)[1]));
}

TEST(RopeScalingValidation, HeadDimPastTheBoundIsRefused) {
  RopeConfig c = Config(RopeScalingType::kNone, 64, 10000.0);
  c.layout.head_dim = c.layout.rotary_dim = kMaxRopeHeadDim * 2;
  const Status s = ValidateRopeConfig(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("head_dim 2097152 is beyond 1048576"), std::string::npos) << s.message();
}

// ---- the variant list: every row's keys are validated and computed through the table ----

// valid: sets the key to a value every rule of the row accepts (equal values satisfy the ordering
// rules; a list given only optionally stays empty). !valid: breaks the key's rule; false for a key
// without one.
bool SetKey(RopeConfig& c, const RopeScalingKey& k, bool valid) {
  switch (k.rule) {
    case ScalingKeyRule::kPositive:
      if (auto* o = k.In<std::optional<double>>(c))
        *o = valid ? 1.5 : -1.0;
      else
        *k.In<double>(c) = valid ? 2.0 : -1.0;
      return true;
    case ScalingKeyRule::kNonNegative: *k.In<double>(c) = valid ? 0.0 : -1.0; return true;
    case ScalingKeyRule::kGivenPositive: *k.In<int64_t>(c) = valid ? 4096 : 0; return true;
    case ScalingKeyRule::kUnitInterval: *k.In<double>(c) = valid ? 0.5 : 1.5; return true;
    case ScalingKeyRule::kPairList:
      if (valid)
        k.In<std::vector<double>>(c)->assign(static_cast<size_t>(c.layout.rotary_dim / 2), 1.5);
      else
        k.In<std::vector<double>>(c)->assign(3, 1.0);
      return true;
    case ScalingKeyRule::kPairListIfGiven:
      if (!valid) k.In<std::vector<double>>(c)->assign(3, 1.0);
      return true;
    case ScalingKeyRule::kAny: return false;
  }
  return false;
}

RopeConfig ValidConfigOf(const RopeScalingSpec& row) {
  RopeConfig c = Config(row.type, 64, 10000.0);
  c.source = "table.json";
  for (const RopeScalingKey& k : row.keys) SetKey(c, k, /*valid=*/true);
  return c;
}

TEST(RopeScalingTable, OneRowPerTypeInEnumOrder) {
  ASSERT_EQ(RopeScalings().size(), static_cast<size_t>(RopeScalingType::kQwenDynamicNtk) + 1);
  for (size_t i = 0; i < RopeScalings().size(); ++i) {
    const RopeScalingSpec& row = RopeScalings()[i];
    EXPECT_EQ(static_cast<size_t>(row.type), i);
    EXPECT_EQ(ToString(row.type), row.name);
    EXPECT_EQ(&RopeScalingOf(row.type), &row);
    EXPECT_TRUE(row.compute != nullptr && row.regime_of != nullptr && row.nominal_factor != nullptr) << row.name;
    for (const ScalingSpelling& sp : row.spellings) EXPECT_EQ(FindRopeScaling(sp.name), &row) << sp.name;
    for (const RopeScalingKey& k : row.keys) {
      // The field's type is the key's kind, and the accessor of that type (and no other) reaches it.
      RopeConfig c;
      const ScalingKeyKind kind = k.kind();
      EXPECT_EQ(k.In<double>(c) != nullptr, kind == ScalingKeyKind::kNumber) << row.name << " " << k.name;
      EXPECT_EQ(k.In<int64_t>(c) != nullptr, kind == ScalingKeyKind::kInteger) << row.name << " " << k.name;
      EXPECT_EQ(k.In<bool>(c) != nullptr, kind == ScalingKeyKind::kBoolean) << row.name << " " << k.name;
      EXPECT_EQ(k.In<std::vector<double>>(c) != nullptr, kind == ScalingKeyKind::kNumberList) << k.name;
      EXPECT_EQ(k.In<std::optional<double>>(c) != nullptr, kind == ScalingKeyKind::kOptionalNumber) << k.name;
      EXPECT_EQ(FindScalingKey(row, k.name), &k);
    }
  }
  EXPECT_EQ(FindRopeScaling("ggml"), nullptr);  // ggml parameters are not a Hugging Face rope_type
  EXPECT_EQ(FindRopeScaling("su")->type, RopeScalingType::kLongRope);
  // The nominal factor and the unscaled frequencies come from the row.
  RopeConfig g = Config(RopeScalingType::kGgml, 64, 10000.0);
  g.scaling.freq_scale = 0.25;
  EXPECT_EQ(NominalScalingFactor(g), 4.0);
  RopeConfig n = Config(RopeScalingType::kNone, 64, 10000.0);
  n.scaling.factor = 8.0;
  EXPECT_EQ(NominalScalingFactor(n), 1.0);
  RopeConfig p = Config(RopeScalingType::kProportional, 64, 10000.0);
  p.layout = {RopePairing::kHalf, 64, 0, 32};  // a window, to tell head_dim from rotary_dim
  EXPECT_EQ(UnscaledFrequencies(p).size(), 32u);
  p.scaling.type = RopeScalingType::kLinear;
  EXPECT_EQ(UnscaledFrequencies(p).size(), 16u);
}

// A new row is all it takes: each row's keys at valid values compute; each key with a range rule,
// broken alone, is refused by ValidateRopeConfig and ComputeRopeFrequencies in the one message shape
// "rope config SOURCE: SCALING 'KEY' = VALUE RULE".
TEST(RopeScalingTable, EveryRowsKeysAreValidatedAndComputed) {
  int broken = 0;
  for (const RopeScalingSpec& row : RopeScalings()) {
    SCOPED_TRACE(std::string(row.name));
    const RopeConfig good = ValidConfigOf(row);
    ASSERT_TRUE(ValidateRopeConfig(good).ok()) << ValidateRopeConfig(good).ToString();
    RopeFrequencies f = Freqs(good, 8192);
    EXPECT_EQ(f.inv_freq.size(), 32u);
    for (const RopeScalingKey& k : row.keys) {
      RopeConfig bad = good;
      if (!SetKey(bad, k, /*valid=*/false)) continue;
      ++broken;
      for (const Status& s : {ValidateRopeConfig(bad), ComputeRopeFrequencies(bad, 1).status()}) {
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << k.name;
        EXPECT_EQ(s.message().rfind(fmt::format("rope config table.json: {} '{}", row.name, k.name), 0), 0u)
            << s.message();
      }
    }
  }
  // The rules of linear 1, ntk 1, dynamic 2, yarn 5, llama3 4, longrope 5, proportional 2, ggml 6,
  // qwen_dynamic_ntk 1 (seq_length as original_max_position_embeddings).
  EXPECT_EQ(broken, 27);
}

// The ordering rules accept equality (Kimi K2's betas, Llama 4's band factors) and refuse the reverse.
TEST(RopeScalingTable, OrderRulesAcceptEqualityAndRefuseTheReverse) {
  for (const RopeScalingSpec& row : RopeScalings()) {
    for (const ScalingOrderRule& o : row.orders) {
      RopeConfig c = ValidConfigOf(row);
      double* g = FindScalingKey(row, o.greater)->In<double>(c);
      double* l = FindScalingKey(row, o.lesser)->In<double>(c);
      *g = *l = 3.0;
      EXPECT_TRUE(ValidateRopeConfig(c).ok()) << row.name << ": " << ValidateRopeConfig(c).ToString();
      *l = 4.0;
      const Status s = ValidateRopeConfig(c);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(fmt::format("'{}' = 3 ({} 4) must be at least {}", o.greater, o.lesser, o.lesser)),
                std::string::npos)
          << s.message();
    }
  }
}

// ---- range rules checked once ----

// A validated config (ValidateRopeConfig, as the readers call it) is not validated or computed again
// by ComputeRopeFrequencies; LongRoPE's two regimes are computed once each. A hand-built config, or
// one changed after validation, is still validated in full.
TEST(RopeScalingValidation, ValidatedOnceThenTrusted) {
  RopeConfig c = ValidConfigOf(RopeScalingOf(RopeScalingType::kYarn));
  int64_t before = RopeFrequencyComputations();
  ASSERT_TRUE(ValidateRopeConfig(c).ok());
  EXPECT_EQ(RopeFrequencyComputations() - before, 1);  // one regime
  before = RopeFrequencyComputations();
  RopeFrequencies kept = Freqs(c, 100000);
  c.layout.pairing = RopePairing::kInterleaved;  // pairing does not change the frequencies
  RopeFrequencies again = Freqs(c, 7);
  EXPECT_EQ(RopeFrequencyComputations() - before, 0);
  EXPECT_EQ(kept.inv_freq, again.inv_freq);
  RopeConfig copy = c;  // equal frequency inputs: known, not computed again
  before = RopeFrequencyComputations();
  EXPECT_EQ(Freqs(copy, 7).inv_freq, kept.inv_freq);
  EXPECT_EQ(RopeFrequencyComputations() - before, 0);

  RopeConfig lr = ValidConfigOf(RopeScalingOf(RopeScalingType::kLongRope));
  lr.scaling.long_factor.assign(32, 4.0);
  before = RopeFrequencyComputations();
  ASSERT_TRUE(ValidateRopeConfig(lr).ok());
  EXPECT_EQ(RopeFrequencyComputations() - before, 2);  // short and long regime
  before = RopeFrequencyComputations();
  EXPECT_DOUBLE_EQ(Freqs(lr, 4096).inv_freq[1], Plain(10000.0, 1, 64) / 1.5);
  EXPECT_DOUBLE_EQ(Freqs(lr, 4097).inv_freq[1], Plain(10000.0, 1, 64) / 4.0);
  EXPECT_EQ(RopeFrequencyComputations() - before, 0);

  // Changed after validation: validated again, and refused.
  c.scaling.factor = -3.0;
  ExpectError(c, "'factor' = -3", "must be finite and > 0");
  c.scaling.factor = 2.0;
  c.base = 0.0;
  ExpectError(c, "rope_theta", "0");
  // Built in code, never validated: refused by ComputeRopeFrequencies.
  RopeConfig hand = Config(RopeScalingType::kLlama3, 64, 10000.0,
                           {.factor = 8.0, .original_max_position_embeddings = 8192, .high_freq_factor = 0.5});
  ExpectError(hand, "high_freq_factor", "0.5 (low_freq_factor 1)");
  // Dynamic NTK past max_position_embeddings: computed for that length, still checked.
  RopeConfig dyn = ValidConfigOf(RopeScalingOf(RopeScalingType::kDynamicNtk));
  ASSERT_TRUE(ValidateRopeConfig(dyn).ok());
  before = RopeFrequencyComputations();
  EXPECT_LT(Freqs(dyn, 9000).inv_freq[1], Plain(10000.0, 1, 64));
  EXPECT_DOUBLE_EQ(Freqs(dyn, 10).inv_freq[1], Plain(10000.0, 1, 64));
  EXPECT_EQ(RopeFrequencyComputations() - before, 1);
}

}  // namespace
}  // namespace posenc
