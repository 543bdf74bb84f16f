// The JSON rows a command prints one per line (`posenc bench --json`): every line that starts with
// '{', parsed; other lines (headers, notes) are skipped.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::testing {

inline std::vector<nlohmann::json> JsonLines(const std::string& output) {
  std::vector<nlohmann::json> rows;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace posenc::testing
