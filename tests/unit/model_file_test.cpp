// OpenModel over every format: the real GGUF and llama2.c files, safetensors and Hugging Face folders
// built here (single file and sharded), .npy; embedding rows read through each.
#include "posenc/model/model_file.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/safetensors.hpp"
#include "posenc/model/model_scheme.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using namespace ::posenc::testing;  // NOLINT

fs::path TempDir(const std::string& name) { return ::posenc::testing::TempDir("model_file_test", name); }

TEST(Llama2c, Stories260KHeaderAndLayout) {
  POSENC_REQUIRE_DATA(path, "models/stories260K/stories260K.bin");
  auto f = Llama2cFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Llama2cConfig& c = f->config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(c.head_size(), 8);
  EXPECT_EQ(c.kv_dim(), 32);
  const Llama2cWeights& w = f->weights();
  EXPECT_EQ(w.token_embedding_table.size(), 32768u);
  EXPECT_EQ(w.wk.size(), 10240u);
  EXPECT_EQ(w.w2.size(), 55040u);
  EXPECT_EQ(w.wcls.data(), w.token_embedding_table.data());
  // README: freq_cis at pos 1 = cos/sin(10000^(-2i/8)).
  EXPECT_NEAR(w.freq_cis_real[4], 0.5403f, 1e-4);
  EXPECT_NEAR(w.freq_cis_imag[5], 0.0998f, 1e-4);
  // Byte offsets in the README: rms_final_weight at 1039900.
  const auto* base = reinterpret_cast<const std::byte*>(w.token_embedding_table.data()) - 28;
  EXPECT_EQ(reinterpret_cast<const std::byte*>(w.rms_final_weight.data()) - base, 1039900);
}

TEST(OpenModel, Llama2cEmbeddingsMatchReference) {
  POSENC_REQUIRE_DATA(path, "models/stories260K/stories260K.bin");
  POSENC_REQUIRE_DATA(ref, "models/stories260K/reference/embeddings.npy");
  auto m = OpenModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format(), ModelFormat::kLlama2c);
  EXPECT_EQ(m->gguf(), nullptr);
  EXPECT_EQ(m->vocab_size(), 512);
  EXPECT_EQ(m->hidden_size(), 64);
  ASSERT_NE(m->llama2c(), nullptr);  // the parsed header, for ModelScheme
  EXPECT_EQ(m->llama2c()->config().dim, 64);
  EXPECT_FALSE(m->rms_norm_eps().has_value());  // run.c's 1e-5 is not in the file
  EXPECT_TRUE(m->config_path().empty());
  auto table = m->TokenEmbeddingTable();
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  const std::vector<int64_t> ids = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 400, 428};
  auto x = LookupRows(*table, ids);
  ASSERT_TRUE(x.ok());
  auto want = ReadNpy(ref);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(want->shape(), x->shape());
  for (int64_t i = 0; i < x->size(); ++i) ASSERT_EQ(x->data<float>()[i], want->data<float>()[i]) << i;
}

TEST(OpenModel, GgufTinyLlama) {
  POSENC_REQUIRE_DATA(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  auto m = OpenModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format(), ModelFormat::kGguf);
  EXPECT_EQ(m->architecture(), "llama");
  EXPECT_EQ(m->vocab_size(), 32000);
  EXPECT_EQ(m->hidden_size(), 8);
  EXPECT_EQ(m->num_heads(), 2);
  EXPECT_EQ(m->llama2c(), nullptr);
  EXPECT_EQ(m->rms_norm_eps().has_value(), m->gguf()->Find("llama.attention.layer_norm_rms_epsilon") != nullptr);
  ASSERT_NE(m->token_embedding(), nullptr);
  EXPECT_EQ(m->token_embedding()->shape, (std::vector<int64_t>{32000, 8}));
  EXPECT_EQ(m->token_embedding()->type_name, "F16");
  EXPECT_EQ(m->position_embedding(), nullptr);
  EXPECT_EQ(m->PositionTable().status().code(), StatusCode::kNotFound);
  // The parsed file itself, for the metadata OpenModel does not summarize.
  ASSERT_NE(m->gguf(), nullptr);
  EXPECT_NE(m->gguf()->Find("llama.embedding_length"), nullptr);
  EXPECT_EQ(m->gguf()->tensors().size(), m->tensors().size());
}

TEST(OpenModel, VocabOnlyGgufHasNoTable) {
  POSENC_REQUIRE_DATA(path, "models/ggml-vocab/ggml-vocab-phi-3.gguf");
  auto m = OpenModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->vocab_size(), 32064);
  auto t = m->TokenEmbeddingTable();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("token_embd.weight"), std::string::npos);
}

std::vector<float> Iota(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale;
  return v;
}

TEST(OpenModel, SafetensorsFileWithGpt2Tables) {
  const fs::path dir = TempDir("gpt2");
  SafetensorsBuilder b;
  std::string wte16;
  for (float v : Iota(5 * 4, 0.5f)) {
    const uint16_t h = F32ToF16(v).bits;
    wte16.append(reinterpret_cast<const char*>(&h), 2);
  }
  b.Tensor("wte.weight", "F16", {5, 4}, wte16);
  b.Tensor("wpe.weight", "F32", {3, 4}, FloatBytes(Iota(12, -1.0f)));
  b.Tensor("h.0.attn.bias", "I64", {2}, std::string(16, '\0'));
  b.Finish("{\"format\":\"pt\"}");
  WriteFile(dir / "model.safetensors", b.Build());
  WriteFile(dir / "config.json",
            R"({"model_type": "gpt2", "vocab_size": 5, "n_embd": 4, "n_layer": 1, "n_head": 2, "n_positions": 3})");

  auto st = SafetensorsFile::Open((dir / "model.safetensors").string());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->metadata().at("format"), "pt");
  EXPECT_EQ(st->tensors().size(), 3u);

  for (const std::string& path : {(dir / "model.safetensors").string(), dir.string()}) {
    SCOPED_TRACE(path);
    auto m = OpenModel(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->architecture(), "gpt2");
    EXPECT_EQ(m->context_length(), 3);
    EXPECT_EQ(m->config_path(), (dir / "config.json").string());
    EXPECT_NE(m->config_text().find("\"n_positions\": 3"), std::string::npos);
    auto scheme = ModelScheme(*m);
    ASSERT_TRUE(scheme.ok()) << scheme.status().ToString();
    EXPECT_EQ(scheme->kind, PositionKind::kLearned);
    auto e = m->TokenEmbeddingTable();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const std::vector<int64_t> ids = {4, 0};
    auto x = LookupRows(*e, ids);
    ASSERT_TRUE(x.ok());
    EXPECT_EQ(x->data<float>()[0], 8.0f);  // row 4 element 0 = 16 * 0.5
    EXPECT_EQ(x->data<float>()[3], 9.5f);
    EXPECT_EQ(x->data<float>()[4], 0.0f);
    auto p = m->PositionTable();
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->rows, 3);
    const std::vector<int64_t> pos = {2};
    auto px = LookupRows(*p, pos);
    ASSERT_TRUE(px.ok());
    EXPECT_EQ(px->data<float>()[1], -9.0f);
    auto bad = LookupRows(*p, std::vector<int64_t>{3});
    EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
    const ModelTensor* i64 = m->Find("h.0.attn.bias");
    ASSERT_NE(i64, nullptr);
    EXPECT_FALSE(i64->dtype.has_value());
  }
}

TEST(OpenModel, ShardedHuggingFaceFolder) {
  const fs::path dir = TempDir("sharded");
  SafetensorsBuilder a, b;
  a.Tensor("model.embed_tokens.weight", "BF16", {3, 2},
           std::string("\x80\x3f\x00\x40\x40\x40\x80\x40\xa0\x40\xc0\x40", 12))
      .Finish();
  b.Tensor("model.norm.weight", "F32", {2}, FloatBytes({1.0f, 1.0f})).Finish();
  WriteFile(dir / "model-00001-of-00002.safetensors", a.Build());
  WriteFile(dir / "model-00002-of-00002.safetensors", b.Build());
  WriteFile(dir / "model.safetensors.index.json",
            R"({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                "model.norm.weight": "model-00002-of-00002.safetensors"}})");
  WriteFile(
      dir / "config.json",
      R"({"model_type": "llama", "hidden_size": 2, "num_attention_heads": 1, "rope_theta": 500000.0, "vocab_size": 3})");
  auto m = OpenModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format(), ModelFormat::kHuggingFaceFolder);
  EXPECT_EQ(m->tensors().size(), 2u);
  EXPECT_FALSE(m->rms_norm_eps().has_value());
  auto scheme = ModelScheme(*m);
  ASSERT_TRUE(scheme.ok()) << scheme.status().ToString();
  EXPECT_EQ(scheme->rope.base, 500000.0);
  auto e = m->TokenEmbeddingTable();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto x = LookupRows(*e, std::vector<int64_t>{1, 2});
  ASSERT_TRUE(x.ok());
  // bf16 0x4040 = 3.0, 0x4080 = 4.0, 0x40a0 = 5.0, 0x40c0 = 6.0 (little-endian pairs above)
  EXPECT_EQ(x->data<float>()[0], 3.0f);
  EXPECT_EQ(x->data<float>()[1], 4.0f);
  EXPECT_EQ(x->data<float>()[3], 6.0f);

  // A shard name that leaves the folder is refused.
  WriteFile(dir / "model.safetensors.index.json", R"({"weight_map": {"x": "../evil.safetensors"}})");
  auto evil = OpenModel(dir.string());
  ASSERT_FALSE(evil.ok());
  EXPECT_NE(evil.status().message().find("leaves the folder"), std::string::npos);
}

// Folders as people download them: config.json alone (weights in pytorch_model.bin, or not fetched)
// gives the scheme and no tables; a GGUF repository's folder opens its one .gguf file, and one with
// several names them; a folder with none of these says what it looked for.
TEST(OpenModel, ConfigOnlyAndGgufFolders) {
  const fs::path cfg = TempDir("config_only");
  WriteFile(cfg / "config.json",
            R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0})");
  WriteFile(cfg / "pytorch_model.bin", "not read");
  auto m = OpenModel(cfg.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format(), ModelFormat::kHuggingFaceFolder);
  EXPECT_TRUE(m->tensors().empty());
  auto scheme = ModelScheme(*m);
  ASSERT_TRUE(scheme.ok()) << scheme.status().ToString();
  EXPECT_EQ(scheme->rope.base, 10000.0);
  EXPECT_EQ(scheme->rope.layout.head_dim, 16);
  auto table = m->TokenEmbeddingTable();
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), StatusCode::kNotFound);
  EXPECT_NE(table.status().message().find("no token embedding table"), std::string::npos) << table.status().ToString();

  const fs::path empty = TempDir("empty_folder");
  WriteFile(empty / "README.md", "nothing here");
  auto none = OpenModel(empty.string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("neither config.json, model.safetensors nor"), std::string::npos)
      << none.status().ToString();

  POSENC_REQUIRE_DATA(gguf, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const fs::path one = TempDir("one_gguf");
  fs::remove(one / "model-q8_0.gguf");
  fs::copy_file(gguf, one / "model-q8_0.gguf");
  WriteFile(one / "README.md", "a GGUF repository");
  auto g = OpenModel(one.string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->format(), ModelFormat::kGguf);
  EXPECT_EQ(g->path(), (one / "model-q8_0.gguf").string());
  EXPECT_EQ(g->vocab_size(), 32000);
  fs::remove(one / "model-f16.gguf");
  fs::copy_file(gguf, one / "model-f16.gguf");
  auto two = OpenModel(one.string());
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("it holds 2 GGUF files (model-f16.gguf, model-q8_0.gguf); pass the one"),
            std::string::npos)
      << two.status().ToString();
}

TEST(OpenModel, NpyAndUnknownAndMissing) {
  const fs::path dir = TempDir("npy");
  Array a = Array::Zeros(DType::kF32, {4, 3}).value();
  a.data<float>()[5] = 7.0f;
  ASSERT_TRUE(WriteNpy((dir / "table.npy").string(), a).ok());
  auto m = OpenModel((dir / "table.npy").string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format(), ModelFormat::kNpy);
  auto x = LookupRows(m->TokenEmbeddingTable().value(), std::vector<int64_t>{1});
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->data<float>()[2], 7.0f);

  WriteFile(dir / "junk.bin", "hello, this is not a model file at all");
  auto junk = OpenModel((dir / "junk.bin").string());
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(junk.status().message().find("junk.bin"), std::string::npos);
  auto missing = OpenModel((dir / "nope.gguf").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(OpenModel, Llama2cSeparateClassifier) {
  const std::string bytes = BuildLlama2c(8, 16, 1, 2, 1, -10, 4);
  auto f = Llama2cFile::FromBytes(AsBytes(bytes), "sep.bin");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->config().shared_classifier);
  EXPECT_EQ(f->config().vocab_size, 10);
  EXPECT_EQ(f->weights().wcls.size(), 80u);
  EXPECT_NE(f->weights().wcls.data(), f->weights().token_embedding_table.data());
  // wcls is the last thing in the file.
  EXPECT_EQ(reinterpret_cast<const char*>(f->weights().wcls.data() + 80) -
                reinterpret_cast<const char*>(f->weights().token_embedding_table.data()) + 28,
            static_cast<std::ptrdiff_t>(bytes.size()));
}

// One detector for every reader (OpenModel, convert-layout): magic bytes, a safetensors header that
// fits the file, the .safetensors name for a damaged header, else llama2.c.
TEST(DetectFileFormat, OneRuleForEveryReader) {
  auto detect = [](const std::string& bytes, std::string_view name) {
    return DetectFileFormat(AsBytes(bytes), name);
  };
  EXPECT_EQ(detect("GGUF\x03\x00\x00\x00", "m.bin"), ModelFormat::kGguf);
  EXPECT_EQ(detect(std::string("\x93NUMPY\x01\x00", 8), "a.bin"), ModelFormat::kNpy);
  const std::string header = "{\"a\": 1}";
  std::string st(8, '\0');
  st[0] = static_cast<char>(header.size());
  EXPECT_EQ(detect(st + header, "m.bin"), ModelFormat::kSafetensors);
  st[0] = static_cast<char>(header.size() + 1);  // a length past the file
  EXPECT_EQ(detect(st + header, "m.bin"), ModelFormat::kLlama2c);
  EXPECT_EQ(detect(st + header, "m.safetensors"), ModelFormat::kSafetensors);
  EXPECT_EQ(detect("", "m.bin"), ModelFormat::kLlama2c);
}

// The one "config.json that goes with a model" rule: inside a folder, beside a file.
TEST(ConfigJsonFor, InsideAFolderBesideAFile) {
  const fs::path dir = TempDir("config_for");
  EXPECT_EQ(ConfigJsonFor(dir.string()), dir.string() + "/config.json");
  EXPECT_EQ(ConfigJsonFor((dir / "model.safetensors").string()), (dir / "config.json").string());
  EXPECT_EQ(ConfigJsonFor("model.safetensors"), "config.json");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
