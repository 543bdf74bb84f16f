// Family facts of the Hugging Face reader (pairing, default partial factor, text_config nesting), the
// per-layer RoPE / NoPE schedule (Llama 4, Cohere2, plain) with its errors, and Llama 4's
// temperature keys.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"
#include "parse_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/config/model_families.hpp"

namespace posenc {
namespace {

PositionScheme Parse(const std::string& text, const HfConfigOptions& o = {}) {
  return testing::ParseConfigOrFail(text, o);
}

std::vector<int> Ints(const LayerSchedule& s) { return std::vector<int>(s.rope.begin(), s.rope.end()); }

void ExpectScheduleError(const std::string& text, const std::string& key, const std::string& value) {
  Result<PositionScheme> s = ParseHfConfig(text, "test.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Result<LayerSchedule> l = LayerRopeSchedule(*s);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  for (const std::string& needle : {std::string("test.json"), key, value})
    EXPECT_NE(l.status().message().find(needle), std::string::npos) << needle << " in: " << l.status().message();
}

// ---------- family table ----------

TEST(HfRopeFamily, TableRows) {
  // The seven interleaved families of the old kRopeFamilies table, now registry rows
  // (model_families.hpp); llama4_text is llama4's row through the "_text" fallback.
  for (const char* mt : {"gptj", "codegen", "cohere", "cohere2", "glm4", "llama4", "llama4_text"}) {
    const ModelFamily* f = FindModelFamily(mt);
    ASSERT_NE(f, nullptr) << mt;
    EXPECT_EQ(f->pairing, RopePairing::kInterleaved) << mt;
    EXPECT_FALSE(f->source.empty()) << mt;
    EXPECT_EQ(f->default_partial_rotary_factor, std::string(mt) == "glm4" ? 0.5 : 1.0) << mt;
  }
  ASSERT_NE(FindModelFamily("llama"), nullptr);
  EXPECT_EQ(FindModelFamily("llama")->pairing, RopePairing::kHalf);
  EXPECT_EQ(FindModelFamily(""), nullptr);
  EXPECT_EQ(FindModelFamily("no_such_family"), nullptr);
}

TEST(HfRopeFamily, CohereInterleavedWholeHead) {
  for (const char* mt : {"cohere", "cohere2"}) {
    PositionScheme s = Parse(std::string(R"({"model_type": ")") + mt +
                             R"(", "hidden_size": 8192, "num_attention_heads": 64, "rope_theta": 8000000.0})");
    EXPECT_EQ(s.rope.layout.pairing, RopePairing::kInterleaved) << mt;
    EXPECT_EQ(s.rope.layout.rotary_dim, 128) << mt;
    EXPECT_EQ(s.rope.layout.head_dim, 128) << mt;
  }
  // The same keys without a family: half pairing.
  EXPECT_EQ(Parse(R"({"model_type": "llama", "hidden_size": 8192, "num_attention_heads": 64})").rope.layout.pairing,
            RopePairing::kHalf);
}

TEST(HfRopeFamily, Glm4PartialDefaultAndExplicit) {
  PositionScheme s =
      Parse(R"({"model_type": "glm4", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128})");
  EXPECT_EQ(s.rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_EQ(s.rope.layout.rotary_dim, 64);  // Glm4Config's default 0.5
  bool noted = false;
  for (const std::string& n : s.notes) noted |= n.find("0.5 assumed") != std::string::npos;
  EXPECT_TRUE(noted);
  // An explicit factor wins over the family default.
  s = Parse(R"({"model_type": "glm4", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
                "partial_rotary_factor": 0.25})");
  EXPECT_EQ(s.rope.layout.rotary_dim, 32);
  s = Parse(R"({"model_type": "glm4", "head_dim": 128, "num_attention_heads": 32, "partial_rotary_factor": 1.0})");
  EXPECT_EQ(s.rope.layout.rotary_dim, 128);
  // Frequencies over the rotary dims: theta^(-2i/64).
  s = Parse(R"({"model_type": "glm4", "head_dim": 128, "num_attention_heads": 32, "rope_theta": 10000.0})");
  Result<RopeFrequencies> f = ComputeRopeFrequencies(s.rope, 1);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->inv_freq.size(), 32u);
  EXPECT_DOUBLE_EQ(f->inv_freq[1], std::pow(10000.0, -2.0 / 64.0));
}

TEST(HfRopeFamily, Llama4NestedInTextConfig) {
  // Llama4Config keeps the text model's keys in text_config (model_type llama4_text there).
  PositionScheme s = Parse(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128, "num_hidden_layers": 8, "rope_theta": 500000.0,
      "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                       "original_max_position_embeddings": 8192}, "no_rope_layer_interval": 4}})");
  EXPECT_EQ(s.model_type, "llama4_text");
  EXPECT_EQ(s.rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_EQ(s.rope.layout.rotary_dim, 128);
  EXPECT_EQ(s.rope.scaling.type, RopeScalingType::kLlama3);
  EXPECT_TRUE(s.attn_temperature.tuning);
  Result<LayerSchedule> l = LayerRopeSchedule(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Ints(*l), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
  // Without its own model_type the text config takes the outer one (also in the table).
  s = Parse(
      R"({"model_type": "llama4", "text_config": {"hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128}})");
  EXPECT_EQ(s.rope.layout.pairing, RopePairing::kInterleaved);
}

TEST(HfRopeFamily, Llama3EqualBandFactorsParsedAndNoted) {
  PositionScheme s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 40,
      "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
      "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}})");
  EXPECT_EQ(s.rope.scaling.low_freq_factor, s.rope.scaling.high_freq_factor);
  bool noted = false;
  for (const std::string& n : s.rope.notes) noted |= n.find("no smooth band") != std::string::npos;
  EXPECT_TRUE(noted);
  // high below low stays refused, naming the key.
  Result<PositionScheme> bad = ParseHfConfig(R"({"model_type": "llama", "head_dim": 128, "num_attention_heads": 4, "rope_scaling":
      {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
       "original_max_position_embeddings": 8192}})",
                                             "test.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("high_freq_factor"), std::string::npos);
  // YaRN with equal betas parses (Kimi K2); beta_fast below beta_slow does not.
  EXPECT_TRUE(ParseHfConfig(R"({"model_type": "llama", "head_dim": 64, "num_attention_heads": 4, "max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                       "beta_fast": 1.0, "beta_slow": 1.0}})",
                            "test.json")
                  .ok());
}

// ---------- layer schedules ----------

TEST(LayerSchedule, PlainModelEveryLayerRope) {
  PositionScheme s =
      Parse(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 5})");
  Result<LayerSchedule> l = LayerRopeSchedule(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Ints(*l), (std::vector<int>{1, 1, 1, 1, 1}));
  EXPECT_EQ(l->num_nope_layers(), 0);
  EXPECT_FALSE(QueryTemperatureApplies(s, *l, 0));
  // Layer types do not matter to a family without a NoPE rule (Gemma 3's sliding layers rotate too).
  s = Parse(R"({"model_type": "gemma3_text", "head_dim": 64, "num_attention_heads": 8, "num_hidden_layers": 3,
                "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]})");
  EXPECT_EQ(Ints(LayerRopeSchedule(s).value()), (std::vector<int>{1, 1, 1}));
}

TEST(LayerSchedule, Llama4NoRopeLayersAndInterval) {
  PositionScheme s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 4,
      "num_hidden_layers": 6, "no_rope_layers": [1, 0, 1, 1, 0, 1], "no_rope_layer_interval": 2})");
  Result<LayerSchedule> l = LayerRopeSchedule(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(Ints(*l), (std::vector<int>{1, 0, 1, 1, 0, 1}));  // the list wins over the interval
  EXPECT_EQ(l->num_nope_layers(), 2);
  EXPECT_TRUE(QueryTemperatureApplies(s, *l, 1));
  EXPECT_FALSE(QueryTemperatureApplies(s, *l, 0));
  EXPECT_FALSE(QueryTemperatureApplies(s, *l, 6));
  EXPECT_FALSE(QueryTemperatureApplies(s, *l, -1));
  // Empty list: the interval rule int((i + 1) % interval != 0).
  s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 4, "num_hidden_layers": 6,
                "no_rope_layers": [], "no_rope_layer_interval": 3})");
  EXPECT_EQ(Ints(LayerRopeSchedule(s).value()), (std::vector<int>{1, 1, 0, 1, 1, 0}));
  // Neither key: Llama4TextConfig's default interval 4.
  s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 4, "num_hidden_layers": 8})");
  l = LayerRopeSchedule(s);
  EXPECT_EQ(Ints(*l), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_NE(l->rule.find("default"), std::string::npos);
  // Tuning off: NoPE layers without temperature.
  s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 4, "num_hidden_layers": 4,
                "attn_temperature_tuning": false})");
  EXPECT_FALSE(QueryTemperatureApplies(s, LayerRopeSchedule(s).value(), 3));
}

TEST(LayerSchedule, Cohere2SlidingLayersRotate) {
  PositionScheme s = Parse(R"({"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32,
      "num_hidden_layers": 8, "sliding_window": 4096, "sliding_window_pattern": 4})");
  EXPECT_EQ(Ints(LayerRopeSchedule(s).value()), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
  s = Parse(R"({"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 6,
                "sliding_window_pattern": 3})");
  EXPECT_EQ(Ints(LayerRopeSchedule(s).value()), (std::vector<int>{1, 1, 0, 1, 1, 0}));
  // layer_types win over the pattern.
  s = Parse(R"({"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 3,
                "sliding_window_pattern": 4, "layer_types": ["full_attention", "sliding_attention", "full_attention"]})");
  EXPECT_EQ(Ints(LayerRopeSchedule(s).value()), (std::vector<int>{0, 1, 0}));
  // Neither: Cohere2Config's default pattern 4.
  s = Parse(R"({"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 4})");
  EXPECT_EQ(Ints(LayerRopeSchedule(s).value()), (std::vector<int>{1, 1, 1, 0}));
  // Cohere2 has no temperature.
  EXPECT_FALSE(s.attn_temperature.tuning);
}

TEST(LayerScheduleErrors, BadKeysAreNamed) {
  ExpectScheduleError(
      R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 4, "num_hidden_layers": 4,
                          "no_rope_layers": [1, 1, 0]})",
      "no_rope_layers", "3 entries");
  ExpectScheduleError(R"({"model_type": "cohere2", "head_dim": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
                          "layer_types": ["sliding_attention", "chunked_attention"]})",
                      "layer_types[1]", "chunked_attention");
  ExpectScheduleError(R"({"model_type": "cohere2", "head_dim": 128, "num_attention_heads": 4, "num_hidden_layers": 3,
                          "layer_types": ["sliding_attention"]})",
                      "layer_types", "1 entries");
  ExpectScheduleError(R"({"model_type": "llama", "head_dim": 128, "num_attention_heads": 4})", "num_hidden_layers",
                      "missing");
  // Values the parser refuses outright.
  for (
      const char* text :
      {R"({"model_type": "llama", "head_dim": 64, "num_attention_heads": 4, "no_rope_layers": [1, 2]})",
       R"({"model_type": "llama", "head_dim": 64, "num_attention_heads": 4, "no_rope_layer_interval": 0})",
       R"({"model_type": "llama", "head_dim": 64, "num_attention_heads": 4, "sliding_window_pattern": -1})",
       R"({"model_type": "llama", "head_dim": 64, "num_attention_heads": 4, "layer_types": ["full_attention", 3]})",
       R"({"model_type": "llama", "head_dim": 64, "num_attention_heads": 4, "num_hidden_layers": 0})",
       R"({"model_type": "llama4_text", "head_dim": 64, "num_attention_heads": 4, "floor_scale": 0})",
       R"({"model_type": "llama4_text", "head_dim": 64, "num_attention_heads": 4, "attn_temperature_tuning": "yes"})"}) {
    Result<PositionScheme> s = ParseHfConfig(text, "test.json");
    EXPECT_FALSE(s.ok()) << text;
    if (!s.ok()) { EXPECT_NE(s.status().message().find("test.json"), std::string::npos) << s.status().message(); }
  }
  // A scheme that is not RoPE has no RoPE schedule.
  Result<PositionScheme> alibi = ParseHfConfig(R"({"model_type": "bloom", "n_head": 8, "n_layer": 2})", "test.json");
  ASSERT_TRUE(alibi.ok());
  EXPECT_FALSE(LayerRopeSchedule(*alibi).ok());
}

TEST(AttnTemperatureConfig, Llama4KeysAndDefaults) {
  // Scout's config: a truthy int.
  PositionScheme s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 40,
      "attn_temperature_tuning": 4, "floor_scale": 8192, "attn_scale": 0.1})");
  EXPECT_TRUE(s.attn_temperature.tuning);
  EXPECT_EQ(s.attn_temperature.floor_scale, 8192.0);
  EXPECT_EQ(s.attn_temperature.attn_scale, 0.1);
  s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 40, "attn_temperature_tuning": 0,
                "floor_scale": 4096, "attn_scale": 0.25})");
  EXPECT_FALSE(s.attn_temperature.tuning);
  EXPECT_EQ(s.attn_temperature.floor_scale, 4096.0);
  EXPECT_EQ(s.attn_temperature.attn_scale, 0.25);
  // No keys: Llama4TextConfig's defaults, noted.
  s = Parse(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 40})");
  EXPECT_TRUE(s.attn_temperature.tuning);
  EXPECT_EQ(s.attn_temperature.floor_scale, 8192.0);
  EXPECT_EQ(s.attn_temperature.attn_scale, 0.1);
  int notes = 0;
  for (const std::string& n : s.notes) notes += n.find("Llama4TextConfig's default") != std::string::npos;
  EXPECT_EQ(notes, 3);
  // Other families: off, whatever keys they carry.
  s = Parse(R"({"model_type": "llama", "head_dim": 128, "num_attention_heads": 40, "attn_temperature_tuning": true})");
  EXPECT_FALSE(s.attn_temperature.tuning);
}

}  // namespace
// Qwen3-Next / Qwen3.5: RoPE on full_attention layers only; linear_attention (Gated DeltaNet) layers
// carry no positions. Without layer_types, every full_attention_interval-th layer is full attention.
TEST(LayerSchedule, Qwen3NextRotatesItsFullAttentionLayersOnly) {
  const std::string base = R"({"model_type": "qwen3_next", "head_dim": 256, "hidden_size": 2048,
      "num_attention_heads": 16, "num_hidden_layers": 8, "partial_rotary_factor": 0.25, "rope_theta": 5000000)";
  Result<LayerSchedule> by_interval = LayerRopeSchedule(Parse(base + R"(, "full_attention_interval": 4})"));
  ASSERT_TRUE(by_interval.ok()) << by_interval.status().message();
  EXPECT_EQ(Ints(*by_interval), (std::vector<int>{0, 0, 0, 1, 0, 0, 0, 1}));
  // The layers the interval leaves without RoPE are linear_attention ones: no self-attention, as when
  // layer_types lists them (the per-layer table of a config without layer_types says the same).
  EXPECT_EQ(std::vector<bool>(by_interval->attention.begin(), by_interval->attention.end()),
            (std::vector<bool>{false, false, false, true, false, false, false, true}));
  Result<LayerSchedule> by_default = LayerRopeSchedule(Parse(base + "}"));
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(Ints(*by_default), Ints(*by_interval));
  EXPECT_EQ(by_default->attention, by_interval->attention);
  Result<LayerSchedule> listed = LayerRopeSchedule(Parse(base + R"(, "layer_types": ["linear_attention",
      "full_attention", "linear_attention", "linear_attention", "full_attention", "full_attention",
      "linear_attention", "linear_attention"]})"));
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(Ints(*listed), (std::vector<int>{0, 1, 0, 0, 1, 1, 0, 0}));
  ExpectScheduleError(base + R"(, "layer_types": ["linear_attention", "full_attention", "mamba", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention"]})",
                      "layer_types[2]", "'mamba'");
}

// LFM2: only the full_attention layers rotate (conv layers are short convolutions), from layer_types or
// from full_attn_idxs; Mllama: no RoPE on its cross_attention_layers.
TEST(LayerSchedule, Lfm2ConvLayersAndMllamaCrossAttentionLayersHaveNoRope) {
  const std::string lfm = R"({"model_type": "lfm2", "hidden_size": 1024, "num_attention_heads": 16,
      "num_hidden_layers": 6, "rope_theta": 1000000)";
  Result<LayerSchedule> by_idx = LayerRopeSchedule(Parse(lfm + R"(, "full_attn_idxs": [2, 5]})"));
  ASSERT_TRUE(by_idx.ok()) << by_idx.status().message();
  EXPECT_EQ(Ints(*by_idx), (std::vector<int>{0, 0, 1, 0, 0, 1}));
  Result<LayerSchedule> by_types = LayerRopeSchedule(Parse(lfm + R"(, "layer_types": ["conv", "full_attention",
      "conv", "conv", "full_attention", "conv"]})"));
  ASSERT_TRUE(by_types.ok());
  EXPECT_EQ(Ints(*by_types), (std::vector<int>{0, 1, 0, 0, 1, 0}));
  Result<PositionScheme> bad = ParseHfConfig(lfm + R"(, "full_attn_idxs": [2, 6]})", "test.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("full_attn_idxs[1]"), std::string::npos) << bad.status().message();

  const PositionScheme ml = Parse(R"({"model_type": "mllama", "text_config": {"model_type": "mllama_text_model",
      "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8, "rope_theta": 500000.0,
      "cross_attention_layers": [3, 7]}})");
  Result<LayerSchedule> m = LayerRopeSchedule(ml);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(Ints(*m), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
}

}  // namespace posenc
