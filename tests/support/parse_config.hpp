// A config.json text parsed for a test, the failure reported (with the message) where it does not parse;
// and the check of the model a scheme names.
#pragma once

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"

namespace posenc::testing {

inline PositionScheme ParseConfigOrFail(const std::string& text, const HfConfigOptions& options = {}) {
  Result<PositionScheme> s = ParseHfConfig(text, "test.json", options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : PositionScheme{};
}

// The model a scheme names: its position kind, model_type, head count and hidden size.
struct SchemeModel {
  PositionKind kind;
  std::string model_type;
  int64_t num_heads, hidden_size;
};

inline void ExpectSchemeModel(const PositionScheme& s, const SchemeModel& want) {
  EXPECT_EQ(s.kind, want.kind);
  EXPECT_EQ(s.model_type, want.model_type);
  EXPECT_EQ(s.num_heads, want.num_heads);
  EXPECT_EQ(s.hidden_size, want.hidden_size);
}

}  // namespace posenc::testing
