// `posenc demo` end to end: exit status, the equivariance claim and its breaking, RoPE's checks,
// the seed's exercise values, determinism, --help and a bad option.
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

TEST(Demo, TellsTheStoryAndEveryCheckHolds) {
  int rc = -1;
  const std::string out = RunDemo("", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(Has(out, "\"The dog chased the cat\"")) << out;
  EXPECT_TRUE(Has(out, "\"The cat chased the dog\"")) << out;
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
  for (const char* scheme : {"sinusoidal", "learned (GPT-2", "RoPE (base", "ALiBi", "T5 buckets", "Shaw"}) {
    const std::string line = LineWith(out, std::string("   ") + scheme);
    EXPECT_TRUE(Has(line, "yes [ok]")) << scheme << ": " << line;
  }
  // 3. RoPE.
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
  // 5. The summary table and the verdict.
  EXPECT_TRUE(Has(out, "Norm preservation")) << out;
  EXPECT_TRUE(Has(out, "Llama 2/3, Mistral, Gemma, Qwen, DeepSeek, Phi")) << out;
  EXPECT_FALSE(Has(out, "[FAILED]")) << out;
  EXPECT_TRUE(Has(out, "All checks passed.")) << out;
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
