// Per-layer schemes from the family's rule (ModelFamily::layer_rule, issue 18 item 3) on configs shaped
// like the published ones: EXAONE 4 (LGAI-EXAONE/EXAONE-4.0-32B config.json: sliding_window 4096,
// sliding_window_pattern "LLLG", layer_types; modeling_exaone4.py Exaone4Attention: RoPE iff
// sliding_window is None or the layer is sliding), OLMo 3 (allenai/Olmo-3 config.json: rope_scaling
// yarn, layer_types; modeling_olmo3.py: the sliding layers' rotary embedding is the default one), and
// the refusal of a layer type the config does not declare.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/math/rope_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using nlohmann::json;

json Exaone4(int layers) {
  json c = {{"model_type", "exaone4"},
            {"hidden_size", 5120},
            {"head_dim", 128},
            {"num_attention_heads", 40},
            {"num_key_value_heads", 8},
            {"num_hidden_layers", layers},
            {"max_position_embeddings", 131072},
            {"rope_theta", 1000000.0},
            {"sliding_window", 4096},
            {"sliding_window_pattern", "LLLG"},
            {"rope_scaling",
             {{"rope_type", "llama3"},
              {"factor", 16.0},
              {"low_freq_factor", 1.0},
              {"high_freq_factor", 4.0},
              {"original_max_position_embeddings", 8192}}}};
  return c;
}

std::vector<bool> Schedule(const json& c, HfConfigOptions o = {}) {
  Result<PositionScheme> s = ParseHfConfig(c.dump(), "cfg", o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  Result<LayerSchedule> l = LayerRopeSchedule(*s);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? l->rope : std::vector<bool>{};
}

TEST(LayerTypes, Exaone4HybridIsNopeOnGlobalLayers) {
  const std::vector<bool> lllg = {true, true, true, false, true, true, true, false};
  json c = Exaone4(8);
  EXPECT_EQ(Schedule(c), lllg);  // from the "LLLG" string alone
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                      "sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(Schedule(c), (std::vector<bool>{true, false, true, false, true, false, true, false}));  // the list wins
  // Without a sliding window (EXAONE-4.0-1.2B: sliding_window null) every layer rotates.
  c = Exaone4(4);
  c["sliding_window"] = nullptr;
  EXPECT_EQ(Schedule(c), std::vector<bool>(4, true));
  // Without the key, Exaone4Config's default sliding_window (4096) applies: windowed, so the full layers
  // (every 4th by the class's default sliding_window_pattern 4 when it is absent too) are NoPE.
  c.erase("sliding_window");
  EXPECT_EQ(Schedule(c), (std::vector<bool>{true, true, true, false}));
  c.erase("sliding_window_pattern");
  EXPECT_EQ(Schedule(c), (std::vector<bool>{true, true, true, false}));
  c["sliding_window_pattern"] = 2;
  EXPECT_EQ(Schedule(c), (std::vector<bool>{true, false, true, false}));
  // A pattern of other letters is refused naming the key and value.
  c = Exaone4(4);
  c["sliding_window_pattern"] = "LLXG";
  Result<PositionScheme> bad = ParseHfConfig(c.dump(), "cfg");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key 'sliding_window_pattern' is \"LLXG\""), std::string::npos)
      << bad.status().message();
}

json Olmo3() {
  return {{"model_type", "olmo3"},
          {"hidden_size", 4096},
          {"num_attention_heads", 32},
          {"num_hidden_layers", 4},
          {"max_position_embeddings", 65536},
          {"rope_theta", 500000},
          {"sliding_window", 4096},
          {"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}},
          {"rope_scaling",
           {{"rope_type", "yarn"},
            {"factor", 8.0},
            {"original_max_position_embeddings", 8192},
            {"attention_factor", 1.2079441541679836},
            {"beta_fast", 32},
            {"beta_slow", 1}}}};
}

TEST(LayerTypes, Olmo3ScalesOnlyItsFullAttentionLayers) {
  HfConfigOptions sliding, full;
  sliding.layer_type = "sliding_attention";
  full.layer_type = "full_attention";
  Result<PositionScheme> whole = ParseHfConfig(Olmo3().dump(), "cfg");
  Result<PositionScheme> f = ParseHfConfig(Olmo3().dump(), "cfg", full);
  Result<PositionScheme> s = ParseHfConfig(Olmo3().dump(), "cfg", sliding);
  ASSERT_TRUE(whole.ok() && f.ok() && s.ok()) << s.status().ToString();
  EXPECT_EQ(whole->rope.scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(f->rope.scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(s->rope.scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(s->rope.base, 500000.0);
  // The sliding layers' frequencies are the seed's, unscaled, with no attention factor.
  Result<RopeFrequencies> fs = ComputeRopeFrequencies(s->rope, 65536);
  Result<RopeFrequencies> plain = DefaultRopeFrequencies(128, 500000.0);
  ASSERT_TRUE(fs.ok() && plain.ok());
  EXPECT_EQ(fs->inv_freq, plain->inv_freq);
  EXPECT_EQ(fs->attention_scaling, 1.0);
  Result<RopeFrequencies> ff = ComputeRopeFrequencies(f->rope, 65536);
  ASSERT_TRUE(ff.ok());
  EXPECT_NEAR(ff->attention_scaling, 1.2079441541679836, 1e-12);
  EXPECT_EQ(Schedule(Olmo3()), std::vector<bool>(4, true));  // every layer rotates
}

TEST(LayerTypes, AnUndeclaredLayerTypeIsRefusedNamingTheDeclaredOnes) {
  HfConfigOptions o;
  o.layer_type = "chunked_attention";
  Result<PositionScheme> s = ParseHfConfig(Olmo3().dump(), "cfg", o);
  EXPECT_TRUE(testing::HasError(
      s.status(), StatusCode::kNotFound,
      "layer type 'chunked_attention' is not one of the config's layer_types (sliding_attention, full_attention)"));
  json llama = {{"model_type", "llama"}, {"hidden_size", 64}, {"num_attention_heads", 4}};
  o.layer_type = "sliding_attention";
  s = ParseHfConfig(llama.dump(), "cfg", o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("declares no layer_types"), std::string::npos) << s.status().message();
  o.layer_type = "full_attention";  // the one layer type of a config that declares none
  EXPECT_TRUE(ParseHfConfig(llama.dump(), "cfg", o).ok());
  // A declared type of a one-RoPE config takes that RoPE, with a note.
  json mistral = llama;
  mistral["layer_types"] = {"sliding_attention", "full_attention"};
  o.layer_type = "sliding_attention";
  s = ParseHfConfig(mistral.dump(), "cfg", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope_layer_type, "sliding_attention");
}

}  // namespace
}  // namespace posenc
