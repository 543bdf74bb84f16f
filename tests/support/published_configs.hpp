// The published config.json files of tests/conformance/configs (one conformance record per file, the
// config under "config"), for tests that check real models' descriptions (rope_check_test,
// rope_diff_test, check_cli_test).
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace posenc::testing {

// The "config" object of conformance record `name` (the file name without .json).
inline nlohmann::json PublishedConfig(const std::string& name) {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/tests/conformance/configs/" + name + ".json");
  return nlohmann::json::parse(in)["config"];
}

}  // namespace posenc::testing
