// The layout detector on real models: stories260K as shipped (interleaved), converted to half, and
// written as GGUF (float32 and Q8_0) and as Hugging Face safetensors; random weights that decide
// nothing, and a file of another kind refused by name.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_builders.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/model/layout_convert.hpp"
#include "posenc/model/layout_detect.hpp"
#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using testing::AsBytes;

// stories260K's reference prompt followed by its greedy continuation (52 tokens of its own text).
std::vector<int64_t> Stories260KText(const std::string& case_json) {
  std::ifstream cf(case_json);
  const auto c = nlohmann::json::parse(cf);
  std::vector<int64_t> ids = c.at("token_ids").get<std::vector<int64_t>>();
  for (int64_t t : c.at("greedy_continuation").at("new_token_ids").get<std::vector<int64_t>>()) ids.push_back(t);
  return ids;
}

// The detector names interleaved for stories260K as shipped and half for it converted (warning that the
// llama2.c format declares interleaved), on the reference prompt plus its greedy continuation; a
// 3-token sequence is too weak to decide.
TEST(LayoutDetect, Stories260KShippedAndConverted) {
  POSENC_REQUIRE_DATA(model, "models/stories260K/stories260K.bin");
  POSENC_REQUIRE_DATA(case_json, "models/stories260K/reference/case.json");
  const std::vector<int64_t> ids = Stories260KText(case_json);
  auto shipped = DetectLayout(model, ids);
  ASSERT_TRUE(shipped.ok()) << shipped.status().message();
  ASSERT_TRUE(shipped->verdict.has_value()) << shipped->summary;
  EXPECT_EQ(*shipped->verdict, RopePairing::kInterleaved) << shipped->summary;
  EXPECT_FALSE(shipped->declared_disagrees);
  EXPECT_GT(shipped->margin, 1.0) << shipped->summary;  // measured 2.3 nats/token

  const auto dir = std::filesystem::temp_directory_path() / ("posenc_detect_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string half = (dir / "half.bin").string();
  LayoutConvertOptions o;
  ASSERT_TRUE(ConvertLayoutFile(model, half, o).ok());
  {
    // The library call refuses its own input as output (also through a link) and a directory as
    // input, and leaves the file byte for byte (issue 15: it wrote in place with a plain stream).
    const std::string before = testing::ReadFile(half);
    const std::string link = (dir / "link.bin").string();
    std::filesystem::create_symlink(half, link);
    LayoutConvertOptions back;
    back.from = RopePairing::kHalf;
    back.to = RopePairing::kInterleaved;
    for (const std::string& out_path : {half, link}) {
      Result<LayoutConvertReport> same = ConvertLayoutFile(half, out_path, back);
      ASSERT_FALSE(same.ok()) << out_path;
      EXPECT_NE(same.status().message().find("is the input"), std::string::npos) << same.status().message();
    }
    Result<LayoutConvertReport> folder = ConvertLayoutFile(dir.string(), (dir / "x.bin").string(), back);
    ASSERT_FALSE(folder.ok());
    EXPECT_NE(folder.status().message().find("not a regular file"), std::string::npos) << folder.status().message();
    EXPECT_FALSE(std::filesystem::exists(dir / "x.bin"));
    EXPECT_EQ(testing::ReadFile(half), before);
    std::filesystem::remove(link);
  }
  auto converted = DetectLayout(half, ids);
  ASSERT_TRUE(converted.ok()) << converted.status().message();
  ASSERT_TRUE(converted->verdict.has_value()) << converted->summary;
  EXPECT_EQ(*converted->verdict, RopePairing::kHalf) << converted->summary;
  EXPECT_TRUE(converted->declared_disagrees);
  // The right layout's loss is the same model's loss either way (the conversion keeps every score).
  EXPECT_NEAR(converted->candidates[0].mean_loss, shipped->candidates[1].mean_loss, 1e-4);
  std::string out;
  std::string list;
  for (int64_t t : ids) list += (list.empty() ? "" : ",") + std::to_string(t);
  EXPECT_EQ(0, testing::RunCommand(testing::CliPath() + " detect-layout " + half + " --quiet --tokens " + list, &out))
      << out;
  EXPECT_NE(out.find("layout half"), std::string::npos) << out;
  EXPECT_NE(out.find("warning: the file's format declares interleaved"), std::string::npos) << out;

  const std::vector<int64_t> few = {1, 403, 407};
  auto weak = DetectLayout(model, few);
  ASSERT_TRUE(weak.ok());
  EXPECT_FALSE(weak->verdict.has_value()) << weak->summary;
  EXPECT_NE(weak->summary.find("evidence too weak"), std::string::npos);
  const std::vector<int64_t> bad = {1, 9999};
  auto e = DetectLayout(model, bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("token 9999 at index 1"), std::string::npos) << e.status().message();
  std::filesystem::remove_all(dir);
}

// ---------- stories260K in other formats ----------

// Rows [l*n, (l+1)*n) of a float32 tensor as bytes.
std::string Slice(std::span<const float> all, int64_t l, int64_t n) {
  return std::string(reinterpret_cast<const char*>(all.data() + l * n), static_cast<size_t>(n) * sizeof(float));
}

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

// Interleaved -> half rows of every q/k head (`heads` heads of `hs` rows of `dim` floats), as
// convert_llama_weights_to_hf.py permutes them.
std::string ToHalfRows(const std::string& rows, int64_t heads, int64_t hs, int64_t dim) {
  const auto perm =
      RotaryRowPermutation(RotaryLayout{RopePairing::kInterleaved, hs, 0, hs}, RopePairing::kHalf).value();
  std::string out(rows.size(), '\0');
  EXPECT_TRUE(PermuteHeadRows(AsBytes(rows), std::as_writable_bytes(std::span<char>(out.data(), out.size())), heads,
                              hs, static_cast<size_t>(dim) * sizeof(float), perm)
                  .ok());
  return out;
}

// A matrix for the GGUF file: float32, or (quantized) Q8_0 where its rows are whole 32-element
// blocks and float16 where they are not (stories260K's ffn_down rows have 172 elements), as
// llama.cpp's quantizer falls back.
void AddMatrix(testing::GgufBuilder& g, const std::string& name, int64_t rows, int64_t cols, const std::string& f32,
               bool quantized) {
  const float* x = reinterpret_cast<const float*>(f32.data());
  if (!quantized) {
    g.Tensor(name, {U(cols), U(rows)}, 0, f32);
  } else if (cols % 32 != 0) {
    std::string h;
    for (int64_t i = 0; i < rows * cols; ++i) {
      const uint16_t bits = F32ToF16(x[i]).bits;
      h.append(reinterpret_cast<const char*>(&bits), 2);
    }
    g.Tensor(name, {U(cols), U(rows)}, 1, h);
  } else {
    std::string q;
    for (int64_t b0 = 0; b0 < rows * cols; b0 += 32) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
      const float d = amax / 127.0f;
      const uint16_t bits = F32ToF16(d).bits;
      q.append(reinterpret_cast<const char*>(&bits), 2);
      for (int i = 0; i < 32; ++i)
        q.push_back(static_cast<char>(static_cast<int8_t>(d == 0 ? 0 : std::lround(x[b0 + i] / d))));
    }
    g.Tensor(name, {U(cols), U(rows)}, 8, q);
  }
}

// The llama2.c weights as a GGUF file (architecture llama, q/k rows as they are: adjacent pairs).
std::string StoriesGguf(const Llama2cFile& file, bool quantized) {
  const Llama2cConfig& cfg = file.config();
  const Llama2cWeights& w = file.weights();
  const int64_t D = cfg.dim, F = cfg.hidden_dim, L = cfg.n_layers, V = cfg.vocab_size, hs = cfg.head_size(),
                KV = cfg.kv_dim();
  testing::GgufBuilder g;
  g.KvString("general.architecture", "llama")
      .KvU32("llama.block_count", static_cast<uint32_t>(L))
      .KvU32("llama.embedding_length", static_cast<uint32_t>(D))
      .KvU32("llama.feed_forward_length", static_cast<uint32_t>(F))
      .KvU32("llama.attention.head_count", static_cast<uint32_t>(cfg.n_heads))
      .KvU32("llama.attention.head_count_kv", static_cast<uint32_t>(cfg.n_kv_heads))
      .KvU32("llama.context_length", static_cast<uint32_t>(cfg.seq_len))
      .KvU32("llama.rope.dimension_count", static_cast<uint32_t>(hs))
      .KvF32("llama.rope.freq_base", 10000.0f)
      .KvF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.Tensor("token_embd.weight", {U(D), U(V)}, 0, Slice(w.token_embedding_table, 0, V * D));
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    g.Tensor(b + "attn_norm.weight", {U(D)}, 0, Slice(w.rms_att_weight, l, D));
    AddMatrix(g, b + "attn_q.weight", D, D, Slice(w.wq, l, D * D), quantized);
    AddMatrix(g, b + "attn_k.weight", KV, D, Slice(w.wk, l, KV * D), quantized);
    AddMatrix(g, b + "attn_v.weight", KV, D, Slice(w.wv, l, KV * D), quantized);
    AddMatrix(g, b + "attn_output.weight", D, D, Slice(w.wo, l, D * D), quantized);
    g.Tensor(b + "ffn_norm.weight", {U(D)}, 0, Slice(w.rms_ffn_weight, l, D));
    AddMatrix(g, b + "ffn_gate.weight", F, D, Slice(w.w1, l, F * D), quantized);
    AddMatrix(g, b + "ffn_down.weight", D, F, Slice(w.w2, l, D * F), quantized);
    AddMatrix(g, b + "ffn_up.weight", F, D, Slice(w.w3, l, F * D), quantized);
  }
  g.Tensor("output_norm.weight", {U(D)}, 0, Slice(w.rms_final_weight, 0, D));
  if (!cfg.shared_classifier) AddMatrix(g, "output.weight", V, D, Slice(w.wcls, 0, V * D), quantized);
  return g.Build();
}

// The llama2.c weights as Hugging Face safetensors (q/k rows permuted to half pairs).
std::string StoriesSafetensors(const Llama2cFile& file) {
  const Llama2cConfig& cfg = file.config();
  const Llama2cWeights& w = file.weights();
  const int64_t D = cfg.dim, F = cfg.hidden_dim, L = cfg.n_layers, V = cfg.vocab_size, hs = cfg.head_size(),
                KV = cfg.kv_dim();
  testing::SafetensorsBuilder st;
  st.Tensor("model.embed_tokens.weight", "F32", {V, D}, Slice(w.token_embedding_table, 0, V * D));
  for (int64_t l = 0; l < L; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".";
    st.Tensor(h + "input_layernorm.weight", "F32", {D}, Slice(w.rms_att_weight, l, D))
        .Tensor(h + "self_attn.q_proj.weight", "F32", {D, D}, ToHalfRows(Slice(w.wq, l, D * D), cfg.n_heads, hs, D))
        .Tensor(h + "self_attn.k_proj.weight", "F32", {KV, D},
                ToHalfRows(Slice(w.wk, l, KV * D), cfg.n_kv_heads, hs, D))
        .Tensor(h + "self_attn.v_proj.weight", "F32", {KV, D}, Slice(w.wv, l, KV * D))
        .Tensor(h + "self_attn.o_proj.weight", "F32", {D, D}, Slice(w.wo, l, D * D))
        .Tensor(h + "post_attention_layernorm.weight", "F32", {D}, Slice(w.rms_ffn_weight, l, D))
        .Tensor(h + "mlp.gate_proj.weight", "F32", {F, D}, Slice(w.w1, l, F * D))
        .Tensor(h + "mlp.down_proj.weight", "F32", {D, F}, Slice(w.w2, l, D * F))
        .Tensor(h + "mlp.up_proj.weight", "F32", {F, D}, Slice(w.w3, l, F * D));
  }
  st.Tensor("model.norm.weight", "F32", {D}, Slice(w.rms_final_weight, 0, D));
  if (!cfg.shared_classifier) st.Tensor("lm_head.weight", "F32", {V, D}, Slice(w.wcls, 0, V * D));
  st.Finish();
  return st.Build();
}

std::string StoriesConfigJson(const Llama2cConfig& cfg) {
  return nlohmann::json{{"model_type", "llama"},
                        {"hidden_size", cfg.dim},
                        {"intermediate_size", cfg.hidden_dim},
                        {"num_hidden_layers", cfg.n_layers},
                        {"num_attention_heads", cfg.n_heads},
                        {"num_key_value_heads", cfg.n_kv_heads},
                        {"vocab_size", cfg.vocab_size},
                        {"rope_theta", 10000.0},
                        {"rms_norm_eps", 1e-5},
                        {"max_position_embeddings", cfg.seq_len},
                        {"tie_word_embeddings", bool(cfg.shared_classifier)}}
      .dump();
}

// stories260K's trained weights written as a GGUF file (architecture llama, q/k rows as they are:
// adjacent pairs, as llama.cpp's converter leaves them) and as a Hugging Face safetensors file with
// config.json (q/k rows permuted to half pairs, as convert_llama_weights_to_hf.py does): the detector
// runs both, finds the layout each format declares, and its losses for the right layout are the
// llama2.c file's (the same float32 weights, the same scores). A third file, the GGUF with Q8_0 and
// float16 matrices, gives the same verdict with the loss moved by the quantization error only.
class Stories260KFormats : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    POSENC_REQUIRE_DATA(model, "models/stories260K/stories260K.bin");
    POSENC_REQUIRE_DATA(case_json, "models/stories260K/reference/case.json");
    model_ = model;
    ids_ = Stories260KText(case_json);
    auto l2c = Llama2cFile::Open(model);
    ASSERT_TRUE(l2c.ok()) << l2c.status().message();
    const Llama2cConfig& cfg = l2c->config();
    embedding_ = Slice(l2c->weights().token_embedding_table, 0, cfg.vocab_size * cfg.dim);
    vocab_ = cfg.vocab_size, dim_ = cfg.dim;
    gguf_ = P("stories260K.gguf"), gguf_q8_ = P("stories260K-q8_0.gguf"), hf_ = P("model.safetensors");
    std::ofstream(gguf_, std::ios::binary) << StoriesGguf(*l2c, false);
    std::ofstream(gguf_q8_, std::ios::binary) << StoriesGguf(*l2c, true);
    std::ofstream(hf_, std::ios::binary) << StoriesSafetensors(*l2c);
    Write("config.json", StoriesConfigJson(cfg));
  }
  // The llama2.c file's detection, the losses the other formats must reproduce.
  LayoutDetection Shipped() {
    auto shipped = DetectLayout(model_, ids_);
    EXPECT_TRUE(shipped.ok()) << shipped.status().message();
    return shipped.ok() ? *shipped : LayoutDetection{};
  }
  // Runs the detector on `path`; expects a verdict of `layout`, which is also what the format declares.
  LayoutDetection Detect(const std::string& path, RopePairing layout) {
    auto d = DetectLayout(path, ids_);
    EXPECT_TRUE(d.ok()) << d.status().message();
    if (!d.ok()) return LayoutDetection{};
    EXPECT_TRUE(d->verdict.has_value()) << d->summary;
    EXPECT_EQ(d->verdict, std::optional<RopePairing>(layout)) << d->summary;
    EXPECT_EQ(d->declared, ToString(layout)) << path;
    EXPECT_FALSE(d->declared_disagrees) << path;
    return *d;
  }
  std::string model_, gguf_, gguf_q8_, hf_, embedding_;
  std::vector<int64_t> ids_;
  int64_t vocab_ = 0, dim_ = 0;
};

// Same weights, same scores: GGUF reproduces the llama2.c losses for both layouts, and the Hugging
// Face file under half pairs reproduces them under interleaved pairs.
TEST_F(Stories260KFormats, GgufAndSafetensorsDeclareTheirLayoutAndKeepTheLosses) {
  const LayoutDetection shipped = Shipped();
  ASSERT_EQ(shipped.candidates.size(), 2u);
  const LayoutDetection from_gguf = Detect(gguf_, RopePairing::kInterleaved);
  const LayoutDetection from_hf = Detect(hf_, RopePairing::kHalf);
  ASSERT_EQ(from_gguf.candidates.size(), 2u);
  ASSERT_EQ(from_hf.candidates.size(), 2u);
  for (int k = 0; k < 2; ++k)
    EXPECT_NEAR(from_gguf.candidates[k].mean_loss, shipped.candidates[k].mean_loss, 1e-6) << k;
  EXPECT_NEAR(from_hf.candidates[0].mean_loss, shipped.candidates[1].mean_loss, 1e-4);
  EXPECT_GT(from_hf.margin, 1.0) << from_hf.summary;
}

// Quantized weights (Q8_0, float16 where rows are not whole blocks) run through the same pass: same
// verdict, and the right layout's loss moves by the quantization error only.
TEST_F(Stories260KFormats, Q8_0GgufKeepsTheVerdictWithinTheQuantizationError) {
  const LayoutDetection shipped = Shipped();
  ASSERT_EQ(shipped.candidates.size(), 2u);
  const LayoutDetection from_q8 = Detect(gguf_q8_, RopePairing::kInterleaved);
  ASSERT_EQ(from_q8.candidates.size(), 2u);
  std::printf("stories260K as Q8_0 GGUF: %s\n", from_q8.summary.c_str());
  EXPECT_NEAR(from_q8.candidates[1].mean_loss, shipped.candidates[1].mean_loss, 0.01);  // measured 0.001
  EXPECT_NE(from_q8.candidates[1].mean_loss, shipped.candidates[1].mean_loss);          // it did dequantize
}

TEST_F(Stories260KFormats, AMissingConfigOrWeightIsNamed) {
  // A missing config.json is named.
  std::filesystem::remove(dir_ / "config.json");
  auto e = DetectLayout(hf_, ids_);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no config.json"), std::string::npos) << e.status().message();
  // A layer count the file cannot hold (nine tensors a layer) is refused before anything is sized by it.
  testing::SafetensorsBuilder partial;
  partial.Tensor("model.embed_tokens.weight", "F32", {vocab_, dim_}, embedding_);
  std::ofstream(hf_, std::ios::binary | std::ios::trunc) << partial.Finish().Build();
  std::ofstream(dir_ / "config.json") << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
    "num_hidden_layers": 5, "rope_theta": 10000.0})";
  e = DetectLayout(hf_, ids_);
  EXPECT_TRUE(testing::HasError(e.status(), StatusCode::kInvalidArgument,
                                "5 layers (block_count / num_hidden_layers) need at least 45 tensors; the file has 1"));
  // Enough tensors, but not the ones a layer needs: the first missing one is named.
  for (int i = 0; i < 8; ++i) partial.Tensor("pad." + std::to_string(i), "F32", {1}, testing::FloatBytes({0.0f}));
  std::ofstream(hf_, std::ios::binary | std::ios::trunc) << partial.Finish().Build();
  std::ofstream(dir_ / "config.json", std::ios::trunc) << R"({"model_type": "llama", "hidden_size": 64,
    "num_attention_heads": 8, "num_hidden_layers": 1, "rope_theta": 10000.0})";
  e = DetectLayout(hf_, ids_);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no tensor 'model.layers.0.mlp.gate_proj.weight'"), std::string::npos)
      << e.status().message();
}

// Random weights (llama-2-tiny-random.gguf, base 10000 as llama.cpp assumes without the key) run,
// but predict nothing under either layout: no verdict. A file of another kind is refused by name.
TEST(LayoutDetect, RandomWeightsGiveNoVerdictAndOtherFormatsAreRefused) {
  POSENC_REQUIRE_DATA(gguf, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const std::vector<int64_t> ids = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203, 29889};
  auto r = DetectLayout(gguf, ids);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->verdict.has_value()) << r->summary;
  EXPECT_NEAR(r->candidates[0].mean_loss, std::log(32000.0), 0.5);  // uniform over the vocabulary
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_detect_npy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Array a = Array::Zeros(DType::kF32, {4, 2}).value();
  ASSERT_TRUE(WriteNpy((dir / "table.npy").string(), a).ok());
  auto e = DetectLayout((dir / "table.npy").string(), ids);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(e.status().message().find("is npy"), std::string::npos) << e.status().message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc

