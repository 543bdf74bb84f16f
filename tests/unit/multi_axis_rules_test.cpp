// Multi-axis RoPE's rules: section rules of each layout against hand-computed tables (golden/FORMAT.md's
// examples among them), errors, frequencies and config readers (Hugging Face text and vision, ggml
// modes). Applying them (fast path against the reference, the CLI): multi_axis_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/config/multi_axis_config.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_table.hpp"
#include "multi_axis_test_rules.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using testing::Ggml;
using testing::Hf;

std::vector<int64_t> Components(const MultiAxisRope& m, int64_t pairs) {
  Result<std::vector<int64_t>> r = PairComponents(m, pairs, "test");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<int64_t>{};
}
std::vector<int64_t> FreqIndices(const MultiAxisRope& m, int64_t pairs) {
  Result<std::vector<int64_t>> r = PairFrequencyIndices(m, pairs, "test");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<int64_t>{};
}
std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// ---------- section rules ----------

TEST(MultiAxisSections, HfChunked) {
  EXPECT_EQ(Components(Hf(SectionLayout::kChunked, {2, 3, 3}, 3), 8), (std::vector<int64_t>{0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(Components(Hf(SectionLayout::kChunked, {0, 2, 1}, 3), 3), (std::vector<int64_t>{1, 1, 2}));
  // Qwen2-VL / Qwen2.5-VL [16, 24, 24]: t [0, 16), h [16, 40), w [40, 64); frequency index = pair.
  const std::vector<int64_t> q = Components(Hf(SectionLayout::kChunked, {16, 24, 24}, 3), 64);
  ASSERT_EQ(q.size(), 64u);
  for (int64_t j = 0; j < 64; ++j) EXPECT_EQ(q[static_cast<size_t>(j)], j < 16 ? 0 : j < 40 ? 1 : 2) << j;
  EXPECT_EQ(FreqIndices(Hf(SectionLayout::kChunked, {16, 24, 24}, 3), 64), Iota(64));
}

TEST(MultiAxisSections, HfInterleaved) {
  // h if j % 3 == 1 and j < 3 s_h, w if j % 3 == 2 and j < 3 s_w, otherwise t.
  EXPECT_EQ(Components(Hf(SectionLayout::kInterleaved, {2, 1, 1}, 3), 4), (std::vector<int64_t>{0, 1, 2, 0}));
  EXPECT_EQ(Components(Hf(SectionLayout::kInterleaved, {2, 2, 0}, 3), 4), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(Components(Hf(SectionLayout::kInterleaved, {3, 1, 2}, 3), 6), (std::vector<int64_t>{0, 1, 2, 0, 0, 2}));
  // Qwen3-VL [24, 20, 20] (FORMAT.md): pairs 61 and 62 take t.
  const std::vector<int64_t> q = Components(Hf(SectionLayout::kInterleaved, {24, 20, 20}, 3), 64);
  ASSERT_EQ(q.size(), 64u);
  for (int64_t j = 0; j < 64; ++j) {
    const int64_t want = (j % 3 == 1 && j < 60) ? 1 : (j % 3 == 2 && j < 60) ? 2 : 0;
    EXPECT_EQ(q[static_cast<size_t>(j)], want) << j;
  }
  EXPECT_EQ(q[61], 0);
  EXPECT_EQ(q[62], 0);
  EXPECT_EQ(FreqIndices(Hf(SectionLayout::kInterleaved, {24, 20, 20}, 3), 64), Iota(64));
}

TEST(MultiAxisSections, GgmlMropeSectorsWrap) {
  // sector = j % sum(sections): [0, s0) p0, [s0, s0+s1) p1, [.., +s2) p2, the rest p3.
  EXPECT_EQ(Components(Ggml(SectionLayout::kChunked, {1, 1, 1, 1}), 6), (std::vector<int64_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(Components(Ggml(SectionLayout::kChunked, {2, 1, 0, 0}), 5), (std::vector<int64_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(Components(Ggml(SectionLayout::kChunked, {1, 1, 1, 2}), 5), (std::vector<int64_t>{0, 1, 2, 3, 3}));
  // Partial case of the golden set: n_dims 64 (32 pairs), [8, 12, 12, 0].
  const std::vector<int64_t> p = Components(Ggml(SectionLayout::kChunked, {8, 12, 12, 0}), 32);
  for (int64_t j = 0; j < 32; ++j) EXPECT_EQ(p[static_cast<size_t>(j)], j < 8 ? 0 : j < 20 ? 1 : 2) << j;
  // MROPE never resets the frequency index, even across a wrap.
  EXPECT_EQ(FreqIndices(Ggml(SectionLayout::kChunked, {1, 1, 1, 1}), 6), Iota(6));
}

TEST(MultiAxisSections, GgmlImropeFallsBackToP3) {
  // p1 if sector % 3 == 1 and < 3 s1, p2 if % 3 == 2 and < 3 s2, p0 if % 3 == 0 and < 3 s0, else p3.
  const std::vector<int64_t> q = Components(Ggml(SectionLayout::kInterleaved, {24, 20, 20, 0}), 64);
  ASSERT_EQ(q.size(), 64u);
  for (int64_t j = 0; j < 64; ++j) {
    const int64_t want = (j % 3 == 1 && j < 60) ? 1 : (j % 3 == 2 && j < 60) ? 2 : (j % 3 == 0 && j < 72) ? 0 : 3;
    EXPECT_EQ(q[static_cast<size_t>(j)], want) << j;
  }
  EXPECT_EQ(q[60], 0);
  EXPECT_EQ(q[61], 3);  // HF gives t here (FORMAT.md: ggml's IMROPE routes them to p3)
  EXPECT_EQ(q[62], 3);
  EXPECT_EQ(q[63], 0);
  EXPECT_EQ(Components(Ggml(SectionLayout::kInterleaved, {1, 1, 1, 0}), 5), (std::vector<int64_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(Components(Ggml(SectionLayout::kInterleaved, {1, 0, 1, 1}), 3), (std::vector<int64_t>{0, 3, 2}));
}

TEST(MultiAxisSections, GgmlVisionRestarts) {
  // Qwen2-VL's encoder in llama.cpp: D 80, n_dims 40 = pairs, sections [20, 20, 20, 20].
  const MultiAxisRope v = Ggml(SectionLayout::kChunkedRestart, {20, 20, 20, 20});
  const std::vector<int64_t> c = Components(v, 40);
  const std::vector<int64_t> k = FreqIndices(v, 40);
  for (int64_t j = 0; j < 40; ++j) {
    EXPECT_EQ(c[static_cast<size_t>(j)], j < 20 ? 0 : 1) << j;
    EXPECT_EQ(k[static_cast<size_t>(j)], j % 20) << j;
  }
  // Restart at every block and at the wrap of sum(sections).
  EXPECT_EQ(FreqIndices(Ggml(SectionLayout::kChunkedRestart, {2, 1, 0, 0}), 5), (std::vector<int64_t>{0, 1, 0, 0, 1}));
}

TEST(MultiAxisSections, HfVisionVariants) {
  // qwen2vl: chunked_restart [D/4, D/4]; pixtral: chunked_strided, h at f_{2k}, w at f_{2k+1}.
  EXPECT_EQ(FreqIndices(Hf(SectionLayout::kChunkedRestart, {3, 3}, 2), 6), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(FreqIndices(Hf(SectionLayout::kChunkedStrided, {3, 3}, 2), 6), (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(Components(Hf(SectionLayout::kChunkedStrided, {3, 3}, 2), 6), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
}

TEST(MultiAxisSections, LayoutNames) {
  for (SectionLayout l : {SectionLayout::kChunked, SectionLayout::kInterleaved, SectionLayout::kChunkedRestart,
                          SectionLayout::kChunkedStrided}) {
    SectionLayout back;
    ASSERT_TRUE(ParseSectionLayout(ToString(l), &back)) << ToString(l);
    EXPECT_EQ(back, l);
  }
  SectionLayout x;
  EXPECT_FALSE(ParseSectionLayout("round_robin", &x));
}

// ---------- errors ----------

void ExpectInvalid(const MultiAxisRope& m, int64_t pairs, const std::string& needle) {
  Status s = ValidateMultiAxisRope(m, pairs, "cfg.json");
  ASSERT_FALSE(s.ok()) << needle;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cfg.json"), std::string::npos) << s.message();
  EXPECT_FALSE(PairComponents(m, pairs, "cfg.json").ok());
}

TEST(MultiAxisErrors, SectionsAndComponents) {
  ExpectInvalid(Hf(SectionLayout::kChunked, {16, 24, 23}, 3), 64, "sum to 63");
  ExpectInvalid(Hf(SectionLayout::kInterleaved, {24, 20, 21}, 3), 64, "sum to 65");
  ExpectInvalid(Hf(SectionLayout::kChunked, {33, -1, 32}, 3), 64, "section 1 is -1");
  ExpectInvalid(Ggml(SectionLayout::kChunked, {16, 24, 24, int64_t{1} << 40}), 64, "beyond");
  ExpectInvalid(Hf(SectionLayout::kChunked, {16, 24, 24}, 2), 64, "component index 2 out of range");
  ExpectInvalid(Hf(SectionLayout::kInterleaved, {32, 32}, 2), 64, "3 components");
  ExpectInvalid(MultiAxisRope{SectionLayout::kChunked, SectionRules::kGgml, {16, 24, 24}, 4}, 64, "4 entries");
  ExpectInvalid(MultiAxisRope{SectionLayout::kChunked, SectionRules::kGgml, {16, 24, 24, 0}, 3}, 64, "4 position rows");
  ExpectInvalid(Ggml(SectionLayout::kChunked, {0, 0, 0, 0}), 64, "sum to 0");
  ExpectInvalid(Ggml(SectionLayout::kChunkedStrided, {1, 1, 1, 1}), 4, "chunked_strided");
  ExpectInvalid(Hf(SectionLayout::kChunked, {1}, 0), 1, "0 position components");
  ExpectInvalid(Hf(SectionLayout::kChunked, {}, 1), 0, "0 pairs");
}

TEST(MultiAxisErrors, Positions) {
  const std::vector<int64_t> values(10, 1);
  const std::vector<int64_t> bad_rows = {2, 5};
  Status s = ValidateMultiAxisPositions(bad_rows, values, 3, "pos.npy");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("[2, 5]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pos.npy"), std::string::npos) << s.message();
  const std::vector<int64_t> flat = {10};
  EXPECT_FALSE(ValidateMultiAxisPositions(flat, values, 1, "pos.npy").ok());
  std::vector<int64_t> neg = values;
  neg[7] = -3;
  s = ValidateMultiAxisPositions(bad_rows, neg, 2, "pos.npy");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("[1, 2] = -3"), std::string::npos) << s.message();
  EXPECT_TRUE(ValidateMultiAxisPositions(bad_rows, values, 2, "pos.npy").ok());
}

TEST(MultiAxisErrors, PerTokenTable) {
  RopeFrequencies f = DefaultRopeFrequencies(8, 10000.0).value();
  const std::vector<int64_t> comp = {0, 1, 2, 0};
  const std::vector<int64_t> pos(9, 0);
  Result<RopeTable> t = RopeTable::BuildPerToken(f, comp, 2, pos, RopePrecision::kReference);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("pair 2 takes component 2"), std::string::npos) << t.status().message();
  t = RopeTable::BuildPerToken(f, comp, 3, std::vector<int64_t>(8, 0), RopePrecision::kReference);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not 3 rows"), std::string::npos) << t.status().message();
  t = RopeTable::BuildPerToken(f, std::vector<int64_t>{0, 0}, 1, pos, RopePrecision::kReference);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("2 pair components for 4"), std::string::npos) << t.status().message();
  std::vector<int64_t> far = pos;
  far[4] = int64_t{1} << 31;
  t = RopeTable::BuildPerToken(f, comp, 3, far, RopePrecision::kReference);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(t.status().message().find("[1, 1]"), std::string::npos) << t.status().message();
}

// ---------- frequencies and config readers ----------

TEST(MultiAxisConfig, HfQwen25VlLegacyMrope) {
  Result<PositionScheme> s = ParseHfConfig(
      R"({"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 128000,
          "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})",
      "qwen25vl.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const RopeConfig& rc = s->rope;
  ASSERT_TRUE(rc.multi_axis.has_value());
  EXPECT_EQ(rc.scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(rc.layout.rotary_dim, 128);
  EXPECT_EQ(rc.multi_axis->layout, SectionLayout::kChunked);
  EXPECT_EQ(rc.multi_axis->sections, (std::vector<int64_t>{16, 24, 24}));
  Result<MultiAxisPlan> plan = ComputeMultiAxisRope(rc, 100);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (int64_t j = 0; j < 64; ++j)
    EXPECT_DOUBLE_EQ(plan->freqs.inv_freq[static_cast<size_t>(j)],
                     std::pow(1e6, -2.0 * static_cast<double>(j) / 128.0));
  EXPECT_EQ(plan->pair_component[15], 0);
  EXPECT_EQ(plan->pair_component[16], 1);
  EXPECT_EQ(plan->pair_component[40], 2);
  EXPECT_EQ(plan->num_components, 3);
}

TEST(MultiAxisConfig, HfQwen3VlNestedTextConfigIsInterleaved) {
  // The mrope_interleaved key is not read: the family decides (here it even says false).
  Result<PositionScheme> s = ParseHfConfig(
      R"({"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096,
          "num_attention_heads": 32, "head_dim": 128, "rope_theta": 5000000,
          "rope_scaling": {"mrope_interleaved": false, "mrope_section": [24, 20, 20], "rope_type": "default"}}})",
      "qwen3vl.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->rope.multi_axis.has_value());
  EXPECT_EQ(s->rope.multi_axis->layout, SectionLayout::kInterleaved);
  Result<MultiAxisPlan> plan = ComputeMultiAxisRope(s->rope, 10);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->pair_component[61], 0);
  EXPECT_EQ(plan->pair_component[58], 1);
}

TEST(MultiAxisConfig, HfQwen35DefaultsToQuarterRotary) {
  Result<PositionScheme> s = ParseHfConfig(
      R"({"model_type": "qwen3_5", "hidden_size": 2048, "num_attention_heads": 8, "head_dim": 256, "rope_parameters":
          {"rope_type": "default", "rope_theta": 10000000, "mrope_section": [11, 11, 10], "mrope_interleaved": true}})",
      "qwen35.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.head_dim, 256);
  EXPECT_EQ(s->rope.layout.rotary_dim, 64);
  ASSERT_TRUE(s->rope.multi_axis.has_value());
  EXPECT_EQ(s->rope.multi_axis->layout, SectionLayout::kInterleaved);
  // An explicit factor wins; then the sections must match its pair count.
  Result<PositionScheme> e = ParseHfConfig(
      R"({"model_type": "qwen3_5", "head_dim": 256, "partial_rotary_factor": 0.5, "rope_parameters":
          {"rope_type": "default", "rope_theta": 10000000, "mrope_section": [11, 11, 10]}})",
      "qwen35.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("mrope_section"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("rotary pair count is 64"), std::string::npos) << e.status().message();
}

TEST(MultiAxisConfig, HfErrors) {
  Result<PositionScheme> s = ParseHfConfig(
      R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1e6,
          "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 23]}})",
      "q.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("q.json"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("'mrope_section'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("sum to 63"), std::string::npos) << s.status().message();
  s = ParseHfConfig(R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
          "rope_scaling": {"type": "mrope", "mrope_section": [16, 24.5, 24]}})",
                    "q.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("mrope_section[1]"), std::string::npos) << s.status().message();
  s = ParseHfConfig(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
          "rope_scaling": {"rope_type": "default", "mrope_section": [16, 24, 24]}})",
                    "q.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("'llama'"), std::string::npos) << s.status().message();
  // A family config without mrope_section stays 1-D.
  s = ParseHfConfig(R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1e6})",
                    "q.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->rope.multi_axis.has_value());
}

TEST(MultiAxisConfig, GgmlModes) {
  const std::string base = R"("n_ctx_orig": 32768, "freq_base": 10000.0, "freq_scale": 1.0, "ext_factor": 0.0,
                              "attn_factor": 1.0, "beta_fast": 32.0, "beta_slow": 1.0)";
  Result<RopeConfig> m =
      RopeConfigFromGgmlParams(R"({"n_dims": 64, "mode": 8, "sections": [8, 12, 12, 0], )" + base + "}", 128, "g");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->layout.rotary_dim, 64);
  EXPECT_EQ(m->layout.pairing, RopePairing::kHalf);
  EXPECT_EQ(m->multi_axis->layout, SectionLayout::kChunked);
  EXPECT_EQ(m->multi_axis->rules, SectionRules::kGgml);
  Result<RopeConfig> im =
      RopeConfigFromGgmlParams(R"({"n_dims": 128, "mode": 40, "sections": [24, 20, 20, 0], )" + base + "}", 128, "g");
  ASSERT_TRUE(im.ok()) << im.status().ToString();
  EXPECT_EQ(im->multi_axis->layout, SectionLayout::kInterleaved);
  Result<RopeConfig> v =
      RopeConfigFromGgmlParams(R"({"n_dims": 40, "mode": 24, "sections": [20, 20, 20, 20], )" + base + "}", 80, "g");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->layout.rotary_dim, 80);
  EXPECT_EQ(v->multi_axis->layout, SectionLayout::kChunkedRestart);
  Result<MultiAxisPlan> plan = ComputeMultiAxisRope(*v, 20);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->freqs.inv_freq.size(), 40u);
  for (int64_t j = 0; j < 40; ++j)
    EXPECT_DOUBLE_EQ(plan->freqs.inv_freq[static_cast<size_t>(j)],
                     std::pow(1e4, -2.0 * static_cast<double>(j % 20) / 40.0))
        << j;
  // MROPE keeps ggml's 1-D frequencies (freq_scale applies).
  Result<RopeConfig> fs = RopeConfigFromGgmlParams(
      R"({"n_dims": 64, "mode": 8, "sections": [8, 12, 12, 0], "freq_base": 10000.0, "freq_scale": 0.5})", 64, "g");
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  plan = ComputeMultiAxisRope(*fs, 20);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_DOUBLE_EQ(plan->freqs.inv_freq[3], 0.5 * std::pow(1e4, -6.0 / 64.0));

  // Errors name the key and value.
  auto expect = [&](const std::string& text, int64_t head_dim, const std::string& needle) {
    Result<RopeConfig> r = RopeConfigFromGgmlParams(text, head_dim, "g.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("g.json"), std::string::npos) << r.status().message();
  };
  expect(R"({"n_dims": 128, "mode": 8, "freq_base": 1e4, "sections": [16, 24, 24]})", 128, "4 integers");
  expect(R"({"n_dims": 128, "mode": 8, "freq_base": 1e4})", 128, "'sections' is missing");
  expect(R"({"n_dims": 128, "mode": 8, "freq_base": 1e4, "sections": [64, 64, 64, 0]})", 128, "beyond head_dim 128");
  expect(R"({"n_dims": 128, "mode": 8, "freq_base": 1e4, "sections": [16, -24, 24, 0]})", 128, "-24");
  expect(R"({"n_dims": 40, "mode": 24, "freq_base": 1e4, "sections": [20, 20, 20, 20]})", 96, "2 * n_dims");
  // VISION's restarted frequencies take no YaRN ramp: refused where the config is read, and by
  // ComputeMultiAxisRope for a config built by hand.
  Result<RopeConfig> y = RopeConfigFromGgmlParams(
      R"({"n_dims": 40, "mode": 24, "freq_base": 1e4, "sections": [20, 20, 20, 20], "ext_factor": 1.0, "freq_scale": 0.5,
          "n_ctx_orig": 4096})",
      80, "g");
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(y.status().message().find("'ext_factor' = 1"), std::string::npos) << y.status().message();
  RopeConfig hand = *v;
  hand.scaling.ext_factor = 1.0;
  Result<MultiAxisPlan> yp = ComputeMultiAxisRope(hand, 20);
  ASSERT_FALSE(yp.ok());
  EXPECT_EQ(yp.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(yp.status().message().find("ext_factor 1"), std::string::npos) << yp.status().message();
  hand = *v;
  hand.scaling.type = RopeScalingType::kYarn;
  EXPECT_EQ(ComputeMultiAxisRope(hand, 20).status().code(), StatusCode::kUnimplemented);
}

TEST(MultiAxisConfig, HfVision) {
  Result<RopeConfig> q = ParseHfVision2dConfig(R"({"embed_dim": 1280, "num_heads": 16, "spatial_merge_size": 2})",
                                               Vision2dVariant::kQwen2Vl, "qv.json");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->layout.head_dim, 80);
  EXPECT_EQ(q->layout.rotary_dim, 80);
  EXPECT_EQ(q->base, 10000.0);
  Result<MultiAxisPlan> qp = ComputeMultiAxisRope(*q, 16);
  ASSERT_TRUE(qp.ok()) << qp.status().ToString();
  for (int64_t j = 0; j < 40; ++j) {
    EXPECT_EQ(qp->pair_component[static_cast<size_t>(j)], j < 20 ? 0 : 1);
    EXPECT_DOUBLE_EQ(qp->freqs.inv_freq[static_cast<size_t>(j)],
                     std::pow(1e4, -2.0 * static_cast<double>(j % 20) / 40.0));
  }
  // Pixtral, as a whole model config with vision_config.
  Result<RopeConfig> p = ParseHfVision2dConfig(
      R"({"vision_config": {"hidden_size": 1024, "num_attention_heads": 16, "rope_theta": 10000.0}})",
      Vision2dVariant::kPixtral, "px.json");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->layout.head_dim, 64);
  Result<MultiAxisPlan> pp = ComputeMultiAxisRope(*p, 16);
  ASSERT_TRUE(pp.ok()) << pp.status().ToString();
  for (int64_t j = 0; j < 32; ++j) {
    const int64_t i = j < 16 ? 2 * j : 2 * (j - 16) + 1;
    EXPECT_DOUBLE_EQ(pp->freqs.inv_freq[static_cast<size_t>(j)], std::pow(1e4, -2.0 * static_cast<double>(i) / 64.0))
        << j;
  }
  Result<RopeConfig> bad =
      ParseHfVision2dConfig(R"({"embed_dim": 1280, "num_heads": 12})", Vision2dVariant::kQwen2Vl, "qv.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'num_heads' = 12"), std::string::npos) << bad.status().message();
  bad = ParseHfVision2dConfig(R"({"hidden_size": 1080, "num_attention_heads": 16})", Vision2dVariant::kPixtral,
                              "px.json");
  ASSERT_FALSE(bad.ok());
  bad = ParseHfVision2dConfig(R"({"head_dim": 6})", Vision2dVariant::kPixtral, "px.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("head_dim 6"), std::string::npos) << bad.status().message();
  // Nesting is bounded before parsing (posenc/io/json_guard.hpp).
  bad = ParseHfVision2dConfig(R"({"head_dim": )" + std::string(1000, '[') + std::string(1000, ']') + "}",
                              Vision2dVariant::kPixtral, "deep.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("deep.json"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("nested deeper"), std::string::npos) << bad.status().message();
  Vision2dVariant v;
  EXPECT_TRUE(ParseVision2dVariant("pixtral", &v));
  EXPECT_EQ(v, Vision2dVariant::kPixtral);
  EXPECT_FALSE(ParseVision2dVariant("siglip", &v));
}

}  // namespace
}  // namespace posenc
