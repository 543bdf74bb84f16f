// ggml_rope_ext's own parameters -> RopeConfig, and a JSON text of either spelling -> RopeConfig.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc {

// A RoPE config from ggml_rope_ext's own parameters, as a ggml golden case's `config` object spells
// them: n_dims, mode (0 = NORMAL = interleaved pairs, 2 = NEOX = half), n_ctx_orig, freq_base,
// freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, and optionally freq_factors (a list of
// n_dims/2 divisors). `json_text` may also be a whole case.json (its "config" object is used).
// n_dims, mode and freq_base are required; the others default to ggml's neutral values (noted).
// head_dim >= n_dims; dims n_dims.. pass through. ggml_rope_multi's modes 8 (MROPE), 40 (IMROPE) and
// 24 (VISION) take `sections` (4 integers) and come back with multi_axis set (multi_axis.hpp; VISION
// rotates n_dims pairs over a head of 2 * n_dims); other modes are kUnimplemented.
Result<RopeConfig> RopeConfigFromGgmlParams(std::string_view json_text, int64_t head_dim, const std::string& source);

// The RoPE of a JSON text that is either ggml_rope_ext parameters (n_dims and mode present, at the top
// level or under "config", as in a ggml golden case; head_dim comes from the caller) or a Hugging
// Face config.json in either spelling. Errors as RopeConfigFromGgmlParams / ParseHfConfig, and
// kInvalidArgument naming `source` when the config's scheme is not RoPE. A ggml config comes back
// with scaling type kGgml; a Hugging Face one never does.
// The text is parsed once (src/config/config_json.hpp: both readers take the parsed value), and the
// config comes back validated once (ValidateRopeConfig): ComputeRopeFrequencies on it reuses the
// frequencies validation computed.
Result<RopeConfig> ParseRopeConfigJson(std::string_view json_text, int64_t head_dim, const std::string& source);

}  // namespace posenc
