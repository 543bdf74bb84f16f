// Multi-axis RoPE applied: the fast path (per-token RopeTable through the SIMD kernels) against the
// scalar reference, equal components as 1-D RoPE, queries and keys, and the CLI's component rows. The
// section rules, errors and config readers: multi_axis_rules_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/config/multi_axis_config.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_table.hpp"
#include "multi_axis_test_rules.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using testing::Ggml;
using testing::Hf;

// ---------- applying: fast path vs reference ----------

double Ulp32(double m) {
  if (m < 1e-30) return std::ldexp(1.0, -149);
  return std::ldexp(1.0, std::ilogb(m) - 23);
}
double UlpStorage(double m, DType d) {
  const int mant = d == DType::kF16 ? 10 : d == DType::kBF16 ? 7 : 23;
  const int min_exp = d == DType::kF16 ? -14 : -126;
  return std::ldexp(1.0, std::max(m < 1e-30 ? min_exp : std::ilogb(m), min_exp) - mant);
}

std::vector<double> Values(const Array& a) {
  Array d = a.AsType(DType::kF64).value();
  return {d.span<double>().begin(), d.span<double>().end()};
}

struct ApplyCase {
  int64_t head_dim, rotary_dim, rotary_start;
  RopePairing pairing;
  MultiAxisRope m;
};

std::string Name(const ApplyCase& c, int64_t tokens, DType d, RopePrecision p) {
  return fmt::format("D={} R={} s={} {} {} sections {} T={} {} {}", c.head_dim, c.rotary_dim, c.rotary_start,
                     ToString(c.pairing), ToString(c.m.layout), c.m.sections.size(), tokens, ToString(d), ToString(p));
}

TEST(MultiAxisApply, FastMatchesReference) {
  const std::vector<ApplyCase> cases = {
      {128, 128, 0, RopePairing::kHalf, Hf(SectionLayout::kChunked, {16, 24, 24}, 3)},
      {128, 128, 0, RopePairing::kInterleaved, Hf(SectionLayout::kInterleaved, {24, 20, 20}, 3)},
      {128, 64, 0, RopePairing::kHalf, Ggml(SectionLayout::kChunked, {8, 12, 12, 0})},
      {128, 64, 32, RopePairing::kInterleaved, Ggml(SectionLayout::kInterleaved, {11, 11, 10, 0})},
      {80, 80, 0, RopePairing::kHalf, Ggml(SectionLayout::kChunkedRestart, {20, 20, 20, 20})},
      {80, 80, 0, RopePairing::kInterleaved, Hf(SectionLayout::kChunkedStrided, {20, 20}, 2)},
      {80, 40, 40, RopePairing::kHalf, Hf(SectionLayout::kChunked, {7, 6, 7}, 3)},
  };
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int checked = 0;
  for (const ApplyCase& ac : cases) {
    const RotaryLayout layout{ac.pairing, ac.head_dim, ac.rotary_start, ac.rotary_dim};
    const int64_t pairs = layout.num_pairs();
    const std::vector<int64_t> comp = PairComponents(ac.m, pairs, "test").value();
    RopeFrequencies freqs = DefaultRopeFrequencies(ac.rotary_dim, 1e6).value();
    freqs.attention_scaling = 1.25;
    for (int64_t tokens : {int64_t{0}, int64_t{1}, int64_t{17}}) {
      const int64_t heads = 3;
      std::vector<int64_t> positions(static_cast<size_t>(ac.m.num_components * tokens));
      for (auto& p : positions) p = static_cast<int64_t>(rng() % 70000);
      Array x32 = Array::Zeros(DType::kF32, {tokens, heads, ac.head_dim}).value();
      for (float& v : x32.span<float>()) v = normal(rng);
      for (DType storage : {DType::kF32, DType::kF16, DType::kBF16}) {
        for (RopePrecision precision : {RopePrecision::kReference, RopePrecision::kExact}) {
          SCOPED_TRACE(Name(ac, tokens, storage, precision));
          const MultiAxisRopeArgs args{layout, &freqs, comp, ac.m.num_components, positions, precision};
          Array in = x32.AsType(storage).value();
          Array fast = in, ref = in, inplace = in;
          ASSERT_TRUE(
              ApplyMultiAxisRope(args, HeadsView::Of(in, "in").value(), HeadsView::Of(fast, "fast").value()).ok());
          ASSERT_TRUE(
              ApplyMultiAxisRopeReference(args, HeadsView::Of(in, "in").value(), HeadsView::Of(ref, "ref").value())
                  .ok());
          ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(inplace, "x").value()).ok());
          const std::vector<double> xin = Values(in), f = Values(fast), r = Values(ref), ip = Values(inplace);
          ASSERT_EQ(f, ip) << "in place differs from out of place";
          int bad = 0;
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t h = 0; h < heads; ++h) {
              const size_t row = static_cast<size_t>((t * heads + h) * ac.head_dim);
              std::vector<bool> rotated(static_cast<size_t>(ac.head_dim), false);
              for (int64_t i = 0; i < pairs; ++i) {
                const size_t a = row + static_cast<size_t>(layout.first(i)),
                             b = row + static_cast<size_t>(layout.second(i));
                rotated[static_cast<size_t>(layout.first(i))] = rotated[static_cast<size_t>(layout.second(i))] = true;
                const double m = 2 * 1.25 * std::max(std::fabs(xin[a]), std::fabs(xin[b]));
                for (size_t k : {a, b}) {
                  const double allowed =
                      2 * Ulp32(m) + (storage == DType::kF32 ? 0.0 : UlpStorage(std::fabs(r[k]), storage));
                  if (!(std::fabs(f[k] - r[k]) <= allowed) && ++bad <= 5)
                    ADD_FAILURE() << fmt::format("token {} head {} pair {}: fast {} ref {}", t, h, i, f[k], r[k]);
                }
              }
              for (int64_t d = 0; d < ac.head_dim; ++d)
                if (!rotated[static_cast<size_t>(d)]) {
                  ASSERT_EQ(f[row + static_cast<size_t>(d)], xin[row + static_cast<size_t>(d)])
                      << "pass-through dim " << d;
                  ASSERT_EQ(r[row + static_cast<size_t>(d)], xin[row + static_cast<size_t>(d)])
                      << "pass-through dim " << d;
                }
            }
          EXPECT_EQ(bad, 0);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 7 * 3 * 3 * 2);
}

// The one rotary formula in float64 (float64 angles and cos/sin, no float32 step): kExact results are
// within the documented 2e-6 max|x| bound of it (times the scaling).
TEST(MultiAxisApply, ExactWithinBoundOfFloat64Formula) {
  const RotaryLayout layout{RopePairing::kHalf, 128, 0, 128};
  const MultiAxisRope m = Ggml(SectionLayout::kInterleaved, {24, 20, 20, 0});
  const std::vector<int64_t> comp = PairComponents(m, 64, "test").value();
  const RopeFrequencies freqs = DefaultRopeFrequencies(128, 5e6).value();
  const int64_t tokens = 33, heads = 2;
  std::mt19937_64 rng(99);
  std::vector<int64_t> positions(static_cast<size_t>(4 * tokens));
  for (auto& p : positions) p = static_cast<int64_t>(rng() % (int64_t{1} << 30));
  Array x = Array::Zeros(DType::kF32, {tokens, heads, 128}).value();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double max_abs = 0;
  for (float& v : x.span<float>()) {
    v = normal(rng);
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  }
  const std::vector<double> xin = Values(x);
  const MultiAxisRopeArgs args{layout, &freqs, comp, 4, positions, RopePrecision::kExact};
  ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(x, "x").value()).ok());
  const std::vector<double> got = Values(x);
  double worst = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < 64; ++j) {
        const size_t base = static_cast<size_t>((t * heads + h) * 128);
        const double angle =
            static_cast<double>(positions[static_cast<size_t>(comp[static_cast<size_t>(j)] * tokens + t)]) *
            freqs.inv_freq[static_cast<size_t>(j)];
        const double a = xin[base + static_cast<size_t>(j)], b = xin[base + static_cast<size_t>(j + 64)];
        worst = std::max(worst,
                         std::fabs(got[base + static_cast<size_t>(j)] - (a * std::cos(angle) - b * std::sin(angle))));
        worst = std::max(
            worst, std::fabs(got[base + static_cast<size_t>(j + 64)] - (b * std::cos(angle) + a * std::sin(angle))));
      }
  EXPECT_LE(worst, 2e-6 * max_abs);
  std::printf("exact multi-axis rope vs float64 formula, positions < 2^30: max |err| %.3g (bound %.3g)\n", worst,
              2e-6 * max_abs);
}

// Text tokens (t = h = w) under M-RoPE, and one component everywhere, are 1-D RoPE, bit for bit.
TEST(MultiAxisApply, EqualComponentsAreOneDimensionalRope) {
  for (RopePrecision precision : {RopePrecision::kReference, RopePrecision::kExact}) {
    const RotaryLayout layout{RopePairing::kHalf, 128, 0, 128};
    const std::vector<int64_t> comp = PairComponents(Hf(SectionLayout::kInterleaved, {24, 20, 20}, 3), 64, "t").value();
    const RopeFrequencies freqs = DefaultRopeFrequencies(128, 5e6).value();
    const int64_t tokens = 19;
    std::vector<int64_t> pos1(static_cast<size_t>(tokens)), pos3;
    for (int64_t t = 0; t < tokens; ++t) pos1[static_cast<size_t>(t)] = 1000 * t + 7;
    for (int c = 0; c < 3; ++c) pos3.insert(pos3.end(), pos1.begin(), pos1.end());
    Array x = Array::Zeros(DType::kF32, {tokens, 4, 128}).value();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& v : x.span<float>()) v = u(rng);
    Array y = x;
    const MultiAxisRopeArgs args{layout, &freqs, comp, 3, pos3, precision};
    ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(x, "x").value()).ok());
    // A table of size 0: every row from ComputeCosSin, as the per-token table computes them.
    const RopeTable table = RopeTable::Build(freqs, 0, precision).value();
    ASSERT_TRUE(ApplyRope(RopeArgs{layout, &table, pos1}, HeadsView::Of(y, "y").value()).ok());
    EXPECT_EQ(Values(x), Values(y)) << ToString(precision);
  }
}

TEST(MultiAxisApply, QueriesAndKeysAndErrors) {
  const RotaryLayout layout{RopePairing::kHalf, 64, 0, 64};
  const std::vector<int64_t> comp = PairComponents(Hf(SectionLayout::kChunkedStrided, {16, 16}, 2), 32, "t").value();
  const RopeFrequencies freqs = DefaultRopeFrequencies(64, 1e4).value();
  const int64_t tokens = 5;
  std::vector<int64_t> pos(static_cast<size_t>(2 * tokens));
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int64_t>(i % 7);
  Array q = Array::Zeros(DType::kF32, {tokens, 4, 64}).value();
  Array k = Array::Zeros(DType::kF32, {tokens, 2, 64}).value();
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : q.span<float>()) v = u(rng);
  for (float& v : k.span<float>()) v = u(rng);
  Array q1 = q, k1 = k;
  const MultiAxisRopeArgs args{layout, &freqs, comp, 2, pos, RopePrecision::kReference};
  ASSERT_TRUE(ApplyMultiAxisRopeQK(args, HeadsView::Of(q, "q").value(), HeadsView::Of(k, "k").value()).ok());
  ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(q1, "q").value()).ok());
  ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(k1, "k").value()).ok());
  EXPECT_EQ(Values(q), Values(q1));
  EXPECT_EQ(Values(k), Values(k1));

  // Wrong position count, a component out of range, a position out of range: errors, nothing written.
  Array before = q;
  MultiAxisRopeArgs bad = args;
  const std::vector<int64_t> short_pos(pos.begin(), pos.end() - 1);
  bad.positions = short_pos;
  Status s = ApplyMultiAxisRope(bad, HeadsView::Of(q, "q").value());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("9 positions for 2 components x 5 tokens"), std::string::npos) << s.message();
  std::vector<int64_t> comp_bad = comp;
  comp_bad[3] = 2;
  bad = args;
  bad.pair_component = comp_bad;
  s = ApplyMultiAxisRope(bad, HeadsView::Of(q, "q").value());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pair 3 takes component 2"), std::string::npos) << s.message();
  std::vector<int64_t> pos_bad = pos;
  pos_bad[6] = -1;
  bad = args;
  bad.positions = pos_bad;
  s = ApplyMultiAxisRope(bad, HeadsView::Of(q, "q").value());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("[1, 1] = -1"), std::string::npos) << s.message();
  EXPECT_EQ(Values(q), Values(before));
}

// `posenc rope --config` with a multi-axis config takes positions [components, tokens] and gives the
// library's result; a [tokens] file is refused naming the shape it needs.
TEST(MultiAxisCli, RopeTakesComponentRows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("posenc_multi_axis_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "g.json") << R"({"n_dims": 64, "mode": 40, "sections": [11, 11, 10, 0], "freq_base": 1e6})";
  const int64_t tokens = 5;
  Array x = Array::Zeros(DType::kF32, {tokens, 2, 96}).value();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x.span<float>()) v = u(rng);
  Array p1 = Array::Zeros(DType::kI64, {tokens}).value();
  Array p4 = Array::Zeros(DType::kI64, {4, tokens}).value();
  for (int64_t i = 0; i < 4 * tokens; ++i) p4.data<int64_t>()[i] = (i * 37) % 101;
  ASSERT_TRUE(WriteNpy((dir / "x.npy").string(), x).ok());
  ASSERT_TRUE(WriteNpy((dir / "p1.npy").string(), p1).ok());
  ASSERT_TRUE(WriteNpy((dir / "p4.npy").string(), p4).ok());
  const std::string base = testing::CliPath() + " rope --config " + (dir / "g.json").string() + " --input " +
                           (dir / "x.npy").string() + " --output " + (dir / "y.npy").string() + " --positions ";
  std::string log;
  EXPECT_EQ(testing::RunCommand(base + (dir / "p1.npy").string(), &log), 2) << log;
  EXPECT_NE(log.find("expected [4, tokens]"), std::string::npos) << log;
  ASSERT_EQ(testing::RunCommand(base + (dir / "p4.npy").string() + " --precision exact", &log), 0) << log;
  const Array got = ReadNpy((dir / "y.npy").string()).value();

  const RopeConfig rc =
      RopeConfigFromGgmlParams(R"({"n_dims": 64, "mode": 40, "sections": [11, 11, 10, 0], "freq_base": 1e6})", 96, "g")
          .value();
  const MultiAxisPlan plan = ComputeMultiAxisRope(rc, 101).value();
  const MultiAxisRopeArgs args{rc.layout, &plan.freqs,        plan.pair_component,
                               4,         p4.span<int64_t>(), RopePrecision::kExact};
  ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(x, "x").value()).ok());
  EXPECT_EQ(Values(got), Values(x));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
