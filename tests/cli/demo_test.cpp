// `posenc demo` end to end: exit status, the equivariance claim (causal mask off) and its breaking by
// each scheme and by the causal mask alone, ALiBi under the mask, RoPE's checks, the seed's exercise
// values, RoPE past the training length with each scaling (the printed numbers recomputed here),
// determinism, --help and a bad option.
#include <cmath>
#include <cstdio>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "test_support.hpp"

namespace posenc {
namespace {

std::string RunDemo(const std::string& args, int* rc) {
  std::string out;
  *rc = testing::RunCommand(testing::CliPath() + " demo " + args, &out);
  return out;
}

bool Has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// The line of `text` that contains `needle`, or "".
std::string LineWith(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

// The number printed right after `label` on the line holding `needle` (NaN when absent).
double NumberAfter(const std::string& text, const std::string& needle, const std::string& label) {
  const std::string line = LineWith(text, needle);
  const size_t at = line.find(label);
  if (line.empty() || at == std::string::npos) return NAN;
  return std::strtod(line.c_str() + at + label.size(), nullptr);
}

// The numbers of a line, in order (tokens that parse as numbers).
std::vector<double> Numbers(const std::string& line) {
  std::vector<double> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) {
    char* end = nullptr;
    const double x = std::strtod(w.c_str(), &end);
    if (end != w.c_str() && *end == '\0') out.push_back(x);
  }
  return out;
}

// The demo's output at the default seed, run once for the suite; each test reads its sections.
class DemoStory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { out_ = RunDemo("", &rc_); }
  void SetUp() override { ASSERT_EQ(rc_, 0) << out_; }
  // The text from `heading` up to the next line starting with `next` (the rest when none); "" when
  // the heading is missing.
  static std::string Section(const std::string& heading, const std::string& next) {
    const size_t at = out_.find(heading);
    if (at == std::string::npos) return "";
    return out_.substr(at, out_.find("\n" + next, at) - at);
  }
  static inline std::string out_;
  static inline int rc_ = -1;
};

TEST_F(DemoStory, TellsTheStoryAndEveryCheckHolds) {
  const std::string& out = out_;
  EXPECT_TRUE(Has(out, "\"The dog chased the cat\"")) << out;
  EXPECT_TRUE(Has(out, "\"The cat chased the dog\"")) << out;
  // 7. The summary table, corrected, and the verdict.
  EXPECT_FALSE(Has(out, "extrapolates naturally")) << out;
  EXPECT_TRUE(Has(LineWith(out, "also poor past the training length"), "RoPE")) << out;
  EXPECT_TRUE(Has(out, "Norm preservation")) << out;
  EXPECT_TRUE(Has(out, "Llama 2/3, Mistral, Gemma, Qwen, DeepSeek, Phi")) << out;
  EXPECT_FALSE(Has(out, "[FAILED]")) << out;
  EXPECT_TRUE(Has(out, "All checks passed.")) << out;
}

TEST_F(DemoStory, WithoutPositionsAttentionIsOrderBlindAndEverySchemeIsNot) {
  const std::string& out = out_;
  // 1. Equivariance without positions, with a small max difference.
  const std::string eq = LineWith(out, "permutation-equivariant");
  EXPECT_TRUE(Has(eq, "< 1e-6")) << eq;
  EXPECT_TRUE(Has(eq, "[ok]")) << eq;
  // The printed "dog" rows of A (position 1) and B (position 4) are the same numbers.
  const std::string dog_a = LineWith(out, "A, \"dog\" at position 1: "),
                    dog_b = LineWith(out, "B, \"dog\" at position 4: ");
  ASSERT_FALSE(dog_a.empty());
  EXPECT_EQ(dog_a.substr(dog_a.find('[')), dog_b.substr(dog_b.find('['))) << out;
  // 2. Every scheme is order-aware, "none" is not.
  EXPECT_TRUE(Has(LineWith(out, "   none "), "no  [ok]")) << out;
  for (const char* scheme : {"sinusoidal", "learned (GPT-2", "RoPE (base", "T5 buckets", "Shaw"}) {
    const std::string line = LineWith(out, std::string("   ") + scheme);
    EXPECT_TRUE(Has(line, "yes [ok]")) << scheme << ": " << line;
  }
  EXPECT_TRUE(Has(out, "1. Attention without positions is word-order blind (x_t = e_t only, causal mask OFF")) << out;
  EXPECT_LT(NumberAfter(out, "permutation-equivariant", "perm t]| = "), 1e-6) << out;
  EXPECT_TRUE(LineWith(out, "   ALiBi (").empty()) << "ALiBi drawn without its causal mask:\n" << out;
}

TEST_F(DemoStory, TheCausalMaskAloneBreaksItAndAlibiLooksCloser) {
  // 3. The causal mask alone breaks it: A's and B's "dog" rows differ, the gap is large, the first
  // "the" is its own v, the two "the"s differ.
  const std::string sec3 = Section("3. A decoder's causal mask alone", "4. ");
  ASSERT_FALSE(sec3.empty()) << out_;
  const std::string dog_ac = LineWith(sec3, "A, \"dog\" at position 1: "),
                    dog_bc = LineWith(sec3, "B, \"dog\" at position 4: ");
  ASSERT_FALSE(dog_ac.empty());
  EXPECT_NE(dog_ac.substr(dog_ac.find('[')), dog_bc.substr(dog_bc.find('['))) << sec3;
  EXPECT_GT(NumberAfter(sec3, "order-aware", "perm t]| = "), 1e-3) << sec3;
  EXPECT_LT(NumberAfter(sec3, "sees only itself", "|out_0 - v_0| = "), 1e-6) << sec3;
  EXPECT_GT(NumberAfter(sec3, "now differ by", "now differ by "), 1e-3) << sec3;
  EXPECT_TRUE(Has(sec3, "NoPE")) << sec3;
  // ALiBi under the mask: each printed weight row sums to 1 (to the printed digits), its mean distance
  // is what the weights give, and ALiBi's is the smaller.
  double back[2] = {0, 0};
  int row = 0;
  for (const char* label : {"causal mask only:", "causal + ALiBi:"}) {
    const std::string line = LineWith(sec3, label);
    const std::vector<double> n = Numbers(line.substr(line.find(':') + 1));
    ASSERT_GE(n.size(), 6u) << line;
    double sum = 0, mean = 0;
    for (int j = 0; j < 5; ++j) {
      sum += n[j];
      mean += n[j] * (4 - j);
    }
    EXPECT_NEAR(sum, 1.0, 3e-3) << line;
    EXPECT_NEAR(mean, n[5], 3e-3) << line;
    back[row++] = n[5];
  }
  EXPECT_LT(back[1], back[0]) << sec3;
}

TEST_F(DemoStory, RopeChecksAndTheSeedsExercisesHold) {
  const std::string& out = out_;
  // 4. RoPE.
  EXPECT_TRUE(Has(LineWith(out, "largest relative change"), "[ok]")) << out;
  EXPECT_TRUE(Has(LineWith(out, "depends only on m - n"), "[ok]")) << out;
  EXPECT_TRUE(Has(out, "(1000002, 1000001)")) << out;
  // 4. The exercises, to the seed's digits.
  EXPECT_TRUE(Has(LineWith(out, "Exercise 1"), "v' = [0.7071, 0.7071]")) << out;
  EXPECT_TRUE(Has(out, "|v| = 1.0000, |v'| = 1.0000")) << out;
  EXPECT_TRUE(Has(LineWith(out, "Exercise 2"), "q' = [0.0, 1.0], k' = [0.7071, 0.7071]")) << out;
  EXPECT_TRUE(Has(out, "q' . k' = 0.7071 = cos((m - n) theta) = 0.7071 [ok]")) << out;
  EXPECT_TRUE(Has(LineWith(out, "Exercise 3"), "w' = [-3.0, -4.0]")) << out;
  EXPECT_TRUE(Has(out, "|w| = 5.0, |w'| = 5.0")) << out;
}

TEST_F(DemoStory, PastTheTrainingLengthEachScalingIsItsFormula) {
  // 6. Past the training length. Llama 2: theta_i = 10000^(-2i/128), 4096 trained positions.
  const std::string sec6 = Section("6. Where the seed is too simple: RoPE does not extrapolate by itself", "7. ");
  ASSERT_FALSE(sec6.empty()) << out_;
  auto theta = [](int i) { return std::pow(10000.0, -2.0 * i / 128.0); };
  int slow = 0, first_slow = -1;
  for (int i = 0; i < 64; ++i)
    if (2 * std::numbers::pi / theta(i) > 4096) {
      if (first_slow < 0) first_slow = i;
      ++slow;
    }
  EXPECT_EQ(slow, 18);
  EXPECT_TRUE(Has(sec6, fmt::format("{} of its 64 pairs", slow))) << sec6;
  EXPECT_TRUE(Has(sec6, fmt::format("(pairs {}..63: wavelength > 4096)", first_slow))) << sec6;
  {  // pair 63's row: wavelength, largest trained angle, angle at 16383
    const std::vector<double> n = Numbers(LineWith(sec6, "    63 "));
    ASSERT_EQ(n.size(), 4u) << sec6;
    EXPECT_NEAR(n[1], 2 * std::numbers::pi / theta(63), 0.051);
    EXPECT_NEAR(n[2], 4095 * theta(63), 5e-5);
    EXPECT_NEAR(n[3], 16383 * theta(63), 5e-5);
  }
  // Per scaling (factor 4): how far the slowest pair turns at 16383, as an unscaled position, and how
  // many slow pairs end past 4096, from each scaling's formula. NTK: base * 4^(128/126), so pair i
  // turns 4^(i/63) times slower; dynamic NTK at 16384: base * (4 * 4 - 3)^(128/126), 13^(i/63).
  auto past = [&](double (*divisor)(int)) {
    int n = 0;
    for (int i = first_slow; i < 64; ++i) n += 16383 / divisor(i) >= 4096;
    return n;
  };
  struct Want {
    const char* name;
    double slowest;
    int past;
  };
  const Want wants[] = {
      {"none      ", 16383.0, 18},
      {"linear    ", 16383 / 4.0, 0},
      {"NTK       ", 16383 / 4.0, past([](int i) { return std::pow(4.0, i / 63.0); })},
      {"dynamic   ", 16383 / 13.0, past([](int i) { return std::pow(13.0, i / 63.0); })},
      {"YaRN      ", 16383 / 4.0, 0},
      {"Llama 3   ", 16383 / 4.0, 0},
  };
  EXPECT_EQ(wants[2].past, 17);
  EXPECT_EQ(wants[3].past, 0);
  for (const Want& w : wants) {
    const std::string line = LineWith(sec6, std::string("   ") + w.name);
    ASSERT_FALSE(line.empty()) << w.name << "\n" << sec6;
    double slowest = NAN;
    int n = -1, of = -1;
    ASSERT_EQ(std::sscanf(line.c_str() + 13, "%lf %d of %d", &slowest, &n, &of), 3) << line;
    EXPECT_NEAR(slowest, w.slowest, 0.006) << line;
    EXPECT_EQ(n, w.past) << line;
    EXPECT_EQ(of, 18) << line;
    EXPECT_TRUE(Has(line, "[ok]")) << line;
  }
}

TEST(Demo, IsDeterministicAndHoldsForOtherSeeds) {
  int rc1 = -1, rc2 = -1;
  EXPECT_EQ(RunDemo("", &rc1), RunDemo("--seed 2024", &rc2));
  EXPECT_EQ(rc1, 0);
  for (const char* seed : {"1", "7", "123456789"}) {
    int rc = -1;
    const std::string out = RunDemo(std::string("--seed ") + seed, &rc);
    EXPECT_EQ(rc, 0) << "seed " << seed << "\n" << out;
    EXPECT_FALSE(Has(out, "[FAILED]")) << "seed " << seed << "\n" << out;
  }
}

TEST(Demo, HelpAndBadOption) {
  int rc = -1;
  EXPECT_TRUE(Has(RunDemo("--help", &rc), "--seed"));
  EXPECT_EQ(rc, 0);
  const std::string out = RunDemo("--seed notanumber", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(Has(out, "notanumber")) << out;
}

}  // namespace
}  // namespace posenc
