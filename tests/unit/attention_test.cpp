// The tiled online-softmax reference attention against a plain full-matrix softmax written here,
// over random shapes, GQA, causal masks with offsets, every bias kind and several tile sizes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/math/attention.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

Array RandomHeads(std::mt19937_64& rng, int64_t t, int64_t h, int64_t d) {
  Array a = Array::Zeros(DType::kF32, {t, h, d}).value();
  std::vector<float> r = testing::RandomNormal(rng, static_cast<size_t>(a.size()));
  std::copy(r.begin(), r.end(), a.data<float>());
  return a;
}

// Materializes the whole score matrix per head: the obvious formula, the oracle for the tiled one.
std::vector<double> NaiveAttention(const Array& q, const Array& k, const Array& v, const AttentionOptions& o) {
  const int64_t tq = q.dim(0), hq = q.dim(1), d = q.dim(2), tk = k.dim(0), hkv = k.dim(1);
  const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> out(static_cast<size_t>(tq * hq * d), 0.0);
  for (int64_t h = 0; h < hq; ++h) {
    const int64_t g = h / (hq / hkv);
    for (int64_t i = 0; i < tq; ++i) {
      const int64_t qpos = o.query_offset + i;
      const float* qv = q.data<float>() + (i * hq + h) * d;
      std::vector<double> s(static_cast<size_t>(tk), -INFINITY);
      for (int64_t j = 0; j < tk; ++j) {
        if (o.causal && j > qpos) continue;
        const float* kv = k.data<float>() + (j * hkv + g) * d;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) {
          double key = kv[c];
          if (o.bias.kind == AttentionBiasKind::kShaw)
            key += o.bias.shaw->key_table.data<float>()[o.bias.shaw->Index(qpos, j) * d + c];
          dot += static_cast<double>(qv[c]) * key;
        }
        double b = 0;
        if (o.bias.kind == AttentionBiasKind::kAlibi) b = -o.bias.alibi_slopes[h] * static_cast<double>(qpos - j);
        if (o.bias.kind == AttentionBiasKind::kT5) b = o.bias.t5->BiasAt(h, qpos, j);
        s[j] = dot * scale + b;
      }
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) {
        x = std::exp(x - m);
        sum += x;
      }
      for (int64_t j = 0; j < tk; ++j) {
        const double p = s[j] / sum;
        for (int64_t c = 0; c < d; ++c) {
          double val = v.data<float>()[(j * hkv + g) * d + c];
          if (o.bias.kind == AttentionBiasKind::kShaw)
            val += o.bias.shaw->value_table.data<float>()[o.bias.shaw->Index(qpos, j) * d + c];
          out[(i * hq + h) * d + c] += p * val;
        }
      }
    }
  }
  return out;
}

TEST(AttentionReference, MatchesFullSoftmaxForEveryBiasAndTile) {
  const uint64_t seed = 12345;
  auto rng = testing::MakeRng(seed);
  for (int trial = 0; trial < 48; ++trial) {
    const int64_t hkv = 1 + static_cast<int64_t>(rng() % 3);
    const int64_t hq = hkv * (1 + static_cast<int64_t>(rng() % 3));
    const int64_t d = 1 + static_cast<int64_t>(rng() % 20);
    const int64_t tk = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t tq = 1 + static_cast<int64_t>(rng() % tk);
    const AttentionBiasKind kind = static_cast<AttentionBiasKind>(trial % 4);
    const bool causal = (trial / 4) % 2 == 1;
    const int64_t offset = causal ? tk - tq : static_cast<int64_t>(rng() % 5);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " trial " << trial << " q [" << tq << "," << hq << "," << d
                                      << "] kv [" << tk << "," << hkv << "] bias " << ToString(kind) << " causal "
                                      << causal << " offset " << offset);
    const Array q = RandomHeads(rng, tq, hq, d), k = RandomHeads(rng, tk, hkv, d), v = RandomHeads(rng, tk, hkv, d);
    const std::vector<double> slopes = AlibiSlopes(hq, AlibiVariant::kBloom).value();
    const T5RelativeBias t5 = RandomT5Bias({!causal, 16, 20}, hq, seed + trial).value();
    const ShawRelativeEmbeddings shaw = RandomShawEmbeddings(3, d, seed + trial, 0.5).value();
    AttentionOptions o;
    o.causal = causal;
    o.query_offset = offset;
    if (kind == AttentionBiasKind::kAlibi) o.bias = AttentionBias::Alibi(slopes);
    if (kind == AttentionBiasKind::kT5) o.bias = AttentionBias::T5(t5);
    if (kind == AttentionBiasKind::kShaw) o.bias = AttentionBias::Shaw(shaw);
    const std::vector<double> want = NaiveAttention(q, k, v, o);
    for (int64_t tile : {1, 3, 7, 32, 1000}) {
      o.key_tile = tile;
      Result<Array> got = AttentionReference(q, k, v, o);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->shape(), q.shape());
      // float64 arithmetic, one float32 rounding: 2 float32 ulps of the largest output.
      double max_abs = 0;
      for (double w : want) max_abs = std::max(max_abs, std::fabs(w));
      const double tol = 2.0 * 0x1p-24 * std::max(1.0, max_abs);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got->data<float>()[i], want[i], tol) << "tile " << tile << " element " << i;
    }
  }
}

TEST(AttentionReference, CausalFirstQueryReadsOnlyTheFirstValue) {
  auto rng = testing::MakeRng(7);
  const Array q = RandomHeads(rng, 4, 2, 8), k = RandomHeads(rng, 4, 1, 8), v = RandomHeads(rng, 4, 1, 8);
  AttentionOptions o;
  o.causal = true;
  Result<Array> out = AttentionReference(q, k, v, o);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t c = 0; c < 8; ++c) EXPECT_FLOAT_EQ(out->data<float>()[h * 8 + c], v.data<float>()[c]);
}

TEST(AttentionReference, HugeScoresDoNotOverflow) {
  // Scores near 1e4 would overflow exp() without the running maximum.
  Array q = Array::Zeros(DType::kF32, {1, 1, 1}).value(), k = Array::Zeros(DType::kF32, {3, 1, 1}).value();
  Array v = Array::Zeros(DType::kF32, {3, 1, 1}).value();
  q.data<float>()[0] = 100.0f;
  for (int j = 0; j < 3; ++j) {
    k.data<float>()[j] = 100.0f + j;
    v.data<float>()[j] = static_cast<float>(j);
  }
  AttentionOptions o;
  o.key_tile = 1;
  Result<Array> out = AttentionReference(q, k, v, o);
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR(out->data<float>()[0], 2.0, 1e-6);  // softmax puts ~all weight on the largest score
  EXPECT_TRUE(std::isfinite(out->data<float>()[0]));
}

void ExpectError(const Array& q, const Array& k, const Array& v, const AttentionOptions& o, const std::string& needle) {
  Result<Array> r = AttentionReference(q, k, v, o);
  ASSERT_FALSE(r.ok()) << needle;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(AttentionReference, ErrorsNameShapesAndValues) {
  auto z = [](std::vector<int64_t> s) { return Array::Zeros(DType::kF32, std::move(s)).value(); };
  const Array q = z({2, 6, 4}), k = z({3, 4, 4}), v = z({3, 4, 4});
  ExpectError(q, k, v, {}, "6 query heads are not a multiple of 4 key/value heads");
  ExpectError(z({2, 4, 4}), k, z({3, 4, 5}), {}, "k and v shapes differ: q [2, 4, 4] k [3, 4, 4] v [3, 4, 5]");
  ExpectError(z({2, 4, 8}), k, v, {}, "head_dim differ");
  ExpectError(z({2, 4}), k, v, {}, "q must be float32 [tokens, heads, head_dim], got float32 [2, 4]");
  ExpectError(z({2, 4, 4}), z({0, 4, 4}), z({0, 4, 4}), {}, "no keys");
  AttentionOptions o;
  o.query_offset = -1;
  ExpectError(z({2, 4, 4}), k, v, o, "query_offset -1");
  o = {};
  o.key_tile = 0;
  ExpectError(z({2, 4, 4}), k, v, o, "key_tile 0");
  o = {};
  o.scale = -1;
  ExpectError(z({2, 4, 4}), k, v, o, "scale -1");
  const std::vector<double> slopes = {0.5, 0.25};
  o = {};
  o.bias = AttentionBias::Alibi(slopes);
  ExpectError(z({2, 4, 4}), k, v, o, "2 alibi slopes for 4 query heads");
  const T5RelativeBias t5 = RandomT5Bias({true, 8, 16}, 3, 1).value();
  o.bias = AttentionBias::T5(t5);
  ExpectError(z({2, 4, 4}), k, v, o, "t5 table has 3 heads, q has 4");
  const ShawRelativeEmbeddings shaw = RandomShawEmbeddings(2, 5, 1).value();
  o.bias = AttentionBias::Shaw(shaw);
  ExpectError(z({2, 4, 4}), k, v, o, "shaw tables have head_dim 5, q has 4");
}

TEST(ProjectHeads, MultipliesRowsByTheWeightMatrix) {
  Array x = Array::Zeros(DType::kF32, {2, 3}).value();
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i + 1);  // [[1 2 3] [4 5 6]]
  std::vector<float> w(3 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) - 2.0f;
  const Array out = ProjectHeads(x, w, 2, 2).value();
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{2, 2, 2}));
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t c = 0; c < 4; ++c) {
      double want = 0;
      for (int64_t i = 0; i < 3; ++i) want += double{x.data<float>()[t * 3 + i]} * w[static_cast<size_t>(i * 4 + c)];
      EXPECT_EQ(out.data<float>()[t * 4 + c], static_cast<float>(want)) << t << ", " << c;
    }
}

TEST(ProjectHeads, BadShapesAreRefusedNamingThem) {
  const Array x = Array::Zeros(DType::kF32, {2, 3}).value();
  const std::vector<float> w(12);
  auto msg = [](const Result<Array>& r) { return r.ok() ? std::string("ok") : r.status().message(); };
  EXPECT_NE(msg(ProjectHeads(Array::Zeros(DType::kF32, {2, 3, 1}).value(), w, 2, 2)).find("float32 [tokens, d_model]"),
            std::string::npos);
  EXPECT_NE(msg(ProjectHeads(x, w, 0, 2)).find("heads 0 and head_dim 2 must be >= 1"), std::string::npos);
  EXPECT_NE(msg(ProjectHeads(x, w, 3, 2)).find("w holds 12 values, not d_model 3 x heads 3 x head_dim 2"),
            std::string::npos);
  // heads x head_dim x d_model past int64: refused, not wrapped around to a matching size.
  EXPECT_NE(msg(ProjectHeads(x, w, int64_t{1} << 62, 4)).find("w holds 12 values"), std::string::npos);
}

}  // namespace
}  // namespace posenc
