// Internal to the Hugging Face config.json reader: the small helpers its parts share. The reader is
// hf_config.cpp (the top-level parse, the family's identity, the positional-key check) and its parts,
// each with its own header: hf_layer_keys (per-layer keys and layer types), hf_non_rope (schemes that
// are not RoPE), hf_sites (positions switch, RoPE sites and the site's view of the config),
// hf_rope_params (the RoPE parameter set and its scaling) and hf_rope_dims (heads, rotary layout, base).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/model_families.hpp"
#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "config/json_util.hpp"

namespace posenc::hf_json {

using nlohmann::json;

// The first of `keys` present (non-null) in `j`, or "".
inline std::string FirstKey(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (json_util::Has(j, k)) return k;
  return "";
}

// A note on the RoPE config and on the scheme.
inline void Note(PositionScheme* s, std::string note) {
  s->rope.notes.push_back(note);
  s->notes.push_back(std::move(note));
}

inline bool IsOneOf(const std::string& v, std::initializer_list<const char*> set) {
  for (const char* x : set)
    if (v == x) return true;
  return false;
}

// The registry row of the scheme's model_type (model_families.hpp), or nullptr.
inline const ModelFamily* FamilyOf(const PositionScheme& s) { return FindModelFamily(s.model_type); }

// "config S: key 'k' is <value>, expected <what>": a value of the wrong shape, named with its key.
inline Status ExpectedError(const std::string& source, std::string_view key, const json& v, std::string_view what) {
  return json_util::KeyError(source, key, fmt::format("is {}, expected {}", JsonForMessage(v), what));
}

// The list under `key`, or nullptr when the key is absent or null; any other value is refused
// (ExpectedError, "expected <what>").
inline Result<const json*> FindList(const json& j, std::string_view key, const std::string& source,
                                    std::string_view what) {
  const json* v = json_util::Find(j, key);
  if (v != nullptr && !v->is_array()) return ExpectedError(source, key, *v, what);
  return v;
}

}  // namespace posenc::hf_json
