// Hugging Face config.json -> PositionScheme.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

struct HfConfigOptions {
  // Nested rope_parameters: the layer type to describe. Empty: "full_attention" when present, else the
  // first type in key order (noted). A name that is not there is kNotFound listing the ones that are.
  std::string layer_type{};
  // A decoder layer index: the scheme of that layer (its type by the family's rule, checked against
  // layer_type when both are given). A layer without attention (mamba, linear attention, ...) gives
  // PositionKind::kNone. -1: not given.
  int64_t layer = -1;
  // The RoPE site to describe (RotarySite names); empty: the family's first site (attention, or mla).
  // A site the family does not have is kInvalidArgument naming the sites it has.
  std::string site{};
  // The pair layout of a RoPE config whose model_type is not in the family registry
  // (model_families.hpp): without it such a config is refused (kInvalidArgument naming the model_type).
  // Ignored for a known family; a config with no model_type (and no class naming a family) is refused
  // unless it is given.
  std::optional<RopePairing> assume_layout{};
  // Keys the caller states as understood. A config key that names positions or rotation (rope, rotary,
  // position, nope, mrope, theta, partial) which neither the reader nor the family's registry row reads
  // or lists as deliberately ignored is refused naming it (never guessed past); a key listed here is
  // accepted as not changing the answer, noted.
  std::vector<std::string> understood_keys{};
};

// Parses a Hugging Face config.json text; `source` names it in errors. RoPE configs in both
// spellings: legacy top-level rope_theta + rope_scaling, and rope_parameters. The pairing layout
// is not in a config: it is the family's (ModelFamilies(), model_families.hpp, keyed by model_type, or
// by architectures / auto_map for remote-code families without one), as are the rotary window's
// default factor, the family's own key spellings (rope_embedding_base, kv_channels, rope_ratio,
// use_dynamic_ntk, rope_position_scale) and fixed bases. An unknown model_type with a RoPE scheme is
// kInvalidArgument naming it unless options.assume_layout states the layout; a config without
// model_type is read as half pairing, noted.
//
// The scheme's kind comes from the config's keys and the family's row: ALiBi (BLOOM, JAIS, Baichuan 2
// 13B; MPT's attn_config.alibi; Falcon's "alibi": true), T5 buckets (relative_attention_num_buckets, the
// T5 family), sinusoidal (XLM's sinusoidal_embeddings, Marian / FSMT / Pegasus / M2M-100, ...), learned
// (GPT-2, GPT-Neo, GPT-BigCode, OPT, BART, ...), none (Mamba, RWKV, Jamba), otherwise RoPE. RoPE dimension keys:
// head_dim (null = absent), else hidden_size / n_embd / d_model over num_attention_heads / n_head / n_heads; partial
// rotary from partial_rotary_factor, rotary_pct or rotary_dim; DeepSeek MLA's qk_rope_head_dim (the rotary part sits
// after qk_nope_head_dim). Every scaling's keys are checked as ValidateRopeConfig does; an unknown rope_type is
// kUnimplemented naming it. Errors name the source, the key and the value.
Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source);
Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source,
                                     const HfConfigOptions& options);
// Reads and parses a config.json file (kNotFound if it cannot be opened).
Result<PositionScheme> LoadHfConfig(const std::string& path, const HfConfigOptions& options = {});

}  // namespace posenc
