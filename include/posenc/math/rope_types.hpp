// RoPE's vocabulary: pair layouts, precisions, directions, the rotary window of a head, per-pair
// frequencies and their bounds, and ComputeCosSin, the one definition of both precisions.
//
// RoPE (RoFormer, Su et al. 2021): rotate query and key heads in 2-D planes by position * frequency.
//
// For pair i with frequency w_i (radians per position) at position m, the two coordinates (a, b) of
// the pair become (a cos mw_i - b sin mw_i, a sin mw_i + b cos mw_i), times an attention scaling that
// YaRN and LongRoPE apply to cos and sin. Values are never rotated. Where the pairs sit in a head is a
// `RotaryLayout`: `kHalf` pairs x[s+i] with x[s+i+R/2] (GPT-NeoX, Hugging Face Llama), `kInterleaved`
// pairs x[s+2i] with x[s+2i+1] (GPT-J, Meta's Llama, RoFormer), over a window of R = rotary_dim
// dims starting at s = rotary_start; dims outside the window pass through unchanged.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/core/status.hpp"

namespace posenc {

enum class RopePairing { kHalf, kInterleaved };
// "half", "interleaved"
std::string_view ToString(RopePairing p);
// Accepts "half" / "neox" and "interleaved" / "normal" / "gptj".
bool ParseRopePairing(std::string_view s, RopePairing* out);

// How angles become cos/sin. kReference: float32(position) * float32(inv_freq) in float32, then
// float32 cos/sin, as PyTorch (Hugging Face) and ggml compute them, so a model sees what it saw in
// training; the angle error grows like position * 2^-24. kExact: angle = position * inv_freq in
// float64, cos/sin in float64, rounded once to float32 (ComputeCosSin is the definition): within
// 2e-6 * max|x| of the float64 truth for every position below 2^31. A kExact RopeTable builds its rows
// by one float64 angle addition from anchors every 32 positions (cheaper than a cos and sin per entry):
// each entry is within scaling * (2^-52 |pos * w| + 2^-50) plus one float32 ulp of ComputeCosSin's
// (equal at the anchors), which keeps the same bound.
enum class RopePrecision { kReference, kExact };
std::string_view ToString(RopePrecision p);
bool ParseRopePrecision(std::string_view s, RopePrecision* out);

enum class RopeDirection { kForward, kBackward };  // backward rotates by -angle (the gradient)

// Where the rotated pairs sit in one head.
struct RotaryLayout {
  RopePairing pairing = RopePairing::kHalf;
  int64_t head_dim = 0;
  int64_t rotary_start = 0;  // first rotated dim (DeepSeek MLA puts the rotary part last)
  int64_t rotary_dim = 0;    // number of rotated dims, even; num_pairs = rotary_dim / 2

  int64_t num_pairs() const { return rotary_dim / 2; }
  // The two dims (within the head) of pair i.
  int64_t first(int64_t i) const { return rotary_start + (pairing == RopePairing::kHalf ? i : 2 * i); }
  int64_t second(int64_t i) const {
    return rotary_start + (pairing == RopePairing::kHalf ? i + rotary_dim / 2 : 2 * i + 1);
  }
  // kInvalidArgument naming the field: head_dim <= 0 or > kMaxRopeHeadDim, odd or non-positive
  // rotary_dim, window past head_dim.
  Status Validate() const;
};

// The layout to rotate an input whose heads are `input_head_dim` wide with a config's `layout`: the
// layout itself when the widths agree; when the input is exactly the config's rotary window of a
// partial or back-of-head layout (DeepSeek MLA's q_pe / k_pe slice of qk_rope_head_dim, Hugging Face's
// q_rot of a partial rotary), that window alone (head_dim = rotary_dim, rotary_start 0), as Hugging
// Face rotates it. Frequencies stay the config's. Anything else is kInvalidArgument naming `what`, the
// input's width and both of the config's.
Result<RotaryLayout> RotaryLayoutForInput(const RotaryLayout& layout, int64_t input_head_dim, std::string_view what);

// Per-pair angular frequencies (radians per position, float64) and the factor applied to cos and sin.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_scaling = 1.0;
};

// The seed's formula: inv_freq[i] = base^(-2i / rotary_dim), i = 0 .. rotary_dim/2 - 1.
// kInvalidArgument for an odd or non-positive rotary_dim, or a base that is not finite and > 0.
Result<RopeFrequencies> DefaultRopeFrequencies(int64_t rotary_dim, double base);

// Largest head_dim a RotaryLayout accepts: 2^20, far past any model's (64-576), so that a hostile
// config cannot make frequency and table vectors of billions of entries.
inline constexpr int64_t kMaxRopeHeadDim = int64_t{1} << 20;

// Largest position RoPE accepts (exclusive): 2^31, the range over which kExact keeps its bound.
inline constexpr int64_t kMaxRopePosition = int64_t{1} << 31;

// Largest |inv_freq| (radians per token) RoPE accepts: the float32 angle of every position below
// kMaxRopePosition stays finite (FLT_MAX / 2^31, about 1.6e29; real models are at most ~1).
inline constexpr double kMaxRopeInvFreq = 3.4028234663852886e38 / 2147483648.0;

// OK when every inv_freq is finite with |inv_freq| <= kMaxRopeInvFreq and attention_scaling is
// finite; else kInvalidArgument naming `what`, the pair and its value.
Status ValidateRopeFrequencies(const RopeFrequencies& freqs, std::string_view what);

// cos and sin of every pair at position `pos`, times attention_scaling, in the given precision.
// This is the one definition of both precisions; tables and on-the-fly paths call it.
void ComputeCosSin(const RopeFrequencies& freqs, int64_t pos, RopePrecision precision, float* cos_out, float* sin_out);

}  // namespace posenc
