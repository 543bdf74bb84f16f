// RoPE's vocabulary types, the seed's frequencies and the cos/sin of each precision.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "posenc/math/rope_types.hpp"
#include "posenc/core/checked_math.hpp"
#include "core/enum_names.hpp"

namespace posenc {

// neox: GPT-NeoX's name for the half layout; normal (ggml) and gptj: the interleaved one.
constexpr detail::EnumName<RopePairing> kPairingNames[] = {{RopePairing::kHalf, "half"},
                                                           {RopePairing::kHalf, "neox"},
                                                           {RopePairing::kInterleaved, "interleaved"},
                                                           {RopePairing::kInterleaved, "normal"},
                                                           {RopePairing::kInterleaved, "gptj"}};
constexpr detail::EnumName<RopePrecision> kPrecisionNames[] = {{RopePrecision::kReference, "reference"},
                                                               {RopePrecision::kExact, "exact"}};

std::string_view ToString(RopePairing p) { return detail::NameOf(p, kPairingNames); }
bool ParseRopePairing(std::string_view s, RopePairing* out) { return detail::ValueOf(s, kPairingNames, out); }

std::string_view ToString(RopePrecision p) { return detail::NameOf(p, kPrecisionNames); }
bool ParseRopePrecision(std::string_view s, RopePrecision* out) { return detail::ValueOf(s, kPrecisionNames, out); }

Status RotaryLayout::Validate() const {
  if (head_dim <= 0) return InvalidArgumentError(fmt::format("rope layout: head_dim {} must be positive", head_dim));
  if (head_dim > kMaxRopeHeadDim)
    return InvalidArgumentError(fmt::format(
        "rope layout: head_dim {} is beyond {} (a model's is at most a few hundred)", head_dim, kMaxRopeHeadDim));
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    return InvalidArgumentError(fmt::format("rope layout: rotary_dim {} must be even and positive", rotary_dim));
  if (rotary_start < 0 || rotary_start > head_dim - rotary_dim)
    return InvalidArgumentError(fmt::format("rope layout: rotary window [{}, {}) does not fit head_dim {}",
                                            rotary_start, rotary_start + rotary_dim, head_dim));
  return OkStatus();
}

Result<RopeFrequencies> DefaultRopeFrequencies(int64_t rotary_dim, double base) {
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    return InvalidArgumentError(fmt::format("rope frequencies: rotary_dim {} must be even and positive", rotary_dim));
  if (!(base > 0) || !std::isfinite(base))
    return InvalidArgumentError(
        fmt::format("rope frequencies: base (rope_theta) {} must be finite and positive", base));
  RopeFrequencies f;
  f.inv_freq.resize(static_cast<size_t>(rotary_dim / 2));
  for (int64_t i = 0; i < rotary_dim / 2; ++i)
    f.inv_freq[static_cast<size_t>(i)] = std::pow(base, -static_cast<double>(2 * i) / static_cast<double>(rotary_dim));
  return f;
}

void ComputeCosSin(const RopeFrequencies& freqs, int64_t pos, RopePrecision precision, float* cos_out, float* sin_out) {
  const size_t n = freqs.inv_freq.size();
  if (precision == RopePrecision::kReference) {
    const float p = static_cast<float>(pos);
    const float scale = static_cast<float>(freqs.attention_scaling);
    for (size_t i = 0; i < n; ++i) {
      const float angle = p * static_cast<float>(freqs.inv_freq[i]);
      cos_out[i] = std::cos(angle) * scale;
      sin_out[i] = std::sin(angle) * scale;
    }
  } else {
    const double p = static_cast<double>(pos);
    for (size_t i = 0; i < n; ++i) {
      const double angle = p * freqs.inv_freq[i];
      cos_out[i] = static_cast<float>(std::cos(angle) * freqs.attention_scaling);
      sin_out[i] = static_cast<float>(std::sin(angle) * freqs.attention_scaling);
    }
  }
}

Result<RotaryLayout> RotaryLayoutForInput(const RotaryLayout& layout, int64_t input_head_dim, std::string_view what) {
  if (input_head_dim == layout.head_dim) return layout;
  if (input_head_dim == layout.rotary_dim && layout.rotary_dim < layout.head_dim) {
    RotaryLayout slice = layout;
    slice.head_dim = layout.rotary_dim;
    slice.rotary_start = 0;
    return slice;
  }
  return InvalidArgumentError(
      fmt::format("{}: head_dim {} is neither the config's head_dim {} nor its rotary slice of {} dims (dims [{}, {}))",
                  what, input_head_dim, layout.head_dim, layout.rotary_dim, layout.rotary_start,
                  layout.rotary_start + layout.rotary_dim));
}

Status ValidateRopeFrequencies(const RopeFrequencies& freqs, std::string_view what) {
  for (size_t i = 0; i < freqs.inv_freq.size(); ++i) {
    // Negative frequencies are allowed: they rotate the other way (re-rotation, rerotate.hpp, uses them).
    const double w = freqs.inv_freq[i];
    if (!std::isfinite(w)) return InvalidArgumentError(fmt::format("{}: inv_freq[{}] = {} must be finite", what, i, w));
    if (std::fabs(w) > kMaxRopeInvFreq)
      return InvalidArgumentError(
          fmt::format("{}: inv_freq[{}] = {:g} rad/token is beyond {:g}: float32 angles of "
                      "positions up to 2^31 would overflow",
                      what, i, w, kMaxRopeInvFreq));
  }
  // The combined scale (YaRN's mscale ratio, attention_factor, ggml's attn_factor product) multiplies
  // cos/sin in float32: it must be a nonzero float32 normal there, whatever each key was alone.
  if (!FitsFloat32(freqs.attention_scaling) || freqs.attention_scaling == 0.0)
    return InvalidArgumentError(fmt::format(
        "{}: attention_scaling {} is not a nonzero float32 (magnitude {} to {}), the type it "
        "multiplies cos and sin in",
        what, freqs.attention_scaling, std::numeric_limits<float>::min(), std::numeric_limits<float>::max()));
  return OkStatus();
}

}  // namespace posenc
