// A config.json text parsed for a test, the failure reported (with the message) where it does not parse.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"

namespace posenc::testing {

inline PositionScheme ParseConfigOrFail(const std::string& text, const HfConfigOptions& options = {}) {
  Result<PositionScheme> s = ParseHfConfig(text, "test.json", options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : PositionScheme{};
}

}  // namespace posenc::testing
