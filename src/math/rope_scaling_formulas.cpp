// Each scaling's frequencies as a pure function of the config and the sequence length, and its regimes.
//
// The formulas follow Hugging Face transformers' modeling_rope_utils.py (linear, dynamic, yarn,
// longrope, llama3, proportional) and ggml's CPU rope (ggml_rope_cache_init, rope_yarn,
// ggml_rope_yarn_corr_dims); docs/ROPE_SCALING.md states each one and where the two differ. Everything
// is float64 except the one place where ggml's float32 arithmetic decides an integer (the YaRN
// correction range of kGgml), which is computed in float32 as ggml does.
#include "math/rope_scaling_formulas.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>

namespace posenc::rope_scaling {

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// The pair index at which a frequency turns `rotations` times over `length` tokens (YaRN's
// "correction dimension"): solves length * base^(-2i/dim) = 2 pi rotations for i.
double CorrectionDim(double rotations, int64_t dim, double base, double length) {
  return static_cast<double>(dim) * std::log(length / (rotations * kTwoPi)) / (2.0 * std::log(base));
}

// YaRN's attention scaling 0.1 * m * ln(s) + 1 (1 for s <= 1).
double YarnMscale(double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

// ggml_rope_yarn_corr_dims, in float32 as ggml computes it: these floor/ceil decisions are what a
// GGUF model runs with.
void GgmlCorrDims(int64_t n_dims, int64_t n_ctx_orig, double freq_base, double beta_fast, double beta_slow, double* low,
                  double* high) {
  const float nd = static_cast<float>(n_dims);
  const float ctx = static_cast<float>(n_ctx_orig);
  const float base = static_cast<float>(freq_base);
  const float pi = std::numbers::pi_v<float>;
  auto corr = [&](float rot) { return nd * std::log(ctx / (rot * 2.0f * pi)) / (2.0f * std::log(base)); };
  const float start = std::floor(corr(static_cast<float>(beta_fast)));
  const float end = std::ceil(corr(static_cast<float>(beta_slow)));
  *low = std::max(0.0f, start);
  *high = std::min(nd - 1.0f, end);
}

// Qwen 1.0 (modeling_qwen.py, QWenModel.get_ntk_alpha and RotaryEmbedding): the NTK alpha steps
// through 1, 3, 7, 15, ... as the length passes seq_length times a power of two.
double QwenNtkAlpha(const RopeConfig& c, int64_t seq_len) {
  const double ratio = static_cast<double>(seq_len) / static_cast<double>(c.scaling.original_max_position_embeddings);
  if (!(ratio > 0)) return 1.0;
  return std::max(std::pow(2.0, std::ceil(std::log2(ratio) + 1.0)) - 1.0, 1.0);
}

}  // namespace

std::string ConfigWhat(const RopeConfig& c) {
  return c.source.empty() ? std::string("rope config") : "rope config " + c.source;
}

Status FieldError(const RopeConfig& c, std::string_view key, const std::string& value, std::string_view rule) {
  return InvalidArgumentError(
      fmt::format("{}: {} '{}' = {} {}", ConfigWhat(c), ToString(c.scaling.type), key, value, rule));
}

bool Positive(double x) { return std::isfinite(x) && x > 0; }

// base^(-2i/dim) for i in [0, pairs).
std::vector<double> Powers(double base, int64_t pairs, int64_t dim) {
  std::vector<double> f(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i)
    f[static_cast<size_t>(i)] = std::pow(base, -static_cast<double>(2 * i) / static_cast<double>(dim));
  return f;
}

Result<RopeFrequencies> Yarn(const RopeConfig& c, int64_t) {
  const RopeScaling& s = c.scaling;
  const int64_t dim = c.layout.rotary_dim;
  const int64_t pairs = dim / 2;
  std::vector<double> extrap = Powers(c.base, pairs, dim);
  double low = CorrectionDim(s.beta_fast, dim, c.base, static_cast<double>(s.original_max_position_embeddings));
  double high = CorrectionDim(s.beta_slow, dim, c.base, static_cast<double>(s.original_max_position_embeddings));
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as Hugging Face: avoids a division by zero
  RopeFrequencies f;
  f.inv_freq.resize(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    // ramp = 0 below `low` (keep the original frequency), 1 above `high` (divide by factor).
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double e = extrap[static_cast<size_t>(i)];
    f.inv_freq[static_cast<size_t>(i)] = (e / s.factor) * ramp + e * (1.0 - ramp);
  }
  if (s.attention_factor.has_value()) {
    f.attention_scaling = *s.attention_factor;
  } else if (s.mscale.value_or(0.0) != 0.0 && s.mscale_all_dim.value_or(0.0) != 0.0) {
    f.attention_scaling = YarnMscale(s.factor, *s.mscale) / YarnMscale(s.factor, *s.mscale_all_dim);
  } else {
    f.attention_scaling = YarnMscale(s.factor, 1.0);
  }
  return f;
}

Result<RopeFrequencies> Llama3(const RopeConfig& c, int64_t) {
  const RopeScaling& s = c.scaling;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelen = old_len / s.low_freq_factor;
  const double high_wavelen = old_len / s.high_freq_factor;
  RopeFrequencies f;
  f.inv_freq = Powers(c.base, c.layout.rotary_dim / 2, c.layout.rotary_dim);
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    double& w = f.inv_freq[i];
    const double wavelen = kTwoPi / w;
    if (wavelen > low_wavelen) {
      w = w / s.factor;  // long wavelengths: interpolate fully
    } else if (s.high_freq_factor == s.low_freq_factor) {
      // Llama 4: no middle band. Hugging Face's smooth factor is 0/0 (NaN) for a wavelength exactly
      // at the one boundary; every other pair is kept.
      if (wavelen == low_wavelen)
        return FieldError(c, "low_freq_factor", fmt::format("{} (= high_freq_factor)", s.low_freq_factor),
                          fmt::format("puts pair {}'s wavelength exactly on the band edge {}, where Hugging Face's "
                                      "smooth factor is 0/0",
                                      i, low_wavelen));
    } else if (wavelen >= high_wavelen) {
      // the middle band: mix of w/factor and w by how many turns fit in the original length
      const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      w = (1.0 - smooth) * w / s.factor + smooth * w;
    }
  }
  return f;
}

Result<RopeFrequencies> LongRope(const RopeConfig& c, int64_t seq_len) {
  const RopeScaling& s = c.scaling;
  const bool use_long = seq_len > s.original_max_position_embeddings;
  const std::vector<double>& ext = use_long ? s.long_factor : s.short_factor;
  RopeFrequencies f;
  f.inv_freq = Powers(c.base, c.layout.rotary_dim / 2, c.layout.rotary_dim);
  for (size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] /= ext[i];
  if (s.attention_factor.has_value()) {
    f.attention_scaling = *s.attention_factor;
  } else if (s.factor <= 1.0) {
    f.attention_scaling = 1.0;
  } else {
    f.attention_scaling =
        std::sqrt(1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position_embeddings)));
  }
  return f;
}

Result<RopeFrequencies> Proportional(const RopeConfig& c, int64_t) {
  const RopeScaling& s = c.scaling;
  const int64_t head_dim = c.layout.head_dim;
  const int64_t rotated =
      static_cast<int64_t>(std::floor(s.partial_rotary_factor * static_cast<double>(head_dim) / 2.0));
  RopeFrequencies f;
  f.inv_freq.assign(static_cast<size_t>(head_dim / 2), 0.0);
  for (int64_t i = 0; i < rotated; ++i)
    f.inv_freq[static_cast<size_t>(i)] =
        std::pow(c.base, -static_cast<double>(2 * i) / static_cast<double>(head_dim)) / s.factor;
  return f;
}


Result<RopeFrequencies> Ggml(const RopeConfig& c, int64_t seq_len) {
  const RopeScaling& s = c.scaling;
  const int64_t n_dims = c.layout.rotary_dim;
  // LongRoPE GGUF models (Phi-3) carry two divisor lists; the long one applies past the original length.
  const std::vector<double>& ff = !s.freq_factors.empty() || s.long_factor.empty() ? s.freq_factors
                                  : seq_len > s.original_max_position_embeddings   ? s.long_factor
                                                                                   : s.short_factor;
  RopeFrequencies f;
  f.inv_freq = Powers(c.base, n_dims / 2, n_dims);
  double low = 0, high = 0;
  if (s.ext_factor != 0.0)
    GgmlCorrDims(n_dims, s.original_max_position_embeddings, c.base, s.beta_fast, s.beta_slow, &low, &high);
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    const double extrap = f.inv_freq[i] / (ff.empty() ? 1.0 : ff[i]);
    const double interp = s.freq_scale * extrap;
    if (s.ext_factor != 0.0) {
      const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
      const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * s.ext_factor;
      const double a = interp * (1.0 - mix), b = extrap * mix;
      f.inv_freq[i] = a + b;
      // ggml mixes in float32: an ext_factor past 1 makes the two terms opposite, and where they are
      // more than 2^12 times their sum float32 keeps fewer than half its 24 bits of the result (a
      // huge ext_factor cancels the pair's rotation to 0 or noise). Refused, naming the pair.
      if (!(std::abs(a) + std::abs(b) <= 4096.0 * std::abs(f.inv_freq[i])))
        return FieldError(c, "ext_factor", fmt::format("{}", s.ext_factor),
                          fmt::format("cancels pair {}'s frequency in ggml's float32 mix (interp * (1 - mix) + "
                                      "extrap * mix = {:.6g} from terms of magnitude {:.6g}): use an ext_factor "
                                      "in [0, 1]",
                                      i, f.inv_freq[i], std::max(std::abs(a), std::abs(b))));
    } else {
      f.inv_freq[i] = interp;
    }
  }
  f.attention_scaling = s.attn_factor;
  if (s.ext_factor != 0.0) f.attention_scaling *= 1.0 + 0.1 * std::log(1.0 / s.freq_scale);
  return f;
}

// ---------- the frequency functions of the rows that need no helper ----------

Result<RopeFrequencies> Default(const RopeConfig& c, int64_t) {
  return DefaultRopeFrequencies(c.layout.rotary_dim, c.base);
}

Result<RopeFrequencies> Linear(const RopeConfig& c, int64_t) {
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, DefaultRopeFrequencies(c.layout.rotary_dim, c.base));
  for (double& w : f.inv_freq) w /= c.scaling.factor;
  return f;
}

// The NTK family: the default frequencies of base * m^(R/(R-2)). The new base is checked here, where
// the error can say it was scaled (rope_theta itself was finite when it was read).
Result<RopeFrequencies> FromNtkBase(const RopeConfig& c, double m, int64_t seq_len) {
  const int64_t dim = c.layout.rotary_dim;
  const double base = c.base * std::pow(m, static_cast<double>(dim) / static_cast<double>(dim - 2));
  if (!std::isfinite(base) || !(base > 0))
    return InvalidArgumentError(fmt::format("{}: {} scaling at seq_len {}: rope_theta {} * {}^({}/{}) = {} is not a "
                                            "finite positive base",
                                            ConfigWhat(c), ToString(c.scaling.type), seq_len, c.base, m, dim, dim - 2,
                                            base));
  return DefaultRopeFrequencies(dim, base);
}

Result<RopeFrequencies> Ntk(const RopeConfig& c, int64_t seq_len) { return FromNtkBase(c, c.scaling.factor, seq_len); }

Result<RopeFrequencies> DynamicNtk(const RopeConfig& c, int64_t seq_len) {
  const double factor = c.scaling.factor;
  const double max_len = static_cast<double>(c.max_position_embeddings);
  const double len = std::max(static_cast<double>(seq_len), max_len);
  return FromNtkBase(c, factor * len / max_len - (factor - 1.0), seq_len);
}

Result<RopeFrequencies> QwenDynamicNtk(const RopeConfig& c, int64_t seq_len) {
  return FromNtkBase(c, QwenNtkAlpha(c, seq_len), seq_len);
}

// ---------- regimes ----------

// The long regime's length: one past the original (and max) length.
// One past the longer of the two lengths (at least 2), saturating at 2^63-1: a length of 2^63-1 read
// from a config must not overflow here.
int64_t LongLength(const RopeConfig& c) {
  const int64_t longest = std::max(c.scaling.original_max_position_embeddings, c.max_position_embeddings);
  return longest >= std::numeric_limits<int64_t>::max() - 1 ? std::numeric_limits<int64_t>::max()
                                                             : std::max<int64_t>(longest + 1, 2);
}
int64_t OneRegime(const RopeConfig&, int64_t) { return 1; }
// LongRoPE (and ggml with its two lists) switch factors past original_max_position_embeddings.
int64_t SwitchAtOriginal(const RopeConfig& c, int64_t seq_len) {
  return seq_len > c.scaling.original_max_position_embeddings ? LongLength(c) : 1;
}
int64_t GgmlRegime(const RopeConfig& c, int64_t seq_len) {
  return c.scaling.freq_factors.empty() && !c.scaling.long_factor.empty() ? SwitchAtOriginal(c, seq_len) : 1;
}
// Dynamic NTK: the unscaled frequencies up to max_position_embeddings, a new base at every length past it.
int64_t DynamicRegime(const RopeConfig& c, int64_t seq_len) {
  return seq_len <= c.max_position_embeddings ? 1 : seq_len;
}
// Qwen's alpha: 1 up to seq_length; past it each length is its own regime (alpha steps at powers of two).
int64_t QwenNtkRegime(const RopeConfig& c, int64_t seq_len) {
  const int64_t s = c.scaling.original_max_position_embeddings;
  if (seq_len <= s || s <= 0) return 1;
  return seq_len;
}

}  // namespace posenc::rope_scaling
