// `posenc bench` through the CLI: the JSON each row prints (the fields issue 4 names, and the
// relations between them), its case list, and its errors. Timings are printed, never asserted.
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "json_lines.hpp"
#include "posenc/kernels/simd.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using namespace ::posenc::testing;  // NOLINT
using nlohmann::json;

// `posenc info --json`: the target lists nest (chosen in available in compiled), and the store-prefetch
// policy follows POSENC_PREFETCH_STORES (by default the gather prefetches; RoPE depends on the CPU).
TEST(InfoCli, TargetsNestAndStorePrefetchFollowsTheEnvironment) {
  const auto info = [](const std::string& env) {
    std::string out;
    EXPECT_EQ(RunCommand(env + CliPath() + " info --json", &out), 0) << out;
    const std::vector<json> rows = JsonLines(out);
    EXPECT_EQ(rows.size(), 1u) << out;
    return rows.empty() ? json() : rows[0];
  };
  // The defaults, whatever the caller set.
  const json d = info("env -u POSENC_PREFETCH_STORES -u POSENC_QKNORM_F32_REGS -u POSENC_STREAM_STORES ");
  ASSERT_TRUE(d.contains("chosen") && d.contains("available") && d.contains("compiled")) << d.dump();
  const auto available = d["available"].get<std::vector<std::string>>();
  const auto compiled = d["compiled"].get<std::vector<std::string>>();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(d["chosen"], available.front());
  for (const auto& t : available) EXPECT_NE(std::find(compiled.begin(), compiled.end(), t), compiled.end()) << t;
  EXPECT_GE(d["threads"].get<int>(), 1);
  EXPECT_EQ(d["prefetch_stores"]["gather_rows"], true);
  ASSERT_TRUE(d.contains("native_f16") && d["native_f16"].is_boolean()) << d.dump();
  EXPECT_EQ(d["native_f16"].get<bool>(), NativeF16Arithmetic());  // this process reads the same CPU
  ASSERT_TRUE(d.contains("qknorm_f32_regs") && d["qknorm_f32_regs"].is_boolean()) << d.dump();
  for (const char* v : {"0", "1"})
    EXPECT_EQ(info(std::string("POSENC_QKNORM_F32_REGS=") + v + " ")["qknorm_f32_regs"], v[0] == '1');
  EXPECT_EQ(d["stream_store_min_bytes"], 16 << 20) << d.dump();
  EXPECT_EQ(info("POSENC_STREAM_STORES=1 ")["stream_store_min_bytes"], 0);
  EXPECT_TRUE(info("POSENC_STREAM_STORES=0 ")["stream_store_min_bytes"].is_null());
  for (const char* v : {"0", "1"}) {
    const json f = info(std::string("POSENC_PREFETCH_STORES=") + v + " ");
    const bool on = v[0] == '1';
    EXPECT_EQ(f["prefetch_stores"]["gather_rows"], on) << f.dump();
    EXPECT_EQ(f["prefetch_stores"]["rope_out_of_place"], on) << f.dump();
  }
}

// The smallest case (a decode step, 1 MiB), both cache modes and thread counts, one repetition.
TEST(BenchCli, JsonRowsCarryTheFieldsAndTheirRelations) {
  std::string out;
  const int rc = RunCommand(
      CliPath() + " bench --json --filter '^rope_decode/float32/half' --threads 1,2 --cache both --reps 1", &out);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<json> rows = JsonLines(out);
  ASSERT_EQ(rows.size(), 4u) << out;
  std::set<std::pair<std::string, int>> seen;
  for (const json& r : rows) {
    SCOPED_TRACE(r.dump());
    for (const char* key :
         {"op", "shape", "dtype", "layout", "threads", "inplace", "cache", "simd", "median_ms", "gbps", "roofline",
          "roofline_median_ms", "roofline_gbps", "fraction", "core_gbps", "attainable", "bytes", "reps"})
      ASSERT_TRUE(r.contains(key)) << key;
    EXPECT_EQ(r["op"], "rope_decode");
    EXPECT_EQ(r["dtype"], "float32");
    EXPECT_EQ(r["layout"], "half");
    EXPECT_EQ(r["inplace"], true);
    EXPECT_EQ(r["roofline"], "rmw");
    EXPECT_EQ(r["reps"], 1);
    // 64 tokens x 32 heads x 128 float32, read and written.
    EXPECT_DOUBLE_EQ(r["bytes"].get<double>(), 2.0 * 64 * 32 * 128 * 4);
    const double ms = r["median_ms"], gbps = r["gbps"], roof = r["roofline_gbps"], fraction = r["fraction"];
    const double core = r["core_gbps"], attainable = r["attainable"];
    ASSERT_GT(ms, 0.0);
    ASSERT_GT(gbps, 0.0);
    ASSERT_GT(roof, 0.0);
    ASSERT_GT(core, 0.0);
    // gbps = bytes / time and fraction = gbps / roofline, up to the printed digits (median_ms has 4
    // decimals: a relative rounding of up to 0.5e-4 / ms).
    EXPECT_NEAR(gbps, r["bytes"].get<double>() / (ms * 1e-3) / 1e9, gbps * (0.5e-4 / ms + 1e-3) + 2e-3);
    // gbps and roofline_gbps have 3 decimals: each adds a relative rounding of up to 0.5e-3 / value (a
    // roofline pass slowed to 0.065 GB/s on a loaded host makes that 0.8%).
    EXPECT_NEAR(fraction, gbps / roof, fraction * (0.5e-3 / gbps + 0.5e-3 / roof + 1e-3) + 2e-3);
    const int threads = r["threads"];
    EXPECT_NEAR(attainable, std::min(1.0, threads * core / roof),
                attainable * (0.5e-3 / core + 0.5e-3 / roof + 1e-3) + 2e-3);
    EXPECT_LE(attainable, 1.0);
    // A cold row says how much it read before each timed run: by default twice the largest cache the
    // machine reports, within [256 MiB, 4 GiB].
    if (r["cache"] == "cold") {
      long largest = 0;
      for (int name : {_SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL4_CACHE_SIZE})
        largest = std::max(largest, sysconf(name));
      EXPECT_EQ(r["evict_mib"].get<long>(), std::clamp(2 * largest, 256L << 20, 4L << 30) >> 20);
    } else {
      EXPECT_FALSE(r.contains("evict_mib"));
    }
    seen.insert({r["cache"].get<std::string>(), threads});
  }
  EXPECT_EQ(seen, (std::set<std::pair<std::string, int>>{{"warm", 1}, {"warm", 2}, {"cold", 1}, {"cold", 2}}));
}

// --evict-mib sets the cold pass's size, and the rows report it.
TEST(BenchCli, EvictMibSetsTheColdPass) {
  std::string out;
  ASSERT_EQ(RunCommand(CliPath() + " bench --json --filter '^rope_decode/float32/half' --threads 1 --cache cold "
                                   "--reps 1 --evict-mib 300",
                       &out),
            0)
      << out;
  const std::vector<json> rows = JsonLines(out);
  ASSERT_EQ(rows.size(), 1u) << out;
  EXPECT_EQ(rows[0]["evict_mib"], 300) << out;
}

// A multi-axis decode row: the per-token table's cos/sin rows are counted in bytes_all, as for 1-D rows.
TEST(BenchCli, MultiAxisDecodeRowCountsItsCosSinRows) {
  std::string out;
  ASSERT_EQ(
      RunCommand(CliPath() + " bench --json --filter '^mrope_decode/float32' --threads 1 --cache warm --reps 1", &out),
      0)
      << out;
  const std::vector<json> rows = JsonLines(out);
  ASSERT_EQ(rows.size(), 1u) << out;
  const json& r = rows[0];
  EXPECT_EQ(r["op"], "mrope_decode");
  const double tensor = 64.0 * 28 * 128 * 4;
  EXPECT_DOUBLE_EQ(r["bytes"].get<double>(), 2 * tensor) << r.dump();
  EXPECT_DOUBLE_EQ(r["bytes_all"].get<double>(), 2 * tensor + 64.0 * 64 * 8) << r.dump();
  EXPECT_GT(r["fraction_all"].get<double>(), 0.0) << r.dump();
}

TEST(BenchCli, ListsEveryCaseOfTheIssue) {
  std::string out;
  ASSERT_EQ(RunCommand(CliPath() + " bench --list", &out), 0) << out;
  for (const char* dtype : {"float32", "bfloat16", "float16"}) {
    for (const char* layout : {"half", "interleaved"}) {
      for (const char* op : {"rope_prefill_q", "rope_prefill_k", "rope_prefill_qk", "rope_decode"})
        EXPECT_NE(out.find(std::string(op) + "/" + dtype + "/" + layout + "\n"), std::string::npos)
            << op << dtype << layout;
      EXPECT_NE(out.find(std::string("rope_prefill_q_oop/") + dtype + "/" + layout + "/oop"), std::string::npos);
    }
    EXPECT_NE(out.find(std::string("gather/") + dtype + "/rows/oop"), std::string::npos) << dtype;
    // Multi-axis (issue 18): Qwen2.5-VL chunked and Qwen3-VL interleaved prefill, decode, and the call
    // that builds its per-token table.
    for (const char* op : {"mrope_prefill_q", "imrope_prefill_q", "mrope_decode", "mrope_prefill_q_build"})
      EXPECT_NE(out.find(std::string(op) + "/" + dtype + "/half\n"), std::string::npos) << op << dtype;
  }
  EXPECT_NE(out.find("gather_bf16out/bfloat16/rows/oop"), std::string::npos);
  EXPECT_NE(out.find("rope_table_build"), std::string::npos);
  // Issue 34: fused QK-norm (Qwen3-8B) and the MLA cache row (DeepSeek-V3).
  for (const char* op : {"qknorm_prefill", "qknorm_decode"})
    for (const char* cache : {"bfloat16", "float16", "q8_0", "float32"})
      EXPECT_NE(out.find(std::string(op) + "/bfloat16/half/cache_" + cache + "\n"), std::string::npos) << op << cache;
  for (const char* op : {"mla_prefill", "mla_decode"})
    for (const char* cache : {"bfloat16", "q8_0"})
      EXPECT_NE(out.find(std::string(op) + "/bfloat16/interleaved/cache_" + cache + "\n"), std::string::npos) << op;
}

TEST(BenchCli, BadOptionsNameWhatIsWrong) {
  std::string out;
  EXPECT_EQ(RunCommand(CliPath() + " bench --cache lukewarm --filter rope_decode", &out), 2) << out;
  EXPECT_NE(out.find("--cache 'lukewarm'"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(CliPath() + " bench --threads 1,zero --filter rope_decode", &out), 2) << out;
  EXPECT_NE(out.find("'zero'"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(CliPath() + " bench --threads 0 --filter rope_decode", &out), 2) << out;
  EXPECT_NE(out.find("'0'"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(CliPath() + " bench --evict-mib 9000 --filter rope_decode", &out), 2) << out;
  EXPECT_NE(out.find("--evict-mib: '9000'"), std::string::npos) << out;
  // A filter that selects nothing is an error, not an empty table.
  EXPECT_EQ(RunCommand(CliPath() + " bench --filter no_such_case", &out), 2) << out;
  EXPECT_NE(out.find("--filter 'no_such_case' matches no case"), std::string::npos) << out;
}

}  // namespace
}  // namespace posenc
