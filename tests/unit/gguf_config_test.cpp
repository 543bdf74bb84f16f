// LoadGgufConfig on the shared tiny Llama GGUF: the rope keys, the pairing llama.cpp fixes for
// `llama`, and the refusal of a file without rope.freq_base; GgufConfigFromFile's steps on built files.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "parse_config.hpp"
#include "posenc/io/gguf.hpp"
#include "scheme_models.hpp"

#include "posenc/config/hf_config.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/config/gguf_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/math/multi_axis.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using ::posenc::testing::AsBytes;
using ::posenc::testing::ExpectSchemeModel;
using ::posenc::testing::FloatBytes;
using ::posenc::testing::GgufBuilder;

constexpr const char* kTiny = "models/llama-2-tiny-random/llama-2-tiny-random.gguf";

// Refused when the caller asks for the key (the default takes llama.cpp's 10000: next test).
TEST(GgufConfig, MissingFreqBaseIsAnErrorNamingTheKeyWhenRequired) {
  POSENC_REQUIRE_DATA(path, kTiny);
  Result<PositionScheme> s = LoadGgufConfig(path, GgufConfigOptions{.allow_default_freq_base = false});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("llama.rope.freq_base"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("10000"), std::string::npos) << s.status().message();
}

TEST(GgufConfig, TinyLlamaWithLlamaCppDefaultBase) {
  POSENC_REQUIRE_DATA(path, kTiny);
  Result<PositionScheme> s = LoadGgufConfig(path);  // the default: llama.cpp's 10000, noted
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectSchemeModel(*s, {PositionKind::kRope, "llama", 2, 8});
  EXPECT_EQ(s->max_position_embeddings, 4096);
  const RopeConfig& rc = s->rope;
  EXPECT_EQ(rc.scaling.type, RopeScalingType::kGgml);
  EXPECT_EQ(rc.layout.pairing, RopePairing::kInterleaved);  // llama.cpp: LLAMA_ROPE_TYPE_NORM
  EXPECT_EQ(rc.layout.head_dim, 4);
  EXPECT_EQ(rc.layout.rotary_dim, 4);
  EXPECT_EQ(rc.base, 10000.0);
  EXPECT_EQ(rc.scaling.freq_scale, 1.0);
  EXPECT_EQ(rc.scaling.ext_factor, 0.0);
  EXPECT_EQ(rc.scaling.attn_factor, 1.0);
  EXPECT_EQ(rc.scaling.original_max_position_embeddings, 4096);
  bool noted = false;
  for (const auto& n : rc.notes) noted |= n.find("10000") != std::string::npos;
  EXPECT_TRUE(noted);
  Result<RopeFrequencies> f = ComputeRopeFrequencies(rc, 16);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->inv_freq.size(), 2u);
  EXPECT_DOUBLE_EQ(f->inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(f->inv_freq[1], 0.01);  // 10000^(-2/4)
  EXPECT_EQ(f->attention_scaling, 1.0);
}

// GGUF files built here, one step of GgufConfigFromFile each: head size and rotary dims, YaRN's
// attn_factor as llama-context.cpp computes it, rope_freqs divisors, the non-RoPE architectures, and a
// refusal naming the key and value for each rule.
GgufBuilder Qwen2(uint32_t n_rot = 32) {
  GgufBuilder b = ::posenc::testing::Qwen2Gguf(10000.0f, 4096);
  b.KvU32("qwen2.rope.dimension_count", n_rot);
  return b;
}
Result<PositionScheme> FromBuilt(const GgufBuilder& b, const std::string& name = "built.gguf") {
  const std::string bytes = b.Build();
  POSENC_ASSIGN_OR_RETURN(GgufFile f, GgufFile::FromBytes(AsBytes(bytes), name));
  return GgufConfigFromFile(f);
}

TEST(GgufConfig, HeadSizeFromKeyLengthAndRotaryDims) {
  Result<PositionScheme> s = FromBuilt(Qwen2());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.pairing, RopePairing::kHalf);  // qwen2: LLAMA_ROPE_TYPE_NEOX
  EXPECT_EQ(s->rope.layout.head_dim, 48);                 // key_length, not 64 / 2
  EXPECT_EQ(s->rope.layout.rotary_dim, 32);
  EXPECT_EQ(s->rope.scaling.freq_scale, 1.0);
  EXPECT_EQ(s->rope.scaling.original_max_position_embeddings, 4096);
  // Without key_length the head size is embedding_length / head_count.
  GgufBuilder b;
  b.KvString("general.architecture", "qwen2")
      .KvU32("qwen2.embedding_length", 64)
      .KvU32("qwen2.attention.head_count", 2)
      .KvF32("qwen2.rope.freq_base", 10000.0f);
  s = FromBuilt(b);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.head_dim, 32);
  EXPECT_EQ(s->rope.layout.rotary_dim, 32);
}

// The query temperature llama.cpp's load_hparams sets per architecture: llama4's fixed values (none
// with attention.sliding_window 0), mistral3's temperature_scale over the YaRN original context,
// deepseek2's temperature_scale / temperature_length; a zero floor is refused naming the key.
TEST(GgufConfig, QueryTemperatureAsLlamaCppLoadsIt) {
  auto base = [](const char* arch) {
    GgufBuilder b;
    const std::string a = arch;
    b.KvString("general.architecture", arch)
        .KvU32(a + ".embedding_length", 512)
        .KvU32(a + ".attention.head_count", 4)
        .KvU32(a + ".context_length", 262144)
        .KvF32(a + ".rope.freq_base", 1000000.0f);
    return b;
  };
  Result<PositionScheme> l4 = FromBuilt(base("llama4"));
  ASSERT_TRUE(l4.ok()) << l4.status().ToString();
  EXPECT_TRUE(l4->attn_temperature.tuning);
  EXPECT_EQ(l4->attn_temperature.floor_scale, 8192.0);
  EXPECT_EQ(l4->attn_temperature.offset, 1);
  EXPECT_FALSE(l4->attn_temperature.every_layer);
  GgufBuilder no_swa = base("llama4");
  no_swa.KvU32("llama4.attention.sliding_window", 0);
  EXPECT_FALSE(FromBuilt(no_swa).value().attn_temperature.tuning);

  GgufBuilder m3 = base("mistral3");
  m3.KvF32("mistral3.attention.temperature_scale", 0.1f).KvU32("mistral3.rope.scaling.original_context_length", 16384);
  Result<PositionScheme> s = FromBuilt(m3);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->attn_temperature.tuning);
  EXPECT_EQ(s->attn_temperature.floor_scale, 16384.0);
  EXPECT_FLOAT_EQ(s->attn_temperature.attn_scale, 0.1f);
  EXPECT_EQ(s->attn_temperature.offset, 0);
  EXPECT_TRUE(s->attn_temperature.every_layer);
  EXPECT_FALSE(FromBuilt(base("mistral3")).value().attn_temperature.tuning);  // no key: none

  GgufBuilder ds = base("deepseek2");
  ds.KvF32("deepseek2.attention.temperature_scale", 0.1f).KvU32("deepseek2.rope.dimension_count", 64);
  Result<PositionScheme> bad = FromBuilt(ds, "ds.gguf");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(testing::HasError(bad.status(), StatusCode::kInvalidArgument, "deepseek2.attention.temperature_length"))
      << bad.status().message();
  ds.KvU32("deepseek2.attention.temperature_length", 8192);
  s = FromBuilt(ds);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->attn_temperature.floor_scale, 8192.0);
  EXPECT_TRUE(s->attn_temperature.every_layer);
}

// The per-layer table of a GGUF file, as llama.cpp applies its architecture's rule: cohere2 rotates
// its sliding layers only (pattern 4: every 4th layer has none); llama4 with attention.sliding_window 0
// has n_no_rope_layer_step = block_count (only the last layer is NoPE).
TEST(GgufConfig, LayerTableFromBlockCount) {
  GgufBuilder c;
  c.KvString("general.architecture", "cohere2")
      .KvU32("cohere2.embedding_length", 512)
      .KvU32("cohere2.attention.head_count", 4)
      .KvU32("cohere2.block_count", 8)
      .KvF32("cohere2.rope.freq_base", 50000.0f);
  Result<PositionScheme> s = FromBuilt(c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Result<LayerSchedule> l = LayerRopeSchedule(*s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(std::vector<bool>(l->rope.begin(), l->rope.end()),
            (std::vector<bool>{true, true, true, false, true, true, true, false}));
  GgufBuilder m;
  m.KvString("general.architecture", "llama4")
      .KvU32("llama4.embedding_length", 512)
      .KvU32("llama4.attention.head_count", 4)
      .KvU32("llama4.block_count", 6)
      .KvU32("llama4.attention.sliding_window", 0)
      .KvF32("llama4.rope.freq_base", 500000.0f);
  s = FromBuilt(m);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  l = LayerRopeSchedule(*s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->num_nope_layers(), 1);
  EXPECT_FALSE(l->rope[5]);
}

TEST(GgufConfig, YarnAttnFactorAndRopeFreqs) {
  // factor 4: llama.cpp's kernel factor mscale(4) = 1 + 0.1 ln 4 is cancelled by 1 / (1 + 0.1 ln 4),
  // so attn_factor is the key's 0.5 alone.
  GgufBuilder b = Qwen2();
  b.KvString("qwen2.rope.scaling.type", "yarn")
      .KvF32("qwen2.rope.scaling.factor", 4.0f)
      .KvU32("qwen2.rope.scaling.original_context_length", 1024)
      .KvF32("qwen2.rope.scaling.attn_factor", 0.5f)
      .KvF32("qwen2.rope.scaling.yarn_beta_fast", 16.0f);
  std::vector<float> divisors(16, 1.0f);
  divisors[15] = 8.0f;
  b.Tensor("rope_freqs.weight", {16}, 0, FloatBytes(divisors));
  Result<PositionScheme> s = FromBuilt(b);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const RopeScaling& sc = s->rope.scaling;
  EXPECT_EQ(sc.freq_scale, 0.25);
  EXPECT_EQ(sc.ext_factor, 1.0);
  EXPECT_EQ(sc.beta_fast, 16.0);
  EXPECT_EQ(sc.beta_slow, 1.0);
  EXPECT_EQ(sc.original_max_position_embeddings, 1024);
  EXPECT_FLOAT_EQ(static_cast<float>(sc.attn_factor), 0.5f);
  ASSERT_EQ(sc.freq_factors.size(), 16u);
  EXPECT_EQ(sc.freq_factors[15], 8.0);
  // DeepSeek 2's yarn_log_multiplier 0.1: mscale(4, 0.1) / mscale(4, 0.1) = 1, times 1 / (1 + 0.1 ln 4).
  GgufBuilder d;
  d.KvString("general.architecture", "deepseek2")
      .KvU32("deepseek2.embedding_length", 64)
      .KvU32("deepseek2.attention.head_count", 2)
      .KvF32("deepseek2.rope.freq_base", 10000.0f)
      .KvString("deepseek2.rope.scaling.type", "yarn")
      .KvF32("deepseek2.rope.scaling.factor", 4.0f)
      .KvF32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f)
      .KvU32("deepseek2.context_length", 4096);
  s = FromBuilt(d);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.pairing, RopePairing::kInterleaved);  // deepseek2: NORM
  EXPECT_FLOAT_EQ(static_cast<float>(s->rope.scaling.attn_factor), 1.0f / (1.0f + 0.1f * std::log(4.0f)));
}

TEST(GgufConfig, ArchitecturesWithoutRope) {
  GgufBuilder gpt2, bloom, mamba;
  gpt2.KvString("general.architecture", "gpt2").KvU32("gpt2.context_length", 1024);
  bloom.KvString("general.architecture", "bloom").KvU32("bloom.attention.head_count", 16);
  mamba.KvString("general.architecture", "mamba");
  Result<PositionScheme> s = FromBuilt(gpt2);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, PositionKind::kLearned);
  EXPECT_EQ(s->max_position_embeddings, 1024);
  s = FromBuilt(bloom);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, PositionKind::kAlibi);
  EXPECT_EQ(s->alibi_variant, "bloom");
  EXPECT_EQ(s->num_heads, 16);
  // Mamba: no RoPE in llama.cpp and no positions in the family's code (its registry row): none.
  s = FromBuilt(mamba);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, PositionKind::kNone);
}

// One file per rule; each refusal has the rule's code and names the key and value. (Qwen2(64) was
// checked by its message alone until it joined this table, which checks every code.)
TEST(GgufConfig, EachRuleRefusedNamingTheKeyAndValue) {
  struct Refused {
    GgufBuilder file;
    const char* name;
    StatusCode code;
    const char* message;
  };
  const Refused cases[] = {
      {Qwen2(5), "odd.gguf", StatusCode::kInvalidArgument,
       "gguf odd.gguf: key 'qwen2.rope.dimension_count' = 5 must be even"},
      {Qwen2(64), "built.gguf", StatusCode::kInvalidArgument,
       "= 64 must be even, positive and at most the head size 48"},
      {Qwen2().KvString("qwen2.rope.scaling.type", "warp"), "built.gguf", StatusCode::kUnimplemented,
       "key 'qwen2.rope.scaling.type' = 'warp'"},
      {Qwen2().KvF32("qwen2.rope.scaling.factor", -2.0f), "built.gguf", StatusCode::kInvalidArgument,
       "key 'qwen2.rope.scaling.factor' = -2 must be finite and >= 0"},
      {Qwen2().Tensor("rope_freqs.weight", {15}, 0, FloatBytes(std::vector<float>(15, 1.0f))), "built.gguf",
       StatusCode::kInvalidArgument, "'rope_freqs.weight' has 15 values, must have n_rot/2 = 16"},
      {Qwen2().Tensor("rope_factors_long.weight", {16}, 0, FloatBytes(std::vector<float>(16, 1.0f))), "built.gguf",
       StatusCode::kNotFound, "only one of rope_factors_long / rope_factors_short"},
      {GgufBuilder().KvString("general.architecture", "qwen2").KvF32("qwen2.rope.freq_base", 10000.0f), "built.gguf",
       StatusCode::kNotFound, "key 'qwen2.attention.head_count' is missing or 0"},
  };
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.message);
    const Result<PositionScheme> s = FromBuilt(c.file, c.name);
    EXPECT_EQ(s.status().code(), c.code);
    EXPECT_NE(s.status().message().find(c.message), std::string::npos) << s.status().message();
  }
}

TEST(GgufConfig, MissingFileIsAnError) {
  Result<PositionScheme> s = LoadGgufConfig("/nonexistent/model.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/model.gguf"), std::string::npos) << s.status().message();
}


// GGUF M-RoPE architectures (issue 18): qwen2vl is ggml's MROPE (mode 8, chunked sections), qwen3vl and
// qwen3vlmoe IMROPE (mode 40, interleaved), with <arch>.rope.dimension_sections. The scheme read from
// GGUF metadata must be the one RopeConfigFromGgmlParams reads from the same ggml_rope_multi
// parameters (the path the golden ggml mrope / imrope cases check): the same frequencies, attention
// scaling and per-pair position row.
struct MropeGguf {
  const char* arch;
  int64_t mode;
  uint32_t head_dim, n_rot;
  std::vector<int32_t> sections;
  float base;
};

class GgufMultiAxis : public ::testing::TestWithParam<MropeGguf> {};

TEST_P(GgufMultiAxis, SameSchemeAsTheGgmlParameters) {
  const MropeGguf& c = GetParam();
  const std::string a = c.arch;
  ::posenc::testing::GgufBuilder b;
  b.KvString("general.architecture", a)
      .KvU32(a + ".embedding_length", 8 * c.head_dim)
      .KvU32(a + ".attention.head_count", 8)
      .KvU32(a + ".attention.key_length", c.head_dim)
      .KvU32(a + ".rope.dimension_count", c.n_rot)
      .KvU32(a + ".context_length", 32768)
      .KvF32(a + ".rope.freq_base", c.base)
      .KvArray<int32_t>(a + ".rope.dimension_sections", 5, c.sections);
  Result<PositionScheme> s = FromBuilt(b);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->rope.multi_axis.has_value());
  EXPECT_EQ(s->rope.multi_axis->num_components, 4);
  EXPECT_EQ(s->rope.multi_axis->layout, c.mode == 8 ? SectionLayout::kChunked : SectionLayout::kInterleaved);

  std::string sections;
  for (int32_t v : c.sections) sections += (sections.empty() ? "" : ",") + std::to_string(v);
  const std::string params = fmt::format(
      R"({{"n_dims": {}, "mode": {}, "sections": [{}], "n_ctx_orig": 32768, "freq_base": {}, "freq_scale": 1.0,
          "ext_factor": 0.0, "attn_factor": 1.0, "beta_fast": 32.0, "beta_slow": 1.0}})",
      c.n_rot, c.mode, sections, c.base);
  Result<RopeConfig> want = RopeConfigFromGgmlParams(params, c.head_dim, "params");
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_EQ(s->rope.layout.pairing, want->layout.pairing);
  EXPECT_EQ(s->rope.layout.rotary_dim, want->layout.rotary_dim);
  Result<MultiAxisPlan> got_plan = ComputeMultiAxisRope(s->rope, 4096);
  Result<MultiAxisPlan> want_plan = ComputeMultiAxisRope(*want, 4096);
  ASSERT_TRUE(got_plan.ok()) << got_plan.status().ToString();
  ASSERT_TRUE(want_plan.ok()) << want_plan.status().ToString();
  EXPECT_EQ(got_plan->pair_component, want_plan->pair_component);
  EXPECT_EQ(got_plan->freqs.inv_freq, want_plan->freqs.inv_freq);
  EXPECT_EQ(got_plan->freqs.attention_scaling, want_plan->freqs.attention_scaling);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufMultiAxis,
                         ::testing::Values(MropeGguf{"qwen2vl", 8, 128, 128, {16, 24, 24, 0}, 1000000.0f},
                                           MropeGguf{"qwen2vl", 8, 128, 64, {8, 12, 12, 0}, 10000.0f},
                                           MropeGguf{"qwen3vl", 40, 128, 128, {24, 20, 20, 0}, 5000000.0f},
                                           MropeGguf{"qwen3vlmoe", 40, 128, 128, {24, 20, 20, 0}, 5000000.0f}));

TEST(GgufMultiAxisErrors, MissingOrBadSectionsAreNamed) {
  ::posenc::testing::GgufBuilder b;
  b.KvString("general.architecture", "qwen2vl")
      .KvU32("qwen2vl.embedding_length", 1024)
      .KvU32("qwen2vl.attention.head_count", 8)
      .KvF32("qwen2vl.rope.freq_base", 10000.0f);
  Result<PositionScheme> s = FromBuilt(b, "vl.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("gguf vl.gguf: key 'qwen2vl.rope.dimension_sections' is missing"),
            std::string::npos)
      << s.status().message();
  ::posenc::testing::GgufBuilder wide = b;
  wide.KvArray<int32_t>("qwen2vl.rope.dimension_sections", 5, {64, 64, 64, 0});
  s = FromBuilt(wide, "vl.gguf");
  EXPECT_TRUE(::posenc::testing::HasError(
      s.status(), StatusCode::kInvalidArgument,
      "key 'qwen2vl.rope.dimension_sections' = [64, 64, 64, 0] sums to 192, beyond head_dim 128"));
  ::posenc::testing::GgufBuilder three = b;
  three.KvArray<int32_t>("qwen2vl.rope.dimension_sections", 5, {16, 24, 24});
  s = FromBuilt(three, "vl.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("ggml_rope_multi takes 4 integers"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace posenc
