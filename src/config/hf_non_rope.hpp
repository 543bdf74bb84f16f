// Internal to the Hugging Face reader (hf_config_internal.hpp): the schemes of a config.json that are
// not RoPE (ALiBi, T5's relative buckets, learned and sinusoidal absolute tables, none).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"

namespace posenc::hf_json {

// Returns true (and fills s) when the config names a non-RoPE scheme; reads the head count either way.
Result<bool> ParseNonRope(const nlohmann::json& j, const std::string& source, PositionScheme* s);

}  // namespace posenc::hf_json
