// Re-rotation of cached keys: rotate with the old frequencies, re-rotate, compare with rotating the
// original keys directly with the new ones, for the dynamic-NTK and LongRoPE configs of the golden
// hf folder; the SIMD path against its scalar twin; strided cache views; errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/kernels/rerotate.hpp"
#include "posenc/math/rope_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

RopeConfig LoadGoldenRope(const std::string& case_dir) {
  std::ifstream f(case_dir + "/case.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  // The case names its family where the config does not (FORMAT.md hf_model_type).
  nlohmann::json config = j.at("config");
  if (!config.contains("model_type") && j.contains("hf_model_type")) config["model_type"] = j["hf_model_type"];
  auto scheme = ParseHfConfig(config.dump(), case_dir);
  EXPECT_TRUE(scheme.ok()) << scheme.status().message();
  RopeConfig c = scheme.value().rope;
  if (j.value("layout", "half") == "interleaved") c.layout.pairing = RopePairing::kInterleaved;
  return c;
}

// Positions a long-context cache holds: the ends, both sides of the switch, and random ones.
std::vector<int64_t> CachePositions(std::mt19937_64& rng, int64_t original, int64_t max_pos) {
  std::vector<int64_t> p = {0, 1, 2, original - 1, original, original + 1, max_pos / 2, max_pos - 1, max_pos};
  for (int i = 0; i < 119; ++i) p.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(max_pos + 1)));
  return p;
}

Array Rotated(const std::vector<float>& x, const std::vector<int64_t>& pos, int64_t heads, const RotaryLayout& L,
              const RopeFrequencies& f, RopePrecision prec) {
  Array a = Array::Zeros(DType::kF32, {static_cast<int64_t>(pos.size()), heads, L.head_dim}).value();
  std::copy(x.begin(), x.end(), a.data<float>());
  RopeTable t = RopeTable::Build(f, 0, prec).value();
  HeadsView v = HeadsView::Of(a, "keys").value();
  EXPECT_TRUE(ApplyRope({L, &t, pos}, v).ok());
  return a;
}

double MaxAbsDiff(const Array& a, const Array& b) {
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

double MaxAbs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

struct Transition {
  std::string case_name;
  int64_t old_seq_len, new_seq_len;
};

// Exact precision: re-rotated == rotated directly with the new frequencies, within 2e-6 * max|x|,
// for every position up to 131072 (the bound), SIMD and scalar twin.
TEST(Rerotate, MatchesDirectRotationForGoldenDynamicNtkAndLongRope) {
  POSENC_REQUIRE_DATA(hf, "golden/hf");
  const std::vector<Transition> transitions = {
      {"rope_dynamic_ntk_x2_seq6000", 4096, 4097},         // just past the original length
      {"rope_dynamic_ntk_x2_seq6000", 4096, 131073},       // from unscaled to far past it
      {"rope_dynamic_ntk_x2_seq6000", 6000, 131073},       // growing while already scaled
      {"rope_dynamic_ntk_x2_seq4097", 131073, 5000},       // shrinking again (HF returns toward the original)
      {"rope_longrope_phi3_mini_128k_short", 4096, 4097},  // short_factor -> long_factor
      {"rope_longrope_phi3_mini_128k_short", 4096, 131073}, {"rope_longrope_phi3_attn_factor_short", 4096, 131073},
  };
  auto rng = testing::MakeRng(606);
  for (const Transition& tr : transitions) {
    SCOPED_TRACE(tr.case_name + " " + std::to_string(tr.old_seq_len) + " -> " + std::to_string(tr.new_seq_len));
    const std::string dir = hf + "/" + tr.case_name;
    if (!std::filesystem::exists(dir)) FAIL() << "missing golden case " << dir;
    RopeConfig cfg = LoadGoldenRope(dir);
    auto f_old = ComputeRopeFrequencies(cfg, tr.old_seq_len);
    auto f_new = ComputeRopeFrequencies(cfg, tr.new_seq_len);
    ASSERT_TRUE(f_old.ok() && f_new.ok());
    // The transition must really change something, or the test proves nothing.
    double max_change = 0;
    for (size_t i = 0; i < f_old->inv_freq.size(); ++i)
      max_change = std::max(max_change, std::abs(f_new->inv_freq[i] - f_old->inv_freq[i]));
    ASSERT_GT(max_change, 1e-6);
    for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved}) {
      RotaryLayout L = cfg.layout;
      L.pairing = pairing;
      const int64_t heads = 3;
      const int64_t original = cfg.scaling.original_max_position_embeddings > 0
                                   ? cfg.scaling.original_max_position_embeddings
                                   : cfg.max_position_embeddings;
      const std::vector<int64_t> pos = CachePositions(rng, original, 131072);
      const std::vector<float> x =
          testing::RandomNormal(rng, pos.size() * static_cast<size_t>(heads * L.head_dim), 3.0f);
      const double tol = 2e-6 * MaxAbs(x);
      Array cache = Rotated(x, pos, heads, L, *f_old, RopePrecision::kExact);
      Array cache_ref = cache;
      const Array direct = Rotated(x, pos, heads, L, *f_new, RopePrecision::kExact);
      RerotateArgs args{L, pos, &f_old.value(), &f_new.value(), RopePrecision::kExact};
      ASSERT_TRUE(RerotateKeys(args, HeadsView::Of(cache, "cache").value()).ok());
      ASSERT_TRUE(RerotateKeysReference(args, HeadsView::Of(cache_ref, "cache").value()).ok());
      EXPECT_LE(MaxAbsDiff(cache, direct), tol);
      EXPECT_LE(MaxAbsDiff(cache_ref, direct), tol);
      std::printf("%s %lld->%lld %s: max|rerotated - direct| / max|x| = %.3g\n", tr.case_name.c_str(),
                  static_cast<long long>(tr.old_seq_len), static_cast<long long>(tr.new_seq_len),
                  std::string(ToString(pairing)).c_str(), MaxAbsDiff(cache, direct) / MaxAbs(x));
      // The SIMD path and its twin differ only by float32 rounding order.
      EXPECT_LE(MaxAbsDiff(cache, cache_ref), 1e-6 * MaxAbs(x));
      // And the direct rotation differs from the stale cache (the check is not vacuous).
      EXPECT_GT(MaxAbsDiff(Rotated(x, pos, heads, L, *f_old, RopePrecision::kExact), direct), 100 * tol);
    }
  }
}

// Reference precision: the angle is float32(p) * float32(w_new - w_old); the result agrees with a fresh
// reference rotation to the float32 angle error of both, about p * 2^-24 * w radians.
TEST(Rerotate, ReferencePrecisionWithinFloat32AngleError) {
  RopeConfig cfg;
  cfg.layout = {RopePairing::kHalf, 64, 0, 64};
  cfg.base = 10000.0;
  cfg.max_position_embeddings = 2048;
  cfg.scaling.type = RopeScalingType::kDynamicNtk;
  cfg.scaling.factor = 4.0;
  const RopeFrequencies f_old = ComputeRopeFrequencies(cfg, 2048).value();
  const RopeFrequencies f_new = ComputeRopeFrequencies(cfg, 20000).value();
  auto rng = testing::MakeRng(7);
  for (int64_t p : {int64_t{0}, int64_t{5}, int64_t{2047}, int64_t{10000}, int64_t{19999}}) {
    SCOPED_TRACE(p);
    const std::vector<int64_t> pos = {p};
    const std::vector<float> x = testing::RandomNormal(rng, 2 * 64);
    Array cache = Rotated(x, pos, 2, cfg.layout, f_old, RopePrecision::kReference);
    const Array direct = Rotated(x, pos, 2, cfg.layout, f_new, RopePrecision::kReference);
    RerotateArgs args{cfg.layout, pos, &f_old, &f_new, RopePrecision::kReference};
    ASSERT_TRUE(RerotateKeys(args, HeadsView::Of(cache, "cache").value()).ok());
    // Angle error of each float32 angle <= ~p * 2^-24 (w <= 1); three angles involved.
    const double tol = (3.0 * static_cast<double>(p) * std::ldexp(1.0, -24) + 2e-6) * 2.0 * MaxAbs(x);
    EXPECT_LE(MaxAbsDiff(cache, direct), tol);
  }
}

// A KV-cache slot: keys of one layer inside a [T, 2 (k|v), H, D] buffer, the rotary part last (as
// DeepSeek MLA puts it), bf16 and f16 storage. Values and pass-through dims must not move.
TEST(Rerotate, StridedCacheViewPartialWindowAndHalfTypes) {
  auto rng = testing::MakeRng(11);
  const RotaryLayout L{RopePairing::kInterleaved, 24, 8, 16};
  const RopeFrequencies f_old = DefaultRopeFrequencies(16, 10000.0).value();
  RopeFrequencies f_new = DefaultRopeFrequencies(16, 40000.0).value();
  f_new.attention_scaling = 1.25;
  const int64_t T = 9, H = 2, D = 24;
  std::vector<int64_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = 100 + 7 * t;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(ToString(dt)));
    const std::vector<float> xs = testing::RandomNormal(rng, static_cast<size_t>(T * 2 * H * D));
    Array buf32 = Array::Zeros(DType::kF32, {T, 2, H, D}).value();
    std::copy(xs.begin(), xs.end(), buf32.data<float>());
    Array buf = buf32.AsType(dt).value();
    const Array before = buf;
    HeadsView keys{buf.bytes(), dt, T, H, D, 2 * H * D, D};
    RerotateArgs args{L, pos, &f_old, &f_new, RopePrecision::kExact};
    Array buf_ref = buf;
    HeadsView keys_ref{buf_ref.bytes(), dt, T, H, D, 2 * H * D, D};
    ASSERT_TRUE(RerotateKeys(args, keys).ok());
    ASSERT_TRUE(RerotateKeysReference(args, keys_ref).ok());
    const Array got = buf.AsType(DType::kF32).value();
    const Array want = buf_ref.AsType(DType::kF32).value();
    const Array orig = before.AsType(DType::kF32).value();
    const double ulp = dt == DType::kF32 ? 1e-6 : (dt == DType::kF16 ? 2e-3 : 1.6e-2);
    int moved = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t i = ((t * 2 + kv) * H + h) * D + d;
            const float g = got.data<float>()[i], w = want.data<float>()[i], o = orig.data<float>()[i];
            if (kv == 1 || d < 8) {
              EXPECT_EQ(g, o) << "value or pass-through dim changed at " << t << "," << kv << "," << h << "," << d;
            } else {
              EXPECT_NEAR(g, w, ulp * 4) << t << "," << h << "," << d;
              moved += g != o;
            }
          }
    EXPECT_GT(moved, T * H * 8);
  }
}

// Re-rotating twice (a -> b -> c) equals re-rotating once (a -> c), and equal frequencies are a no-op.
TEST(Rerotate, ComposesAndIdentityLeavesKeysUntouched) {
  auto rng = testing::MakeRng(3);
  const RotaryLayout L{RopePairing::kHalf, 32, 0, 32};
  const RopeFrequencies a = DefaultRopeFrequencies(32, 10000.0).value();
  const RopeFrequencies b = DefaultRopeFrequencies(32, 25000.0).value();
  RopeFrequencies c = DefaultRopeFrequencies(32, 90000.0).value();
  c.attention_scaling = 0.8;
  const std::vector<int64_t> pos = {0, 3, 4095, 70000};
  const std::vector<float> x = testing::RandomNormal(rng, pos.size() * 4 * 32);
  Array two = Rotated(x, pos, 4, L, a, RopePrecision::kExact);
  Array one = two;
  const Array untouched = two;
  ASSERT_TRUE(RerotateKeys({L, pos, &a, &b}, HeadsView::Of(two, "k").value()).ok());
  ASSERT_TRUE(RerotateKeys({L, pos, &b, &c}, HeadsView::Of(two, "k").value()).ok());
  ASSERT_TRUE(RerotateKeys({L, pos, &a, &c}, HeadsView::Of(one, "k").value()).ok());
  EXPECT_LE(MaxAbsDiff(two, one), 3e-6 * MaxAbs(x));
  Array same = untouched;
  ASSERT_TRUE(RerotateKeys({L, pos, &a, &a}, HeadsView::Of(same, "k").value()).ok());
  EXPECT_EQ(0, std::memcmp(same.bytes(), untouched.bytes(), same.nbytes()));
}

TEST(Rerotate, ErrorsNameTheFault) {
  const RotaryLayout L{RopePairing::kHalf, 8, 0, 8};
  const RopeFrequencies f4 = DefaultRopeFrequencies(8, 10000.0).value();
  const RopeFrequencies f3 = DefaultRopeFrequencies(6, 10000.0).value();
  RopeFrequencies zero = f4;
  zero.attention_scaling = 0.0;
  Array k = Array::Zeros(DType::kF32, {2, 1, 8}).value();
  HeadsView v = HeadsView::Of(k, "k").value();
  const std::vector<int64_t> pos = {0, 1}, one_pos = {0}, bad_pos = {0, -4};
  auto msg = [&](const RerotateArgs& a) {
    Status s = RerotateKeys(a, v);
    EXPECT_FALSE(s.ok());
    return std::string(s.message());
  };
  EXPECT_NE(msg({L, pos, &f4, &f3}).find("4 pairs, new ones 3"), std::string::npos);
  EXPECT_NE(msg({L, pos, &zero, &f4}).find("old attention_scaling 0"), std::string::npos);
  EXPECT_NE(msg({L, one_pos, &f4, &f4}).find("1 positions for 2 tokens"), std::string::npos);
  EXPECT_NE(msg({L, bad_pos, &f4, &f4}).find("position -4 at index 1"), std::string::npos);
  EXPECT_NE(msg({L, pos, nullptr, &f4}).find("must both be given"), std::string::npos);
  EXPECT_NE(msg({RotaryLayout{RopePairing::kHalf, 8, 0, 6}, pos, &f4, &f4}).find("table has 4 frequency pairs"),
            std::string::npos);
}

}  // namespace
}  // namespace posenc
