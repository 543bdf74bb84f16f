// Guards for JSON from files (safetensors headers; config.json, ggml parameters and golden cases read
// by the config layer): bound the nesting before parsing, and never print a whole value in a message.
//
// A 140 KB value of nested arrays where a number is expected parses fine (nlohmann's parser keeps its
// own stack), but anything recursive over it afterwards — dump() into an error message, a recursive
// walk — overflows the process's stack. CheckJsonNesting scans the text (strings skipped, no
// allocation) and refuses nesting deeper than `max_depth` with the byte offset, before parsing.
// JsonForMessage renders a parsed value shallowly: scalars as JSON (strings escaped and capped),
// arrays and objects by their first few members (compact, as dump() writes them), nested ones as [...N] / {...N}; never
// recursive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/core/message.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// Deepest nesting posenc's JSON readers accept (Hugging Face configs nest text_config/rope_scaling a
// few levels; safetensors headers three).
inline constexpr int kMaxJsonNesting = 32;

// kInvalidArgument "<what>: JSON nested deeper than <max_depth> levels at byte <offset>" when an
// array/object opens past `max_depth` levels. Malformed text is left to the parser (this scan only
// counts brackets outside strings).
Status CheckJsonNesting(std::string_view text, int max_depth, std::string_view what);

// For a JSON syntax error at `byte` (nlohmann's parse_error::byte, 1-based): "" or a hint naming what
// is there when it is a non-JSON literal Python's json.dump writes (NaN, Infinity, -Infinity).
std::string JsonSyntaxHint(std::string_view text, size_t byte);

// A one-line, bounded rendering of `v` (a nlohmann::json) for a message.
template <typename Json>
std::string JsonForMessage(const Json& v, size_t cap = 120) {
  // Built with append (GCC 12 warns falsely on "literal" + std::string&&).
  auto shallow = [](const Json& x) {
    std::string r;
    if (x.is_array() || x.is_object()) {
      const bool a = x.is_array();
      r.append(a ? "[" : "{");
      if (!x.empty()) r.append("...").append(std::to_string(x.size()));
      r.append(a ? "]" : "}");
    } else if (x.is_string()) {
      r.append("\"").append(EscapeForMessage(x.template get_ref<const std::string&>(), 60)).append("\"");
    } else {
      r = x.dump();  // number, bool, null: short
    }
    return r;
  };
  if (!v.is_array() && !v.is_object()) return shallow(v);
  const bool array = v.is_array();
  std::string out(array ? "[" : "{");
  size_t shown = 0;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string item;
    if (!array) item.append("\"").append(EscapeForMessage(it.key(), 40)).append("\":");
    item.append(shallow(*it));
    if (shown > 0 && out.size() + item.size() + 1 > cap) break;
    if (shown > 0) out.append(",");
    out.append(item);
    ++shown;
  }
  if (shown < v.size()) {
    out.append(",... (").append(std::to_string(v.size())).append(array ? " elements)" : " keys)");
  }
  out.append(array ? "]" : "}");
  return out;
}

}  // namespace posenc
