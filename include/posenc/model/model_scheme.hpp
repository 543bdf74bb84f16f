// One answer to "which positional scheme does this model have?", for every format OpenModel reads and
// for a bare config.json.
//
// Example:
//   ModelFile model = OpenModel("llama-2-tiny-random.gguf").value();
//   ModelSchemeOptions options;
//   options.allow_default_freq_base = true;
//   PositionScheme s = ModelScheme(model, options).value();
//   RopeFrequencies f = ComputeRopeFrequencies(s.rope, seq_len).value();
//
// Where each format's scheme comes from (each file parsed once: the scheme is read from what OpenModel
// already holds):
//   GGUF         the parsed metadata (GgufConfigFromFile: llama.cpp's per-architecture pairing, n_rot from
//                <arch>.rope.dimension_count, head size from <arch>.attention.key_length)
//   HF folder,   the config.json text OpenModel read (ParseHfConfig: head_dim from the config's head_dim
//   safetensors  where it states one, else hidden_size / num_attention_heads)
//   llama2.c     the header: run.c's fixed scheme (Llama2cScheme below, the one place it is written)
//   .npy, or a safetensors file without config.json: kNotFound naming the file
// Head dims always come from the file's own keys; d_model / n_heads only where the file states nothing
// else (and llama2.c, whose run.c defines head_size that way).
//
// The family-specific facts that no key carries (the pair layout of a family's modeling code, the
// defaults of remote-code families) are the family registry's (posenc/config/model_families.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"
#include "posenc/model/model_file.hpp"

namespace posenc {

struct Llama2cConfig;

// What a caller may state that the file does not.
struct ModelSchemeOptions {
  // Nested rope_parameters (Gemma 3 style): which layer type to describe (HfConfigOptions::layer_type).
  // A GGUF: "sliding_attention" reads <arch>.rope.freq_base_swa / rope.scaling_swa where the file has
  // them (or the architecture fixes them); a GGUF without per-layer-type parameters refuses it.
  std::string layer_type;
  // Which decoder layer (HfConfigOptions::layer; -1 none) and RoPE site (HfConfigOptions::site).
  int64_t layer = -1;
  std::string site;
  // A GGUF without <arch>.rope.freq_base: llama.cpp's 10000, noted (true, as llama.cpp runs it), or
  // kNotFound naming the key (false).
  bool allow_default_freq_base = true;
  // The pair layout, replacing the format's or the family's (RoPE schemes only; noted when it differs).
  std::optional<RopePairing> pairing;
  // A Hugging Face config whose model_type is not in the family registry: the pair layout to read it
  // with (HfConfigOptions::assume_layout); without it such a config is refused. Known families ignore it.
  std::optional<RopePairing> assume_layout{};
  // Positional-looking config keys the caller states as understood (HfConfigOptions::understood_keys).
  std::vector<std::string> understood_keys{};
};

// The scheme of an opened model. Errors name the file: the config readers' errors, kNotFound when the
// file carries no scheme (.npy, safetensors without config.json).
Result<PositionScheme> ModelScheme(const ModelFile& model, const ModelSchemeOptions& options = {});

// The scheme of a Hugging Face config.json given by path (kNotFound if it cannot be read).
Result<PositionScheme> ConfigFileScheme(const std::string& config_path, const ModelSchemeOptions& options = {});
// The same for a config.json's text, named `source` in messages.
Result<PositionScheme> ConfigTextScheme(std::string_view json_text, const std::string& source,
                                        const ModelSchemeOptions& options = {});

// llama2.c's scheme, fixed by run.c rather than stored: RoPE base 10000 over the whole head, adjacent
// pairs, head_size = dim / n_heads; `source` (the file) becomes rope.source.
PositionScheme Llama2cScheme(const Llama2cConfig& config, const std::string& source);

// The one-line summary `posenc embed --rope-check` prints: what the file itself states about RoPE,
// computed from the scheme ModelScheme gave (a value the file leaves to a default is 0 / unset here;
// the scheme holds the default and notes it).
struct ModelRopeInfo {
  bool present = false;                // the scheme is RoPE
  double theta = 0.0;                  // the base the file states; 0: not stated
  int64_t rotary_dim = 0;              // the rotary dims the file states; 0: not stated (the whole head)
  int64_t head_dim = 0;                // the scheme's head size
  std::optional<RopePairing> pairing;  // when the format or its runtime fixes it (llama2.c, GGUF architectures)
  std::string note;                    // where the values came from / defaults the runtime would take
};
ModelRopeInfo RopeInfoOf(const ModelFile& model, const PositionScheme& scheme);

}  // namespace posenc
