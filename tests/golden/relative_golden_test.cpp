// ALiBi slopes/biases and T5 buckets against Hugging Face's outputs in shared/golden/hf.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/io/npy.hpp"
#include "posenc/math/relative.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

nlohmann::json ReadCase(const std::string& dir) {
  std::ifstream in(dir + "/case.json");
  return nlohmann::json::parse(in);
}

Array MustRead(const std::string& path) {
  Result<Array> a = ReadNpy(path);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : Array();
}

// |got - want| <= atol + rtol * |want| elementwise; prints the first mismatches.
void ExpectClose(const std::vector<double>& got, const Array& want_arr, const nlohmann::json& tol, const std::string& what) {
  ASSERT_EQ(want_arr.dtype(), DType::kF32) << what;
  std::span<const float> want = want_arr.span<float>();
  ASSERT_EQ(got.size(), want.size()) << what;
  const double atol = tol.at("atol").get<double>();
  const double rtol = tol.at("rtol").get<double>();
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i];
    if (std::fabs(got[i] - w) > atol + rtol * std::fabs(w)) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << w << " (atol " << atol << ", rtol " << rtol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements outside tolerance";
}

class AlibiGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(AlibiGolden, SlopesAndBiasMatch) {
  POSENC_REQUIRE_DATA(dir, "golden/hf/" + GetParam());
  const nlohmann::json c = ReadCase(dir);
  AlibiVariant variant;
  ASSERT_TRUE(ParseAlibiVariant(c.at("variant").get<std::string>(), &variant));
  double bias_max = 8.0;
  if (c.at("config").contains("attn_config")) bias_max = c["config"]["attn_config"].value("alibi_bias_max", 8.0);
  Result<std::vector<double>> slopes = AlibiSlopes(c.at("num_heads").get<int64_t>(), variant, bias_max);
  ASSERT_TRUE(slopes.ok()) << slopes.status().ToString();
  ExpectClose(*slopes, MustRead(dir + "/" + c["files"]["slopes"].get<std::string>()), c["tolerance"]["slopes"], "slopes");

  Result<Array> bias = AlibiBias(*slopes, c.at("query_length").get<int64_t>(), c.at("key_length").get<int64_t>());
  ASSERT_TRUE(bias.ok()) << bias.status().ToString();
  const Array want = MustRead(dir + "/" + c["files"]["bias"].get<std::string>());
  ASSERT_EQ(bias->shape(), want.shape());
  std::vector<double> got(bias->span<float>().begin(), bias->span<float>().end());
  ExpectClose(got, want, c["tolerance"]["bias"], "bias");
}

INSTANTIATE_TEST_SUITE_P(Hf, AlibiGolden,
                         ::testing::Values("alibi_bloom_h112", "alibi_bloom_h12", "alibi_bloom_h16", "alibi_mpt_h16",
                                           "alibi_mpt_h24"));

class T5Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(T5Golden, BucketsMatchExactly) {
  POSENC_REQUIRE_DATA(dir, "golden/hf/" + GetParam());
  const nlohmann::json c = ReadCase(dir);
  T5BucketParams p{c.at("bidirectional").get<bool>(), c.at("num_buckets").get<int64_t>(), c.at("max_distance").get<int64_t>()};
  const Array rel = MustRead(dir + "/" + c["files"]["relative_positions"].get<std::string>());
  const Array want = MustRead(dir + "/" + c["files"]["buckets"].get<std::string>());
  ASSERT_EQ(rel.dtype(), DType::kI64);
  ASSERT_EQ(want.dtype(), DType::kI64);
  Result<std::vector<int64_t>> got = T5RelativeBuckets(rel.span<int64_t>(), p);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), static_cast<size_t>(want.size()));
  int bad = 0;
  for (size_t i = 0; i < got->size(); ++i) {
    if ((*got)[i] != want.span<int64_t>()[i] && ++bad <= 5)
      ADD_FAILURE() << "relative position " << rel.span<int64_t>()[i] << ": bucket " << (*got)[i] << ", want "
                    << want.span<int64_t>()[i];
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Hf, T5Golden, ::testing::Values("t5_bucket_bidir_32_128", "t5_bucket_unidir_32_128"));

}  // namespace
}  // namespace posenc
