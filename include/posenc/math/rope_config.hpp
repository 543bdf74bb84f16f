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

#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_types.hpp"
#include "posenc/core/status.hpp"

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
  // Qwen (1.0) use_dynamic_ntk: base * alpha^(R/(R-2)), alpha from the length in powers of 2.
  kQwenDynamicNtk,
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
  // proportional (Gemma 4 p-RoPE): the share of head_dim whose pairs rotate. The layout spans the whole
  // head (rotary_dim == head_dim, pairs (i, i + head_dim/2)); pairs at or past
  // floor(partial_rotary_factor * head_dim / 2) get frequency 0.
  double partial_rotary_factor = 1.0;

  bool operator==(const RopeScaling&) const = default;
};

struct RopeConfig {
  RotaryLayout layout;
  double base = 10000.0;                // rope_theta
  int64_t max_position_embeddings = 0;  // 0 = not given
  RopeScaling scaling;
  // Multi-axis RoPE (M-RoPE, ggml MROPE / IMROPE / VISION, 2-D vision): how the pairs are divided among
  // position components; absent for 1-D RoPE. ComputeMultiAxisRope (multi_axis.hpp) gives its plan.
  std::optional<MultiAxisRope> multi_axis;
  // Messages about values a reference implementation would have defaulted silently.
  std::vector<std::string> notes;
  // Where the config came from (file name or "ggml params"), for messages.
  std::string source;
};

// Frequencies and attention scaling for a sequence of `seq_len` tokens (max position + 1). Errors
// name the offending field and value (kInvalidArgument).
// Every scaling is computed in float64 from the numbers of the config as written. Per scaling:
//   kNone          w_i = base^(-2i/R)
//   kLinear        w_i / factor
//   kNtk           base' = base * factor^(R/(R-2)), then the default formula
//   kDynamicNtk    s = max(seq_len, max_position_embeddings);
//                  base' = base * (factor*s/max_position_embeddings - (factor-1))^(R/(R-2))
//                  (equal to the unscaled frequencies for seq_len <= max_position_embeddings)
//   kYarn          ramp between extrapolation (w_i) and interpolation (w_i/factor) over the pair
//                  range [low, high] given by beta_fast / beta_slow rotations in
//                  original_max_position_embeddings tokens (floor/ceil when truncate);
//                  attention_scaling = attention_factor, else mscale ratio (DeepSeek), else 0.1 ln(factor)+1
//   kLlama3        wavelength bands of original_max_position_embeddings / low_freq_factor and
//                  / high_freq_factor, smooth in between; attention_scaling 1. low_freq_factor ==
//                  high_freq_factor (Llama 4) has no middle band: wavelengths > original / low are
//                  divided by factor, the rest kept (a wavelength exactly on that edge is refused:
//                  Hugging Face's smooth factor is 0/0 there)
//   kLongRope      w_i / long_factor[i] when seq_len > original_max_position_embeddings, else
//                  / short_factor[i]; attention_scaling = attention_factor, else
//                  sqrt(1 + ln(factor)/ln(original)) (1 when factor <= 1)
//   kProportional  base^(-2i/head_dim) for the first floor(partial_rotary_factor*head_dim/2) pairs, 0
//                  for the rest, all / factor
//   kQwenDynamicNtk  Qwen 1.0's modeling_qwen.py (use_dynamic_ntk): L = seq_len, S = seq_length
//                  (scaling.original_max_position_embeddings); alpha = max(2^ceil(log2(L/S) + 1) - 1, 1);
//                  base' = base * alpha^(R/(R-2)) (unscaled for L <= S)
//   kGgml          as ggml_rope_ext: base^(-2i/R) / freq_factors[i], blended between freq_scale*that
//                  and that by the YaRN ramp times ext_factor; attention_scaling = attn_factor
//                  (times 1 + 0.1 ln(1/freq_scale) when ext_factor != 0)
Result<RopeFrequencies> ComputeRopeFrequencies(const RopeConfig& config, int64_t seq_len);

// Checks every field the config's scaling uses (each key's range rule, the ordering rules, the
// cross-key rules of its row of the library's scaling table, src/math/rope_scaling_table.hpp), then
// the frequencies themselves, computed once per regime the row has (two for the length-dependent
// rows: at seq_len 1 and one past the original / max length), against kMaxRopeInvFreq. The error
// names the config, the key and its value. A config that passed is remembered by its frequency
// inputs (head_dim, rotary window, base, max_position_embeddings, scaling) in a small private cache:
// ComputeRopeFrequencies on an equal config then neither validates nor, for a regime it computed,
// computes again. The config readers call it. What tools need from the table: rope_scaling_facts.hpp.
Status ValidateRopeConfig(const RopeConfig& config);

// How a pair's frequency relates to the unscaled base^(-2i/R) at one sequence length, for display.
// The meanings are defined once, in PairRegimeMeaning (`posenc inspect --help`, docs/LEARNING.md).
enum class PairRegime {
  kUnscaled,      // nothing is scaled at this length: every pair keeps base^(-2i/R)
  kExtrapolated,  // the scaling keeps this pair's unscaled frequency
  kInterpolated,  // divided by the full factor (positions squeezed into the trained range)
  kBlended,       // divided by something strictly between 1 and the factor
  kScaled,        // divided by something outside [1, factor] (LongRoPE lists, NTK past the factor)
  kUnrotated,     // frequency 0 (proportional RoPE's tail)
};
std::string_view ToString(PairRegime r);
// One sentence saying what the regime means for a learner (no trailing period).
std::string_view PairRegimeMeaning(PairRegime r);
// Every regime, in the order above.
inline constexpr PairRegime kPairRegimes[] = {PairRegime::kUnscaled,     PairRegime::kExtrapolated,
                                              PairRegime::kInterpolated, PairRegime::kBlended,
                                              PairRegime::kScaled,       PairRegime::kUnrotated};
// The factor the scaling aims at (yarn/linear/llama3/longrope/ntk/dynamic: factor; ggml:
// 1/freq_scale; none: 1), used as the "interpolated" mark.
double NominalScalingFactor(const RopeConfig& config);
// One regime per pair of `freqs` (which ComputeRopeFrequencies gave for `config`): kUnscaled for
// every rotating pair when none differs from base^(-2i/R) (no scaling, or none at this length).
std::vector<PairRegime> ClassifyPairs(const RopeConfig& config, const RopeFrequencies& freqs);
// The unscaled frequencies the regimes are measured against: base^(-2i/R), or for proportional
// base^(-2i/head_dim) over the whole head.
std::vector<double> UnscaledFrequencies(const RopeConfig& config);

}  // namespace posenc
