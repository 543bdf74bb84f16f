// A model's positional scheme, read from its Hugging Face config.json (or, later, GGUF metadata),
// as one value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope_config.hpp"
#include "posenc/status.hpp"

namespace posenc {

class GgufFile;

enum class PositionKind { kRope, kLearned, kSinusoidal, kAlibi, kT5Bucket, kNone };
std::string_view ToString(PositionKind k);

// How a fused query_key_value projection (one [rows, hidden] weight for q, k and v) orders its rows,
// as the model's Hugging Face modeling code splits it. Head counts are the config's.
enum class FusedQkvLayout {
  kNone,        // the model type has no such tensor (or posenc does not know how it is split)
  kPerHead,     // per query head [q, k, v]: gpt_neox, persimmon, falcon without multi-query
  kPerKvGroup,  // per key/value head [num_heads / num_kv_heads q heads, k, v]: falcon new_decoder_architecture
  kQThenKThenV  // all q heads, then the k heads, then the v heads: falcon multi-query (one k and one v head)
};
std::string_view ToString(FusedQkvLayout l);

struct PositionScheme {
  PositionKind kind = PositionKind::kRope;
  std::string model_type;  // config's model_type, if any
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t hidden_size = 0;
  // The row order of the model's fused query_key_value weight, if it has one (layout converter).
  FusedQkvLayout fused_qkv = FusedQkvLayout::kNone;
  RopeConfig rope;  // kind == kRope
  // absolute schemes
  int64_t max_position_embeddings = 0;
  // alibi
  std::string alibi_variant;  // "bloom" or "mpt"
  double alibi_bias_max = 8.0;
  // t5
  int64_t t5_num_buckets = 0;
  int64_t t5_max_distance = 0;
  bool t5_bidirectional = true;
  // sinusoidal: "interleaved" (sin at even dims: Vaswani, XLM) or "concat" ([sin | cos]: fairseq, Marian)
  std::string sinusoidal_layout;
  // rope: the config's spelling ("rope_parameters", "rope_scaling", "plain", "gguf", "ggml params")
  std::string rope_spelling;
  // rope_parameters in the nested per-layer-type form ({"full_attention": {...}, ...}): the types
  // found, and the one `rope` describes; both empty for a single RoPE.
  std::vector<std::string> rope_layer_types;
  std::string rope_layer_type;
  // Notes on values taken from a family default or inferred (for every kind; RoPE ones are also in
  // rope.notes).
  std::vector<std::string> notes;
};

struct HfConfigOptions {
  // Nested rope_parameters: the layer type to describe. Empty: "full_attention" when present, else the
  // first type in key order (noted). A name that is not there is kNotFound listing the ones that are.
  std::string layer_type;
};

// Parses a Hugging Face config.json text; `source` names it in errors. RoPE configs in both
// spellings: legacy top-level rope_theta + rope_scaling, and rope_parameters. The pairing layout
// is not in a config: it defaults to `half` (Hugging Face's) unless model_type fixes it (gptj:
// interleaved); callers that know better set config.rope.layout.pairing afterwards.
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

// A RoPE config from ggml_rope_ext's own parameters, as a ggml golden case's `config` object spells
// them: n_dims, mode (0 = NORMAL = interleaved pairs, 2 = NEOX = half), n_ctx_orig, freq_base,
// freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, and optionally freq_factors (a list of
// n_dims/2 divisors). `json_text` may also be a whole case.json (its "config" object is used).
// n_dims, mode and freq_base are required; the others default to ggml's neutral values (noted).
// head_dim >= n_dims; dims n_dims.. pass through. Other modes (M-RoPE, vision) are kUnimplemented.
Result<RopeConfig> RopeConfigFromGgmlParams(std::string_view json_text, int64_t head_dim, const std::string& source);

// A model's scheme from GGUF metadata: general.architecture, <arch>.rope.freq_base (required),
// <arch>.rope.dimension_count (else head_dim), <arch>.attention.head_count, .embedding_length,
// .attention.key_length, .context_length, the <arch>.rope.scaling.* keys (type none / linear / yarn,
// factor, original_context_length, attn_factor, yarn_ext_factor, yarn_beta_fast, yarn_beta_slow) and
// the rope_freqs tensor (per-pair divisors). The result is a kGgml RoPE config with the numbers
// llama.cpp passes to ggml_rope_ext, and the pairing llama.cpp fixes per architecture
// (llama_model_rope_type). kNotFound: file or required key missing; kUnimplemented: an architecture
// whose rope type posenc does not know, or an M-RoPE / vision one.
//
// llama.cpp itself falls back to base 10000 when freq_base is absent; posenc refuses that unless
// `options.allow_default_freq_base` is set (then the fallback is taken and noted).
// The RoPE of a JSON text that is either ggml_rope_ext parameters (n_dims and mode present, at the top
// level or under "config", as in a ggml golden case; head_dim comes from the caller) or a Hugging
// Face config.json in either spelling. Errors as RopeConfigFromGgmlParams / ParseHfConfig, and
// kInvalidArgument naming `source` when the config's scheme is not RoPE. A ggml config comes back
// with scaling type kGgml; a Hugging Face one never does.
Result<RopeConfig> ParseRopeConfigJson(std::string_view json_text, int64_t head_dim, const std::string& source);

struct GgufConfigOptions {
  bool allow_default_freq_base = false;
};
Result<PositionScheme> LoadGgufConfig(const std::string& path, const GgufConfigOptions& options = {});
// The same from a GGUF file already open (or parsed from bytes); errors name f.name().
Result<PositionScheme> GgufConfigFromFile(const GgufFile& f, const GgufConfigOptions& options = {});

}  // namespace posenc
