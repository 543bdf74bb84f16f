// The pair regimes: defined once (PairRegimeMeaning), printed by `posenc inspect --help`, quoted by
// docs/LEARNING.md; "unscaled" where nothing is scaled, "extrapolated" only for a pair a scaling keeps.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/math/rope_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

std::vector<PairRegime> Regimes(const std::string& rope_scaling, int64_t seq_len) {
  const std::string text =
      R"({"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16, "max_position_embeddings": 4096,)"
      R"( "rope_theta": 10000.0, "rope_scaling": )" +
      rope_scaling + "}";
  Result<PositionScheme> s = ParseHfConfig(text, "regimes test");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  Result<RopeFrequencies> f = ComputeRopeFrequencies(s->rope, seq_len);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return ClassifyPairs(s->rope, *f);
}

size_t Count(const std::vector<PairRegime>& r, PairRegime x) { return std::count(r.begin(), r.end(), x); }

TEST(Regimes, UnscaledWhereNothingIsScaled) {
  const std::vector<PairRegime> plain = Regimes("null", 4096);
  ASSERT_EQ(plain.size(), 32u);
  EXPECT_EQ(Count(plain, PairRegime::kUnscaled), 32u);
  // Dynamic NTK scales nothing up to its length, then every pair but the first.
  EXPECT_EQ(Count(Regimes(R"({"rope_type": "dynamic", "factor": 2.0})", 4096), PairRegime::kUnscaled), 32u);
  const std::vector<PairRegime> past = Regimes(R"({"rope_type": "dynamic", "factor": 2.0})", 16384);
  EXPECT_EQ(Count(past, PairRegime::kUnscaled), 0u);
  EXPECT_EQ(past[0], PairRegime::kExtrapolated);  // pair 0's frequency is 1 whatever the base
  // A scaling that keeps fast pairs calls them extrapolated, never unscaled.
  const std::vector<PairRegime> yarn =
      Regimes(R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})", 16384);
  EXPECT_EQ(Count(yarn, PairRegime::kUnscaled), 0u);
  EXPECT_GT(Count(yarn, PairRegime::kExtrapolated), 0u);
  EXPECT_GT(Count(yarn, PairRegime::kInterpolated), 0u);
  EXPECT_GT(Count(yarn, PairRegime::kBlended), 0u);
}

TEST(Regimes, InspectPrintsUnscaledForAnUnscaledModel) {
  const auto dir = testing::TempDir("regimes", "inspect");
  testing::WriteFile(dir / "config.json", R"({"model_type": "llama", "hidden_size": 1024, "num_attention_heads": 16,)"
                                          R"( "max_position_embeddings": 4096, "rope_theta": 10000.0})");
  std::string out;
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " inspect --json " + (dir / "config.json").string(), &out), 0)
      << out;
  const nlohmann::json d = nlohmann::json::parse(out);
  ASSERT_EQ(d["pairs"].size(), 32u);
  for (const auto& p : d["pairs"]) EXPECT_EQ(p["regime"], "unscaled") << p.dump();
}

TEST(Regimes, DefinedOnceInHelpAndDocs) {
  std::string help;
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " inspect --help", &help), 0) << help;
  const std::string docs = testing::ReadFile(std::string(POSENC_SOURCE_DIR) + "/docs/LEARNING.md");
  for (PairRegime r : kPairRegimes) {
    const std::string name(ToString(r)), meaning(PairRegimeMeaning(r));
    ASSERT_FALSE(meaning.empty()) << name;
    EXPECT_NE(meaning, "unknown") << name;
    // `inspect --help`: "  NAME   MEANING" on one line.
    const size_t at = help.find("\n  " + name + " ");
    ASSERT_NE(at, std::string::npos) << name << "\n" << help;
    const std::string line = help.substr(at + 1, help.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(meaning), std::string::npos) << line;
    // docs/LEARNING.md: "- `NAME`: MEANING."
    EXPECT_NE(docs.find("- `" + name + "`: " + meaning + "."), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace posenc
