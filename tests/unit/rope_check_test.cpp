// posenc check's library: dumps of a test engine (Hugging Face's arithmetic in the dump's dtype: the
// angle in float32, cos/sin cast to the dtype, q*cos + rotate_half(q)*sin with each product and the sum
// rounded) for published configs of several families. A correct dump passes in every dtype; each fault
// planted alone is diagnosed with its cause first; a fault outside the list is not_explained with where
// the error starts; bad input is refused naming it.
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/dtype.hpp"
#include "posenc/model/rope_check.hpp"
#include "published_configs.hpp"
#include "rope_check_engine.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ::posenc::testing;  // NOLINT

struct Family {
  std::string name;     // conformance record
  int64_t top;          // largest position of the dumps
  std::string layer_type;
  std::function<void(json&)> edit;  // the config as a test needs it
};

class RopeCheckTest : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    dir_ = TempDir("rope_check_test", std::to_string(reinterpret_cast<uintptr_t>(this)));
    json c = PublishedConfig(GetParam().name);
    if (GetParam().edit) GetParam().edit(c);
    WriteFile(dir_ / "config.json", c.dump());
    Result<RopeDescription> d = OpenRopeDescription((dir_ / "config.json").string());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    desc_ = std::move(d).value();
    Result<RopeCheckTarget> t = RopeCheckTargetOf(desc_, RopeCheckSelect{.layer = -1, .layer_type = GetParam().layer_type, .site = ""});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(t).value();
    positions_ = Positions(GetParam().top);
  }
  void TearDown() override { fs::remove_all(dir_); }
  RopeCheckReport Check(const RopeDump& d) {
    Result<RopeCheckReport> r = CheckRope(target_, d);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : RopeCheckReport{};
  }
  static std::string Diagnosis(const RopeCheckReport& r) {
    std::string s;
    for (const RopeCause& c : r.diagnosis) s += fmt::format("[{} {} {:.3g}] ", c.id, c.detail, c.max_ratio);
    return s;
  }
  void ExpectFirstCause(const Fault& f, const std::string& id, DType dt = DType::kF32) {
    SCOPED_TRACE(id + " in " + std::string(ToString(dt)));
    const RopeCheckReport r = Check(Engine(target_.config, dt, 2, positions_, f, 7));
    EXPECT_FALSE(r.pass);
    ASSERT_FALSE(r.diagnosis.empty());
    EXPECT_EQ(r.diagnosis.front().id, id) << Diagnosis(r);
  }
  fs::path dir_;
  RopeDescription desc_;
  RopeCheckTarget target_;
  std::vector<int64_t> positions_;
};

TEST_P(RopeCheckTest, ACorrectDumpPassesInEveryDtype) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(ToString(dt));
    for (uint64_t seed : {1, 2, 3}) {
      const RopeCheckReport r = Check(Engine(target_.config, dt, 3, positions_, Fault{}, seed));
      EXPECT_TRUE(r.pass) << r.max_ratio << " worst at token " << r.worst.token << " pair " << r.worst.pair;
      EXPECT_LE(r.max_ratio, 1.0);
      EXPECT_TRUE(r.diagnosis.empty());
    }
  }
}

TEST_P(RopeCheckTest, EachPlantedFaultIsDiagnosedFirst) {
  const RopeConfig& ref = target_.config;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    ExpectFirstCause(With([&](Fault& f) { f.pairing = ref.layout.pairing == RopePairing::kHalf ? RopePairing::kInterleaved
                                                                               : RopePairing::kHalf; }),
                     "pairing", dt);
    RopeConfig base = ref;
    base.base = ref.base == 10000.0 ? 500000.0 : 10000.0;
    ExpectFirstCause(With([&](Fault& f) { f.config = base; }), "base", dt);
    ExpectFirstCause(With([&](Fault& f) { f.offset = 7; }), "position_offset", dt);
    ExpectFirstCause(With([&](Fault& f) { f.negate_sin = true; }), "direction", dt);
    ExpectFirstCause(With([&](Fault& f) { f.swap = true; }), "cos_sin_swapped", dt);
    ExpectFirstCause(With([&](Fault& f) { f.angle_bf16 = true; }), "precision", dt);
    if (ref.scaling.type != RopeScalingType::kNone) {
      RopeConfig plain = ref;
      plain.scaling = RopeScaling{};
      Fault missing;
      missing.config = plain;
      missing.scaling = 1.0;
      ExpectFirstCause(missing, "scaling_missing", dt);
    }
    const double s = ComputeRopeFrequencies(ref, positions_.back() + 1).value().attention_scaling;
    if (s != 1.0) ExpectFirstCause(With([&](Fault& f) { f.scaling = 1.0; }), "attention_scaling", dt);
    if (ref.layout.rotary_dim < ref.layout.head_dim) {
      RopeConfig whole = ref;
      whole.layout.rotary_dim = ref.layout.head_dim;
      whole.layout.rotary_start = 0;
      ExpectFirstCause(With([&](Fault& f) { f.config = whole; }), "window", dt);
    }
  }
  // Positions: the engine used the token index where the given positions start at 100.
  std::vector<int64_t> shifted = positions_;
  for (int64_t& p : shifted) p += 100;
  const RopeCheckReport r = Check(Engine(ref, DType::kF32, 2, shifted, With([&](Fault& f) { f.index_positions = true; }), 5));
  ASSERT_FALSE(r.diagnosis.empty());
  EXPECT_TRUE(r.diagnosis.front().id == "position_reset" || r.diagnosis.front().id == "position_offset")
      << Diagnosis(r);
}

TEST_P(RopeCheckTest, AFaultOutsideTheListIsNotExplainedAndSaysWhereItStarts) {
  const int64_t pairs = target_.config.layout.num_pairs();
  const int64_t first = pairs / 2;
  Fault f;
  f.tweak = [&](std::vector<double>& w) {
    for (int64_t j = first; j < first + 3; ++j) w[j] *= 1.37;
  };
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(ToString(dt));
    const RopeCheckReport r = Check(Engine(target_.config, dt, 2, positions_, f, 11));
    EXPECT_FALSE(r.pass);
    ASSERT_EQ(r.diagnosis.size(), 1u) << Diagnosis(r);
    EXPECT_EQ(r.diagnosis[0].id, "not_explained");
    ASSERT_FALSE(r.error_pairs.empty());
    for (int64_t j : r.error_pairs) {
      EXPECT_GE(j, first);
      EXPECT_LT(j, first + 3);
    }
    EXPECT_GT(r.error_first_position, 0);
    EXPECT_NE(r.diagnosis[0].detail.find(fmt::format("from position {}", r.error_first_position)), std::string::npos)
        << r.diagnosis[0].detail;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, RopeCheckTest,
    ::testing::Values(Family{"llama__llama-3.1-8b", 30000, "", nullptr},
                      Family{"qwen2__qwen2.5-7b-instruct-yarn-d1e200f", 30000, "", nullptr},
                      Family{"phi3__phi-3.5-mini-instruct", 30000, "", nullptr},
                      Family{"gptj__gpt-j-6b-8bit", 2000, "", nullptr},
                      Family{"gpt_neox__gptneox-response-full-static-sft", 2000, "", nullptr},
                      Family{"gemma3_text__gemma-3-1b-it", 8000, "sliding_attention",
                             [](json& c) { c = GemmaLayerTypes(c); }}),
    [](const ::testing::TestParamInfo<Family>& p) {
      std::string n = p.param.name.substr(0, p.param.name.find("__"));
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

// Planted faults over random positions, tokens, heads, dtypes and families: correct dumps always
// pass, and at least 9 in 10 faults are named right first (the bar); a wrong cause first is
// counted and printed.
TEST(RopeCheckSweep, NineInTenPlantedFaultsAreNamedRightFirst) {
  const char* families[] = {"llama__llama-3.1-8b", "qwen2__qwen2.5-7b-instruct-yarn-d1e200f",
                            "phi3__phi-3.5-mini-instruct", "gptj__gpt-j-6b-8bit",
                            "gpt_neox__gptneox-response-full-static-sft", "qwen2__qwen2.5-7b-instruct"};
  const fs::path dir = TempDir("rope_check_sweep", "configs");
  std::mt19937_64 rng = MakeRng(2026);
  int faults = 0, right = 0, correct_failed = 0;
  std::string wrong, missed;
  for (int round = 0; round < 120; ++round) {
    const std::string name = families[rng() % std::size(families)];
    WriteFile(dir / "config.json", PublishedConfig(name).dump());
    const RopeDescription d = OpenRopeDescription((dir / "config.json").string()).value();
    const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
    const RopeConfig& ref = t.config;
    const DType dt = std::array{DType::kF32, DType::kF16, DType::kBF16}[rng() % 3];
    const int64_t T = 8 + static_cast<int64_t>(rng() % 40), H = 1 + static_cast<int64_t>(rng() % 3);
    const int64_t top = std::max<int64_t>(ref.max_position_embeddings > 0 ? ref.max_position_embeddings : 2048, 64);
    std::vector<int64_t> pos;
    for (int64_t i = 0; i < T; ++i) pos.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(top - 16)));
    std::sort(pos.begin(), pos.end());
    const uint64_t seed = rng();
    if (!CheckRope(t, Engine(ref, dt, H, pos, Fault{}, seed)).value().pass) ++correct_failed;
    // One fault, chosen among those that apply to the family.
    std::vector<std::pair<std::string, Fault>> options;
    options.emplace_back("pairing", With([&](Fault& f) {
                           f.pairing = ref.layout.pairing == RopePairing::kHalf ? RopePairing::kInterleaved
                                                                                : RopePairing::kHalf;
                         }));
    RopeConfig base = ref;
    base.base = ref.base * (rng() % 2 ? 4.0 : 0.25);
    options.emplace_back("base", With([&](Fault& f) { f.config = base; }));
    const int64_t offset = 1 + static_cast<int64_t>(rng() % 64);
    options.emplace_back("position_offset", With([&](Fault& f) { f.offset = offset; }));
    options.emplace_back("direction", With([&](Fault& f) { f.negate_sin = true; }));
    options.emplace_back("cos_sin_swapped", With([&](Fault& f) { f.swap = true; }));
    if (pos.back() > 4096) options.emplace_back("precision", With([&](Fault& f) { f.angle_bf16 = true; }));
    if (dt == DType::kF32) options.emplace_back("precision", With([&](Fault& f) { f.cos_sin_bf16 = true; }));
    if (ref.scaling.type != RopeScalingType::kNone && ref.scaling.type != RopeScalingType::kLongRope) {
      RopeConfig plain = ref;
      plain.scaling = RopeScaling{};
      options.emplace_back("scaling_missing", With([&](Fault& f) {
                             f.config = plain;
                             f.scaling = 1.0;
                           }));
    }
    const double s = ComputeRopeFrequencies(ref, pos.back() + 1).value().attention_scaling;
    if (s != 1.0) options.emplace_back("attention_scaling", With([&](Fault& f) { f.scaling = 1.0; }));
    if (ref.layout.rotary_dim < ref.layout.head_dim) {
      RopeConfig whole = ref;
      whole.layout.rotary_dim = ref.layout.head_dim;
      options.emplace_back("window", With([&](Fault& f) { f.config = whole; }));
    }
    const auto& [want, fault] = options[rng() % options.size()];
    const RopeCheckReport r = CheckRope(t, Engine(ref, dt, H, pos, fault, seed)).value();
    if (r.pass) continue;  // a fault these positions cannot show (e.g. a small offset in bfloat16)
    ++faults;
    if (r.diagnosis.front().id == want) {
      ++right;
    } else if (r.diagnosis.front().id == "not_explained") {
      missed += fmt::format("  {} {} T={} top={}: planted {}: {}\n", name, ToString(dt), T, pos.back(), want,
                            r.diagnosis.front().detail);
    } else {
      wrong += fmt::format("  {} {} T={} top={}: planted {}, named {} ({})\n", name, ToString(dt), T, pos.back(), want,
                           r.diagnosis.front().id, r.diagnosis.front().detail);
    }
  }
  fs::remove_all(dir);
  EXPECT_EQ(correct_failed, 0);
  EXPECT_GE(right * 10, faults * 9) << right << " of " << faults << " named right first\n" << wrong;
  EXPECT_TRUE(wrong.empty()) << wrong;
  std::printf("sweep: %d of %d planted faults named right first; not explained:\n%s", right, faults, missed.c_str());
}

}  // namespace
}  // namespace posenc
