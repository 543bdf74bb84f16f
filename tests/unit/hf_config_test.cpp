// ParseHfConfig: both spellings, nested per-layer rope_parameters, every dimension key, the
// non-RoPE families, and one test per validation error (the message names the key and the value).
#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"
#include "parse_config.hpp"
#include "posenc/config/ggml_config.hpp"

namespace posenc {
namespace {

PositionScheme Parse(const std::string& text, const HfConfigOptions& o = {}) {
  return testing::ParseConfigOrFail(text, o);
}

void ExpectError(const std::string& text, const std::string& key, const std::string& value) {
  Result<PositionScheme> s = ParseHfConfig(text, "test.json");
  ASSERT_FALSE(s.ok()) << "expected an error naming " << key << " for " << text;
  const std::string m = s.status().message();
  EXPECT_NE(m.find("test.json"), std::string::npos) << m;
  EXPECT_NE(m.find(key), std::string::npos) << m;
  EXPECT_NE(m.find(value), std::string::npos) << m;
}

// Falcon's key/value heads and every family's fused query_key_value row order, as the Hugging Face
// modeling code splits the projection (the layout converter moves q/k rows by it).
TEST(HfConfig, FalconKeyValueHeadsAndFusedQkvLayouts) {
  // falcon-7b: multi_query, one shared k/v head (num_kv_heads is not read without the new architecture).
  PositionScheme s = Parse(R"({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
    "multi_query": true, "new_decoder_architecture": false, "alibi": false, "rope_theta": 10000.0})");
  EXPECT_EQ(s.num_kv_heads, 1);
  EXPECT_EQ(s.fused_qkv, FusedQkvLayout::kQThenKThenV);
  EXPECT_EQ(s.rope.layout.head_dim, 64);
  // falcon-40b: new_decoder_architecture with 8 kv heads (multi_query is true too and does not matter).
  s = Parse(R"({"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_kv_heads": 8,
    "multi_query": true, "new_decoder_architecture": true, "alibi": false})");
  EXPECT_EQ(s.num_kv_heads, 8);
  EXPECT_EQ(s.fused_qkv, FusedQkvLayout::kPerKvGroup);
  // RefinedWeb spelling: n_head, n_head_kv; FalconConfig's default multi_query is true.
  s = Parse(R"({"model_type": "RefinedWeb", "hidden_size": 8192, "n_head": 128, "n_head_kv": 8,
    "new_decoder_architecture": true})");
  EXPECT_EQ(s.num_heads, 128);
  EXPECT_EQ(s.num_kv_heads, 8);
  s = Parse(R"({"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "alibi": false})");
  EXPECT_EQ(s.num_kv_heads, 1);
  EXPECT_EQ(s.fused_qkv, FusedQkvLayout::kQThenKThenV);
  s = Parse(R"({"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "multi_query": false,
    "alibi": false})");
  EXPECT_EQ(s.num_kv_heads, 4);
  EXPECT_EQ(s.fused_qkv, FusedQkvLayout::kPerHead);
  s = Parse(R"({"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64, "rotary_pct": 0.25})");
  EXPECT_EQ(s.fused_qkv, FusedQkvLayout::kPerHead);
  EXPECT_EQ(s.rope.layout.rotary_dim, 24);
  s = Parse(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})");
  EXPECT_EQ(s.fused_qkv, FusedQkvLayout::kNone);
  ExpectError(R"({"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "multi_query": "yes",
    "alibi": false})",
              "multi_query", "yes");
}

TEST(HfConfig, LegacyAndNewSpellingsAgree) {
  const PositionScheme a = Parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  const PositionScheme b = Parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  for (const PositionScheme* s : {&a, &b}) {
    EXPECT_EQ(s->rope.scaling.type, RopeScalingType::kLlama3);
    EXPECT_EQ(s->rope.base, 500000.0);
    EXPECT_EQ(s->rope.layout.rotary_dim, 128);
    EXPECT_EQ(s->rope.scaling.original_max_position_embeddings, 8192);
  }
  EXPECT_EQ(a.rope_spelling, "rope_scaling");
  EXPECT_EQ(b.rope_spelling, "rope_parameters");
  EXPECT_EQ(ComputeRopeFrequencies(a.rope, 1)->inv_freq, ComputeRopeFrequencies(b.rope, 1)->inv_freq);
}

TEST(HfConfig, NestedPerLayerType) {
  const std::string text = R"({"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 8, "head_dim": 256, "global_head_dim": 512,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25}}})";
  const PositionScheme full = Parse(text);
  EXPECT_EQ(full.rope_layer_type, "full_attention");
  EXPECT_EQ(full.rope_layer_types.size(), 2u);
  EXPECT_EQ(full.rope.scaling.type, RopeScalingType::kProportional);
  EXPECT_EQ(full.rope.layout.head_dim, 512);  // global_head_dim for full attention
  EXPECT_EQ(full.rope.layout.rotary_dim, 512);
  EXPECT_EQ(full.rope.scaling.partial_rotary_factor, 0.25);
  const PositionScheme sliding = Parse(text, {.layer_type = "sliding_attention"});
  EXPECT_EQ(sliding.rope.scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(sliding.rope.base, 10000.0);
  EXPECT_EQ(sliding.rope.layout.head_dim, 256);
  Result<PositionScheme> bad = ParseHfConfig(text, "test.json", {.layer_type = "chunked_attention"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("chunked_attention"), std::string::npos);
  EXPECT_NE(bad.status().message().find("sliding_attention"), std::string::npos);
}

TEST(HfConfig, DimensionKeys) {
  EXPECT_EQ(Parse(R"({"model_type": "llama", "hidden_size": 6144, "num_attention_heads": 64, "rotary_pct": 0.25, "rotary_emb_base": 10000})")
                .rope.layout.rotary_dim,
            24);
  EXPECT_EQ(
      Parse(R"({"model_type": "llama", "hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4})").rope.layout.rotary_dim,
      32);
  const PositionScheme gptj = Parse(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64})");
  EXPECT_EQ(gptj.rope.layout.head_dim, 256);
  EXPECT_EQ(gptj.rope.layout.rotary_dim, 64);
  EXPECT_EQ(gptj.rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_EQ(Parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 64})").rope.layout.head_dim, 64);
  EXPECT_EQ(Parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": null})").rope.layout.head_dim, 128);
  const PositionScheme ds = Parse(R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
    "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})");
  EXPECT_EQ(ds.rope.layout.head_dim, 192);
  EXPECT_EQ(ds.rope.layout.rotary_start, 128);
  EXPECT_EQ(ds.rope.layout.rotary_dim, 64);
  EXPECT_EQ(ds.rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_DOUBLE_EQ(ComputeRopeFrequencies(ds.rope, 1)->attention_scaling, 1.0);
}

TEST(HfConfig, DefaultsAreNoted) {
  const PositionScheme s = Parse(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8})");
  EXPECT_EQ(s.rope.base, 10000.0);
  ASSERT_FALSE(s.rope.notes.empty());
  EXPECT_NE(s.rope.notes[0].find("10000"), std::string::npos);
  // YaRN without factor: inferred from max / original, noted.
  const PositionScheme y = Parse(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 16384,
    "rope_theta": 10000, "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(y.rope.scaling.factor, 4.0);
  bool noted = false;
  for (const auto& n : y.rope.notes) noted |= n.find("no factor") != std::string::npos;
  EXPECT_TRUE(noted);
  // LongRoPE: Phi-3 keeps original_max_position_embeddings at the top level.
  const PositionScheme p = Parse(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope", "short_factor": [1,1,1,1],
    "long_factor": [2,2,2,2]}})");
  EXPECT_EQ(p.rope.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(p.rope.scaling.factor, 32.0);
}

TEST(HfConfig, NonRopeFamilies) {
  const PositionScheme gpt2 = Parse(R"({"model_type": "gpt2", "n_positions": 1024, "n_embd": 768, "n_head": 12})");
  EXPECT_EQ(gpt2.kind, PositionKind::kLearned);
  EXPECT_EQ(gpt2.max_position_embeddings, 1024);
  const PositionScheme bloom = Parse(R"({"model_type": "bloom", "n_head": 112})");
  EXPECT_EQ(bloom.kind, PositionKind::kAlibi);
  EXPECT_EQ(bloom.alibi_variant, "bloom");
  const PositionScheme mpt = Parse(R"({"n_heads": 24, "attn_config": {"alibi": true, "alibi_bias_max": 8}})");
  EXPECT_EQ(mpt.kind, PositionKind::kAlibi);
  EXPECT_EQ(mpt.alibi_variant, "mpt");
  const PositionScheme falcon = Parse(R"({"model_type": "falcon", "num_attention_heads": 8, "alibi": true})");
  EXPECT_EQ(falcon.kind, PositionKind::kAlibi);
  const PositionScheme falcon_rope = Parse(R"({"model_type": "falcon", "hidden_size": 512, "num_attention_heads": 8,
    "alibi": false, "rope_theta": 10000})");
  EXPECT_EQ(falcon_rope.kind, PositionKind::kRope);
  const PositionScheme t5 =
      Parse(R"({"relative_attention_num_buckets": 32, "relative_attention_max_distance": 128, "is_decoder": true})");
  EXPECT_EQ(t5.kind, PositionKind::kT5Bucket);
  EXPECT_FALSE(t5.t5_bidirectional);
  const PositionScheme xlm = Parse(R"({"emb_dim": 16, "max_position_embeddings": 64, "sinusoidal_embeddings": true})");
  EXPECT_EQ(xlm.kind, PositionKind::kSinusoidal);
  EXPECT_EQ(xlm.sinusoidal_layout, "interleaved");
}

// ---- one test per validation error ----

TEST(HfConfigValidation, UnknownRopeType) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"rope_type": "warp", "factor": 2}})",
              "rope_type", "warp");
  Result<PositionScheme> s =
      ParseHfConfig(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "warp"}})", "t");
  EXPECT_EQ(s.status().code(), StatusCode::kUnimplemented);
}

// A range rule broken in a config.json is refused in the validator's one message shape, naming the
// file, the scaling, the key and the value; the whole message is pinned for each scaling's rules.
TEST(HfConfigValidation, RangeRulesInOneMessageShape) {
  const std::string head =
      R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 8192, "rope_scaling": )";
  struct Case {
    std::string scaling, message;
  };
  for (
      const Case& c : std::initializer_list<Case>{
          {R"({"rope_type": "default", "factor": -1})",
           "rope config test.json: default 'factor' = -1 must be finite and > 0"},
          {R"({"rope_type": "linear", "factor": 0})",
           "rope config test.json: linear 'factor' = 0 must be finite and > 0"},
          {R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048, "beta_fast": 1, "beta_slow": 2})",
           "rope config test.json: yarn 'beta_fast' = 1 (beta_slow 2) must be at least beta_slow"},
          {R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0})",
           "rope config test.json: yarn 'original_max_position_embeddings' = 0 must be given and > 0"},
          {R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048, "attention_factor": -1})",
           "rope config test.json: yarn 'attention_factor' = -1 must be finite and > 0"},
          {R"({"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192, "low_freq_factor": 4, "high_freq_factor": 2})",
           "rope config test.json: llama3 'high_freq_factor' = 2 (low_freq_factor 4) must be at least low_freq_factor"},
          {R"({"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192, "low_freq_factor": -1, "high_freq_factor": 2})",
           "rope config test.json: llama3 'low_freq_factor' = -1 must be finite and > 0"},
          {R"({"rope_type": "longrope", "factor": 4, "original_max_position_embeddings": 2048, "short_factor": [1, 1], "long_factor": [1]})",
           "rope config test.json: longrope 'short_factor' = a list of 2 values must have rotary_dim/2 = 32 values"},
      }) {
    Result<PositionScheme> s = ParseHfConfig(head + c.scaling + "}", "test.json");
    ASSERT_FALSE(s.ok()) << c.scaling;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), c.message);
  }
  // Equal betas (Kimi K2) and equal llama3 band factors (Llama 4) are accepted, noted.
  for (
      const std::string& ok :
      {std::string(
           R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048, "beta_fast": 1, "beta_slow": 1})"),
       std::string(
           R"({"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 8192, "low_freq_factor": 1, "high_freq_factor": 1})")}) {
    const PositionScheme p = Parse(head + ok + "}");
    ASSERT_FALSE(p.rope.notes.empty()) << ok;
  }
}

TEST(HfConfigValidation, MissingFactor) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "linear"}})", "factor",
              "missing");
}

TEST(HfConfigValidation, NonPositiveFactor) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "linear", "factor": 0}})",
              "factor", "0");
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"type": "dynamic", "factor": -2.5}})",
              "factor", "-2.5");
}

TEST(HfConfigValidation, ShortFactorWrongLength) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "original_max_position_embeddings": 4096,
    "max_position_embeddings": 8192, "rope_scaling": {"type": "longrope", "short_factor": [1,1,1], "long_factor": [2,2,2,2]}})",
              "short_factor", "3 values");
}

TEST(HfConfigValidation, LongFactorWrongLength) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "original_max_position_embeddings": 4096,
    "max_position_embeddings": 8192, "rope_scaling": {"type": "longrope", "short_factor": [1,1,1,1], "long_factor": [2,2,2,2,2]}})",
              "long_factor", "5 values");
}

TEST(HfConfigValidation, PartialFactorGivesOddRotaryDim) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 80, "num_attention_heads": 8, "partial_rotary_factor": 0.5})", "partial_rotary_factor",
              "= 5");
}

TEST(HfConfigValidation, PartialFactorGivesZeroRotaryDim) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "rotary_pct": 0.01})", "rotary_pct", "= 0");
}

TEST(HfConfigValidation, BetaFastNotAboveBetaSlow) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 16384, "rope_scaling":
    {"type": "yarn", "factor": 4, "original_max_position_embeddings": 4096, "beta_fast": 2, "beta_slow": 8}})",
              "beta_fast", "= 2");
}

TEST(HfConfigValidation, Llama3MissingBandFactor) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "rope_scaling": {"type": "llama3", "factor": 8,
    "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
              "low_freq_factor", "missing");
}

TEST(HfConfigValidation, NonPositiveBase) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "rope_theta": 0})", "rope_theta", "0");
}

TEST(HfConfigValidation, WrongValueType) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "rope_theta": "big"})", "rope_theta", "\"big\"");
}

TEST(HfConfigValidation, ConflictingPartialKeys) {
  ExpectError(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "partial_rotary_factor": 0.5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000, "partial_rotary_factor": 0.25}})",
              "partial_rotary_factor", "0.5");
}

// Keys read only in some paths (one nesting, one layer, one site) are still refused by name when their
// type is wrong, whichever layer and site is asked for; a wrong type is never read as absent.
TEST(HfConfigValidation, NestedConfigOfWrongTypeIsNamed) {
  ExpectError(R"({"model_type": "llava", "text_config": "qwen2", "vision_config": {}})", "text_config", "\"qwen2\"");
  ExpectError(R"({"model_type": "gemma3", "text_config": 5})", "text_config", "5");
  ExpectError(R"({"model_type": "qwen3_omni_moe", "thinker_config": [1]})", "thinker_config", "[1]");
  // null is absent: the outer keys are the model.
  EXPECT_EQ(Parse(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "text_config": null})")
                .rope.layout.rotary_dim,
            64);
}

TEST(HfConfigValidation, FamilyKeysOfOneLayerOrSiteAreCheckedForEveryLayer) {
  // MiMo-V2: swa_rope_theta is the sliding layers' base; asking for layer 0 (full) still checks it.
  ExpectError(R"({"model_type": "mimo_v2", "hidden_size": 2048, "num_attention_heads": 8, "num_hidden_layers": 2,
    "head_dim": 192, "hybrid_layer_pattern": [0, 1], "rope_theta": 1e6, "swa_rope_theta": "1e4",
    "partial_rotary_factor": 0.334})",
              "swa_rope_theta", "\"1e4\"");
  // DeepSeek-V4: compress_rope_theta is the compress set's base, read for compressed layers only.
  ExpectError(R"({"model_type": "deepseek_v4", "hidden_size": 4096, "num_attention_heads": 64, "num_hidden_layers": 2,
    "head_dim": 512, "compress_ratios": [0, 4], "rope_theta": 10000, "compress_rope_theta": "x"})",
              "compress_rope_theta", "\"x\"");
  // DSA: index_head_dim is the indexer site's head, read when that site is asked for.
  ExpectError(R"({"model_type": "deepseek_v32", "hidden_size": 4096, "num_attention_heads": 64, "num_hidden_layers": 2,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "index_head_dim": "128"})",
              "index_head_dim", "\"128\"");
  ExpectError(R"({"model_type": "deepseek_v32", "hidden_size": 4096, "num_attention_heads": 64, "num_hidden_layers": 2,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "index_head_dim": 0})",
              "index_head_dim", "0");
  // Kimi Linear: linear_attn_config gives the layer kinds; a string is not "no config".
  ExpectError(R"({"model_type": "kimi_linear", "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 4,
    "linear_attn_config": "x"})",
              "linear_attn_config", "\"x\"");
  // Mistral 4: llama_4_scaling_beta of a wrong type, and a rope_scaling that is not an object.
  ExpectError(R"({"model_type": "mistral4", "hidden_size": 4096, "num_attention_heads": 32, "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 64, "rope_parameters": {"rope_type": "default", "rope_theta": 10000,
    "llama_4_scaling_beta": "0.1", "original_max_position_embeddings": 8192}})",
              "llama_4_scaling_beta", "\"0.1\"");
  ExpectError(R"({"model_type": "mistral4", "hidden_size": 4096, "num_attention_heads": 32, "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 64, "rope_scaling": "yarn"})",
              "rope_scaling", "\"yarn\"");
}

TEST(GgmlParams, ModesAndErrors) {
  Result<RopeConfig> c = RopeConfigFromGgmlParams(
      R"({"n_dims": 64, "mode": 2, "n_ctx_orig": 4096, "freq_base": 10000.0, "freq_scale": 0.25, "ext_factor": 0.0,
          "attn_factor": 1.0, "beta_fast": 32.0, "beta_slow": 1.0})",
      96, "case");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->layout.pairing, RopePairing::kHalf);
  EXPECT_EQ(c->layout.rotary_dim, 64);
  EXPECT_EQ(c->layout.head_dim, 96);
  EXPECT_EQ(c->scaling.freq_scale, 0.25);
  Result<RopeConfig> m = RopeConfigFromGgmlParams(R"({"n_dims": 64, "mode": 4, "freq_base": 10000.0})", 64, "case");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("'mode' = 4"), std::string::npos) << m.status().message();
  // ggml_rope_multi's modes need their sections (multi_axis_test.cpp covers them).
  Result<RopeConfig> ms = RopeConfigFromGgmlParams(R"({"n_dims": 64, "mode": 8, "freq_base": 10000.0})", 64, "case");
  ASSERT_FALSE(ms.ok());
  EXPECT_NE(ms.status().message().find("'sections'"), std::string::npos) << ms.status().message();
  Result<RopeConfig> nb = RopeConfigFromGgmlParams(R"({"n_dims": 64, "mode": 0})", 64, "case");
  ASSERT_FALSE(nb.ok());
  EXPECT_NE(nb.status().message().find("freq_base"), std::string::npos) << nb.status().message();
}


const std::string kHead =
    R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096, )";

// Issue 15 item 1: a value nested 100,000 deep is refused before parsing, naming the file and the key
// (it crashed in the message's recursive dump()); a nested value shown shallowly and bounded.
TEST(HfConfigHostile, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = kHead + R"("rope_theta": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  Result<PositionScheme> s = ParseHfConfig(deep, "test.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("config test.json: JSON nested deeper than 32 levels at byte"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("(under key 'rope_theta')"), std::string::npos) << s.status().message();

  const std::string nested = kHead + R"("rope_theta": [[[[[[1]]]]], {"a": [2]}, ")" + std::string(5000, 'x') + R"("]})";
  Result<PositionScheme> n = ParseHfConfig(nested, "test.json");
  ASSERT_FALSE(n.ok());
  const std::string nm = n.status().message();
  EXPECT_EQ(nm.rfind("config test.json: key 'rope_theta' is [[...1],{...1},\"xxxx", 0), 0u) << nm.substr(0, 400);
  EXPECT_NE(nm.find("... (5000 bytes in all)\"], expected a number"), std::string::npos) << nm.substr(0, 400);
  EXPECT_LT(nm.size(), 300u);
}

// text_config is followed at most 4 levels (real multimodal configs nest it once); one level is read.
TEST(HfConfigHostile, TextConfigDepthIsBounded) {
  auto wrap = [](int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += R"({"model_type": "llava", "text_config": )";
    return s + R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})" + std::string(static_cast<size_t>(levels), '}');
  };
  Result<PositionScheme> one = ParseHfConfig(wrap(1), "test.json");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->notes.front(), "read from text_config");
  EXPECT_TRUE(ParseHfConfig(wrap(4), "test.json").ok());
  Result<PositionScheme> five = ParseHfConfig(wrap(5), "test.json");
  ASSERT_FALSE(five.ok());
  EXPECT_NE(five.status().message().find("key 'text_config' is nested more than 4 levels deep"), std::string::npos)
      << five.status().message();
  Result<PositionScheme> deep = ParseHfConfig(wrap(100000), "test.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 32 levels"), std::string::npos) << deep.status().message();
  EXPECT_NE(deep.status().message().find("'text_config.text_config"), std::string::npos) << deep.status().message();
}

// Issue 15 item 7: a syntax error gives the byte offset and names NaN / Infinity.
TEST(HfConfigHostile, SyntaxErrorsGiveOffsetAndNameNonJsonLiterals) {
  Result<PositionScheme> nan = ParseHfConfig(kHead + R"("rope_theta": NaN})", "test.json");
  ASSERT_FALSE(nan.ok());
  const std::string m = nan.status().message();
  EXPECT_EQ(m.rfind("config test.json: not valid JSON at byte 117: ", 0), 0u) << m;  // the N, 1-based
  EXPECT_NE(m.find("(NaN is not JSON"), std::string::npos) << m;
  Result<PositionScheme> inf = ParseHfConfig(kHead + R"("rope_theta": Infinity})", "test.json");
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.status().message().find("(Infinity is not JSON"), std::string::npos) << inf.status().message();
}

// Issue 15 item 5: attention-scale values valid in float64 but not in float32 are refused, quoting the value.
TEST(HfConfigHostile, AttentionScaleOutsideFloat32IsRefused) {
  const std::string yarn =
      R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 1024, )";
  ExpectError(kHead + yarn + R"("attention_factor": 1e300}})", "'attention_factor' = 1e+300", "outside float32");
  ExpectError(kHead + yarn + R"("attention_factor": 1e-300}})", "'attention_factor' = 1e-300", "outside float32");
  ExpectError(kHead + yarn + R"("mscale": -1e308, "mscale_all_dim": 1}})", "'mscale' = -1e+308", "outside float32");
  ExpectError(kHead + yarn + R"("mscale": 1, "mscale_all_dim": 1e39}})", "'mscale_all_dim' = 1e+39", "outside float32");
  EXPECT_TRUE(ParseHfConfig(kHead + yarn + R"("attention_factor": 1e30}})", "test.json").ok());
  Result<RopeConfig> ggml =
      RopeConfigFromGgmlParams(R"({"n_dims": 16, "mode": 0, "freq_base": 10000, "attn_factor": 1e300})", 16, "p.json");
  ASSERT_FALSE(ggml.ok());
  // ggml's keys are float32 from the typed reader on (issue 32): refused as read, naming the file and key.
  EXPECT_NE(ggml.status().message().find("config p.json: key 'attn_factor' is 1e+300, outside float32"),
            std::string::npos)
      << ggml.status().message();
}

// LoadHfConfig reads through ReadFileToString: a missing file and a link to /dev/zero name the path.
TEST(HfConfigHostile, LoadHfConfigRefusesSpecialFiles) {
  Result<PositionScheme> missing = LoadHfConfig("/nonexistent/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'/nonexistent/config.json'"), std::string::npos)
      << missing.status().message();
  Result<PositionScheme> zero = LoadHfConfig("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("'/dev/zero': not a regular file (a character device)"), std::string::npos)
      << zero.status().message();
}

HfConfigOptions AtLayer(int64_t layer) {
  HfConfigOptions o;
  o.layer = layer;
  return o;
}

// Gemma 3 / 3n configs published without layer_types (gemma-3-12b-it, gemma-3-1b-it): the config class
// derives them (Gemma3TextConfig: full where (i + 1) % sliding_window_pattern == 0, default 6;
// Gemma3nTextConfig: every 5th layer full), so layer 0 is sliding (rope_local_base_freq, no scaling) and
// layer 5 full (rope_theta and rope_scaling).
TEST(HfConfig, GemmaLayerTypesFromTheSlidingWindowPattern) {
  const std::string head = R"({"model_type": "gemma3_text", "hidden_size": 3840, "num_attention_heads": 16,
    "head_dim": 256, "num_hidden_layers": 12, "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"})";
  for (const char* pattern : {"", R"(, "sliding_window_pattern": 6)"}) {
    const std::string text = head + pattern + "}";
    PositionScheme l0 = Parse(text, AtLayer(0));
    EXPECT_EQ(l0.rope_layer_type, "sliding_attention") << pattern;
    EXPECT_EQ(l0.rope.base, 10000.0);
    EXPECT_EQ(l0.rope.scaling.type, RopeScalingType::kNone);
    PositionScheme l5 = Parse(text, AtLayer(5));
    EXPECT_EQ(l5.rope_layer_type, "full_attention") << pattern;
    EXPECT_EQ(l5.rope.base, 1000000.0);
    EXPECT_EQ(l5.rope.scaling.type, RopeScalingType::kLinear);
    ASSERT_EQ(l5.layer_types.size(), 12u);
    EXPECT_EQ(l5.layer_types[11], "full_attention");
    EXPECT_EQ(l5.layer_types[6], "sliding_attention");
  }
  // Another pattern: every 4th layer full.
  PositionScheme p4 = Parse(head + R"(, "sliding_window_pattern": 4})", AtLayer(3));
  EXPECT_EQ(p4.rope_layer_type, "full_attention");
  EXPECT_EQ(Parse(head + R"(, "sliding_window_pattern": 4})", AtLayer(5)).rope_layer_type, "sliding_attention");
  // Listed layer_types win over the pattern.
  PositionScheme listed = Parse(head + R"(, "num_hidden_layers": 2, "sliding_window_pattern": 6,
    "layer_types": ["full_attention", "sliding_attention"]})", AtLayer(0));
  EXPECT_EQ(listed.rope_layer_type, "full_attention");
  // Gemma 3n: every 5th layer full, sliding_window_pattern not read.
  const std::string n = R"({"model_type": "gemma3n_text", "hidden_size": 2048, "num_attention_heads": 8,
    "head_dim": 256, "num_hidden_layers": 10, "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0})";
  EXPECT_EQ(Parse(n, AtLayer(4)).rope_layer_type, "full_attention");
  EXPECT_EQ(Parse(n, AtLayer(4)).rope.base, 1000000.0);
  EXPECT_EQ(Parse(n, AtLayer(5)).rope_layer_type, "sliding_attention");
  EXPECT_EQ(Parse(n, AtLayer(5)).rope.base, 10000.0);
  // Without rope_local_base_freq / rope_theta the config class's defaults apply per layer type (10000 local,
  // 1e6 global), not one base for every layer.
  const std::string bare = R"({"model_type": "gemma3_text", "hidden_size": 1152, "num_attention_heads": 4,
    "head_dim": 256, "num_hidden_layers": 6})";
  EXPECT_EQ(Parse(bare, AtLayer(0)).rope.base, 10000.0);
  EXPECT_EQ(Parse(bare, AtLayer(5)).rope.base, 1000000.0);
  EXPECT_EQ(Parse(R"({"model_type": "gemma3_text", "hidden_size": 1152, "num_attention_heads": 4, "head_dim": 256,
    "num_hidden_layers": 6, "rope_theta": 500000.0, "rope_scaling": {"type": "linear", "factor": 4.0}})", AtLayer(0))
                .rope.base,
            10000.0);
  PositionScheme old_type = Parse(R"({"model_type": "gemma3_text", "hidden_size": 1152, "num_attention_heads": 4,
    "head_dim": 256, "num_hidden_layers": 6, "rope_theta": 500000.0, "rope_scaling": {"type": "linear", "factor": 4.0}})",
                                  AtLayer(5));
  EXPECT_EQ(old_type.rope.base, 500000.0);
  EXPECT_EQ(old_type.rope.scaling.type, RopeScalingType::kLinear);
  // Only Gemma 3 / 3n read rope_local_base_freq: in another family's config it is a positional key nobody
  // reads, refused by name (never a sliding parameter set the model does not have).
  ExpectError(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0,
    "rope_local_base_freq": 10.0})",
              "rope_local_base_freq", "");
}

// The scheme carries the family's QK-norm; a family with a switch key has it only where the config
// turns it on (GLM-4.5: use_qk_norm, default false), and a switch that is not a boolean is refused.
TEST(HfConfig, QkNormFromTheFamilyRowAndItsSwitch) {
  const std::string glm = R"({"model_type": "glm4_moe", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128,
                              "partial_rotary_factor": 0.5, "rope_theta": 1000000.0)";
  EXPECT_EQ(ParseHfConfig(glm + "}", "t.json").value().qk_norm, QkNorm::kNone);
  EXPECT_EQ(ParseHfConfig(glm + R"(, "use_qk_norm": false})", "t.json").value().qk_norm, QkNorm::kNone);
  EXPECT_EQ(ParseHfConfig(glm + R"(, "use_qk_norm": true})", "t.json").value().qk_norm, QkNorm::kPerHead);
  const Result<PositionScheme> bad = ParseHfConfig(glm + R"(, "use_qk_norm": "yes"})", "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use_qk_norm"), std::string::npos) << bad.status().message();
  const std::string qwen3 = R"({"model_type": "qwen3", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128})";
  EXPECT_EQ(ParseHfConfig(qwen3, "t.json").value().qk_norm, QkNorm::kPerHead);
  const std::string llama = R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4})";
  EXPECT_EQ(ParseHfConfig(llama, "t.json").value().qk_norm, QkNorm::kNone);
}

// Each QK-norm convention names the RMSNorm the fused kernel runs (the Python face's `norm=` and the
// scheme's default), and its name parses back; none and the LayerNorm have no RMSNorm.
TEST(HfConfig, QkNormConventionsAsRmsNorm) {
  struct Row {
    QkNorm q;
    RmsNormStyle style;
    RmsNormScope scope;
  };
  for (const Row& r : {Row{QkNorm::kPerHead, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead},
                       Row{QkNorm::kPerHeadFloat32, RmsNormStyle::kScaleThenCast, RmsNormScope::kPerHead},
                       Row{QkNorm::kPerHeadOnePlus, RmsNormStyle::kOnePlusWeight, RmsNormScope::kPerHead},
                       Row{QkNorm::kWholeProjection, RmsNormStyle::kScaleThenCast, RmsNormScope::kWholeRow},
                       Row{QkNorm::kWholeProjectionCast, RmsNormStyle::kCastThenScale, RmsNormScope::kWholeRow}}) {
    RmsNormStyle style{};
    RmsNormScope scope{};
    ASSERT_TRUE(QkNormAsRmsNorm(r.q, &style, &scope)) << ToString(r.q);
    EXPECT_EQ(style, r.style) << ToString(r.q);
    EXPECT_EQ(scope, r.scope) << ToString(r.q);
  }
  RmsNormStyle style{};
  RmsNormScope scope{};
  EXPECT_FALSE(QkNormAsRmsNorm(QkNorm::kNone, &style, &scope));
  EXPECT_FALSE(QkNormAsRmsNorm(QkNorm::kPerHeadLayerNorm, &style, &scope));
  // The list error messages give: the runnable ones, in the table's order.
  EXPECT_EQ(QkNormRmsNormNames(),
            "per_head, per_head_float32, per_head_one_plus_weight, whole_projection, whole_projection_cast");
  for (QkNorm q : {QkNorm::kNone, QkNorm::kPerHead, QkNorm::kPerHeadFloat32, QkNorm::kPerHeadOnePlus,
                   QkNorm::kWholeProjection, QkNorm::kWholeProjectionCast, QkNorm::kPerHeadLayerNorm}) {
    QkNorm back = QkNorm::kNone;
    ASSERT_TRUE(ParseQkNorm(ToString(q), &back)) << ToString(q);
    EXPECT_EQ(back, q);
  }
  QkNorm out = QkNorm::kPerHead;
  EXPECT_FALSE(ParseQkNorm("rms", &out));
}
}  // namespace
}  // namespace posenc
