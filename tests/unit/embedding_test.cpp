// Token embedding lookup and absolute positions (sinusoidal, learned): values and bad input.
#include <cmath>

#include <gtest/gtest.h>

#include "posenc/kernels/embedding.hpp"
#include "posenc/math/sinusoidal.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

TEST(Embedding, LooksUpRowsInEveryStorageType) {
  auto rng = testing::MakeRng(3);
  const int64_t vocab = 37, d = 13;
  std::vector<float> w = testing::RandomNormal(rng, vocab * d);
  std::vector<f16_t> w16(w.size());
  std::vector<bf16_t> wb(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w16[i] = F32ToF16(w[i]);
    wb[i] = F32ToBF16(w[i]);
  }
  const std::vector<int64_t> ids = {0, 36, 5, 5, 17};
  for (float mult : {1.0f, std::sqrt(13.0f)}) {
    Array a = LookupEmbeddings(EmbeddingTable::View(w.data(), DType::kF32, vocab, d), ids, {mult}).value();
    Array b = LookupEmbeddings(EmbeddingTable::View(w16.data(), DType::kF16, vocab, d), ids, {mult}).value();
    Array c =
        LookupEmbeddings(EmbeddingTable::View(wb.data(), DType::kBF16, vocab, d), ids, {mult, DType::kBF16}).value();
    ASSERT_EQ(a.shape(), (std::vector<int64_t>{5, 13}));
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t k = 0; k < d; ++k) {
        const size_t src = static_cast<size_t>(ids[t] * d + k), dst = t * d + static_cast<size_t>(k);
        EXPECT_EQ(a.data<float>()[dst], w[src] * mult);
        EXPECT_EQ(b.data<float>()[dst], F16ToF32(w16[src]) * mult);
        EXPECT_EQ(c.data<bf16_t>()[dst].bits, F32ToBF16(BF16ToF32(wb[src]) * mult).bits);
      }
  }
  // A strided view (rows padded): same rows.
  std::vector<float> padded(vocab * (d + 3));
  for (int64_t r = 0; r < vocab; ++r)
    for (int64_t k = 0; k < d; ++k) padded[r * (d + 3) + k] = w[r * d + k];
  Array s = LookupEmbeddings(EmbeddingTable::Strided(padded.data(), DType::kF32, vocab, d, d + 3), ids).value();
  Array a = LookupEmbeddings(EmbeddingTable::View(w.data(), DType::kF32, vocab, d), ids).value();
  EXPECT_EQ(std::vector<float>(s.span<float>().begin(), s.span<float>().end()),
            std::vector<float>(a.span<float>().begin(), a.span<float>().end()));
}

TEST(Embedding, OutOfVocabularyIdNamesIdIndexAndVocab) {
  std::vector<float> w(4 * 2);
  const EmbeddingTable t = EmbeddingTable::View(w.data(), DType::kF32, 4, 2);
  for (int64_t bad : {int64_t{4}, int64_t{-1}, int64_t{1} << 40}) {
    const std::vector<int64_t> ids = {0, 1, bad, 2};
    Result<Array> r = LookupEmbeddings(t, ids);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
    EXPECT_NE(r.status().message().find("token id " + std::to_string(bad) + " at index 2"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("[0, 4)"), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(LookupEmbeddings(t, {}).ok());
  EXPECT_EQ(LookupEmbeddings(t, {}).value().dim(0), 0);
}

TEST(Embedding, RejectsBadTablesAndOptions) {
  std::vector<float> w(8);
  EXPECT_FALSE(LookupEmbeddings(EmbeddingTable::Strided(w.data(), DType::kI32, 4, 2, 2), {}).ok());
  EXPECT_FALSE(LookupEmbeddings(EmbeddingTable::Strided(w.data(), DType::kF32, 4, 2, 1), {}).ok());
  EXPECT_FALSE(LookupEmbeddings(EmbeddingTable::Strided(w.data(), DType::kF32, -1, 2, 2), {}).ok());
  EXPECT_FALSE(LookupEmbeddings(EmbeddingTable::View(w.data(), DType::kF32, 4, 2), {}, {1.0f, DType::kF16}).ok());
  EXPECT_FALSE(LookupEmbeddings(EmbeddingTable::View(w.data(), DType::kF32, 4, 2), {}, {NAN}).ok());
  Array three_d = Array::Zeros(DType::kF32, {2, 2, 2}).value();
  Result<EmbeddingTable> t = EmbeddingTable::Of(three_d, "wte");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("wte"), std::string::npos);
}

// Vaswani et al. (2017) section 3.5: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(...).
TEST(Sinusoidal, BothLayoutsFollowTheFormula) {
  const std::vector<int64_t> pos = {0, 1, 7, 1000, 123456};
  const int64_t d = 10;
  Array inter = SinusoidalTable(pos, d, SinusoidalLayout::kInterleaved).value();
  Array concat = SinusoidalTable(pos, d, SinusoidalLayout::kConcat).value();
  for (size_t t = 0; t < pos.size(); ++t)
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = static_cast<double>(pos[t]) / std::pow(10000.0, 2.0 * static_cast<double>(i) / d);
      const float s = static_cast<float>(std::sin(angle)), c = static_cast<float>(std::cos(angle));
      EXPECT_EQ(inter.data<float>()[t * d + 2 * i], s);
      EXPECT_EQ(inter.data<float>()[t * d + 2 * i + 1], c);
      EXPECT_EQ(concat.data<float>()[t * d + i], s);
      EXPECT_EQ(concat.data<float>()[t * d + d / 2 + i], c);
    }
  // Position 0: sin 0 = 0, cos 0 = 1 in every pair.
  for (int64_t i = 0; i < d / 2; ++i) {
    EXPECT_EQ(inter.data<float>()[2 * i], 0.0f);
    EXPECT_EQ(inter.data<float>()[2 * i + 1], 1.0f);
  }
}

TEST(Sinusoidal, RejectsBadArguments) {
  const std::vector<int64_t> pos = {0, -2};
  Result<Array> r = SinusoidalTable(pos, 8, SinusoidalLayout::kConcat);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("position -2 at index 1"), std::string::npos) << r.status().message();
  r = SinusoidalTable({}, 7, SinusoidalLayout::kConcat);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("d_model 7"), std::string::npos);
  EXPECT_FALSE(SinusoidalTable({}, 8, SinusoidalLayout::kConcat, 0.0).ok());
}

TEST(LearnedPositions, AddsRowsAndRefusesToWrap) {
  const int64_t n_pos = 6, d = 4;
  std::vector<float> wpe(n_pos * d), wte(10 * d);
  for (size_t i = 0; i < wpe.size(); ++i) wpe[i] = static_cast<float>(i) * 0.5f;
  for (size_t i = 0; i < wte.size(); ++i) wte[i] = static_cast<float>(i);
  const EmbeddingTable P = EmbeddingTable::View(wpe.data(), DType::kF32, n_pos, d);
  const std::vector<int64_t> ids = {9, 0, 3}, pos = {0, 1, 5};
  Array x = LookupEmbeddings(EmbeddingTable::View(wte.data(), DType::kF32, 10, d), ids).value();
  Array p = LookupLearnedPositions(P, pos).value();
  ASSERT_TRUE(AddPositions(p, x).ok());
  for (size_t t = 0; t < 3; ++t)
    for (int64_t k = 0; k < d; ++k) EXPECT_EQ(x.data<float>()[t * d + k], wte[ids[t] * d + k] + wpe[pos[t] * d + k]);
  const std::vector<int64_t> past = {0, 6};
  Result<Array> r = LookupLearnedPositions(P, past);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("position 6 at index 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("6 positions"), std::string::npos) << r.status().message();
  Array wrong = Array::Zeros(DType::kF32, {2, d}).value();
  EXPECT_FALSE(AddPositions(wrong, x).ok());
}

}  // namespace
}  // namespace posenc
