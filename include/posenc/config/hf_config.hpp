// Hugging Face config.json -> PositionScheme.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

struct HfConfigOptions {
  // Nested rope_parameters: the layer type to describe. Empty: "full_attention" when present, else the
  // first type in key order (noted). A name that is not there is kNotFound listing the ones that are.
  std::string layer_type;
  // The pair layout of a RoPE config whose model_type is not in the family registry
  // (model_families.hpp): without it such a config is refused (kInvalidArgument naming the model_type).
  // Ignored for a known family; a config with no model_type at all is read as half pairing (noted).
  std::optional<RopePairing> assume_layout{};
};

// Parses a Hugging Face config.json text; `source` names it in errors. RoPE configs in both
// spellings: legacy top-level rope_theta + rope_scaling, and rope_parameters. The pairing layout
// is not in a config: it defaults to `half` (Hugging Face's) unless model_type fixes it (the
// HfRopeFamilies table: gptj, cohere, glm4, llama4, ... interleaved; glm4's default partial factor
// 0.5); callers that know better set config.rope.layout.pairing afterwards.
//
// The scheme's kind comes from the config: ALiBi (BLOOM; MPT's attn_config.alibi; Falcon's
// "alibi": true), T5 buckets (relative_attention_num_buckets), sinusoidal (XLM's
// sinusoidal_embeddings, Marian / FSMT / Pegasus / M2M-100), learned (GPT-2, GPT-Neo, GPT-BigCode,
// OPT, BART), otherwise RoPE. RoPE dimension keys: head_dim (null = absent), else
// hidden_size / n_embd / d_model over num_attention_heads / n_head / n_heads; partial rotary from
// partial_rotary_factor, rotary_pct or rotary_dim; DeepSeek MLA's qk_rope_head_dim (the rotary part
// sits after qk_nope_head_dim). Every scaling's keys are checked as ValidateRopeConfig does; an
// unknown rope_type is kUnimplemented naming it. Errors name the source, the key and the value.
Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source);
Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source,
                                     const HfConfigOptions& options);
// Reads and parses a config.json file (kNotFound if it cannot be opened).
Result<PositionScheme> LoadHfConfig(const std::string& path, const HfConfigOptions& options = {});

}  // namespace posenc
