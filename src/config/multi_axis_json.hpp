// Internal to the config readers: the multi-axis parts of a Hugging Face config.json and of ggml
// parameters (multi_axis_config.cpp), called once from hf_config.cpp and ggml_config.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc::multi_axis_json {

// Hugging Face text M-RoPE, after ParseRope filled s->rope: `params` is the rope_scaling /
// rope_parameters object (empty when absent). model_type (optionally with a "_text" suffix) decides
// the section layout, a family fact: qwen2_vl, qwen2_5_vl chunked; qwen3_vl, qwen3_vl_moe, qwen3_5,
// qwen3_5_moe interleaved (the mrope_interleaved key is not read). qwen3_5 without a partial rotary
// key gets partial_rotary_factor 0.25 (its config class's default, noted). mrope_section without one
// of those model types is kUnimplemented naming the model type; a family config without
// mrope_section stays 1-D (noted: for text tokens t = h = w it is the same rotation).
Status ReadHfMultiAxis(const nlohmann::json& j, const nlohmann::json& params, const std::string& source,
                       PositionScheme* s);

// Whether `mode` is one of ggml_rope_multi's: 8 MROPE, 24 VISION, 40 IMROPE.
bool IsGgmlMultiAxisMode(int64_t mode);

// ggml_rope_multi parameters: `sections` (4 integers, in pairs) is required; MROPE / IMROPE rotate
// n_dims dims (pairs (j, j + n_dims/2)), VISION n_dims pairs (j, j + n_dims) over a head of exactly
// 2 * n_dims. sum(sections) must not pass head_dim (ggml asserts it). Sets rc->layout and
// rc->multi_axis; errors name `source`, the key and its value.
Status ReadGgmlMultiAxis(const nlohmann::json& j, int64_t mode, int64_t n_dims, int64_t head_dim,
                         const std::string& source, RopeConfig* rc);

// The same from sections already read (GGUF's <arch>.rope.dimension_sections, or the JSON's
// `sections`), for MROPE (8) and IMROPE (40): n_dims rotated dims in NEOX pairs, the sections in ggml's
// rules. `what` names the file and key in errors. (VISION needs the JSON form's extra checks.)
Status SetGgmlTextMultiAxis(std::vector<int64_t> sections, int64_t mode, int64_t n_dims, int64_t head_dim,
                            const std::string& what, RopeConfig* rc);

}  // namespace posenc::multi_axis_json
