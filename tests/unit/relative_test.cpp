// ALiBi slopes (both variants), T5 buckets (both directions, boundaries), Shaw indexing, and the
// errors each reports.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/math/relative.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

std::vector<double> Pow2(std::initializer_list<double> exponents) {
  std::vector<double> v;
  for (double e : exponents) v.push_back(std::exp2(e));
  return v;
}

void ExpectSlopes(int64_t heads, AlibiVariant variant, double bias_max, const std::vector<double>& want) {
  SCOPED_TRACE(::testing::Message() << ToString(variant) << " heads " << heads << " bias_max " << bias_max);
  Result<std::vector<double>> got = AlibiSlopes(heads, variant, bias_max);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ((*got)[i], want[i]) << "head " << i;
}

TEST(AlibiSlopes, BloomPowerOfTwoIsGeometric) {
  ExpectSlopes(8, AlibiVariant::kBloom, 8, Pow2({-1, -2, -3, -4, -5, -6, -7, -8}));
  ExpectSlopes(1, AlibiVariant::kBloom, 8, Pow2({-8}));
  ExpectSlopes(4, AlibiVariant::kBloom, 8, Pow2({-2, -4, -6, -8}));
}

TEST(AlibiSlopes, BloomNonPowerOfTwoAppendsOddSlopesOfTwiceTheHeads) {
  // 12 heads: the 8-head slopes, then slopes 1, 3, 5, 7 of the 16-head sequence 2^(-k/2).
  ExpectSlopes(12, AlibiVariant::kBloom, 8, Pow2({-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5}));
  ExpectSlopes(3, AlibiVariant::kBloom, 8, Pow2({-4, -8, -2}));
  ExpectSlopes(6, AlibiVariant::kBloom, 8, Pow2({-2, -4, -6, -8, -1, -3}));
}

TEST(AlibiSlopes, MptUsesBiasMaxAndReordersForNonPowersOfTwo) {
  ExpectSlopes(4, AlibiVariant::kMpt, 16, Pow2({-4, -8, -12, -16}));
  ExpectSlopes(4, AlibiVariant::kMpt, 8, Pow2({-2, -4, -6, -8}));
  // 3 heads, bias_max 8: P = 4, slopes 2^-2, 2^-4, 2^-6, 2^-8; indices 1, 3 then 0 -> 2^-4, 2^-8, 2^-2.
  ExpectSlopes(3, AlibiVariant::kMpt, 8, Pow2({-4, -8, -2}));
  // 5 heads, bias_max 4: P = 8, slopes 2^(-k/2); indices 1,3,5,7 then 0 -> k = 2,4,6,8,1.
  ExpectSlopes(5, AlibiVariant::kMpt, 4, Pow2({-1, -2, -3, -4, -0.5}));
}

TEST(AlibiSlopes, RejectsBadHeadsAndBiasMax) {
  for (int64_t heads : {0, -3}) {
    Result<std::vector<double>> r = AlibiSlopes(heads, AlibiVariant::kBloom);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("num_heads " + std::to_string(heads)), std::string::npos)
        << r.status().message();
  }
  Result<std::vector<double>> r = AlibiSlopes(8, AlibiVariant::kMpt, 0.0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("alibi_bias_max 0"), std::string::npos) << r.status().message();
  EXPECT_FALSE(AlibiSlopes(8, AlibiVariant::kMpt, std::nan("")).ok());
}

TEST(AlibiSlopes, VariantNamesRoundTrip) {
  for (AlibiVariant v : {AlibiVariant::kBloom, AlibiVariant::kMpt}) {
    AlibiVariant parsed;
    ASSERT_TRUE(ParseAlibiVariant(ToString(v), &parsed));
    EXPECT_EQ(parsed, v);
  }
  AlibiVariant parsed;
  EXPECT_FALSE(ParseAlibiVariant("falcon", &parsed));
}

TEST(AlibiBias, IsMinusSlopeTimesDistanceWithOffset) {
  const std::vector<double> slopes = {0.5, 0.25};
  Result<Array> b = AlibiBias(slopes, 2, 5, /*query_offset=*/3);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->shape(), (std::vector<int64_t>{2, 2, 5}));
  const float* p = b->data<float>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_FLOAT_EQ(p[(h * 2 + i) * 5 + j], static_cast<float>(-slopes[h] * static_cast<double>(3 + i - j)));
  EXPECT_FLOAT_EQ(p[0], -1.5f);  // head 0, query at position 3, key 0
  EXPECT_FALSE(AlibiBias({}, 2, 2).ok());
  Result<Array> neg = AlibiBias(slopes, -1, 2);
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("query_length -1"), std::string::npos);
}

TEST(T5Buckets, BidirectionalSmallExactLargeLogarithmic) {
  const T5BucketParams p{true, 32, 128};
  EXPECT_EQ(T5RelativeBucket(0, p), 0);
  EXPECT_EQ(T5RelativeBucket(-1, p), 1);
  EXPECT_EQ(T5RelativeBucket(1, p), 17);
  EXPECT_EQ(T5RelativeBucket(-7, p), 7);
  EXPECT_EQ(T5RelativeBucket(-8, p), 8);  // first logarithmic bucket: max_exact = 8
  EXPECT_EQ(T5RelativeBucket(8, p), 24);
  EXPECT_EQ(T5RelativeBucket(-127, p), 15);
  EXPECT_EQ(T5RelativeBucket(-1000000, p), 15);
  EXPECT_EQ(T5RelativeBucket(1000000, p), 31);
}

// Issue 15: the extreme relative positions land in the last bucket of their side (before the fix,
// -2^63 came back as bucket -2^63, a negative table index; -(-2^63) is undefined behaviour).
TEST(T5Buckets, ExtremeRelativePositionsLandInTheLastBucket) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  const T5BucketParams bi{true, 32, 128}, causal{false, 32, 128};
  EXPECT_EQ(T5RelativeBucket(kMin, bi), 15);
  EXPECT_EQ(T5RelativeBucket(kMin + 1, bi), 15);
  EXPECT_EQ(T5RelativeBucket(kMax, bi), 31);
  EXPECT_EQ(T5RelativeBucket(kMin, causal), 31);
  EXPECT_EQ(T5RelativeBucket(kMax, causal), 0);
  Result<std::vector<int64_t>> all = T5RelativeBuckets(std::vector<int64_t>{kMin, -1, 0, kMax}, bi);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, (std::vector<int64_t>{15, 1, 0, 31}));
}

TEST(T5Buckets, CausalKeepsOnlyThePast) {
  const T5BucketParams p{false, 32, 128};
  EXPECT_EQ(T5RelativeBucket(5, p), 0);  // the future shares bucket 0
  EXPECT_EQ(T5RelativeBucket(0, p), 0);
  EXPECT_EQ(T5RelativeBucket(-1, p), 1);
  EXPECT_EQ(T5RelativeBucket(-15, p), 15);
  EXPECT_EQ(T5RelativeBucket(-16, p), 16);
  EXPECT_EQ(T5RelativeBucket(-100000, p), 31);
}

TEST(T5Buckets, BoundaryWhereTheLogTermIsExactlyAnInteger) {
  // 64 buckets, max distance 256: per side 32, max_exact 16, and at distance 64 the log term is
  // log(4) / log(16) * 16 = 8 exactly; T5's float32 evaluation gives 8, not 7.
  const T5BucketParams p{true, 64, 256};
  EXPECT_EQ(T5RelativeBucket(-64, p), 24);
  EXPECT_EQ(T5RelativeBucket(64, p), 56);
  EXPECT_EQ(T5RelativeBucket(-63, p), 23);
  EXPECT_EQ(T5RelativeBucket(-256, p), 31);
}

TEST(T5Buckets, MonotoneInDistanceOverRandomParameters) {
  auto rng = testing::MakeRng(2024);
  for (int trial = 0; trial < 40; ++trial) {
    const bool bidi = trial % 2 == 0;
    const int64_t buckets = 2 * (2 + static_cast<int64_t>(rng() % 40));
    const int64_t per_side = bidi ? buckets / 2 : buckets;
    const int64_t max_distance = per_side / 2 + 1 + static_cast<int64_t>(rng() % 500);
    const T5BucketParams p{bidi, buckets, max_distance};
    SCOPED_TRACE(::testing::Message() << "seed 2024 trial " << trial << " bidirectional " << bidi << " buckets "
                                      << buckets << " max_distance " << max_distance);
    ASSERT_TRUE(p.Validate().ok()) << p.Validate().ToString();
    int64_t prev = -1;
    for (int64_t n = 0; n < 3 * max_distance; ++n) {
      const int64_t b = T5RelativeBucket(-n, p);
      EXPECT_GE(b, prev);
      EXPECT_LT(b, per_side);
      prev = b;
      if (bidi && n > 0) { EXPECT_EQ(T5RelativeBucket(n, p), b + per_side); }
    }
    EXPECT_EQ(prev, per_side - 1);  // far distances land in the last bucket
  }
}

TEST(T5Buckets, RejectsBadParameters) {
  struct Bad {
    T5BucketParams p;
    const char* needle;
  };
  for (const Bad& bad : {Bad{{true, 31, 128}, "num_buckets 31"}, Bad{{true, 2, 128}, "num_buckets 2"},
                         Bad{{false, 1, 128}, "num_buckets 1"}, Bad{{true, 32, 8}, "max_distance 8"},
                         Bad{{false, 32, 16}, "max_distance 16"}}) {
    Status s = bad.p.Validate();
    ASSERT_FALSE(s.ok()) << bad.needle;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(bad.needle), std::string::npos) << s.message();
    const int64_t rel = 3;
    EXPECT_FALSE(T5RelativeBuckets(std::span<const int64_t>(&rel, 1), bad.p).ok());
  }
  EXPECT_TRUE((T5BucketParams{false, 33, 128}.Validate().ok()));  // causal may use an odd count
}

TEST(T5Bias, LooksUpTableByBucketAndHead) {
  Result<T5RelativeBias> b = RandomT5Bias({false, 8, 20}, 3, 7);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(b->Validate().ok());
  const float* t = b->table.data<float>();
  EXPECT_EQ(b->BiasAt(2, 10, 7), t[T5RelativeBucket(-3, b->params) * 3 + 2]);
  EXPECT_EQ(b->BiasAt(1, 0, 5), t[0 * 3 + 1]);
  b->table = Array::Zeros(DType::kF32, {7, 3}).value();
  Status s = b->Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("[7, 3]"), std::string::npos) << s.message();
}

TEST(ShawEmbeddings, IndexClipsRelativeDistance) {
  Result<ShawRelativeEmbeddings> e = RandomShawEmbeddings(2, 4, 1);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE(e->Validate().ok());
  EXPECT_EQ(e->key_table.shape(), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(e->Index(10, 10), 2);
  EXPECT_EQ(e->Index(10, 11), 3);
  EXPECT_EQ(e->Index(10, 9), 1);
  EXPECT_EQ(e->Index(10, 100), 4);
  EXPECT_EQ(e->Index(10, 0), 0);
  e->value_table = Array::Zeros(DType::kF32, {5, 3}).value();
  Status s = e->Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("head_dim"), std::string::npos) << s.message();
  Result<ShawRelativeEmbeddings> neg = RandomShawEmbeddings(-1, 4, 1);
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("max_relative_position -1"), std::string::npos);
}

TEST(ShawEmbeddings, RandomTablesAreDeterministic) {
  Result<ShawRelativeEmbeddings> a = RandomShawEmbeddings(3, 8, 42);
  Result<ShawRelativeEmbeddings> b = RandomShawEmbeddings(3, 8, 42);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t i = 0; i < a->key_table.size(); ++i) {
    EXPECT_EQ(a->key_table.data<float>()[i], b->key_table.data<float>()[i]);
    EXPECT_NE(a->key_table.data<float>()[i], a->value_table.data<float>()[i]);
  }
}

}  // namespace
}  // namespace posenc
