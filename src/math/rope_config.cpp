// ComputeRopeFrequencies: each scaling as a pure function of the config and the sequence length.
//
// The formulas follow Hugging Face transformers' modeling_rope_utils.py (linear, dynamic, yarn,
// longrope, llama3, proportional) and ggml's CPU rope (ggml_rope_cache_init, rope_yarn,
// ggml_rope_yarn_corr_dims); docs/ROPE_SCALING.md states each one and where the two differ. Everything
// is float64 except the one place where ggml's float32 arithmetic decides an integer (the YaRN
// correction range of kGgml), which is computed in float32 as ggml does.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "posenc/math/rope_config.hpp"

namespace posenc {

std::string_view ToString(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "default";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kNtk: return "ntk";
    case RopeScalingType::kDynamicNtk: return "dynamic";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kLongRope: return "longrope";
    case RopeScalingType::kProportional: return "proportional";
    case RopeScalingType::kGgml: return "ggml";
  }
  return "unknown";
}

std::string_view ToString(PairRegime r) {
  switch (r) {
    case PairRegime::kExtrapolated: return "extrapolated";
    case PairRegime::kInterpolated: return "interpolated";
    case PairRegime::kBlended: return "blended";
    case PairRegime::kScaled: return "scaled";
    case PairRegime::kUnrotated: return "unrotated";
  }
  return "unknown";
}

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// "rope config" and the config's source, when it has one: how every error about a config begins.
std::string ConfigWhat(const RopeConfig& c) {
  return c.source.empty() ? std::string("rope config") : "rope config " + c.source;
}

Status FieldError(const RopeConfig& c, std::string_view key, const std::string& value, std::string_view rule) {
  return InvalidArgumentError(fmt::format("{}: {} '{}' = {} {}", ConfigWhat(c), ToString(c.scaling.type), key, value, rule));
}

bool Positive(double x) { return std::isfinite(x) && x > 0; }

// base^(-2i/dim) for i in [0, pairs).
std::vector<double> Powers(double base, int64_t pairs, int64_t dim) {
  std::vector<double> f(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i)
    f[static_cast<size_t>(i)] = std::pow(base, -static_cast<double>(2 * i) / static_cast<double>(dim));
  return f;
}

// The pair index at which a frequency turns `rotations` times over `length` tokens (YaRN's
// "correction dimension"): solves length * base^(-2i/dim) = 2 pi rotations for i.
double CorrectionDim(double rotations, int64_t dim, double base, double length) {
  return static_cast<double>(dim) * std::log(length / (rotations * kTwoPi)) / (2.0 * std::log(base));
}

// YaRN's attention scaling 0.1 * m * ln(s) + 1 (1 for s <= 1).
double YarnMscale(double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

Result<RopeFrequencies> Yarn(const RopeConfig& c) {
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

Result<RopeFrequencies> Llama3(const RopeConfig& c) {
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
                                      "smooth factor is 0/0", i, low_wavelen));
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

Result<RopeFrequencies> Proportional(const RopeConfig& c) {
  const RopeScaling& s = c.scaling;
  const int64_t head_dim = c.layout.head_dim;
  const int64_t rotated = static_cast<int64_t>(std::floor(s.partial_rotary_factor * static_cast<double>(head_dim) / 2.0));
  RopeFrequencies f;
  f.inv_freq.assign(static_cast<size_t>(head_dim / 2), 0.0);
  for (int64_t i = 0; i < rotated; ++i)
    f.inv_freq[static_cast<size_t>(i)] =
        std::pow(c.base, -static_cast<double>(2 * i) / static_cast<double>(head_dim)) / s.factor;
  return f;
}

// ggml_rope_yarn_corr_dims, in float32 as ggml computes it: these floor/ceil decisions are what a
// GGUF model runs with.
void GgmlCorrDims(int64_t n_dims, int64_t n_ctx_orig, double freq_base, double beta_fast, double beta_slow,
                  double* low, double* high) {
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
      f.inv_freq[i] = interp * (1.0 - mix) + extrap * mix;
    } else {
      f.inv_freq[i] = interp;
    }
  }
  f.attention_scaling = s.attn_factor;
  if (s.ext_factor != 0.0) f.attention_scaling *= 1.0 + 0.1 * std::log(1.0 / s.freq_scale);
  return f;
}

Status CheckFactor(const RopeConfig& c) {
  if (!Positive(c.scaling.factor)) return FieldError(c, "factor", fmt::format("{}", c.scaling.factor), "must be finite and > 0");
  return OkStatus();
}

Status CheckOriginal(const RopeConfig& c, std::string_view key = "original_max_position_embeddings") {
  if (c.scaling.original_max_position_embeddings <= 0)
    return FieldError(c, key, fmt::format("{}", c.scaling.original_max_position_embeddings), "must be given and > 0");
  return OkStatus();
}

Status CheckBetas(const RopeConfig& c) {
  const RopeScaling& s = c.scaling;
  if (!Positive(s.beta_fast)) return FieldError(c, "beta_fast", fmt::format("{}", s.beta_fast), "must be finite and > 0");
  if (!Positive(s.beta_slow)) return FieldError(c, "beta_slow", fmt::format("{}", s.beta_slow), "must be finite and > 0");
  // Equal betas (Kimi K2 ships beta_fast = beta_slow = 1) make a one-pair ramp that Hugging Face and
  // ggml both compute (their 0.001 guard); beta_fast below beta_slow would swap the bands.
  if (s.beta_fast < s.beta_slow)
    return FieldError(c, "beta_fast", fmt::format("{} (beta_slow {})", s.beta_fast, s.beta_slow), "must be at least beta_slow");
  return OkStatus();
}

Status CheckFactorList(const RopeConfig& c, std::string_view key, const std::vector<double>& list) {
  const size_t pairs = static_cast<size_t>(c.layout.rotary_dim / 2);
  if (list.size() != pairs)
    return FieldError(c, key, fmt::format("a list of {} values", list.size()),
                      fmt::format("must have rotary_dim/2 = {} values", pairs));
  for (size_t i = 0; i < list.size(); ++i)
    if (!Positive(list[i]))
      return FieldError(c, fmt::format("{}[{}]", key, i), fmt::format("{}", list[i]), "must be finite and > 0");
  return OkStatus();
}

// The config's own keys, each against its rule.
Status ValidateKeys(const RopeConfig& c) {
  if (Status s = c.layout.Validate(); !s.ok())
    return InvalidArgumentError(fmt::format("{}: {}", ConfigWhat(c), s.message()));
  if (!Positive(c.base)) return FieldError(c, "rope_theta", fmt::format("{}", c.base), "must be finite and > 0");
  const RopeScaling& s = c.scaling;
  switch (s.type) {
    case RopeScalingType::kNone:
      return OkStatus();
    case RopeScalingType::kLinear:
      return CheckFactor(c);
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamicNtk:
      POSENC_RETURN_IF_ERROR(CheckFactor(c));
      if (c.layout.rotary_dim <= 2)
        return FieldError(c, "rotary_dim", fmt::format("{}", c.layout.rotary_dim), "must be > 2 (the exponent is R/(R-2))");
      if (s.type == RopeScalingType::kDynamicNtk && c.max_position_embeddings <= 0)
        return FieldError(c, "max_position_embeddings", fmt::format("{}", c.max_position_embeddings), "must be given and > 0");
      return OkStatus();
    case RopeScalingType::kYarn:
      POSENC_RETURN_IF_ERROR(CheckFactor(c));
      POSENC_RETURN_IF_ERROR(CheckOriginal(c));
      POSENC_RETURN_IF_ERROR(CheckBetas(c));
      if (s.attention_factor.has_value() && !Positive(*s.attention_factor))
        return FieldError(c, "attention_factor", fmt::format("{}", *s.attention_factor), "must be finite and > 0");
      return OkStatus();
    case RopeScalingType::kLlama3:
      POSENC_RETURN_IF_ERROR(CheckFactor(c));
      POSENC_RETURN_IF_ERROR(CheckOriginal(c));
      if (!Positive(s.low_freq_factor))
        return FieldError(c, "low_freq_factor", fmt::format("{}", s.low_freq_factor), "must be finite and > 0");
      // Equal factors (Llama 4) leave the smooth band empty: Hugging Face warns and computes it.
      if (!Positive(s.high_freq_factor) || s.high_freq_factor < s.low_freq_factor)
        return FieldError(c, "high_freq_factor", fmt::format("{} (low_freq_factor {})", s.high_freq_factor, s.low_freq_factor),
                          "must be finite and at least low_freq_factor");
      return OkStatus();
    case RopeScalingType::kLongRope:
      POSENC_RETURN_IF_ERROR(CheckFactor(c));
      POSENC_RETURN_IF_ERROR(CheckOriginal(c));
      POSENC_RETURN_IF_ERROR(CheckFactorList(c, "short_factor", s.short_factor));
      POSENC_RETURN_IF_ERROR(CheckFactorList(c, "long_factor", s.long_factor));
      if (s.attention_factor.has_value() && !Positive(*s.attention_factor))
        return FieldError(c, "attention_factor", fmt::format("{}", *s.attention_factor), "must be finite and > 0");
      if (s.original_max_position_embeddings <= 1 && !s.attention_factor.has_value())
        return FieldError(c, "original_max_position_embeddings", fmt::format("{}", s.original_max_position_embeddings),
                          "must be > 1 (its log divides the attention factor)");
      return OkStatus();
    case RopeScalingType::kProportional: {
      POSENC_RETURN_IF_ERROR(CheckFactor(c));
      if (c.layout.rotary_dim != c.layout.head_dim || c.layout.rotary_start != 0)
        return FieldError(c, "rotary_dim", fmt::format("{} (head_dim {})", c.layout.rotary_dim, c.layout.head_dim),
                          "must equal head_dim: proportional RoPE spans the whole head");
      if (!(s.partial_rotary_factor > 0 && s.partial_rotary_factor <= 1))
        return FieldError(c, "partial_rotary_factor", fmt::format("{}", s.partial_rotary_factor), "must be in (0, 1]");
      const double rotated = std::floor(s.partial_rotary_factor * static_cast<double>(c.layout.head_dim) / 2.0);
      if (rotated < 1)
        return FieldError(c, "partial_rotary_factor", fmt::format("{}", s.partial_rotary_factor),
                          fmt::format("rotates no pair of head_dim {}", c.layout.head_dim));
      return OkStatus();
    }
    case RopeScalingType::kGgml:
      if (!Positive(s.freq_scale)) return FieldError(c, "freq_scale", fmt::format("{}", s.freq_scale), "must be finite and > 0");
      if (!std::isfinite(s.ext_factor) || s.ext_factor < 0)
        return FieldError(c, "ext_factor", fmt::format("{}", s.ext_factor), "must be finite and >= 0");
      if (!std::isfinite(s.attn_factor) || s.attn_factor <= 0)
        return FieldError(c, "attn_factor", fmt::format("{}", s.attn_factor), "must be finite and > 0");
      if (!s.freq_factors.empty()) POSENC_RETURN_IF_ERROR(CheckFactorList(c, "freq_factors", s.freq_factors));
      if (!s.long_factor.empty() || !s.short_factor.empty()) {
        POSENC_RETURN_IF_ERROR(CheckFactorList(c, "rope_factors_short", s.short_factor));
        POSENC_RETURN_IF_ERROR(CheckFactorList(c, "rope_factors_long", s.long_factor));
        POSENC_RETURN_IF_ERROR(CheckOriginal(c, "n_ctx_orig"));
      }
      if (s.ext_factor != 0.0) {
        POSENC_RETURN_IF_ERROR(CheckOriginal(c, "n_ctx_orig"));
        POSENC_RETURN_IF_ERROR(CheckBetas(c));
      }
      return OkStatus();
  }
  return InvalidArgumentError("rope config: unknown scaling type");
}

Result<RopeFrequencies> ComputeUnchecked(const RopeConfig& config, int64_t seq_len) {
  const RopeScaling& s = config.scaling;
  const int64_t dim = config.layout.rotary_dim;
  switch (s.type) {
    case RopeScalingType::kNone:
      return DefaultRopeFrequencies(dim, config.base);
    case RopeScalingType::kLinear: {
      POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, DefaultRopeFrequencies(dim, config.base));
      for (double& w : f.inv_freq) w /= s.factor;
      return f;
    }
    case RopeScalingType::kNtk: {
      const double base = config.base * std::pow(s.factor, static_cast<double>(dim) / static_cast<double>(dim - 2));
      return DefaultRopeFrequencies(dim, base);
    }
    case RopeScalingType::kDynamicNtk: {
      const double max_len = static_cast<double>(config.max_position_embeddings);
      const double len = std::max(static_cast<double>(seq_len), max_len);
      const double base =
          config.base * std::pow(s.factor * len / max_len - (s.factor - 1.0), static_cast<double>(dim) / static_cast<double>(dim - 2));
      return DefaultRopeFrequencies(dim, base);
    }
    case RopeScalingType::kYarn: return Yarn(config);
    case RopeScalingType::kLlama3: return Llama3(config);
    case RopeScalingType::kLongRope: return LongRope(config, seq_len);
    case RopeScalingType::kProportional: return Proportional(config);
    case RopeScalingType::kGgml: return Ggml(config, seq_len);
  }
  return InvalidArgumentError("rope frequencies: unknown scaling type");
}

std::string FrequenciesWhat(const RopeConfig& c) { return fmt::format("{}: {} scaling", ConfigWhat(c), ToString(c.scaling.type)); }

}  // namespace

Status ValidateRopeConfig(const RopeConfig& c) {
  POSENC_RETURN_IF_ERROR(ValidateKeys(c));
  // Each key can be in range while their product is not (a ggml freq_scale of 1e52, a linear factor of
  // 1e-40): the frequencies must make finite float32 angles, in the short regime and in the long one
  // (LongRope and ggml switch factors past original_max_position_embeddings; dynamic NTK only lowers
  // frequencies as the length grows).
  const int64_t long_len = std::max(c.scaling.original_max_position_embeddings, c.max_position_embeddings) + 1;
  for (int64_t seq_len : {int64_t{1}, std::max<int64_t>(long_len, 2)}) {
    POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, ComputeUnchecked(c, seq_len));
    POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(f, FrequenciesWhat(c)));
  }
  return OkStatus();
}

Result<RopeFrequencies> ComputeRopeFrequencies(const RopeConfig& config, int64_t seq_len) {
  if (seq_len < 0) return InvalidArgumentError(fmt::format("rope frequencies: seq_len {} is negative", seq_len));
  POSENC_RETURN_IF_ERROR(ValidateRopeConfig(config));
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, ComputeUnchecked(config, seq_len));
  POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(f, FrequenciesWhat(config)));
  return f;
}

double NominalScalingFactor(const RopeConfig& config) {
  switch (config.scaling.type) {
    case RopeScalingType::kNone: return 1.0;
    case RopeScalingType::kGgml: return 1.0 / config.scaling.freq_scale;
    default: return config.scaling.factor;
  }
}

std::vector<double> UnscaledFrequencies(const RopeConfig& config) {
  if (config.scaling.type == RopeScalingType::kProportional)
    return Powers(config.base, config.layout.head_dim / 2, config.layout.head_dim);
  return Powers(config.base, config.layout.rotary_dim / 2, config.layout.rotary_dim);
}

std::vector<PairRegime> ClassifyPairs(const RopeConfig& config, const RopeFrequencies& freqs) {
  const std::vector<double> plain = UnscaledFrequencies(config);
  const double factor = NominalScalingFactor(config);
  const double lo = std::min(1.0, factor), hi = std::max(1.0, factor);
  constexpr double kRel = 1e-9;
  std::vector<PairRegime> out(freqs.inv_freq.size(), PairRegime::kScaled);
  for (size_t i = 0; i < out.size() && i < plain.size(); ++i) {
    const double w = freqs.inv_freq[i];
    if (w == 0.0) {
      out[i] = PairRegime::kUnrotated;
      continue;
    }
    const double divisor = plain[i] / w;  // how much slower the pair turns than unscaled
    if (std::abs(divisor - 1.0) <= kRel) out[i] = PairRegime::kExtrapolated;
    else if (std::abs(divisor - factor) <= kRel * factor) out[i] = PairRegime::kInterpolated;
    else if (divisor > lo && divisor < hi) out[i] = PairRegime::kBlended;
    else out[i] = PairRegime::kScaled;
  }
  return out;
}

}  // namespace posenc
