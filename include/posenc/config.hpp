// A model's positional scheme, read from its Hugging Face config.json (or, later, GGUF metadata),
// as one value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/rope_config.hpp"
#include "posenc/status.hpp"

namespace posenc {

enum class PositionKind { kRope, kLearned, kSinusoidal, kAlibi, kT5Bucket, kNone };
std::string_view ToString(PositionKind k);

struct PositionScheme {
  PositionKind kind = PositionKind::kRope;
  std::string model_type;  // config's model_type, if any
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t hidden_size = 0;
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
};

// Parses a Hugging Face config.json text; `source` names it in errors. RoPE configs in both
// spellings: legacy top-level rope_theta + rope_scaling, and rope_parameters. The pairing layout
// is not in a config: it defaults to `half` (Hugging Face's) unless model_type fixes it (gptj:
// interleaved); callers that know better set config.rope.layout.pairing afterwards.
Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source);
// Reads and parses a config.json file (kNotFound if it cannot be opened).
Result<PositionScheme> LoadHfConfig(const std::string& path);

}  // namespace posenc
