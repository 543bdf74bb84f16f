// Runs the golden cases of ../shared/golden (format: golden/FORMAT.md) against posenc.
#pragma once

#include <string>
#include <vector>

#include "golden_case.hpp"  // FindGoldenCases
#include "posenc/core/status.hpp"

namespace posenc::golden {

struct GoldenResult {
  std::string name;  // case folder path as given
  bool passed = false;
  std::string detail;  // what was compared, or why it failed
};

// Runs one case folder; a case posenc cannot run is a failure, with the reason in `detail`.
GoldenResult RunGoldenCase(const std::string& dir);

}  // namespace posenc::golden
