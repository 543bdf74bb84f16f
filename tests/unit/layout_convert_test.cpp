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

}  // namespace
}  // namespace posenc
