// RopeConfig: one model's RoPE, everything needed to compute its frequencies, and the scalings that
// extend a model's context (linear, NTK, dynamic NTK, YaRN, Llama 3, LongRoPE, proportional, ggml).
//
// ComputeRopeFrequencies is a pure function of the config and, for the schemes that depend on it
// (dynamic NTK, LongRoPE), the sequence length: the largest position the model is about to see + 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope.hpp"
#include "posenc/status.hpp"

namespace posenc {

enum class RopeScalingType {
  kNone,          // theta_i = base^(-2i/R)
  kLinear,        // position interpolation: inv_freq / factor
  kNtk,           // static NTK-aware: base * factor^(R/(R-2))
  kDynamicNtk,    // NTK with the factor recomputed from the sequence length
  kYarn,          // YaRN ramp between interpolation and extrapolation, attention factor
  kLlama3,        // Llama 3.1: low/high frequency bands with a smooth middle
  kLongRope,      // Phi-3: per-pair short/long factors switched at original_max_position_embeddings
  kProportional,  // Gemma 4 p-RoPE: frequencies over head_dim, unrotated pairs at frequency 0
  kGgml,          // llama.cpp/ggml's own parameters (freq_scale, ext_factor, ...), as ggml computes
};
std::string_view ToString(RopeScalingType t);

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;  // yarn, longrope: explicit override
  std::optional<double> mscale;            // DeepSeek yarn
  std::optional<double> mscale_all_dim;    // DeepSeek yarn
  bool truncate = true;                    // yarn: floor/ceil the correction dims
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // longrope
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  // ggml (ggml_rope_ext parameters)
  double freq_scale = 1.0;
  double ext_factor = 0.0;
  double attn_factor = 1.0;
  std::vector<double> freq_factors;  // per pair divisor (llama.cpp rope_freqs), empty = all 1
};

struct RopeConfig {
  RotaryLayout layout;
  double base = 10000.0;                  // rope_theta
  int64_t max_position_embeddings = 0;    // 0 = not given
  RopeScaling scaling;
  // Messages about values a reference implementation would have defaulted silently.
  std::vector<std::string> notes;
};

// Frequencies and attention scaling for a sequence of `seq_len` tokens (max position + 1). Errors
// name the offending field and value (kInvalidArgument).
Result<RopeFrequencies> ComputeRopeFrequencies(const RopeConfig& config, int64_t seq_len);

}  // namespace posenc
