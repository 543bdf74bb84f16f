// RopeConfig: one model's RoPE, everything needed to compute its frequencies, and the scalings that
// extend a model's context (linear, NTK, dynamic NTK, YaRN, Llama 3, LongRoPE, proportional, ggml).
//
// ComputeRopeFrequencies is a pure function of the config and, for the schemes that depend on it
// (dynamic NTK, LongRoPE), the sequence length: the largest position the model is about to see + 1.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
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

// What ValidateRopeConfigAndKeep recorded about a config (rope_config.cpp); opaque.
struct RopeConfigCheck;

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
  // Set by ValidateRopeConfigAndKeep (the config readers): the validated inputs and the frequencies
  // computed while validating. ComputeRopeFrequencies trusts it only while the frequency inputs
  // (head_dim, rotary window, base, max_position_embeddings, scaling) are unchanged; a config built
  // or changed in code is validated in full. Copies share it.
  std::shared_ptr<const RopeConfigCheck> checked;
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

// Checks every field the config's scaling uses (its row of RopeScalings(): each key's range rule, the
// ordering rules, the row's cross-key rules), then the frequencies themselves, computed once per
// regime the row has (two for the length-dependent rows: at seq_len 1 and one past the original /
// max length), against kMaxRopeInvFreq. The error names the config, the key and its value.
Status ValidateRopeConfig(const RopeConfig& config);
// ValidateRopeConfig, and on success records in config->checked what it validated and the
// frequencies it computed: ComputeRopeFrequencies on the unchanged config then neither validates nor,
// for a length it already computed (any length for a length-independent row), computes again. The
// config readers (Hugging Face, ggml parameters) call it.
Status ValidateRopeConfigAndKeep(RopeConfig* config);

// ---------- the variant list: one row per scaling ----------
//
// Everything posenc knows per scaling is its row: the names configs give it, its keys (where each
// lives in RopeScaling, its kind, default, how a reader gets it and its range rule), the ordering and
// cross-key rules, whether its frequencies depend on the sequence length, and its frequency
// function. The Hugging Face and ggml readers read the keys through it, ValidateRopeConfig checks the
// rules, ComputeRopeFrequencies calls the function and `posenc inspect` shows the keys; adding a
// scaling is one row (and its RopeScalingType).

enum class ScalingKeyKind { kNumber, kInteger, kBoolean, kNumberList, kOptionalNumber };

enum class ScalingKeyRule {
  kAny,              // no range rule
  kPositive,         // finite and > 0 (an optional number: when given)
  kNonNegative,      // finite and >= 0
  kGivenPositive,    // an integer that must be given and > 0
  kUnitInterval,     // in (0, 1]
  kPairList,         // rotary_dim / 2 values, each finite and > 0
  kPairListIfGiven,  // empty, or as kPairList
};

enum class ScalingKeyRead {
  kOptional,   // read from the rope parameters when present, else the RopeScaling default stays
  kRequired,   // a config must give it
  kInferred,   // Hugging Face infers it when absent (factor = max_position_embeddings / original)
  kNamedStep,  // a reader's own step reads it (original_max_position_embeddings: top level first)
  kNotRead,    // set from elsewhere in the config (the layout, max_position_embeddings, GGUF arrays)
};

// Where a key's value lives: exactly one pointer is set, matching the key's kind.
struct ScalingField {
  double* number = nullptr;
  int64_t* integer = nullptr;
  bool* boolean = nullptr;
  std::vector<double>* list = nullptr;
  std::optional<double>* optional = nullptr;
};

struct RopeScalingKey {
  std::string_view name;  // as the config spells it (ggml_rope_ext's parameter names for the ggml row)
  ScalingKeyKind kind;
  ScalingKeyRule rule;
  ScalingKeyRead read;
  double default_value;       // RopeScaling's default (ggml: its neutral value), for notes and docs
  bool note_default = false;  // a reader notes "no KEY: DEFAULT assumed" when it is absent
  ScalingField (*field)(RopeConfig&) = nullptr;
};

// `greater` must be at least `lesser` (both number keys of the row).
struct ScalingOrderRule {
  std::string_view greater;
  std::string_view lesser;
};

// A name a config gives the scaling (Hugging Face rope_type / type), and a note when it is an old one.
struct ScalingSpelling {
  std::string_view name;
  std::string_view note;  // "" for the current name
};

struct RopeScalingSpec {
  RopeScalingType type;
  std::string_view name;                       // ToString(type)
  std::span<const ScalingSpelling> spellings;  // Hugging Face rope_type values; empty: not a HF type
  std::span<const RopeScalingKey> keys;
  std::span<const ScalingOrderRule> orders;
  Status (*cross_rules)(const RopeConfig&);  // rules across keys and the layout; nullptr: none
  // The sequence length whose frequencies equal those at `seq_len`: 1 for the short (or only)
  // regime, another fixed length for a long regime, seq_len itself where every length differs
  // (dynamic NTK past max_position_embeddings). ValidateRopeConfig computes each regime of
  // {1, one past the original / max length} once.
  int64_t (*regime_of)(const RopeConfig&, int64_t seq_len);
  Result<RopeFrequencies> (*compute)(const RopeConfig&, int64_t seq_len);  // on a validated config
  // NominalScalingFactor: the factor the scaling aims at.
  double (*nominal_factor)(const RopeConfig&);
  // UnscaledFrequencies are over the whole head (base^(-2i/head_dim)), not the rotary window.
  bool unscaled_over_head_dim = false;
};

// The rows, in RopeScalingType order.
std::span<const RopeScalingSpec> RopeScalings();
const RopeScalingSpec& RopeScalingOf(RopeScalingType type);
// The row a Hugging Face rope_type spells (and its spelling), or nullptr.
const RopeScalingSpec* FindRopeScaling(std::string_view hf_name, const ScalingSpelling** spelling = nullptr);
// One key's range rule; the error is "rope config SOURCE: SCALING 'KEY' = VALUE RULE".
Status CheckRopeScalingKey(const RopeConfig& config, const RopeScalingKey& key);
// The row's key named `name`, or nullptr.
const RopeScalingKey* FindScalingKey(const RopeScalingSpec& row, std::string_view name);

// Test hook: how many times a scaling's frequency function has run in this process.
int64_t RopeFrequencyComputations();

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
