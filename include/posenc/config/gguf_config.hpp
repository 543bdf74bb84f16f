// GGUF metadata -> PositionScheme, with llama.cpp's per-architecture pairing.
#pragma once

#include <string>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class GgufFile;

// A model's scheme from GGUF metadata: general.architecture, <arch>.rope.freq_base (required),
// <arch>.rope.dimension_count (else head_dim), <arch>.attention.head_count, .embedding_length,
// .attention.key_length, .context_length, the <arch>.rope.scaling.* keys (type none / linear / yarn,
// factor, original_context_length, attn_factor, yarn_ext_factor, yarn_beta_fast, yarn_beta_slow) and
// the rope_freqs tensor (per-pair divisors). The result is a kGgml RoPE config with the numbers
// llama.cpp passes to ggml_rope_ext, and the pairing llama.cpp fixes per architecture
// (llama_model_rope_type). kNotFound: file or required key missing; kUnimplemented: an architecture
// whose rope type posenc does not know, or an M-RoPE / vision one.
//
// llama.cpp falls back to base 10000 when freq_base is absent (every early Llama 2 GGUF lacks the
// key); posenc does the same and says so in a note, unless `options.allow_default_freq_base` is
// cleared (then a missing key is kNotFound naming it).
struct GgufConfigOptions {
  bool allow_default_freq_base = true;
  // The layer type to describe: "" or "full_attention" (the file's rope keys), or "sliding_attention":
  // <arch>.rope.freq_base_swa and <arch>.rope.scaling_swa.* where the file has them, llama.cpp's fixed
  // values for Gemma 3 (base 10000, no scaling) where it has not. Another name, or sliding_attention
  // for a file without sliding-window parameters, is refused naming the key looked for.
  std::string layer_type{};
};
Result<PositionScheme> LoadGgufConfig(const std::string& path, const GgufConfigOptions& options = {});
// The same from a GGUF file already open (or parsed from bytes); errors name f.name().
Result<PositionScheme> GgufConfigFromFile(const GgufFile& f, const GgufConfigOptions& options = {});

}  // namespace posenc
