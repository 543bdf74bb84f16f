// CheckJsonNesting: a bracket count outside strings, before any JSON is parsed.
#include "posenc/io/json_guard.hpp"

#include <fmt/format.h>

namespace posenc {

Status CheckJsonNesting(std::string_view text, int max_depth, std::string_view what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // skip the escaped character
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgumentError(fmt::format("{}: JSON nested deeper than {} levels at byte {} (refused before "
                                                "parsing)", what, max_depth, i));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return OkStatus();
}

}  // namespace posenc
