// ComputeRopeFrequencies: each scaling as a pure function of the config and the sequence length.
//
// The formulas follow Hugging Face transformers' modeling_rope_utils.py (linear, dynamic, yarn,
// longrope, llama3, proportional) and ggml's CPU rope (ggml_rope_cache_init, rope_yarn,
// ggml_rope_yarn_corr_dims); docs/ROPE_SCALING.md states each one and where the two differ. Everything
// is float64 except the one place where ggml's float32 arithmetic decides an integer (the YaRN
// correction range of kGgml), which is computed in float32 as ggml does.
#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <cmath>
#include <limits>
#include <memory>
#include <iterator>
#include <numbers>

#include <fmt/format.h>

#include "posenc/math/rope_config.hpp"
#include "core/enum_names.hpp"
#include "math/rope_scaling_table.hpp"

namespace posenc {

std::string_view ToString(RopeScalingType t) {
  for (const RopeScalingSpec& row : RopeScalings())
    if (row.type == t) return row.name;
  return "unknown";
}

constexpr detail::EnumName<PairRegime> kRegimeNames[] = {{PairRegime::kUnscaled, "unscaled"},
                                                         {PairRegime::kExtrapolated, "extrapolated"},
                                                         {PairRegime::kInterpolated, "interpolated"},
                                                         {PairRegime::kBlended, "blended"},
                                                         {PairRegime::kScaled, "scaled"},
                                                         {PairRegime::kUnrotated, "unrotated"}};

// The one definition of each regime (inspect --help prints these; docs/LEARNING.md quotes them and a
// test holds the two equal). "The factor" is NominalScalingFactor; L the original context.
constexpr detail::EnumName<PairRegime> kRegimeMeanings[] = {
    {PairRegime::kUnscaled,
     "nothing is scaled at this length: the pair turns at base^(-2i/R) as in training (past the training "
     "length a slow pair, wavelength > L, reaches angles training never showed it)"},
    {PairRegime::kExtrapolated,
     "the scaling keeps this pair's trained frequency: past L it turns on into new positions, harmless "
     "for a fast pair whose wavelength is far below L (it met every angle in training)"},
    {PairRegime::kInterpolated,
     "frequency divided by the full factor: factor x L positions are squeezed into the angles L "
     "positions reached in training"},
    {PairRegime::kBlended,
     "frequency divided by something strictly between 1 and the factor (YaRN's ramp, "
     "Llama 3's smooth band, NTK's middle pairs)"},
    {PairRegime::kScaled,
     "frequency divided by something outside [1, factor] (LongRoPE's per-pair lists, "
     "dynamic NTK past its length)"},
    {PairRegime::kUnrotated,
     "frequency 0: the pair is never rotated and carries no position (proportional "
     "RoPE's tail)"},
};

std::string_view ToString(PairRegime r) { return detail::NameOf(r, kRegimeNames); }
std::string_view PairRegimeMeaning(PairRegime r) { return detail::NameOf(r, kRegimeMeanings); }

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// "rope config" and the config's source, when it has one: how every error about a config begins.
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

Result<RopeFrequencies> Proportional(const RopeConfig& c) {
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

// ---------- the frequency functions of the rows that need no helper above ----------

Result<RopeFrequencies> Default(const RopeConfig& c, int64_t) {
  return DefaultRopeFrequencies(c.layout.rotary_dim, c.base);
}

Result<RopeFrequencies> Linear(const RopeConfig& c, int64_t) {
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, DefaultRopeFrequencies(c.layout.rotary_dim, c.base));
  for (double& w : f.inv_freq) w /= c.scaling.factor;
  return f;
}

Result<RopeFrequencies> Ntk(const RopeConfig& c, int64_t) {
  const int64_t dim = c.layout.rotary_dim;
  const double base = c.base * std::pow(c.scaling.factor, static_cast<double>(dim) / static_cast<double>(dim - 2));
  return DefaultRopeFrequencies(dim, base);
}

Result<RopeFrequencies> DynamicNtk(const RopeConfig& c, int64_t seq_len) {
  const int64_t dim = c.layout.rotary_dim;
  const double factor = c.scaling.factor;
  const double max_len = static_cast<double>(c.max_position_embeddings);
  const double len = std::max(static_cast<double>(seq_len), max_len);
  const double base = c.base * std::pow(factor * len / max_len - (factor - 1.0),
                                        static_cast<double>(dim) / static_cast<double>(dim - 2));
  return DefaultRopeFrequencies(dim, base);
}

// Qwen 1.0 (modeling_qwen.py, QWenModel.get_ntk_alpha and RotaryEmbedding): the NTK alpha steps
// through 1, 3, 7, 15, ... as the length passes seq_length times a power of two.
double QwenNtkAlpha(const RopeConfig& c, int64_t seq_len) {
  const double ratio = static_cast<double>(seq_len) / static_cast<double>(c.scaling.original_max_position_embeddings);
  if (!(ratio > 0)) return 1.0;
  return std::max(std::pow(2.0, std::ceil(std::log2(ratio) + 1.0)) - 1.0, 1.0);
}

Result<RopeFrequencies> QwenDynamicNtk(const RopeConfig& c, int64_t seq_len) {
  const int64_t dim = c.layout.rotary_dim;
  const double alpha = QwenNtkAlpha(c, seq_len);
  const double base = c.base * std::pow(alpha, static_cast<double>(dim) / static_cast<double>(dim - 2));
  return DefaultRopeFrequencies(dim, base);
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

// ---------- where each key lives ----------

constexpr auto Factor = &RopeScaling::factor;
constexpr auto Original = &RopeScaling::original_max_position_embeddings;
constexpr auto MaxPositions = &RopeConfig::max_position_embeddings;
constexpr auto BetaFast = &RopeScaling::beta_fast;
constexpr auto BetaSlow = &RopeScaling::beta_slow;
constexpr auto AttentionFactor = &RopeScaling::attention_factor;
constexpr auto Mscale = &RopeScaling::mscale;
constexpr auto MscaleAllDim = &RopeScaling::mscale_all_dim;
constexpr auto Truncate = &RopeScaling::truncate;
constexpr auto LowFreqFactor = &RopeScaling::low_freq_factor;
constexpr auto HighFreqFactor = &RopeScaling::high_freq_factor;
constexpr auto ShortFactor = &RopeScaling::short_factor;
constexpr auto LongFactor = &RopeScaling::long_factor;
constexpr auto PartialRotary = &RopeScaling::partial_rotary_factor;
constexpr auto FreqScale = &RopeScaling::freq_scale;
constexpr auto ExtFactor = &RopeScaling::ext_factor;
constexpr auto AttnFactor = &RopeScaling::attn_factor;
constexpr auto FreqFactors = &RopeScaling::freq_factors;

using R = ScalingKeyRule;
using Rd = ScalingKeyRead;

// ---------- rules across keys ----------

Status CheckRule(const RopeConfig& c, std::string_view key, ScalingKeyRule rule) {
  const RopeScalingKey* k = FindScalingKey(RopeScalingOf(c.scaling.type), key);
  if (k == nullptr) return InvalidArgumentError(fmt::format("{}: no key '{}'", ConfigWhat(c), key));
  RopeScalingKey with = *k;
  with.rule = rule;
  return CheckRopeScalingKey(c, with);
}

Status CheckOrder(const RopeConfig& c, const ScalingOrderRule& o) {
  const RopeScalingSpec& row = RopeScalingOf(c.scaling.type);
  const RopeScalingKey* g = FindScalingKey(row, o.greater);
  const RopeScalingKey* l = FindScalingKey(row, o.lesser);
  const double gv = *g->In<double>(c), lv = *l->In<double>(c);
  // Equal values are accepted: equal betas (Kimi K2 ships beta_fast = beta_slow = 1) make a one-pair
  // ramp that Hugging Face and ggml both compute (their 0.001 guard); equal llama3 band factors
  // (Llama 4) leave the smooth band empty, which Hugging Face warns about and computes.
  if (gv < lv)
    return FieldError(c, o.greater, fmt::format("{} ({} {})", gv, o.lesser, lv),
                      fmt::format("must be at least {}", o.lesser));
  return OkStatus();
}

Status NtkRules(const RopeConfig& c) {
  if (c.layout.rotary_dim <= 2)
    return FieldError(c, "rotary_dim", fmt::format("{}", c.layout.rotary_dim), "must be > 2 (the exponent is R/(R-2))");
  return OkStatus();
}

Status LongRopeRules(const RopeConfig& c) {
  const RopeScaling& s = c.scaling;
  if (s.original_max_position_embeddings <= 1 && !s.attention_factor.has_value())
    return FieldError(c, "original_max_position_embeddings", fmt::format("{}", s.original_max_position_embeddings),
                      "must be > 1 (its log divides the attention factor)");
  return OkStatus();
}

Status ProportionalRules(const RopeConfig& c) {
  if (c.layout.rotary_dim != c.layout.head_dim || c.layout.rotary_start != 0)
    return FieldError(c, "rotary_dim", fmt::format("{} (head_dim {})", c.layout.rotary_dim, c.layout.head_dim),
                      "must equal head_dim: proportional RoPE spans the whole head");
  const double rotated = std::floor(c.scaling.partial_rotary_factor * static_cast<double>(c.layout.head_dim) / 2.0);
  if (rotated < 1)
    return FieldError(c, "partial_rotary_factor", fmt::format("{}", c.scaling.partial_rotary_factor),
                      fmt::format("rotates no pair of head_dim {}", c.layout.head_dim));
  return OkStatus();
}

// ggml: the two LongRoPE lists come together with n_ctx_orig; the YaRN ramp (ext_factor != 0) needs
// n_ctx_orig and ordered betas.
Status GgmlRules(const RopeConfig& c) {
  const RopeScaling& s = c.scaling;
  if (!s.long_factor.empty() || !s.short_factor.empty()) {
    POSENC_RETURN_IF_ERROR(CheckRule(c, "rope_factors_short", R::kPairList));
    POSENC_RETURN_IF_ERROR(CheckRule(c, "rope_factors_long", R::kPairList));
    POSENC_RETURN_IF_ERROR(CheckRule(c, "n_ctx_orig", R::kGivenPositive));
  }
  if (s.ext_factor != 0.0) {
    POSENC_RETURN_IF_ERROR(CheckRule(c, "n_ctx_orig", R::kGivenPositive));
    POSENC_RETURN_IF_ERROR(CheckRule(c, "beta_fast", R::kPositive));
    POSENC_RETURN_IF_ERROR(CheckRule(c, "beta_slow", R::kPositive));
    POSENC_RETURN_IF_ERROR(CheckOrder(c, {"beta_fast", "beta_slow"}));
  }
  return OkStatus();
}

// ---------- the rows ----------

constexpr ScalingSpelling kDefaultNames[] = {{"default", ""}, {"mrope", ""}};  // mrope: legacy M-RoPE spelling
constexpr ScalingSpelling kLinearNames[] = {{"linear", ""}};
constexpr ScalingSpelling kNtkNames[] = {{"ntk", ""}};
constexpr ScalingSpelling kDynamicNames[] = {{"dynamic", ""}};
constexpr ScalingSpelling kYarnNames[] = {{"yarn", ""}};
constexpr ScalingSpelling kLlama3Names[] = {{"llama3", ""}};
constexpr ScalingSpelling kLongRopeNames[] = {{"longrope", ""},
                                              {"su", "rope type 'su' is LongRoPE's old name (read as longrope)"}};
constexpr ScalingSpelling kProportionalNames[] = {{"proportional", ""}};
// Set by the Hugging Face reader for Qwen 1.0 (use_dynamic_ntk), not a rope_type: no spelling.

constexpr RopeScalingKey kLinearKeys[] = {{"factor", R::kPositive, Rd::kRequired, 1.0, false, Factor}};
constexpr RopeScalingKey kDynamicKeys[] = {
    {"factor", R::kPositive, Rd::kRequired, 1.0, false, Factor},
    {"max_position_embeddings", R::kGivenPositive, Rd::kNotRead, 0.0, false, MaxPositions},
};
constexpr RopeScalingKey kYarnKeys[] = {
    {"factor", R::kPositive, Rd::kInferred, 1.0, false, Factor},
    {"original_max_position_embeddings", R::kGivenPositive, Rd::kNamedStep, 0.0, false, Original},
    {"beta_fast", R::kPositive, Rd::kOptional, 32.0, false, BetaFast},
    {"beta_slow", R::kPositive, Rd::kOptional, 1.0, false, BetaSlow},
    {"attention_factor", R::kPositive, Rd::kOptional, 0.0, false, AttentionFactor},
    {"mscale", R::kAny, Rd::kOptional, 0.0, false, Mscale},
    {"mscale_all_dim", R::kAny, Rd::kOptional, 0.0, false, MscaleAllDim},
    {"truncate", R::kAny, Rd::kOptional, 1.0, false, Truncate},
};
constexpr ScalingOrderRule kYarnOrders[] = {{"beta_fast", "beta_slow"}};
constexpr RopeScalingKey kLlama3Keys[] = {
    {"factor", R::kPositive, Rd::kRequired, 1.0, false, Factor},
    {"original_max_position_embeddings", R::kGivenPositive, Rd::kNamedStep, 0.0, false, Original},
    {"low_freq_factor", R::kPositive, Rd::kRequired, 1.0, false, LowFreqFactor},
    {"high_freq_factor", R::kPositive, Rd::kRequired, 4.0, false, HighFreqFactor},
};
constexpr ScalingOrderRule kLlama3Orders[] = {{"high_freq_factor", "low_freq_factor"}};
constexpr RopeScalingKey kLongRopeKeys[] = {
    {"factor", R::kPositive, Rd::kInferred, 1.0, false, Factor},
    {"original_max_position_embeddings", R::kGivenPositive, Rd::kNamedStep, 0.0, false, Original},
    {"short_factor", R::kPairList, Rd::kRequired, 0.0, false, ShortFactor},
    {"long_factor", R::kPairList, Rd::kRequired, 0.0, false, LongFactor},
    {"attention_factor", R::kPositive, Rd::kOptional, 0.0, false, AttentionFactor},
};
constexpr RopeScalingKey kProportionalKeys[] = {
    {"factor", R::kPositive, Rd::kOptional, 1.0, false, Factor},
    {"partial_rotary_factor", R::kUnitInterval, Rd::kNotRead, 1.0, false, PartialRotary},
};
constexpr RopeScalingKey kQwenNtkKeys[] = {
    {"original_max_position_embeddings", R::kGivenPositive, Rd::kNotRead, 0.0, false, Original},
};
constexpr RopeScalingKey kGgmlKeys[] = {
    {"freq_scale", R::kPositive, Rd::kOptional, 1.0, true, FreqScale},
    {"ext_factor", R::kNonNegative, Rd::kOptional, 0.0, true, ExtFactor},
    {"attn_factor", R::kPositive, Rd::kOptional, 1.0, true, AttnFactor},
    {"beta_fast", R::kAny, Rd::kOptional, 32.0, true, BetaFast},
    {"beta_slow", R::kAny, Rd::kOptional, 1.0, true, BetaSlow},
    {"n_ctx_orig", R::kAny, Rd::kOptional, 0.0, false, Original},
    {"freq_factors", R::kPairListIfGiven, Rd::kOptional, 0.0, false, FreqFactors},
    {"rope_factors_short", R::kPairListIfGiven, Rd::kNotRead, 0.0, false, ShortFactor},
    {"rope_factors_long", R::kPairListIfGiven, Rd::kNotRead, 0.0, false, LongFactor},
};

Result<RopeFrequencies> YarnRow(const RopeConfig& c, int64_t) { return Yarn(c); }
Result<RopeFrequencies> Llama3Row(const RopeConfig& c, int64_t) { return Llama3(c); }
Result<RopeFrequencies> ProportionalRow(const RopeConfig& c, int64_t) { return Proportional(c); }

double NoFactor(const RopeConfig&) { return 1.0; }
double ByFactor(const RopeConfig& c) { return c.scaling.factor; }
double ByFreqScale(const RopeConfig& c) { return 1.0 / c.scaling.freq_scale; }

// In RopeScalingType order (RopeScalingOf indexes it; rope_scaling_test checks the order).
constexpr RopeScalingSpec kScalings[] = {
    {RopeScalingType::kNone, "default", kDefaultNames, {}, {}, nullptr, OneRegime, Default, NoFactor},
    {RopeScalingType::kLinear, "linear", kLinearNames, kLinearKeys, {}, nullptr, OneRegime, Linear, ByFactor},
    {RopeScalingType::kNtk, "ntk", kNtkNames, kLinearKeys, {}, NtkRules, OneRegime, Ntk, ByFactor},
    {RopeScalingType::kDynamicNtk,
     "dynamic",
     kDynamicNames,
     kDynamicKeys,
     {},
     NtkRules,
     DynamicRegime,
     DynamicNtk,
     ByFactor},
    {RopeScalingType::kYarn, "yarn", kYarnNames, kYarnKeys, kYarnOrders, nullptr, OneRegime, YarnRow, ByFactor},
    {RopeScalingType::kLlama3, "llama3", kLlama3Names, kLlama3Keys, kLlama3Orders, nullptr, OneRegime, Llama3Row,
     ByFactor},
    {RopeScalingType::kLongRope,
     "longrope",
     kLongRopeNames,
     kLongRopeKeys,
     {},
     LongRopeRules,
     SwitchAtOriginal,
     LongRope,
     ByFactor},
    {RopeScalingType::kProportional,
     "proportional",
     kProportionalNames,
     kProportionalKeys,
     {},
     ProportionalRules,
     OneRegime,
     ProportionalRow,
     ByFactor,
     /*unscaled_over_head_dim=*/true},
    {RopeScalingType::kGgml, "ggml", {}, kGgmlKeys, {}, GgmlRules, GgmlRegime, Ggml, ByFreqScale},
    {RopeScalingType::kQwenDynamicNtk,
     "qwen_dynamic_ntk",
     {},
     kQwenNtkKeys,
     {},
     NtkRules,
     QwenNtkRegime,
     QwenDynamicNtk,
     NoFactor},
};

std::atomic<int64_t> g_computations{0};

// The config's own keys, each against its row's rules.
Status ValidateKeys(const RopeConfig& c) {
  if (Status s = c.layout.Validate(); !s.ok())
    return InvalidArgumentError(fmt::format("{}: {}", ConfigWhat(c), s.message()));
  if (!Positive(c.base)) return FieldError(c, "rope_theta", fmt::format("{}", c.base), "must be finite and > 0");
  const size_t index = static_cast<size_t>(c.scaling.type);
  if (index >= std::size(kScalings))
    return InvalidArgumentError(fmt::format("{}: unknown scaling type", ConfigWhat(c)));
  const RopeScalingSpec& row = kScalings[index];
  for (const RopeScalingKey& k : row.keys) POSENC_RETURN_IF_ERROR(CheckRopeScalingKey(c, k));
  for (const ScalingOrderRule& o : row.orders) POSENC_RETURN_IF_ERROR(CheckOrder(c, o));
  if (row.cross_rules != nullptr) POSENC_RETURN_IF_ERROR(row.cross_rules(c));
  return OkStatus();
}

Result<RopeFrequencies> ComputeUnchecked(const RopeConfig& config, int64_t seq_len) {
  g_computations.fetch_add(1, std::memory_order_relaxed);
  return RopeScalingOf(config.scaling.type).compute(config, seq_len);
}

std::string FrequenciesWhat(const RopeConfig& c) {
  return fmt::format("{}: {} scaling", ConfigWhat(c), ToString(c.scaling.type));
}

// What the frequencies depend on, and what a successful validation found for them.
struct ValidatedFrequencies {
  struct Inputs {
    int64_t head_dim = 0, rotary_dim = 0, rotary_start = 0;
    double base = 0;
    int64_t max_position_embeddings = 0;
    RopeScaling scaling;
    bool operator==(const Inputs&) const = default;
  };
  static Inputs Of(const RopeConfig& c) {
    return {c.layout.head_dim, c.layout.rotary_dim, c.layout.rotary_start, c.base, c.max_position_embeddings,
            c.scaling};
  }
  Inputs inputs;
  std::vector<std::pair<int64_t, RopeFrequencies>> regimes;  // (regime length, its frequencies)
};

// Keys, then the frequencies of each regime once, each against the float32 angle bound: each key can
// be in range while their product is not (a ggml freq_scale of 1e52, a linear factor of 1e-40).
Result<std::shared_ptr<const ValidatedFrequencies>> Check(const RopeConfig& c) {
  POSENC_RETURN_IF_ERROR(ValidateKeys(c));
  auto check = std::make_shared<ValidatedFrequencies>();
  check->inputs = ValidatedFrequencies::Of(c);
  const RopeScalingSpec& row = RopeScalingOf(c.scaling.type);
  for (int64_t seq_len : {int64_t{1}, LongLength(c)}) {
    const int64_t regime = row.regime_of(c, seq_len);
    bool seen = false;
    for (const auto& r : check->regimes) seen |= r.first == regime;
    if (seen) continue;
    POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, ComputeUnchecked(c, regime));
    POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(f, FrequenciesWhat(c)));
    check->regimes.emplace_back(regime, std::move(f));
  }
  return std::shared_ptr<const ValidatedFrequencies>(std::move(check));
}

// The configs validated last, newest first: a reader validates a config once and the model's layers
// then ask for its frequencies, so a few entries serve a process. Only what passed is kept.
class ValidatedCache {
 public:
  static constexpr size_t kEntries = 16;
  static constexpr size_t kMaxValuesPerEntry = 1 << 16;  // doubles: 512 KiB

  std::shared_ptr<const ValidatedFrequencies> Find(const RopeConfig& c) {
    const ValidatedFrequencies::Inputs inputs = ValidatedFrequencies::Of(c);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries_)
      if (e->inputs == inputs) return e;
    return nullptr;
  }
  void Add(std::shared_ptr<const ValidatedFrequencies> e) {
    // A config with huge lists (head_dim up to kMaxRopeHeadDim) is not kept: the cache stays small.
    const RopeScaling& sc = e->inputs.scaling;
    size_t values = sc.short_factor.size() + sc.long_factor.size() + sc.freq_factors.size();
    for (const auto& r : e->regimes) values += r.second.inv_freq.size();
    if (values > kMaxValuesPerEntry) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(entries_, [&](const auto& old) { return old->inputs == e->inputs; });
    entries_.push_front(std::move(e));
    if (entries_.size() > kEntries) entries_.pop_back();
  }

 private:
  std::mutex mu_;
  std::deque<std::shared_ptr<const ValidatedFrequencies>> entries_;
};

ValidatedCache& Validated() {
  static ValidatedCache* cache = new ValidatedCache();  // never destroyed: usable during exit
  return *cache;
}

// Validates in full and remembers what passed.
Result<std::shared_ptr<const ValidatedFrequencies>> CheckAndKeep(const RopeConfig& c) {
  POSENC_ASSIGN_OR_RETURN(std::shared_ptr<const ValidatedFrequencies> check, Check(c));
  Validated().Add(check);
  return check;
}

}  // namespace

std::span<const RopeScalingSpec> RopeScalings() { return kScalings; }

const RopeScalingSpec& RopeScalingOf(RopeScalingType type) {
  const size_t index = static_cast<size_t>(type);
  return index < std::size(kScalings) ? kScalings[index] : kScalings[0];
}

const RopeScalingSpec* FindRopeScaling(std::string_view hf_name, const ScalingSpelling** spelling) {
  for (const RopeScalingSpec& row : kScalings)
    for (const ScalingSpelling& sp : row.spellings)
      if (sp.name == hf_name) {
        if (spelling != nullptr) *spelling = &sp;
        return &row;
      }
  return nullptr;
}

const RopeScalingKey* FindScalingKey(const RopeScalingSpec& row, std::string_view name) {
  for (const RopeScalingKey& k : row.keys)
    if (k.name == name) return &k;
  return nullptr;
}

Status CheckRopeScalingKey(const RopeConfig& c, const RopeScalingKey& key) {
  // The attention-scale keys (attention_factor, mscale, mscale_all_dim: the optional numbers; ggml's
  // attn_factor) end up in the float32 multiplier of cos/sin: a value valid in float64 that is Inf or
  // flushes to 0 (or a denormal) there is refused, whatever the key's rule. (The frequency keys are
  // combined in float64 and checked against the float32 angle bound afterwards.)
  // Every number key of ggml's row is a float parameter of ggml_rope_ext, so the same bound holds there.
  const ScalingKeyKind kind = key.kind();
  const bool attention_key = kind == ScalingKeyKind::kOptionalNumber || key.name == "attn_factor" ||
                             (c.scaling.type == RopeScalingType::kGgml && kind == ScalingKeyKind::kNumber);
  const std::optional<double> given =
      kind == ScalingKeyKind::kNumber || kind == ScalingKeyKind::kOptionalNumber ? key.NumberIn(c) : std::nullopt;
  if (attention_key && given.has_value() && std::isfinite(*given) && *given != 0.0 &&
      !(std::abs(*given) <= std::numeric_limits<float>::max() &&
        std::abs(*given) >= std::numeric_limits<float>::min()))
    return FieldError(c, key.name, fmt::format("{}", *given),
                      fmt::format("is outside float32, the type it is used in (magnitude {} to {}, or 0)",
                                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max()));
  switch (key.rule) {
    case ScalingKeyRule::kAny: return OkStatus();
    case ScalingKeyRule::kPositive: {
      const std::optional<double> v = key.NumberIn(c);
      if (!v.has_value()) return OkStatus();  // an optional number not given
      if (!Positive(*v)) return FieldError(c, key.name, fmt::format("{}", *v), "must be finite and > 0");
      return OkStatus();
    }
    case ScalingKeyRule::kNonNegative: {
      const double v = *key.In<double>(c);
      if (!std::isfinite(v) || v < 0) return FieldError(c, key.name, fmt::format("{}", v), "must be finite and >= 0");
      return OkStatus();
    }
    case ScalingKeyRule::kGivenPositive: {
      const int64_t v = *key.In<int64_t>(c);
      if (v <= 0) return FieldError(c, key.name, fmt::format("{}", v), "must be given and > 0");
      return OkStatus();
    }
    case ScalingKeyRule::kUnitInterval: {
      const double v = *key.In<double>(c);
      if (!(v > 0 && v <= 1)) return FieldError(c, key.name, fmt::format("{}", v), "must be in (0, 1]");
      return OkStatus();
    }
    case ScalingKeyRule::kPairListIfGiven:
      if (key.In<std::vector<double>>(c)->empty()) return OkStatus();
      [[fallthrough]];
    case ScalingKeyRule::kPairList: return CheckFactorList(c, key.name, *key.In<std::vector<double>>(c));
  }
  return OkStatus();
}

ScalingKeyKind RopeScalingKey::kind() const {
  struct KindOf {
    ScalingKeyKind operator()(double RopeScaling::*) const { return ScalingKeyKind::kNumber; }
    ScalingKeyKind operator()(int64_t RopeScaling::*) const { return ScalingKeyKind::kInteger; }
    ScalingKeyKind operator()(bool RopeScaling::*) const { return ScalingKeyKind::kBoolean; }
    ScalingKeyKind operator()(std::vector<double> RopeScaling::*) const { return ScalingKeyKind::kNumberList; }
    ScalingKeyKind operator()(std::optional<double> RopeScaling::*) const { return ScalingKeyKind::kOptionalNumber; }
    ScalingKeyKind operator()(int64_t RopeConfig::*) const { return ScalingKeyKind::kInteger; }
  };
  return std::visit(KindOf{}, field);
}

std::optional<double> RopeScalingKey::NumberIn(const RopeConfig& c) const {
  if (const double* v = In<double>(c)) return *v;
  if (const int64_t* v = In<int64_t>(c)) return static_cast<double>(*v);
  if (const std::optional<double>* v = In<std::optional<double>>(c)) return *v;
  return std::nullopt;
}

bool RopeScalingKey::SetNumber(RopeConfig& c, double v) const {
  if (double* d = In<double>(c)) {
    *d = v;
  } else if (std::optional<double>* o = In<std::optional<double>>(c)) {
    *o = v;
  } else if (int64_t* i = In<int64_t>(c)) {
    *i = static_cast<int64_t>(v);
  } else {
    return false;
  }
  return true;
}

int64_t RopeFrequencyComputations() { return g_computations.load(std::memory_order_relaxed); }

Status ValidateRopeConfig(const RopeConfig& c) { return CheckAndKeep(c).status(); }

Result<RopeFrequencies> ComputeRopeFrequencies(const RopeConfig& config, int64_t seq_len) {
  if (seq_len < 0) return InvalidArgumentError(fmt::format("rope frequencies: seq_len {} is negative", seq_len));
  // A config equal to one validated lately is not validated again; any other is, in full.
  std::shared_ptr<const ValidatedFrequencies> check = Validated().Find(config);
  if (check == nullptr) {
    POSENC_ASSIGN_OR_RETURN(check, CheckAndKeep(config));
  }
  const int64_t regime = RopeScalingOf(config.scaling.type).regime_of(config, seq_len);
  for (const auto& [length, freqs] : check->regimes)
    if (length == regime) return freqs;
  // Dynamic NTK past the lengths validated: its own frequencies, checked as they are returned.
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, ComputeUnchecked(config, seq_len));
  POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(f, FrequenciesWhat(config)));
  return f;
}

double NominalScalingFactor(const RopeConfig& config) {
  return RopeScalingOf(config.scaling.type).nominal_factor(config);
}

std::vector<double> UnscaledFrequencies(const RopeConfig& config) {
  if (RopeScalingOf(config.scaling.type).unscaled_over_head_dim)
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
    if (std::abs(divisor - 1.0) <= kRel)
      out[i] = PairRegime::kExtrapolated;
    else if (std::abs(divisor - factor) <= kRel * factor)
      out[i] = PairRegime::kInterpolated;
    else if (divisor > lo && divisor < hi)
      out[i] = PairRegime::kBlended;
    else
      out[i] = PairRegime::kScaled;
  }
  // Nothing differs from base^(-2i/R): the length (or the config) scales nothing, and "extrapolated",
  // which names a pair a scaling chose to keep, would say a scaling exists.
  if (std::none_of(out.begin(), out.end(), [](PairRegime r) {
        return r == PairRegime::kInterpolated || r == PairRegime::kBlended || r == PairRegime::kScaled;
      }))
    for (PairRegime& r : out)
      if (r == PairRegime::kExtrapolated) r = PairRegime::kUnscaled;
  return out;
}

}  // namespace posenc
