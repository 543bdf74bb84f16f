// Internal to the Hugging Face reader (hf_config_internal.hpp): a RoPE config.json's parameter set
// (rope_parameters / rope_scaling, flat or one per layer type), its scaling and the family's keys read
// with it; the head and rotary layout are hf_rope_dims'.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc::hf_json {

// The rope parameter object (flat), the spelling, and the layer types of a nested form.
struct RopeSource {
  const nlohmann::json* params = nullptr;  // rope_parameters / rope_scaling object, or nullptr
  std::string spelling = "plain";
  bool plain_type = false;  // the layer type takes plain RoPE: the params' base, not their scaling (OLMo 3)
};

// s->rope from the config (as SiteView gives it): the parameter set, the scaling's row and keys, the
// dims and layout, base and length, the family's keys, M-RoPE; validated. `site_pairing`: a pairing
// the site fixes (the DSA indexer).
Status ParseRope(const nlohmann::json& j, const std::string& source, const HfConfigOptions& options,
                 std::optional<RopePairing> site_pairing, PositionScheme* s);

}  // namespace posenc::hf_json
