// ParseJsonText / ReadJsonFile: see posenc/io/json_read.hpp.
#include "posenc/io/json_read.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/message.hpp"

namespace posenc {

namespace {

// The object keys leading to the first array/object that opens past `max_depth` levels, as
// "a.b.c" (at most 4 keys, then "..."), or "" when there are none. One scan, no allocation beyond
// the keys (each capped); strings are skipped as CheckJsonNesting skips them.
std::string KeyPathAtDepth(std::string_view text, int max_depth) {
  std::vector<std::string> keys;  // keys[d]: the current key of the object at depth d+1 ("" in arrays)
  std::string last;               // the last string closed, capped
  bool last_is_string = false;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      last.clear();
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        else if (last.size() < 64)
          last.push_back(text[i]);
      }
      last_is_string = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (c == ':' && last_is_string && depth > 0 && static_cast<size_t>(depth) <= keys.size()) keys[depth - 1] = last;
    last_is_string = false;
    if (c == '[' || c == '{') {
      if (++depth > max_depth) break;
      if (static_cast<size_t>(depth) > keys.size()) keys.resize(depth);
      keys[depth - 1].clear();
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  std::string path;
  int shown = 0;
  for (int d = 0; d < std::min<int>(depth - 1, static_cast<int>(keys.size())); ++d) {
    if (keys[d].empty()) continue;
    if (shown == 4) {
      path.append("..");
      break;
    }
    if (!path.empty()) path.append(".");
    path.append(keys[d]);
    ++shown;
  }
  return path;
}

}  // namespace

Result<nlohmann::json> ParseJsonText(std::string_view text, std::string_view what, int max_depth) {
  if (Status depth = CheckJsonNesting(text, max_depth, what); !depth.ok()) {
    const std::string path = KeyPathAtDepth(text, max_depth);
    if (path.empty()) return depth;
    return Status(depth.code(), fmt::format("{} (under key {})", depth.message(), QuoteForMessage(path, 120)));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return InvalidArgumentError(fmt::format("{}: not valid JSON at byte {}: {}{}", what, e.byte,
                                            EscapeForMessage(e.what(), 160), JsonSyntaxHint(text, e.byte)));
  } catch (const std::exception& e) {
    return InvalidArgumentError(fmt::format("{}: not valid JSON: {}", what, EscapeForMessage(e.what(), 160)));
  }
}

Result<nlohmann::json> ReadJsonFile(const std::string& path, std::string_view what, std::string* text_out,
                                    uint64_t max_bytes) {
  POSENC_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, max_bytes));
  POSENC_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonText(text, what));
  if (text_out != nullptr) *text_out = std::move(text);
  return j;
}

}  // namespace posenc
