// CheckJsonNesting: a bracket count outside strings, before any JSON is parsed.
#include "posenc/io/json_guard.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace posenc {

Status CheckJsonNesting(std::string_view text, int max_depth, std::string_view what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // skip the escaped character
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgumentError(
            fmt::format("{}: JSON nested deeper than {} levels at byte {} (refused before "
                        "parsing)",
                        what, max_depth, i));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return OkStatus();
}

std::string JsonSyntaxHint(std::string_view text, size_t byte) {
  const size_t at = byte == 0 ? 0 : byte - 1;
  const size_t from = at > 12 ? at - 12 : 0;
  const std::string_view window = text.substr(std::min(from, text.size()), 24);
  for (std::string_view lit : {"-Infinity", "Infinity", "NaN"}) {
    if (window.find(lit) != std::string_view::npos) {
      return fmt::format(" ({} is not JSON: Python's json.dump writes it for a non-finite float; write a number)", lit);
    }
  }
  return "";
}

}  // namespace posenc
