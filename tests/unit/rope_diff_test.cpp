// posenc diff's library: ModelRopeLayers (per layer, per site) and DiffRope over real published configs:
// two spellings of one config are equivalent; each planted conversion fault (a scaling key dropped, the
// base changed, the window changed, the partial factor changed, rope_freqs missing from a GGUF) is
// named, with the first position where it matters.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_builders.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/model/rope_diff.hpp"
#include "published_configs.hpp"
#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ::posenc::testing;  // NOLINT

class RopeDiffTest : public TempFolderTest {
 protected:
  RopeDescription Write(const std::string& name, const json& config) {
    const fs::path p = dir_ / (name + ".json");
    WriteFile(p, config.dump());
    Result<RopeDescription> d = OpenRopeDescription(p.string());
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(d).value() : RopeDescription{};
  }
  RopeDiffReport Diff(const RopeDescription& a, const RopeDescription& b, int64_t seq_len = 0) {
    Result<RopeDiffReport> r = DiffRope(a, b, RopeDiffOptions{.seq_len = seq_len});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : RopeDiffReport{};
  }
  static const RopeDifference* Find(const RopeDiffReport& r, const std::string& field) {
    for (const RopeDifference& d : r.differences)
      if (d.field == field) return &d;
    return nullptr;
  }
  // The difference of `field`, checked to read A `a` and B `b`; nullptr (and a failure) when none.
  static const RopeDifference* FindChange(const RopeDiffReport& r, const std::string& field, const std::string& a,
                                          const std::string& b) {
    const RopeDifference* d = Find(r, field);
    EXPECT_NE(d, nullptr) << field;
    if (d != nullptr) {
      EXPECT_EQ(d->a, a);
      EXPECT_EQ(d->b, b);
    }
    return d;
  }
};

// transformers v5 moves rope_theta and rope_scaling into rope_parameters.
json ToV5(json c) {
  json p = c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"] : json::object();
  if (p.contains("type") && !p.contains("rope_type")) p["rope_type"] = p["type"];
  p.erase("type");
  if (!p.contains("rope_type")) p["rope_type"] = "default";
  p["rope_theta"] = c["rope_theta"];
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c["rope_parameters"] = p;
  return c;
}

TEST_F(RopeDiffTest, LayersOfALlamaConfigAreOneSiteEach) {
  const RopeDescription d = Write("a", PublishedConfig("llama__llama-3.1-8b"));
  Result<ModelRope> m = ModelRopeLayers(d);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->layers_known);
  ASSERT_EQ(m->layers.size(), 32u);
  for (const LayerRope& l : m->layers) {
    ASSERT_EQ(l.sites.size(), 1u);
    EXPECT_EQ(l.sites[0].config.scaling.type, RopeScalingType::kLlama3);
    EXPECT_EQ(l.sites[0].config.base, 500000.0);
  }
}

TEST_F(RopeDiffTest, GemmaThreeLayerTypesTakeTheirOwnBase) {
  json c = PublishedConfig("gemma3_text__gemma-3-1b-it");
  c["layer_types"] = json::array();
  for (int i = 0; i < 26; ++i) c["layer_types"].push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  const RopeDescription d = Write("g", c);
  Result<ModelRope> m = ModelRopeLayers(d);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->layers.size(), 26u);
  EXPECT_EQ(m->layers[0].layer_type, "sliding_attention");
  EXPECT_EQ(m->layers[0].sites[0].config.base, 10000.0);
  EXPECT_EQ(m->layers[5].layer_type, "full_attention");
  EXPECT_EQ(m->layers[5].sites[0].config.base, 1000000.0);
}

TEST_F(RopeDiffTest, TheTwoSpellingsOfOneConfigAreEquivalent) {
  for (const char* name : {"llama__llama-3.1-8b", "qwen2__qwen2.5-7b-instruct-yarn-d1e200f",
                           "phi3__phi-3.5-mini-instruct", "gptj__gpt-j-6b-8bit", "qwen2__qwen2.5-7b-instruct"}) {
    SCOPED_TRACE(name);
    const json v4 = PublishedConfig(name);
    if (!v4.contains("rope_theta")) continue;
    const RopeDiffReport r = Diff(Write("v4", v4), Write("v5", ToV5(v4)));
    EXPECT_TRUE(r.equivalent) << r.summary;
    for (const RopeDifference& d : r.differences) EXPECT_FALSE(d.affects) << d.text;
  }
}

TEST_F(RopeDiffTest, ADroppedScalingIsNamedWithTheFirstPositionItMatters) {
  const json v4 = PublishedConfig("llama__llama-3.1-8b");
  json dropped = ToV5(v4);
  dropped["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};  // the scaling keys lost
  const RopeDiffReport r = Diff(Write("a", v4), Write("b", dropped));
  EXPECT_FALSE(r.equivalent);
  const RopeDifference* d = FindChange(r, "scaling", "llama3", "default");
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->text.find("B applies no scaling"), std::string::npos) << d->text;
  EXPECT_EQ(d->first_layer, 0);
  EXPECT_EQ(d->last_layer, 31);
  // The first position past 1e-3 rad is set by the pair whose frequency changes most: p * dw > 1e-3.
  const RopeConfig scaled = Write("c", v4).scheme.rope;
  const std::vector<double> plain = UnscaledFrequencies(scaled);
  const std::vector<double> w = ComputeRopeFrequencies(scaled, 131072).value().inv_freq;
  double largest = 0;
  int64_t fast_untouched = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    largest = std::max(largest, std::abs(plain[i] - w[i]));
    if (plain[i] == w[i]) ++fast_untouched;
  }
  EXPECT_EQ(r.cost.first_position_1e3, static_cast<int64_t>(std::floor(1e-3 / largest)) + 1);
  EXPECT_GT(fast_untouched, 0);
  EXPECT_NE(r.summary.find("scaling: A llama3, B default"), std::string::npos) << r.summary;
  EXPECT_GE(r.cost.max_at_pair, fast_untouched);  // the fast pairs are untouched
}

TEST_F(RopeDiffTest, AChangedBaseIsNamed) {
  json a = PublishedConfig("qwen2__qwen2.5-7b-instruct");
  json b = a;
  b["rope_theta"] = 10000.0;
  const RopeDiffReport r = Diff(Write("a", a), Write("b", b));
  EXPECT_FALSE(r.equivalent);
  const RopeDifference* d = FindChange(r, "base", "1000000", "10000");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->affects);
  EXPECT_EQ(r.differences.size(), 1u);
  // Pair 1's frequency changes by 1e6^(-1/64) - 1e4^(-1/64): past 1e-3 rad within a few positions.
  EXPECT_GT(r.cost.first_position_1e3, 0);
  EXPECT_LT(r.cost.first_position_1e3, 100);
}

TEST_F(RopeDiffTest, AChangedWindowOrPartialFactorIsStructural) {
  json a = PublishedConfig("gptj__gpt-j-6b-8bit");
  json b = a;
  b["rotary_dim"] = 128;  // the partial window changed (64 of 256 dims -> 128)
  const RopeDiffReport r = Diff(Write("a", a), Write("b", b));
  EXPECT_FALSE(r.equivalent);
  EXPECT_TRUE(r.cost.structural);
  const RopeDifference* d = Find(r, "rotary_window");
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->a.find("[0, 64)"), std::string::npos) << d->a;
  EXPECT_NE(d->b.find("[0, 128)"), std::string::npos) << d->b;
  EXPECT_EQ(r.cost.first_position_f32, 1);

  json n = PublishedConfig("gpt_neox__gptneox-response-full-static-sft");
  json m = n;
  m["rotary_pct"] = 0.5;
  const RopeDiffReport r2 = Diff(Write("n", n), Write("m", m));
  EXPECT_FALSE(r2.equivalent);
  EXPECT_NE(Find(r2, "rotary_window"), nullptr);
}

TEST_F(RopeDiffTest, FieldsWithoutEffectKeepItEquivalent) {
  json a = PublishedConfig("qwen2__qwen2.5-7b-instruct");
  json b = a;
  b["max_position_embeddings"] = 65536;  // unscaled RoPE does not read it
  const RopeDiffReport r = Diff(Write("a", a), Write("b", b), 4096);
  EXPECT_TRUE(r.equivalent) << r.summary;
  const RopeDifference* d = Find(r, "max_position_embeddings");
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->affects);
}

TEST_F(RopeDiffTest, ALongRopeSwitchShowsTheLengthFromWhichItMatters) {
  // Phi-3.5 with the long factors replaced by the short ones: identical up to the original 4096
  // positions (both run the short factors), different from the first position of the long regime.
  json a = PublishedConfig("phi3__phi-3.5-mini-instruct");
  json b = a;
  b["rope_scaling"]["long_factor"] = a["rope_scaling"]["short_factor"];
  const RopeDiffReport r = Diff(Write("a", a), Write("b", b), 16384);
  EXPECT_FALSE(r.equivalent);
  EXPECT_EQ(r.cost.first_position_f32, 4096) << r.summary;
  EXPECT_NE(Find(r, "scaling.long_factor"), nullptr);
}

// A GGUF written from the Llama 3.1 config as llama.cpp's converter writes it: interleaved pairs (the
// converter permutes W_q/W_k), the base as float32, and Llama 3's scaling baked into rope_freqs.
std::string LlamaThreeGguf(const RopeConfig& hf, bool with_rope_freqs) {
  GgufBuilder b;
  b.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", 32)
      .KvU32("llama.context_length", 131072)
      .KvU32("llama.embedding_length", 4096)
      .KvU32("llama.attention.head_count", 32)
      .KvU32("llama.attention.head_count_kv", 8)
      .KvF32("llama.rope.freq_base", 500000.0f)
      .KvU32("llama.rope.dimension_count", 128);
  if (with_rope_freqs) {
    const std::vector<double> plain = UnscaledFrequencies(hf);
    const RopeFrequencies scaled = ComputeRopeFrequencies(hf, 131072).value();
    std::vector<float> factors;
    for (size_t i = 0; i < plain.size(); ++i) factors.push_back(static_cast<float>(plain[i] / scaled.inv_freq[i]));
    b.Tensor("rope_freqs.weight", {64}, 0, FloatBytes(factors));
  }
  return b.Build();
}

TEST_F(RopeDiffTest, AGgufMadeFromTheConfigIsEquivalentAndOneWithoutRopeFreqsIsNot) {
  const RopeDescription hf = Write("config", PublishedConfig("llama__llama-3.1-8b"));
  WriteFile(dir_ / "good.gguf", LlamaThreeGguf(hf.scheme.rope, true));
  WriteFile(dir_ / "bad.gguf", LlamaThreeGguf(hf.scheme.rope, false));
  Result<RopeDescription> good = OpenRopeDescription((dir_ / "good.gguf").string());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  const RopeDiffReport r = Diff(hf, *good);
  EXPECT_TRUE(r.equivalent) << r.summary;
  const RopeDifference* pairing = Find(r, "pairing");
  ASSERT_NE(pairing, nullptr);  // listed, without effect: the converter permuted the weights
  EXPECT_FALSE(pairing->affects);
  // Counted when asked.
  Result<RopeDiffReport> strict = DiffRope(hf, *good, RopeDiffOptions{.strict_pairing = true});
  ASSERT_TRUE(strict.ok());
  EXPECT_FALSE(strict->equivalent);

  Result<RopeDescription> bad = OpenRopeDescription((dir_ / "bad.gguf").string());
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  const RopeDiffReport rb = Diff(hf, *bad);
  EXPECT_FALSE(rb.equivalent);
  EXPECT_GT(rb.cost.first_position_f32, 0);
  EXPECT_GT(rb.cost.first_position_1e3, rb.cost.first_position_f32);
  bool named = false;
  for (const RopeDifference& d : rb.differences) named = named || (d.field.starts_with("scaling") && d.affects);
  EXPECT_TRUE(named) << rb.summary;
}

TEST_F(RopeDiffTest, ADifferentSchemeIsNotEquivalent) {
  const RopeDescription a = Write("a", PublishedConfig("llama__llama-3.1-8b"));
  const RopeDescription b = Write("b", PublishedConfig("bloom__bigscience-bloom-560m"));
  const RopeDiffReport r = Diff(a, b);
  EXPECT_FALSE(r.equivalent);
  ASSERT_FALSE(r.differences.empty());
  EXPECT_EQ(r.differences[0].field, "scheme");
}

TEST_F(RopeDiffTest, APerLayerScheduleLostIsNamedPerLayer) {
  // Llama 4 Scout: every 4th layer NoPE (no_rope_layers); a converter that writes every layer as RoPE.
  json a = PublishedConfig("llama4__llama-4-scout-17b-16e");
  json b = a;
  b["text_config"]["no_rope_layers"] = std::vector<int>(48, 1);
  const RopeDiffReport r = Diff(Write("a", a), Write("b", b));
  EXPECT_FALSE(r.equivalent);
  EXPECT_TRUE(r.cost.structural);
  std::vector<int64_t> layers;
  for (const RopeDifference& d : r.differences) {
    EXPECT_EQ(d.field, "rope_applied") << d.text;
    EXPECT_EQ(d.a, "NoPE");
    EXPECT_EQ(d.b, "RoPE");
    EXPECT_EQ(d.first_layer, d.last_layer);
    layers.push_back(d.first_layer);
  }
  EXPECT_EQ(layers, (std::vector<int64_t>{3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47}));
  EXPECT_EQ(r.cost.first_position_f32, 1);
}

TEST_F(RopeDiffTest, SchemesOtherThanRopeCompareTheirParameters) {
  const json bloom = PublishedConfig("bloom__bigscience-bloom-560m");
  EXPECT_TRUE(Diff(Write("a", bloom), Write("b", bloom)).equivalent);
  json more = bloom;
  more["n_head"] = bloom.value("n_head", 16) * 2;  // other ALiBi slopes
  const RopeDiffReport r = Diff(Write("a", bloom), Write("c", more));
  EXPECT_FALSE(r.equivalent);
  ASSERT_FALSE(r.differences.empty());
  EXPECT_EQ(r.differences.front().field, "num_heads");
}

}  // namespace
}  // namespace posenc
