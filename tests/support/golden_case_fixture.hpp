// A GoogleTest fixture over the golden case folders of GoldenCaseDirs: one test instance per case.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "golden_case.hpp"
#include "test_support.hpp"

namespace posenc::testing {

// The schemes a test runs over, as its failure names them ("rope", "mrope / rope_vision_2d"): a
// string literal as a template argument.
template <size_t N>
struct SchemeNames {
  constexpr SchemeNames(const char (&s)[N]) { std::copy_n(s, N, text); }  // NOLINT: implicit on purpose
  char text[N];
};

// SetUp loads the parameter's case. The single "" parameter GoldenCaseDirs gives when no case was
// found skips the test when the shared data is absent (fails under POSENC_REQUIRE_DATA), and fails
// when golden/hf is there but holds no case of the schemes `What`. A case folder that does not load
// fails naming the folder. Either way the test body does not run.
//   class RopeGolden : public testing::GoldenCaseTest<"rope"> {};
template <SchemeNames What>
class GoldenCaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().empty()) {
      POSENC_REQUIRE_DATA(golden_hf, "golden/hf");
      FAIL() << "golden/hf exists but holds no " << What.text << " case";
    }
    Result<golden::GoldenCase> gc = golden::GoldenCase::Load(GetParam());
    ASSERT_TRUE(gc.ok()) << gc.status().ToString();
    case_.emplace(std::move(gc).value());
  }

  // The case (its folder is GetParam()).
  const golden::GoldenCase& Case() const { return *case_; }

 private:
  std::optional<golden::GoldenCase> case_;
};

}  // namespace posenc::testing
