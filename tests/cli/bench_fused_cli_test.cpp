// `posenc bench` rows of the fused RoPE + KV-cache kernels (issue 17): the fields they carry and their
// relations (bytes_all = input + q out + cache rows + cos/sin rows; fraction_all; speedup_vs_unfused;
// fraction_of_pattern = the bare access pattern's time / the kernel's),
// the warm-up and retry counts, and bytes_all on the 1-D RoPE rows. Timings are printed, never asserted.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "json_lines.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using namespace ::posenc::testing;  // NOLINT
using nlohmann::json;

TEST(BenchFusedCli, FusedDecodeRowsCountEveryByte) {
  std::string out;
  const int rc =
      RunCommand(CliPath() +
                     " bench --json --filter 'fused_decode/bfloat16/half/cache_(q8_0|float16)' --threads 1,2 "
                     "--cache warm --reps 1",
                 &out);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<json> rows = JsonLines(out);
  ASSERT_EQ(rows.size(), 4u) << out;
  for (const json& r : rows) {
    SCOPED_TRACE(r.dump());
    for (const char* key : {"bytes_all", "fraction_all", "fused", "cache_type", "unfused_median_ms",
                            "speedup_vs_unfused", "fraction", "roofline_gbps", "pattern_median_ms",
                            "fraction_of_pattern"})
      ASSERT_TRUE(r.contains(key)) << key;
    EXPECT_EQ(r["fused"], true);
    EXPECT_EQ(r["op"], "fused_decode");
    const std::string type = r["cache_type"];
    ASSERT_TRUE(type == "q8_0" || type == "float16") << type;
    // 64 tokens: read (32 + 16) x 128 bfloat16, write 32 x 128 bfloat16 of q and two cache rows of
    // 8 x 128 (float16: 2 bytes each; q8_0: 32 blocks of 34 bytes); cos/sin: 64 pairs x 2 x 4 bytes.
    const double row = type == "q8_0" ? 32 * 34 : 1024 * 2;
    const double bytes = 64 * (48 * 128 * 2 + 32 * 128 * 2 + 2 * row);
    EXPECT_DOUBLE_EQ(r["bytes"].get<double>(), bytes);
    EXPECT_DOUBLE_EQ(r["bytes_all"].get<double>(), bytes + 64 * 64 * 8);
    const double ms = r["median_ms"], roof = r["roofline_gbps"], fa = r["fraction_all"];
    const double expect_fa = r["bytes_all"].get<double>() / (ms * 1e-3) / 1e9 / roof;
    EXPECT_NEAR(fa, expect_fa, expect_fa * (0.5e-4 / ms + 0.5e-3 / roof + 1e-3) + 2e-3);
    const double mu = r["unfused_median_ms"], su = r["speedup_vs_unfused"];
    EXPECT_GT(mu, 0.0);
    EXPECT_NEAR(su, mu / ms, su * (0.5e-4 / ms + 0.5e-4 / mu + 1e-3) + 2e-3);
    const double mp = r["pattern_median_ms"], fp = r["fraction_of_pattern"];
    EXPECT_GT(mp, 0.0);
    EXPECT_NEAR(fp, mp / ms, fp * (0.5e-4 / ms + 0.5e-4 / mp + 1e-3) + 2e-3);
    // Warm-up until steady (at least 3 rounds); the row taken again, on fresh buffers, only while it is
    // unsteady, at most 3 attempts: fewer than 3 means the last one was steady. A steady row's
    // reference passes are at most 2x slower than the kernel: fraction_all <= 2, fraction_of_pattern <= 2.
    ASSERT_TRUE(r.contains("warmup_rounds") && r.contains("attempts") && r.contains("steady"));
    EXPECT_GE(r["warmup_rounds"].get<int>(), 3);
    const int attempts = r["attempts"];
    EXPECT_GE(attempts, 1);
    EXPECT_LE(attempts, 3);
    ASSERT_TRUE(r["steady"].is_boolean());
    if (attempts < 3) {
      EXPECT_EQ(r["steady"], true);
    }
    if (r["steady"] == true) {
      EXPECT_LE(fa, 2.0 + 2e-3);
      EXPECT_LE(fp, 2.0 + 2e-3);
    }
  }
}

TEST(BenchFusedCli, RopeRowsCarryBytesAllWithTheCosSinRows) {
  std::string out;
  ASSERT_EQ(
      RunCommand(CliPath() + " bench --json --filter '^rope_decode/float16/half' --threads 1 --cache warm --reps 1",
                 &out),
      0)
      << out;
  const std::vector<json> rows = JsonLines(out);
  ASSERT_EQ(rows.size(), 1u) << out;
  const json& r = rows[0];
  EXPECT_FALSE(r.contains("fused"));
  EXPECT_FALSE(r.contains("fraction_of_pattern"));
  EXPECT_DOUBLE_EQ(r["bytes_all"].get<double>(), r["bytes"].get<double>() + 64 * 64 * 8);
  EXPECT_LT(r["fraction"].get<double>(), r["fraction_all"].get<double>() + 1e-3);
}

TEST(BenchFusedCli, ListsEveryDtypeAndCacheType) {
  std::string out;
  ASSERT_EQ(RunCommand(CliPath() + " bench --list", &out), 0) << out;
  for (const char* op : {"fused_prefill", "fused_decode"})
    for (const char* dt : {"float32", "bfloat16", "float16"})
      for (const char* ct : {"float32", "float16", "bfloat16", "q8_0"})
        EXPECT_NE(out.find(std::string(op) + "/" + dt + "/half/cache_" + ct + "\n"), std::string::npos)
            << op << dt << ct;
}

}  // namespace
}  // namespace posenc

// The QK-norm and MLA rows (issue 34): they run, are compared with posenc's unfused calls, and count
// their bytes as bench_cases.hpp states.
namespace posenc {
namespace {
TEST(BenchFusedCli, QkNormAndMlaDecodeRowsCountTheirBytes) {
  std::string out;
  const int rc = testing::RunCommand(testing::CliPath() +
                                         " bench --json --filter '^(qknorm_decode/bfloat16/half/cache_bfloat16|"
                                         "mla_decode/bfloat16/interleaved/cache_q8_0)' --threads 1 --cache warm --reps 1",
                                     &out);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<nlohmann::json> rows = testing::JsonLines(out);
  ASSERT_EQ(rows.size(), 2u) << out;
  for (const nlohmann::json& r : rows) {
    SCOPED_TRACE(r.dump());
    ASSERT_TRUE(r.contains("unfused_median_ms") && r.contains("speedup_vs_unfused"));
    EXPECT_GT(r["unfused_median_ms"].get<double>(), 0.0);
    if (r["op"] == "qknorm_decode") {
      // As fused_decode: 64 tokens of (32 + 16) x 128 in, 32 x 128 q out, two bfloat16 cache rows of 8 x 128.
      EXPECT_DOUBLE_EQ(r["bytes"].get<double>(), 64.0 * (48 * 128 * 2 + 32 * 128 * 2 + 2 * 1024 * 2));
      EXPECT_TRUE(r.contains("pattern_median_ms"));
    } else {
      ASSERT_EQ(r["op"], "mla_decode");
      // 64 tokens: 576 bfloat16 in, a q8_0 row of 18 blocks of 34 bytes, 128 heads' 64-dim rope windows
      // read and written; cos/sin of 32 pairs.
      const double bytes = 64.0 * (576 * 2 + 18 * 34 + 2 * 128 * 64 * 2);
      EXPECT_DOUBLE_EQ(r["bytes"].get<double>(), bytes);
      EXPECT_DOUBLE_EQ(r["bytes_all"].get<double>(), bytes + 64.0 * 32 * 8);
    }
  }
}
}  // namespace
}  // namespace posenc
