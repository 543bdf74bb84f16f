// Weight layout converter: the permutation against Hugging Face's and llama.cpp's formulas, attention
// scores unchanged after conversion (full, partial and trailing windows, GQA, biases), bit-identical
// round trips for llama2.c, safetensors and GGUF, quantized rows, refused quantized biases, and
// stories260K converted to half run by tiny_llama.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_builders.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/model/layout_convert.hpp"
#include "posenc/model/layout_detect.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/kernels/rope.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using testing::AsBytes;

std::vector<std::byte> Convert(const std::string& bytes, const std::string& name, RopePairing from, RopePairing to,
                               LayoutConvertOptions o = {}) {
  o.from = from;
  o.to = to;
  std::vector<std::byte> out;
  auto r = ConvertLayoutBytes(AsBytes(bytes), name, o, &out);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return out;
}
std::string Str(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Interleaved -> half is HF's permute: w.view(H, D/2, 2, C).transpose(1, 2): new row c*D/2 + i = old
// row 2i + c. Half -> interleaved is llama.cpp's: reshape(H, 2, D/2, C).swapaxes(1, 2): new row
// 2i + c = old row c*D/2 + i.
TEST(LayoutConvert, PermutationIsHuggingFaceAndLlamaCppPermute) {
  for (int64_t D : {2, 8, 64, 128}) {
    const auto to_half = RotaryRowPermutation({RopePairing::kInterleaved, D, 0, D}, RopePairing::kHalf).value();
    const auto to_inter = RotaryRowPermutation({RopePairing::kHalf, D, 0, D}, RopePairing::kInterleaved).value();
    for (int64_t i = 0; i < D / 2; ++i)
      for (int64_t c = 0; c < 2; ++c) {
        EXPECT_EQ(to_half[static_cast<size_t>(c * D / 2 + i)], 2 * i + c);
        EXPECT_EQ(to_inter[static_cast<size_t>(2 * i + c)], c * D / 2 + i);
      }
    for (int64_t j = 0; j < D; ++j) EXPECT_EQ(to_half[static_cast<size_t>(to_inter[static_cast<size_t>(j)])], j);
  }
  // Partial window at the back (DeepSeek MLA style): the first 4 dims stay.
  const auto p = RotaryRowPermutation({RopePairing::kInterleaved, 12, 4, 8}, RopePairing::kHalf).value();
  EXPECT_EQ(p, (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 8, 10, 5, 7, 9, 11}));
  EXPECT_FALSE(RotaryRowPermutation({RopePairing::kHalf, 8, 4, 8}, RopePairing::kInterleaved).ok());
}

// q = W_q x + b_q, k = W_k x + b_k per head; rotate in the old layout with the original weights and in
// the new layout with the converted ones: every score q_h(t) . k_{h/g}(s) is unchanged.
TEST(LayoutConvert, AttentionScoresUnchangedForWindowsGqaAndBiases) {
  auto rng = testing::MakeRng(42);
  const int64_t C = 24, H = 4, Hkv = 2, T = 6;
  struct W {
    int64_t D, start, R;
  };
  for (const W w : {W{16, 0, 16}, W{16, 0, 8}, W{20, 8, 12}, W{10, 2, 4}}) {
    for (RopePairing from : {RopePairing::kInterleaved, RopePairing::kHalf}) {
      const RopePairing to = from == RopePairing::kHalf ? RopePairing::kInterleaved : RopePairing::kHalf;
      SCOPED_TRACE(::testing::Message() << "D " << w.D << " window [" << w.start << ", " << w.start + w.R << ") from "
                                        << ToString(from));
      const RotaryLayout L_old{from, w.D, w.start, w.R};
      const RotaryLayout L_new{to, w.D, w.start, w.R};
      const auto wq = testing::RandomNormal(rng, static_cast<size_t>(H * w.D * C));
      const auto wk = testing::RandomNormal(rng, static_cast<size_t>(Hkv * w.D * C));
      const auto bq = testing::RandomNormal(rng, static_cast<size_t>(H * w.D));
      const auto bk = testing::RandomNormal(rng, static_cast<size_t>(Hkv * w.D));
      const auto x = testing::RandomNormal(rng, static_cast<size_t>(T * C));
      const auto perm = RotaryRowPermutation(L_old, to).value();
      auto permute = [&](const std::vector<float>& m, int64_t heads, int64_t cols) {
        std::vector<float> out(m.size());
        const size_t rb = static_cast<size_t>(cols) * sizeof(float);
        EXPECT_TRUE(PermuteHeadRows({reinterpret_cast<const std::byte*>(m.data()), m.size() * 4},
                                    {reinterpret_cast<std::byte*>(out.data()), out.size() * 4}, heads, w.D, rb, perm)
                        .ok());
        return out;
      };
      const auto wq2 = permute(wq, H, C), wk2 = permute(wk, Hkv, C), bq2 = permute(bq, H, 1), bk2 = permute(bk, Hkv, 1);
      auto project = [&](const std::vector<float>& m, const std::vector<float>& b, int64_t heads) {
        std::vector<float> out(static_cast<size_t>(T * heads * w.D));
        for (int64_t t = 0; t < T; ++t)
          for (int64_t r = 0; r < heads * w.D; ++r) {
            double s = b[static_cast<size_t>(r)];
            for (int64_t c = 0; c < C; ++c)
              s += static_cast<double>(m[static_cast<size_t>(r * C + c)]) * x[static_cast<size_t>(t * C + c)];
            out[static_cast<size_t>(t * heads * w.D + r)] = static_cast<float>(s);
          }
        return out;
      };
      const RopeFrequencies f = DefaultRopeFrequencies(w.R, 10000.0).value();
      const RopeTable table = RopeTable::Build(f, 64, RopePrecision::kExact).value();
      const std::vector<int64_t> pos = {0, 1, 2, 7, 30, 63};
      auto rotate = [&](std::vector<float> v, int64_t heads, const RotaryLayout& L) {
        HeadsView hv = HeadsView::Dense(v.data(), DType::kF32, T, heads, w.D);
        EXPECT_TRUE(ApplyRopeReference({L, &table, pos}, hv, hv).ok());
        return v;
      };
      const auto q1 = rotate(project(wq, bq, H), H, L_old), k1 = rotate(project(wk, bk, Hkv), Hkv, L_old);
      const auto q2 = rotate(project(wq2, bq2, H), H, L_new), k2 = rotate(project(wk2, bk2, Hkv), Hkv, L_new);
      double worst = 0, scale = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t s = 0; s < T; ++s) {
            double a = 0, b = 0;
            for (int64_t d = 0; d < w.D; ++d) {
              const size_t qi = static_cast<size_t>((t * H + h) * w.D + d),
                           ki = static_cast<size_t>((s * Hkv + h / 2) * w.D + d);
              a += static_cast<double>(q1[qi]) * k1[ki];
              b += static_cast<double>(q2[qi]) * k2[ki];
            }
            worst = std::max(worst, std::abs(a - b));
            scale = std::max(scale, std::abs(a));
          }
      EXPECT_LE(worst, 1e-5 * scale);  // the same float32 numbers, summed in another order
      // Without the conversion the scores change (the check is not vacuous).
      const auto q3 = rotate(project(wq, bq, H), H, L_new);
      double diff = 0;
      for (size_t i = 0; i < q3.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(q3[i] - q1[i])));
      EXPECT_GT(diff, 0.1);
    }
  }
}

TEST(LayoutConvert, Llama2cRoundTripIsBitIdenticalAndMovesOnlyQkRows) {
  const std::string bin = testing::BuildLlama2c(16, 24, 2, 4, 2, 32, 8);
  const auto half = Convert(bin, "tiny.bin", RopePairing::kInterleaved, RopePairing::kHalf);
  const auto back = Convert(Str(half), "tiny.bin", RopePairing::kHalf, RopePairing::kInterleaved);
  EXPECT_EQ(Str(back), bin);
  // Bytes that changed all lie in wq / wk: offsets 28 + 4*(V*D + L*D) .. + L*D*D + L*KV*D floats.
  const size_t wq_begin = 28 + 4 * (32 * 16 + 2 * 16), wk_end = wq_begin + 4 * (2 * 16 * 16 + 2 * 8 * 16);
  size_t changed = 0;
  for (size_t i = 0; i < bin.size(); ++i)
    if (static_cast<char>(half[i]) != bin[i]) {
      ++changed;
      EXPECT_TRUE(i >= wq_begin && i < wk_end) << "byte " << i << " outside wq/wk changed";
    }
  EXPECT_GT(changed, 1000u);
  // Row 1 of head 0 of wq (interleaved pair 0, second coordinate) becomes row D/2 = 2 in half.
  float got, want;
  std::memcpy(&got, half.data() + wq_begin + 2 * 16 * 4, 4);
  std::memcpy(&want, bin.data() + wq_begin + 1 * 16 * 4, 4);
  EXPECT_EQ(got, want);
}

TEST(LayoutConvert, SafetensorsRoundTripWithConfigBiasesAndFusedQkv) {
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_layout_st_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "config.json")
        << R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
             "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "max_position_embeddings": 64})";
  }
  auto rng = testing::MakeRng(5);
  auto floats = [&](size_t n) { return testing::FloatBytes(testing::RandomNormal(rng, n)); };
  std::string bf16(2 * 8 * 16, '\0');
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = static_cast<char>(i * 7 + 3);
  testing::SafetensorsBuilder b;
  b.Tensor("model.layers.0.self_attn.q_proj.weight", "F32", {16, 16}, floats(256))
      .Tensor("model.layers.0.self_attn.q_proj.bias", "F32", {16}, floats(16))
      .Tensor("model.layers.0.self_attn.k_proj.weight", "BF16", {8, 16}, bf16)
      .Tensor("model.layers.0.self_attn.v_proj.weight", "F32", {8, 16}, floats(128))
      .Tensor("model.layers.1.self_attn.qkv_proj.weight", "F32", {32, 16}, floats(512))
      .Finish();
  const std::string file = b.Build();
  const std::string name = (dir / "model.safetensors").string();
  std::vector<std::byte> half;
  LayoutConvertOptions o;
  auto r = ConvertLayoutBytes(AsBytes(file), name, o, &half);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->num_heads, 2);
  EXPECT_EQ(r->num_kv_heads, 1);
  EXPECT_EQ(r->from_layout.rotary_dim, 4);  // partial_rotary_factor 0.5 of head_dim 8
  EXPECT_EQ(r->permuted.size(), 4u);
  EXPECT_NE(Str(half), file);
  const auto back = Convert(Str(half), name, RopePairing::kHalf, RopePairing::kInterleaved);
  EXPECT_EQ(Str(back), file);
  // v_proj and the v rows of qkv (rows 24..31) are untouched; dims 4..7 of every head stay too.
  const size_t data = 8 + *reinterpret_cast<const uint64_t*>(file.data());
  const size_t v_off = data + 256 * 4 + 16 * 4 + bf16.size();
  EXPECT_EQ(0, std::memcmp(half.data() + v_off, file.data() + v_off, 128 * 4));
  const size_t qkv_v = v_off + 128 * 4 + 24 * 16 * 4;
  EXPECT_EQ(0, std::memcmp(half.data() + qkv_v, file.data() + qkv_v, 8 * 16 * 4));
  EXPECT_EQ(0, std::memcmp(half.data() + data + 4 * 64, file.data() + data + 4 * 64, 4 * 64));  // q head 0, rows 4..7
  // A dtype it cannot move is refused, naming the tensor.
  testing::SafetensorsBuilder bad;
  bad.Tensor("q_proj.weight", "I64", {16, 1}, std::string(128, '\0')).Finish();
  std::vector<std::byte> out;
  LayoutConvertOptions o2;
  o2.num_heads = 2;
  o2.head_dim = 8;
  auto e = ConvertLayoutBytes(AsBytes(bad.Build()), "bad.safetensors", o2, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'q_proj.weight' has dtype I64"), std::string::npos) << e.status().message();
  std::filesystem::remove_all(dir);
}

// Fused query_key_value weights, split as the models' Hugging Face code splits them: GPT-NeoX and
// Persimmon per head [q, k, v]; Falcon per kv head [q heads, k, v] (new_decoder_architecture), all q
// then one k and one v (multi_query), or per head (neither). Every row holds its own index, so the
// test can say which source row landed where: q/k rows move inside their head's rotary window by the
// layout permutation, v rows and pass-through dims stay, and converting back restores the file.
TEST(LayoutConvert, SafetensorsFusedQueryKeyValueOfNeoxPersimmonAndFalcon) {
  struct Case {
    const char* config;
    int64_t heads, kv, head_dim, rotary_dim;
    // (row) -> true when the row is a q or k row; rows are grouped in blocks of head_dim.
    int64_t blocks;
    std::function<bool(int64_t block)> rotated;
  };
  const std::vector<Case> cases = {
      {R"({"model_type": "gpt_neox", "hidden_size": 32, "num_attention_heads": 2, "rotary_pct": 0.25})", 2, 2, 16, 4, 6,
       [](int64_t b) { return b % 3 != 2; }},
      {R"({"model_type": "persimmon", "hidden_size": 24, "num_attention_heads": 3, "partial_rotary_factor": 0.5})", 3,
       3, 8, 4, 9, [](int64_t b) { return b % 3 != 2; }},
      {R"({"model_type": "falcon", "hidden_size": 32, "num_attention_heads": 4, "num_kv_heads": 2,
           "new_decoder_architecture": true, "multi_query": true, "alibi": false})",
       4, 2, 8, 8, 8, [](int64_t b) { return b % 4 != 3; }},  // per kv head: q, q, k, v
      {R"({"model_type": "falcon", "hidden_size": 32, "num_attention_heads": 4, "alibi": false})", 4, 1, 8, 8, 6,
       [](int64_t b) { return b < 5; }},  // multi_query by default: q q q q k v
      {R"({"model_type": "falcon", "hidden_size": 16, "num_attention_heads": 2, "multi_query": false,
           "alibi": false})",
       2, 2, 8, 8, 6, [](int64_t b) { return b % 3 != 2; }},
  };
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_layout_qkv_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.config);
    std::ofstream(dir / "config.json", std::ios::trunc) << c.config;
    const int64_t rows = c.blocks * c.head_dim, cols = 3;
    std::vector<float> w(static_cast<size_t>(rows * cols)), bias(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      bias[static_cast<size_t>(r)] = static_cast<float>(r);
      for (int64_t k = 0; k < cols; ++k) w[static_cast<size_t>(r * cols + k)] = static_cast<float>(r);
    }
    testing::SafetensorsBuilder b;
    b.Tensor("layers.0.attention.query_key_value.weight", "F32", {rows, cols}, testing::FloatBytes(w))
        .Tensor("layers.0.attention.query_key_value.bias", "F32", {rows}, testing::FloatBytes(bias))
        .Finish();
    const std::string file = b.Build();
    const std::string name = (dir / "model.safetensors").string();
    LayoutConvertOptions o;
    o.from = RopePairing::kHalf;
    o.to = RopePairing::kInterleaved;
    std::vector<std::byte> out;
    auto r = ConvertLayoutBytes(AsBytes(file), name, o, &out);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->num_heads, c.heads);
    EXPECT_EQ(r->num_kv_heads, c.kv);
    EXPECT_EQ(r->from_layout.rotary_dim, c.rotary_dim);
    EXPECT_EQ(r->permuted.size(), 2u);
    // Half -> interleaved inside the window [0, R): new dim 2i + c holds old dim c*R/2 + i.
    auto source_dim = [&](int64_t d) { return d < c.rotary_dim ? (d % 2) * (c.rotary_dim / 2) + d / 2 : d; };
    const size_t data = 8 + *reinterpret_cast<const uint64_t*>(file.data());
    const float* wout = reinterpret_cast<const float*>(out.data() + data);
    const float* bout = wout + rows * cols;
    int64_t moved = 0;
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t block = row / c.head_dim, d = row % c.head_dim;
      const int64_t want = c.rotated(block) ? block * c.head_dim + source_dim(d) : row;
      moved += want != row;
      ASSERT_EQ(wout[row * cols + 2], static_cast<float>(want)) << "row " << row;
      ASSERT_EQ(bout[row], static_cast<float>(want)) << "bias row " << row;
    }
    EXPECT_GT(moved, 0);
    o.from = RopePairing::kInterleaved;
    o.to = RopePairing::kHalf;
    std::vector<std::byte> back;
    ASSERT_TRUE(ConvertLayoutBytes(out, name, o, &back).ok());
    EXPECT_EQ(Str(back), file);
  }
  // Without config.json the row order of query_key_value is unknown: refused, naming the tensor.
  std::filesystem::remove(dir / "config.json");
  testing::SafetensorsBuilder b;
  b.Tensor("h.0.self_attention.query_key_value.weight", "F32", {48, 1}, std::string(192, '\0')).Finish();
  LayoutConvertOptions o;
  o.num_heads = 2;
  o.head_dim = 8;
  std::vector<std::byte> out;
  auto e = ConvertLayoutBytes(AsBytes(b.Build()), (dir / "m.safetensors").string(), o, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'h.0.self_attention.query_key_value.weight' is a fused query_key_value"),
            std::string::npos)
      << e.status().message();
  // A row count that does not fit the config's heads names the tensor and the split it expected.
  std::ofstream(dir / "config.json", std::ios::trunc)
      << R"({"model_type": "gpt_neox", "hidden_size": 16, "num_attention_heads": 2, "rotary_pct": 1.0})";
  testing::SafetensorsBuilder short_qkv;
  short_qkv.Tensor("h.0.self_attention.query_key_value.weight", "F32", {40, 1}, std::string(160, '\0')).Finish();
  e = ConvertLayoutBytes(AsBytes(short_qkv.Build()), (dir / "m.safetensors").string(), LayoutConvertOptions{}, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'h.0.self_attention.query_key_value.weight' has 40 rows, but 2 x [q, k, v] "
                                      "heads of head_dim 8 need 48"),
            std::string::npos)
      << e.status().message();
  std::filesystem::remove_all(dir);
}

TEST(LayoutConvert, GgufQuantizedRowsRoundTripAndQuantizedBiasIsRefused) {
  // Q8_0: blocks of 32 elements in 34 bytes; a [ne0 = 64, ne1 = 2 heads * 8] weight has rows of 2 blocks.
  std::string q8(16 * 2 * 34, '\0');
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<char>(i * 13 + 1);
  std::string f16(8 * 64 * 2, '\0');
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<char>(i * 5 + 2);
  auto build = [&](bool quantized_bias) {
    testing::GgufBuilder g;
    g.KvString("general.architecture", "llama")
        .KvU32("llama.attention.head_count", 2)
        .KvU32("llama.attention.head_count_kv", 1)
        .KvU32("llama.embedding_length", 16)
        .KvU32("llama.attention.key_length", 8)
        .KvU32("llama.rope.dimension_count", 8)
        .Tensor("blk.0.attn_q.weight", {64, 16}, 8, q8)
        .Tensor("blk.0.attn_k.weight", {64, 8}, 1, f16)
        .Tensor("blk.0.attn_v.weight", {64, 8}, 1, f16);
    if (quantized_bias) g.Tensor("blk.0.attn_q.bias", {32}, 8, std::string(34, '\1'));
    return g.Build();
  };
  const std::string file = build(false);
  const auto half = Convert(file, "tiny.gguf", RopePairing::kInterleaved, RopePairing::kHalf);
  EXPECT_NE(Str(half), file);
  EXPECT_EQ(Str(Convert(Str(half), "tiny.gguf", RopePairing::kHalf, RopePairing::kInterleaved)), file);
  // Row 1 of the Q8_0 weight (68 bytes: two whole blocks) is row 4 after the conversion.
  const size_t q_at = file.find(q8.substr(0, 68));
  ASSERT_NE(q_at, std::string::npos);
  EXPECT_EQ(0, std::memcmp(half.data() + q_at + 4 * 68, file.data() + q_at + 1 * 68, 68));
  std::vector<std::byte> out;
  LayoutConvertOptions o;
  auto e = ConvertLayoutBytes(AsBytes(build(true)), "qbias.gguf", o, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(e.status().message().find("'blk.0.attn_q.bias' is a 1-D Q8_0 tensor"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("split"), std::string::npos);
}

TEST(LayoutConvert, ErrorsNameTheFault) {
  std::vector<std::byte> out;
  LayoutConvertOptions o;
  o.num_heads = 2;  // llama2.c heads come from the header (it says 4)
  auto e = ConvertLayoutBytes(AsBytes(testing::BuildLlama2c(16, 24, 1, 4, 2, 32, 8)), "t.bin", o, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("heads come from the header"), std::string::npos);
  testing::SafetensorsBuilder b;
  b.Tensor("q_proj.weight", "F32", {12, 2}, std::string(96, '\0')).Finish();
  LayoutConvertOptions o2;
  o2.num_heads = 2;
  o2.head_dim = 8;
  e = ConvertLayoutBytes(AsBytes(b.Build()), "x.safetensors", o2, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'q_proj.weight' has 12 rows, but 2 heads of head_dim 8 need 16"),
            std::string::npos)
      << e.status().message();
  // An absurd head_dim (from the options here; a file's metadata can say the same) is refused before a
  // head_dim-long permutation is allocated: past kMaxRopeHeadDim by the layout check, below it by the
  // row count; a heads x head_dim product past int64 is refused as such (the convert fuzzer found the
  // allocation of gigabytes, then a throw).
  LayoutConvertOptions huge = o2;
  huge.head_dim = int64_t{1} << 40;
  e = ConvertLayoutBytes(AsBytes(b.Build()), "x.safetensors", huge, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("x.safetensors: rope layout: head_dim 1099511627776 is beyond 1048576"),
            std::string::npos)
      << e.status().message();
  huge.head_dim = int64_t{1} << 20;
  e = ConvertLayoutBytes(AsBytes(b.Build()), "x.safetensors", huge, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("has 12 rows, but 2 heads of head_dim 1048576 need 2097152"), std::string::npos)
      << e.status().message();
  huge.num_heads = int64_t{1} << 50;
  e = ConvertLayoutBytes(AsBytes(b.Build()), "x.safetensors", huge, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("need more than 2^63"), std::string::npos) << e.status().message();
  testing::SafetensorsBuilder none;
  none.Tensor("v_proj.weight", "F32", {2, 2}, std::string(16, '\0')).Finish();
  e = ConvertLayoutBytes(AsBytes(none.Build()), "v.safetensors", o2, &out);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

// The issue's check: stories260K (interleaved) converted to half and run with half-layout RoPE gives
// the reference logits and greedy text (tiny_llama --check), and converting back gives the file byte
// for byte. Runs the CLI and the tiny_llama example as a user would.
TEST(LayoutConvert, Stories260KConvertedToHalfRunsAndRoundTrips) {
  POSENC_REQUIRE_DATA(model, "models/stories260K/stories260K.bin");
  POSENC_REQUIRE_DATA(ref, "models/stories260K/reference");
  const auto tiny = std::filesystem::path(testing::CliPath()).parent_path() / "examples" / "tiny_llama";
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_layout_s260_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string half = (dir / "half.bin").string(), back = (dir / "back.bin").string();
  std::string out;
  ASSERT_EQ(0, testing::RunCommand(
                   testing::CliPath() + " convert-layout --from interleaved --to half " + model + " " + half, &out))
      << out;
  ASSERT_EQ(0, testing::RunCommand(
                   testing::CliPath() + " convert-layout --from half --to interleaved " + half + " " + back, &out))
      << out;
  std::ifstream a(model, std::ios::binary), b(back, std::ios::binary), h(half, std::ios::binary);
  const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {}),
      sh((std::istreambuf_iterator<char>(h)), {});
  EXPECT_EQ(sa, sb) << "round trip is not byte-identical";
  EXPECT_NE(sa, sh);
  if (!std::filesystem::exists(tiny)) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "tiny_llama not built at " << tiny << " (build the target tiny_llama)";
  }
  // Converted + half layout: every check passes (logits within the case tolerance, 40/40 greedy tokens).
  EXPECT_EQ(0, testing::RunCommand(tiny.string() + " --check " + ref + " --model " + half + " --layout half", &out))
      << out;
  EXPECT_NE(out.find("5 passed, 0 failed"), std::string::npos) << out;
  EXPECT_NE(out.find("40 of 40 new tokens match"), std::string::npos) << out;
  // Converted but run with the old layout: it talks nonsense (the check fails).
  EXPECT_EQ(1,
            testing::RunCommand(tiny.string() + " --check " + ref + " --model " + half + " --layout interleaved", &out))
      << out;
  std::filesystem::remove_all(dir);
}

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

// stories260K's trained weights written as a GGUF file (architecture llama, q/k rows as they are:
// adjacent pairs, as llama.cpp's converter leaves them) and as a Hugging Face safetensors file with
// config.json (q/k rows permuted to half pairs, as convert_llama_weights_to_hf.py does): the detector
// runs both, finds the layout each format declares, and its losses for the right layout are the
// llama2.c file's (the same float32 weights, the same scores). A third file, the GGUF with Q8_0 and
// float16 matrices, gives the same verdict with the loss moved by the quantization error only.
TEST(LayoutDetect, Stories260KAsGgufAndHuggingFaceSafetensors) {
  POSENC_REQUIRE_DATA(model, "models/stories260K/stories260K.bin");
  POSENC_REQUIRE_DATA(case_json, "models/stories260K/reference/case.json");
  const std::vector<int64_t> ids = Stories260KText(case_json);
  auto l2c = Llama2cFile::Open(model);
  ASSERT_TRUE(l2c.ok()) << l2c.status().message();
  const Llama2cConfig& cfg = l2c->config();
  const Llama2cWeights& w = l2c->weights();
  const int64_t D = cfg.dim, F = cfg.hidden_dim, L = cfg.n_layers, V = cfg.vocab_size, hs = cfg.head_size(),
                KV = cfg.kv_dim();
  auto slice = [](std::span<const float> all, int64_t l, int64_t n) {
    return std::string(reinterpret_cast<const char*>(all.data() + l * n), static_cast<size_t>(n) * sizeof(float));
  };
  // Interleaved -> half rows of every q/k head, for the Hugging Face file.
  const auto perm =
      RotaryRowPermutation(RotaryLayout{RopePairing::kInterleaved, hs, 0, hs}, RopePairing::kHalf).value();
  auto to_half = [&](const std::string& rows, int64_t heads) {
    std::string out(rows.size(), '\0');
    EXPECT_TRUE(PermuteHeadRows(AsBytes(rows), std::as_writable_bytes(std::span<char>(out.data(), out.size())), heads,
                                hs, static_cast<size_t>(D) * sizeof(float), perm)
                    .ok());
    return out;
  };
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // A matrix for the GGUF file: float32, or (quantized) Q8_0 where its rows are whole 32-element
  // blocks and float16 where they are not (stories260K's ffn_down rows have 172 elements), as
  // llama.cpp's quantizer falls back.
  auto matrix = [&](testing::GgufBuilder& g, const std::string& name, int64_t rows, int64_t cols,
                    const std::string& f32, bool quantized) {
    const float* x = reinterpret_cast<const float*>(f32.data());
    if (!quantized) {
      g.Tensor(name, {u(cols), u(rows)}, 0, f32);
    } else if (cols % 32 != 0) {
      std::string h;
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t bits = F32ToF16(x[i]).bits;
        h.append(reinterpret_cast<const char*>(&bits), 2);
      }
      g.Tensor(name, {u(cols), u(rows)}, 1, h);
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
      g.Tensor(name, {u(cols), u(rows)}, 8, q);
    }
  };
  auto build_gguf = [&](bool quantized) {
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
    g.Tensor("token_embd.weight", {u(D), u(V)}, 0, slice(w.token_embedding_table, 0, V * D));
    for (int64_t l = 0; l < L; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      g.Tensor(b + "attn_norm.weight", {u(D)}, 0, slice(w.rms_att_weight, l, D));
      matrix(g, b + "attn_q.weight", D, D, slice(w.wq, l, D * D), quantized);
      matrix(g, b + "attn_k.weight", KV, D, slice(w.wk, l, KV * D), quantized);
      matrix(g, b + "attn_v.weight", KV, D, slice(w.wv, l, KV * D), quantized);
      matrix(g, b + "attn_output.weight", D, D, slice(w.wo, l, D * D), quantized);
      g.Tensor(b + "ffn_norm.weight", {u(D)}, 0, slice(w.rms_ffn_weight, l, D));
      matrix(g, b + "ffn_gate.weight", F, D, slice(w.w1, l, F * D), quantized);
      matrix(g, b + "ffn_down.weight", D, F, slice(w.w2, l, D * F), quantized);
      matrix(g, b + "ffn_up.weight", F, D, slice(w.w3, l, F * D), quantized);
    }
    g.Tensor("output_norm.weight", {u(D)}, 0, slice(w.rms_final_weight, 0, D));
    if (!cfg.shared_classifier) matrix(g, "output.weight", V, D, slice(w.wcls, 0, V * D), quantized);
    return g.Build();
  };
  testing::SafetensorsBuilder st;
  st.Tensor("model.embed_tokens.weight", "F32", {V, D}, slice(w.token_embedding_table, 0, V * D));
  for (int64_t l = 0; l < L; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".";
    st.Tensor(h + "input_layernorm.weight", "F32", {D}, slice(w.rms_att_weight, l, D))
        .Tensor(h + "self_attn.q_proj.weight", "F32", {D, D}, to_half(slice(w.wq, l, D * D), cfg.n_heads))
        .Tensor(h + "self_attn.k_proj.weight", "F32", {KV, D}, to_half(slice(w.wk, l, KV * D), cfg.n_kv_heads))
        .Tensor(h + "self_attn.v_proj.weight", "F32", {KV, D}, slice(w.wv, l, KV * D))
        .Tensor(h + "self_attn.o_proj.weight", "F32", {D, D}, slice(w.wo, l, D * D))
        .Tensor(h + "post_attention_layernorm.weight", "F32", {D}, slice(w.rms_ffn_weight, l, D))
        .Tensor(h + "mlp.gate_proj.weight", "F32", {F, D}, slice(w.w1, l, F * D))
        .Tensor(h + "mlp.down_proj.weight", "F32", {D, F}, slice(w.w2, l, D * F))
        .Tensor(h + "mlp.up_proj.weight", "F32", {F, D}, slice(w.w3, l, F * D));
  }
  st.Tensor("model.norm.weight", "F32", {D}, slice(w.rms_final_weight, 0, D));
  if (!cfg.shared_classifier) st.Tensor("lm_head.weight", "F32", {V, D}, slice(w.wcls, 0, V * D));
  st.Finish();
  const auto dir = std::filesystem::temp_directory_path() / ("posenc_detect_fmt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string gguf = (dir / "stories260K.gguf").string(), hf = (dir / "model.safetensors").string();
  const std::string gguf_q8 = (dir / "stories260K-q8_0.gguf").string();
  std::ofstream(gguf, std::ios::binary) << build_gguf(false);
  std::ofstream(gguf_q8, std::ios::binary) << build_gguf(true);
  std::ofstream(hf, std::ios::binary) << st.Build();
  std::ofstream(dir / "config.json") << nlohmann::json{
      {"model_type", "llama"},
      {"hidden_size", D},
      {"intermediate_size", F},
      {"num_hidden_layers", L},
      {"num_attention_heads", cfg.n_heads},
      {"num_key_value_heads", cfg.n_kv_heads},
      {"vocab_size", V},
      {"rope_theta", 10000.0},
      {"rms_norm_eps", 1e-5},
      {"max_position_embeddings", cfg.seq_len},
      {"tie_word_embeddings",
       bool(cfg.shared_classifier)}}.dump();

  // Runs the detector on `path`; expects a verdict of `layout`, which is also what the format declares.
  auto detect = [&](const std::string& path, RopePairing layout) {
    auto d = DetectLayout(path, ids);
    EXPECT_TRUE(d.ok()) << d.status().message();
    if (!d.ok()) return LayoutDetection{};
    EXPECT_TRUE(d->verdict.has_value()) << d->summary;
    EXPECT_EQ(d->verdict, std::optional<RopePairing>(layout)) << d->summary;
    EXPECT_EQ(d->declared, ToString(layout)) << path;
    EXPECT_FALSE(d->declared_disagrees) << path;
    return *d;
  };
  auto shipped = DetectLayout(model, ids);
  ASSERT_TRUE(shipped.ok()) << shipped.status().message();
  const LayoutDetection from_gguf = detect(gguf, RopePairing::kInterleaved);
  const LayoutDetection from_hf = detect(hf, RopePairing::kHalf);
  ASSERT_EQ(from_gguf.candidates.size(), 2u);
  ASSERT_EQ(from_hf.candidates.size(), 2u);
  // Same weights, same scores: GGUF reproduces the llama2.c losses for both layouts, and the Hugging
  // Face file under half pairs reproduces them under interleaved pairs.
  for (int k = 0; k < 2; ++k)
    EXPECT_NEAR(from_gguf.candidates[k].mean_loss, shipped->candidates[k].mean_loss, 1e-6) << k;
  EXPECT_NEAR(from_hf.candidates[0].mean_loss, shipped->candidates[1].mean_loss, 1e-4);
  EXPECT_GT(from_hf.margin, 1.0) << from_hf.summary;
  // Quantized weights (Q8_0, float16 where rows are not whole blocks) run through the same pass: same
  // verdict, and the right layout's loss moves by the quantization error only.
  const LayoutDetection from_q8 = detect(gguf_q8, RopePairing::kInterleaved);
  ASSERT_EQ(from_q8.candidates.size(), 2u);
  std::printf("stories260K as Q8_0 GGUF: %s\n", from_q8.summary.c_str());
  EXPECT_NEAR(from_q8.candidates[1].mean_loss, shipped->candidates[1].mean_loss, 0.01);  // measured 0.001
  EXPECT_NE(from_q8.candidates[1].mean_loss, shipped->candidates[1].mean_loss);          // it did dequantize

  // A missing weight is named.
  std::filesystem::remove(dir / "config.json");
  auto e = DetectLayout(hf, ids);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no config.json"), std::string::npos) << e.status().message();
  // A layer count the file cannot hold (nine tensors a layer) is refused before anything is sized by it.
  testing::SafetensorsBuilder partial;
  partial.Tensor("model.embed_tokens.weight", "F32", {V, D}, slice(w.token_embedding_table, 0, V * D));
  std::ofstream(hf, std::ios::binary | std::ios::trunc) << partial.Finish().Build();
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
    "num_hidden_layers": 5, "rope_theta": 10000.0})";
  e = DetectLayout(hf, ids);
  EXPECT_TRUE(testing::HasError(e.status(), StatusCode::kInvalidArgument,
                                "5 layers (block_count / num_hidden_layers) need at least 45 tensors; the file has 1"));
  // Enough tensors, but not the ones a layer needs: the first missing one is named.
  for (int i = 0; i < 8; ++i) partial.Tensor("pad." + std::to_string(i), "F32", {1}, testing::FloatBytes({0.0f}));
  std::ofstream(hf, std::ios::binary | std::ios::trunc) << partial.Finish().Build();
  std::ofstream(dir / "config.json", std::ios::trunc) << R"({"model_type": "llama", "hidden_size": 64,
    "num_attention_heads": 8, "num_hidden_layers": 1, "rope_theta": 10000.0})";
  e = DetectLayout(hf, ids);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no tensor 'model.layers.0.mlp.gate_proj.weight'"), std::string::npos)
      << e.status().message();
  std::filesystem::remove_all(dir);
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
