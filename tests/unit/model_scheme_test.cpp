// ModelScheme over every format: the shared GGUF (no rope.freq_base) and llama2.c files, GGUF files
// built here (a NEOX architecture whose key_length differs from embedding_length / head_count), Hugging
// Face folders with a Gemma-style head_dim, a bare config.json path, and the formats with no scheme.
#include "posenc/model/model_scheme.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "parse_config.hpp"
#include "posenc/io/npy.hpp"
#include "scheme_models.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using namespace ::posenc::testing;  // NOLINT

fs::path TempDir(const std::string& name) { return ::posenc::testing::TempDir("model_scheme_test", name); }
bool AnyContains(const std::vector<std::string>& notes, const std::string& needle) {
  for (const auto& n : notes)
    if (n.find(needle) != std::string::npos) return true;
  return false;
}

TEST(ModelScheme, GgufWithoutFreqBaseRunsAtTheDefaultUnlessRequired) {
  POSENC_REQUIRE_DATA(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto m = OpenModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ModelSchemeOptions require;
  require.allow_default_freq_base = false;
  auto refused = ModelScheme(*m, require);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);
  EXPECT_NE(refused.status().message().find("'llama.rope.freq_base' is missing"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(path), std::string::npos) << refused.status().message();

  ModelSchemeOptions o;
  o.allow_default_freq_base = true;
  auto s = ModelScheme(*m, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, PositionKind::kRope);
  EXPECT_EQ(s->model_type, "llama");
  EXPECT_EQ(s->rope.layout.pairing, RopePairing::kInterleaved);  // llama.cpp: LLAMA_ROPE_TYPE_NORM
  EXPECT_EQ(s->rope.layout.head_dim, 4);
  EXPECT_EQ(s->rope.layout.rotary_dim, 4);
  EXPECT_EQ(s->rope.base, 10000.0);
  EXPECT_EQ(s->rope.scaling.type, RopeScalingType::kGgml);
  EXPECT_TRUE(AnyContains(s->notes, "base 10000 assumed")) << ::testing::PrintToString(s->notes);
}

// A qwen2 GGUF (NEOX pairs) whose head size, attention.key_length = 48, is not embedding_length /
// head_count = 32, with partial rotary dims and a stated base.
TEST(ModelScheme, GgufHeadSizeFromKeyLengthAndNeoxPairing) {
  const fs::path dir = TempDir("gguf");
  GgufBuilder b = Qwen2Gguf(1000000.0f, 128);
  b.KvU32("qwen2.attention.head_count_kv", 1).KvU32("qwen2.rope.dimension_count", 32);
  WriteFile(dir / "q.gguf", b.Build());
  auto m = OpenModel((dir / "q.gguf").string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto s = ModelScheme(*m);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.pairing, RopePairing::kHalf);
  EXPECT_EQ(s->rope.layout.head_dim, 48);  // the key, not 64 / 2
  EXPECT_EQ(s->rope.layout.rotary_dim, 32);
  EXPECT_EQ(s->rope.base, 1000000.0);

  // The caller may state the pairing; the scheme notes the change.
  ModelSchemeOptions o;
  o.pairing = RopePairing::kInterleaved;
  auto stated = ModelScheme(*m, o);
  ASSERT_TRUE(stated.ok()) << stated.status().ToString();
  EXPECT_EQ(stated->rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_TRUE(
      AnyContains(stated->rope.notes, "pairing interleaved stated by the caller (the file's format gives half)"))
      << ::testing::PrintToString(stated->rope.notes);
  fs::remove_all(dir);
}

TEST(ModelScheme, Llama2cIsRunCsFixedScheme) {
  POSENC_REQUIRE_DATA(path, "models/stories260K/stories260K.bin");
  auto m = OpenModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto s = ModelScheme(*m);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectSchemeModel(*s, {PositionKind::kRope, "llama2c", 8, 64});
  EXPECT_EQ(s->num_kv_heads, 4);
  EXPECT_EQ(s->rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_EQ(s->rope.layout.head_dim, 8);  // dim / n_heads, as run.c defines head_size
  EXPECT_EQ(s->rope.layout.rotary_dim, 8);
  EXPECT_EQ(s->rope.base, 10000.0);
  EXPECT_EQ(s->rope.max_position_embeddings, 512);
  EXPECT_EQ(s->rope.source, path);
  auto f = ComputeRopeFrequencies(s->rope, 512);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->inv_freq.size(), 4u);
  EXPECT_DOUBLE_EQ(f->inv_freq[1], 0.1);  // 10000^(-2/8)
}

// A Gemma-style folder: head_dim 256 while hidden_size / num_attention_heads = 32.
TEST(ModelScheme, HuggingFaceFolderHeadDimFromTheConfig) {
  const fs::path dir = TempDir("gemma");
  WriteHfFolder(dir, 0.25f, R"({"model_type": "gemma", "hidden_size": 64, "num_attention_heads": 2,
      "num_key_value_heads": 1, "head_dim": 256, "rope_theta": 10000.0, "max_position_embeddings": 8192,
      "vocab_size": 3})");
  for (const std::string& path : {dir.string(), (dir / "model.safetensors").string()}) {
    SCOPED_TRACE(path);
    auto m = OpenModel(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_EQ(m->hidden_size() / m->num_heads(), 32);
    auto s = ModelScheme(*m);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->kind, PositionKind::kRope);
    EXPECT_EQ(s->rope.layout.head_dim, 256);
    EXPECT_EQ(s->rope.layout.rotary_dim, 256);
    EXPECT_EQ(s->rope.layout.pairing, RopePairing::kHalf);
    EXPECT_EQ(s->rope.max_position_embeddings, 8192);
  }
  // The scheme is read from the text OpenModel kept: the file is not read again.
  auto m = OpenModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  fs::remove(dir / "config.json");
  auto s = ModelScheme(*m);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.head_dim, 256);
  fs::remove_all(dir);
}

// A family whose modeling code fixes the pairing (Cohere: interleaved): the scheme says so.
TEST(ModelScheme, HuggingFaceFamilyPairing) {
  const fs::path dir = TempDir("cohere");
  WriteHfFolder(dir, 0.25f, R"({"model_type": "cohere", "hidden_size": 64, "num_attention_heads": 4,
      "rope_theta": 8000000.0, "vocab_size": 3})");
  auto m = OpenModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto s = ModelScheme(*m);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.pairing, RopePairing::kInterleaved);
  fs::remove_all(dir);
}

TEST(ModelScheme, ConfigJsonPathAndLayerType) {
  const fs::path dir = TempDir("config");
  const std::string path = (dir / "config.json").string();
  WriteFile(path, R"({"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 2, "head_dim": 16,
      "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  auto s = ConfigFileScheme(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rope.layout.head_dim, 16);
  EXPECT_EQ(s->rope.base, 1000000.0);  // full_attention by default
  ModelSchemeOptions o;
  o.layer_type = "sliding_attention";
  auto sliding = ConfigFileScheme(path, o);
  ASSERT_TRUE(sliding.ok()) << sliding.status().ToString();
  EXPECT_EQ(sliding->rope.base, 10000.0);
  EXPECT_EQ(sliding->rope_layer_type, "sliding_attention");
  auto missing = ConfigFileScheme((dir / "missing.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.json"), std::string::npos) << missing.status().message();
  fs::remove_all(dir);
}

TEST(ModelScheme, FilesWithoutASchemeAreNotFoundNamingTheFile) {
  const fs::path dir = TempDir("none");
  SafetensorsBuilder b;
  b.Tensor("model.embed_tokens.weight", "F32", {3, 4}, FloatBytes(std::vector<float>(12, 1.0f))).Finish();
  WriteFile(dir / "w.safetensors", b.Build());
  Array a = Array::Zeros(DType::kF32, {4, 2}).value();
  ASSERT_TRUE(WriteNpy((dir / "t.npy").string(), a).ok());
  for (const std::string& path : {(dir / "w.safetensors").string(), (dir / "t.npy").string()}) {
    SCOPED_TRACE(path);
    auto m = OpenModel(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto s = ModelScheme(*m);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
    EXPECT_NE(s.status().message().find(path + ": no positional scheme"), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("no config.json"), std::string::npos) << s.status().message();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
