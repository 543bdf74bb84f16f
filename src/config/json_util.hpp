// The config readers' JSON getters: a key's value of the expected type, or an error naming the
// source, the key and the value.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/status.hpp"
#include "posenc/io/json_guard.hpp"

namespace posenc::json_util {

using nlohmann::json;

inline Status KeyError(const std::string& source, std::string_view key, const std::string& why) {
  return InvalidArgumentError(fmt::format("config {}: key '{}' {}", source, key, why));
}

inline bool Has(const json& j, std::string_view key) {
  const auto it = j.find(std::string(key));
  return it != j.end() && !it->is_null();
}

inline Result<double> GetNumber(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (!it->is_number()) return KeyError(source, key, fmt::format("is {}, expected a number", JsonForMessage(*it)));
  return it->get<double>();
}

inline Result<int64_t> GetInt(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) {
    const double v = it->get<double>();
    if (std::isfinite(v) && std::floor(v) == v && std::abs(v) < 9.0e15) return static_cast<int64_t>(v);
  }
  return KeyError(source, key, fmt::format("is {}, expected an integer", JsonForMessage(*it)));
}

inline Result<bool> GetBool(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (!it->is_boolean())
    return KeyError(source, key, fmt::format("is {}, expected true or false", JsonForMessage(*it)));
  return it->get<bool>();
}

inline Result<std::string> GetString(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (!it->is_string()) return KeyError(source, key, fmt::format("is {}, expected a string", JsonForMessage(*it)));
  return it->get<std::string>();
}

inline Result<std::vector<double>> GetNumberList(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end() || it->is_null()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (!it->is_array())
    return KeyError(source, key, fmt::format("is {}, expected a list of numbers", JsonForMessage(*it)));
  std::vector<double> out;
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_number())
      return KeyError(source, fmt::format("{}[{}]", key, i),
                      fmt::format("is {}, expected a number", JsonForMessage((*it)[i])));
    out.push_back((*it)[i].get<double>());
  }
  return out;
}

}  // namespace posenc::json_util
