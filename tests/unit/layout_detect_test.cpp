// The layout detector's forward pass takes the head size from the model's scheme (config.json's
// head_dim), not d_model / n_heads. Checked by equivalence: a Llama folder A with head size 8 (= 16 / 2)
// and a folder B with head_dim 16 that holds A's heads padded with zero dims, where B's RoPE base is
// A's squared (so B's first pairs turn at A's frequencies: theta_B^(-2i/16) = theta_A^(-2i/8)) and B's
// W_q is scaled by sqrt(2) (undoing B's 1/sqrt(16) attention scale). Where the zero dims sit depends
// on the pairing, so B is built once per pairing; each gives A's per-token losses.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "posenc/model/layout_detect.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using namespace ::posenc::testing;  // NOLINT

constexpr int64_t kD = 16, kH = 2, kHkv = 1, kHs = 8, kF = 24, kV = 32;

// A row-major [rows, cols] float matrix.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0.0f) {}
  float& at(int64_t r, int64_t c) { return v[static_cast<size_t>(r * cols + c)]; }
};

Mat Random(int64_t rows, int64_t cols, uint32_t* seed) {
  Mat m(rows, cols);
  for (float& x : m.v) {
    *seed = *seed * 1664525u + 1013904223u;
    x = (static_cast<float>(*seed >> 8) / 16777216.0f - 0.5f) * 0.8f;
  }
  return m;
}

struct LlamaWeights {
  Mat emb, wq, wk, wv, wo, w1, w2, w3;
};

void WriteFolder(const fs::path& dir, const std::string& config, const LlamaWeights& w) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config;
  const std::vector<float> ones(static_cast<size_t>(kD), 1.0f);
  SafetensorsBuilder b;
  auto add = [&](const std::string& name, const Mat& m) { b.Tensor(name, "F32", {m.rows, m.cols}, FloatBytes(m.v)); };
  add("model.embed_tokens.weight", w.emb);
  b.Tensor("model.norm.weight", "F32", {kD}, FloatBytes(ones));
  b.Tensor("model.layers.0.input_layernorm.weight", "F32", {kD}, FloatBytes(ones));
  b.Tensor("model.layers.0.post_attention_layernorm.weight", "F32", {kD}, FloatBytes(ones));
  add("model.layers.0.self_attn.q_proj.weight", w.wq);
  add("model.layers.0.self_attn.k_proj.weight", w.wk);
  add("model.layers.0.self_attn.v_proj.weight", w.wv);
  add("model.layers.0.self_attn.o_proj.weight", w.wo);
  add("model.layers.0.mlp.gate_proj.weight", w.w1);
  add("model.layers.0.mlp.down_proj.weight", w.w2);
  add("model.layers.0.mlp.up_proj.weight", w.w3);
  b.Finish();
  const std::string bytes = b.Build();
  std::ofstream(dir / "model.safetensors", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Config(double theta, int64_t head_dim) {
  std::string c = R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
      "num_hidden_layers": 1, "intermediate_size": 24, "vocab_size": 32, "max_position_embeddings": 64,
      "rms_norm_eps": 1e-5, "rope_theta": )" +
                  std::to_string(theta);
  if (head_dim > 0) c += ", \"head_dim\": " + std::to_string(head_dim);
  return c + "}";
}

// B's head of 16 dims holding A's 8: interleaved pairs (2i, 2i+1) keep dims 0..7; half pairs (i, i+8)
// take A's (i, i+4) as dims i and i + 8 for i < 4.
int64_t PaddedDim(int64_t j, RopePairing p) {
  if (p == RopePairing::kInterleaved) return j;
  return j < kHs / 2 ? j : j + kHs / 2;
}

LlamaWeights Padded(const LlamaWeights& a, RopePairing p) {
  const int64_t hs = 2 * kHs;
  LlamaWeights b{a.emb, Mat(kH * hs, kD), Mat(kHkv * hs, kD), Mat(kHkv * hs, kD), Mat(kD, kH * hs), a.w1, a.w2, a.w3};
  const float sqrt2 = std::sqrt(2.0f);
  for (int64_t h = 0; h < kH; ++h)
    for (int64_t j = 0; j < kHs; ++j)
      for (int64_t c = 0; c < kD; ++c)
        b.wq.at(h * hs + PaddedDim(j, p), c) = sqrt2 * a.wq.v[static_cast<size_t>((h * kHs + j) * kD + c)];
  for (int64_t h = 0; h < kHkv; ++h)
    for (int64_t j = 0; j < kHs; ++j)
      for (int64_t c = 0; c < kD; ++c) {
        b.wk.at(h * hs + PaddedDim(j, p), c) = a.wk.v[static_cast<size_t>((h * kHs + j) * kD + c)];
        b.wv.at(h * hs + PaddedDim(j, p), c) = a.wv.v[static_cast<size_t>((h * kHs + j) * kD + c)];
      }
  for (int64_t r = 0; r < kD; ++r)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t j = 0; j < kHs; ++j)
        b.wo.at(r, h * hs + PaddedDim(j, p)) = a.wo.v[static_cast<size_t>(r * kH * kHs + h * kHs + j)];
  return b;
}

TEST(LayoutDetect, HeadDimFromTheConfigNotDModelOverHeads) {
  const fs::path dir = fs::temp_directory_path() / ("posenc_layout_detect_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  uint32_t seed = 7;
  const LlamaWeights a{Random(kV, kD, &seed),         Random(kH * kHs, kD, &seed), Random(kHkv * kHs, kD, &seed),
                       Random(kHkv * kHs, kD, &seed), Random(kD, kH * kHs, &seed), Random(kF, kD, &seed),
                       Random(kD, kF, &seed),         Random(kF, kD, &seed)};
  WriteFolder(dir / "a", Config(10000.0, 0), a);
  const std::vector<int64_t> tokens = {1, 5, 9, 3, 2, 7, 11, 4, 30, 17, 8, 8, 21};
  for (RopePairing p : {RopePairing::kInterleaved, RopePairing::kHalf}) {
    SCOPED_TRACE(std::string(ToString(p)));
    const fs::path b_dir = dir / ("b_" + std::string(ToString(p)));
    WriteFolder(b_dir, Config(1e8, 2 * kHs), Padded(a, p));
    auto want = LlamaTokenLosses((dir / "a").string(), tokens, p);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = LlamaTokenLosses(b_dir.string(), tokens, p);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t t = 0; t < want->size(); ++t) EXPECT_NEAR((*got)[t], (*want)[t], 2e-4) << "token " << t;
    // The model is not the same under the other pairing (the test can tell layouts apart).
    const RopePairing other = p == RopePairing::kHalf ? RopePairing::kInterleaved : RopePairing::kHalf;
    auto wrong = LlamaTokenLosses(b_dir.string(), tokens, other);
    ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
    double diff = 0;
    for (size_t t = 0; t < want->size(); ++t) diff = std::max(diff, std::abs((*wrong)[t] - (*want)[t]));
    EXPECT_GT(diff, 1e-3);
  }
  // DetectLayout reads the same folder and reports the pairing Hugging Face runs (rotate_half).
  auto d = DetectLayout((dir / "b_half").string(), tokens);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->declared, "half");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
