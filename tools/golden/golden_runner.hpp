// Runs the golden cases of ../shared/golden (format: golden/FORMAT.md) against posenc.
#pragma once

#include <string>
#include <vector>

#include "posenc/core/status.hpp"

namespace posenc::cli {

struct GoldenResult {
  std::string name;      // case folder path as given
  bool passed = false;
  std::string detail;    // what was compared, or why it failed
};

// Every folder at or under each path that holds a case.json, sorted; kNotFound for a missing path.
Result<std::vector<std::string>> FindGoldenCases(const std::vector<std::string>& paths);
// Runs one case folder; a case posenc cannot run is a failure, with the reason in `detail`.
GoldenResult RunGoldenCase(const std::string& dir);

}  // namespace posenc::cli
