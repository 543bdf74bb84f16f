// Internal to the Hugging Face reader (hf_config_internal.hpp): a RoPE config.json's heads, hidden
// size and fused qkv layout, the head and its rotary window and pairing, the base and the context
// length. ParseRope (hf_rope_params) calls these in that order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"
#include "config/hf_rope_params.hpp"

namespace posenc::hf_json {

// Head counts, hidden size, the fused qkv layout and the head: head_dim, DeepSeek MLA's
// qk_rope_head_dim after qk_nope_head_dim, or hidden / heads.
struct RopeDims {
  int64_t head_dim = 0;
  int64_t rotary_start = 0;
  int64_t rotary_dim = -1;  // -1: not fixed yet
};

Result<RopeDims> ReadDims(const nlohmann::json& j, const std::string& source, PositionScheme* s);

// Partial rotary (rope_parameters' partial_rotary_factor, top-level partial_rotary_factor,
// rotary_pct (GPT-NeoX), rotary_dim (GPT-J, CodeGen), the family's default) and the pairing: the
// config's layout.
Status ReadRotaryLayout(const nlohmann::json& j, const nlohmann::json& p, const RopeSource& src,
                        const std::string& source, RopeDims d, std::optional<RopePairing> assume_layout,
                        std::optional<RopePairing> site_pairing, PositionScheme* s);

// Base: the family's base key, rope_theta (rope_parameters, then top level), rotary_emb_base (GPT-NeoX),
// times the family's base scale. Then the context length.
Status ReadBaseAndLength(const nlohmann::json& j, const nlohmann::json& p, const std::string& source,
                         PositionScheme* s);

}  // namespace posenc::hf_json
