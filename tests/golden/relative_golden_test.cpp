// ALiBi slopes/biases and T5 buckets against Hugging Face's outputs: every alibi and t5_bucket case
// under shared/golden, read and compared through the golden library (tools/golden), as `posenc golden`
// does, but computed here through the library's API directly.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/math/relative.hpp"
#include "golden_case_fixture.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

class AlibiGolden : public testing::GoldenCaseTest<"alibi"> {};

TEST_P(AlibiGolden, SlopesAndBiasMatch) {
  const golden::GoldenCase& gc = Case();
  const nlohmann::json& c = gc.j();
  AlibiVariant variant;
  ASSERT_TRUE(ParseAlibiVariant(c.at("variant").get<std::string>(), &variant));
  double bias_max = 8.0;
  if (c.at("config").contains("attn_config")) bias_max = c["config"]["attn_config"].value("alibi_bias_max", 8.0);
  Result<std::vector<double>> slopes = AlibiSlopes(c.at("num_heads").get<int64_t>(), variant, bias_max);
  ASSERT_TRUE(slopes.ok()) << slopes.status().ToString();
  Result<Array> want_slopes = gc.Read("slopes");
  ASSERT_TRUE(want_slopes.ok()) << want_slopes.status().ToString();
  EXPECT_TRUE(testing::GoldenClose("slopes", *slopes, *want_slopes, gc.Tol("slopes")));

  Result<Array> bias = AlibiBias(*slopes, c.at("query_length").get<int64_t>(), c.at("key_length").get<int64_t>());
  ASSERT_TRUE(bias.ok()) << bias.status().ToString();
  Result<Array> want = gc.Read("bias");
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ(bias->shape(), want->shape());
  EXPECT_TRUE(testing::GoldenClose("bias", golden::ToDoubles(*bias), *want, gc.Tol("bias")));
}

INSTANTIATE_TEST_SUITE_P(Hf, AlibiGolden, ::testing::ValuesIn(testing::GoldenCaseDirs({"alibi"})),
                         testing::GoldenCaseName);

class T5Golden : public testing::GoldenCaseTest<"t5_bucket"> {};

TEST_P(T5Golden, BucketsMatchExactly) {
  const golden::GoldenCase& gc = Case();
  const nlohmann::json& c = gc.j();
  T5BucketParams p{c.at("bidirectional").get<bool>(), c.at("num_buckets").get<int64_t>(),
                   c.at("max_distance").get<int64_t>()};
  Result<std::vector<int64_t>> rel = gc.ReadInts("relative_positions");
  ASSERT_TRUE(rel.ok()) << rel.status().ToString();
  Result<Array> want = gc.Read("buckets");
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  Result<std::vector<int64_t>> got = T5RelativeBuckets(*rel, p);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Status s = golden::CompareInts("buckets", *got, *want);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Hf, T5Golden, ::testing::ValuesIn(testing::GoldenCaseDirs({"t5_bucket"})),
                         testing::GoldenCaseName);

}  // namespace
}  // namespace posenc
