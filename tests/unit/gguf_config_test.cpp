// LoadGgufConfig on the shared tiny Llama GGUF: the rope keys, the pairing llama.cpp fixes for
// `llama`, and the refusal of a file without rope.freq_base.
#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/gguf_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

constexpr const char* kTiny = "models/llama-2-tiny-random/llama-2-tiny-random.gguf";

TEST(GgufConfig, MissingFreqBaseIsAnErrorNamingTheKey) {
  POSENC_REQUIRE_DATA(path, kTiny);
  Result<PositionScheme> s = LoadGgufConfig(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("llama.rope.freq_base"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("10000"), std::string::npos) << s.status().message();
}

TEST(GgufConfig, TinyLlamaWithLlamaCppDefaultBase) {
  POSENC_REQUIRE_DATA(path, kTiny);
  Result<PositionScheme> s = LoadGgufConfig(path, GgufConfigOptions{.allow_default_freq_base = true});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, PositionKind::kRope);
  EXPECT_EQ(s->model_type, "llama");
  EXPECT_EQ(s->num_heads, 2);
  EXPECT_EQ(s->hidden_size, 8);
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

TEST(GgufConfig, MissingFileIsAnError) {
  Result<PositionScheme> s = LoadGgufConfig("/nonexistent/model.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/model.gguf"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace posenc
