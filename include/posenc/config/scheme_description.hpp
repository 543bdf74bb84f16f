// One description of a positional scheme, the data `posenc inspect` prints (as text and --json) and
// the web explorer draws; a binding can hand the same text on.
//
// Example:
//   PositionScheme s = LoadHfConfig("config.json").value();
//   std::string json = DescribeSchemeJson(s, "config.json", /*seq_len=*/8192).value();
#pragma once

#include <cstdint>
#include <string>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// The scheme as one JSON object's text (UTF-8; a byte of a string that is not valid UTF-8 becomes
// U+FFFD). Keys, where they apply:
//   source, scheme, model_type, num_heads, num_kv_heads, hidden_size, fused_qkv, notes;
//   ALiBi: alibi_variant, alibi_bias_max; T5: num_buckets, max_distance, bidirectional;
//   learned / sinusoidal: max_position_embeddings, layout;
//   RoPE: spelling, layer_types, layer_type, sites, site, rotation_sign, rope_key, layer, layout,
//     head_dim, rotary_start, rotary_dim, base, max_position_embeddings, scaling, scaling_params (the
//     scaling's keys, ScalingParamsOf), nominal_factor, original_max_position_embeddings, seq_len
//     (and seq_len_note when defaulted), attention_scaling, multi_axis {section_layout, rules,
//     sections, num_components}, query_temperature {formula, attn_scale, floor_scale, offset, on,
//     layers}, pairs [{pair, dims, frequency, wavelength (null when unrotated), divisor, regime,
//     component}], unscaled_wavelengths (each pair's without the scaling);
//   every scheme with layers: layers {count, rule, rope, attention, nope_layers, rope_keys, rope_key,
//     head_dim, types}.
// `seq_len` < 0: max_position_embeddings (noted). Errors: those of ComputeRopeFrequencies,
// ComputeMultiAxisRope and LayerRopeSchedule.
Result<std::string> DescribeSchemeJson(const PositionScheme& scheme, const std::string& source, int64_t seq_len);

}  // namespace posenc
