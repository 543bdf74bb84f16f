// The scaling rows' range rules: each key by its rule, key against key, and each row's cross-key rules.
#include "math/rope_scaling_rules.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "math/rope_scaling_formulas.hpp"

namespace posenc::rope_scaling {

namespace {

using R = ScalingKeyRule;

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

Status CheckRule(const RopeConfig& c, std::string_view key, ScalingKeyRule rule) {
  const RopeScalingKey* k = FindScalingKey(RopeScalingOf(c.scaling.type), key);
  if (k == nullptr) return InvalidArgumentError(fmt::format("{}: no key '{}'", ConfigWhat(c), key));
  RopeScalingKey with = *k;
  with.rule = rule;
  return CheckRopeScalingKey(c, with);
}

}  // namespace

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

}  // namespace posenc::rope_scaling

namespace posenc {

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
    return rope_scaling::FieldError(c, key.name, fmt::format("{}", *given),
                      fmt::format("is outside float32, the type it is used in (magnitude {} to {}, or 0)",
                                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max()));
  switch (key.rule) {
    case ScalingKeyRule::kAny: return OkStatus();
    case ScalingKeyRule::kPositive: {
      const std::optional<double> v = key.NumberIn(c);
      if (!v.has_value()) return OkStatus();  // an optional number not given
      if (!rope_scaling::Positive(*v)) return rope_scaling::FieldError(c, key.name, fmt::format("{}", *v), "must be finite and > 0");
      return OkStatus();
    }
    case ScalingKeyRule::kNonNegative: {
      const double v = *key.In<double>(c);
      if (!std::isfinite(v) || v < 0) return rope_scaling::FieldError(c, key.name, fmt::format("{}", v), "must be finite and >= 0");
      return OkStatus();
    }
    case ScalingKeyRule::kGivenPositive: {
      const int64_t v = *key.In<int64_t>(c);
      if (v <= 0) return rope_scaling::FieldError(c, key.name, fmt::format("{}", v), "must be given and > 0");
      return OkStatus();
    }
    case ScalingKeyRule::kUnitInterval: {
      const double v = *key.In<double>(c);
      if (!(v > 0 && v <= 1)) return rope_scaling::FieldError(c, key.name, fmt::format("{}", v), "must be in (0, 1]");
      return OkStatus();
    }
    case ScalingKeyRule::kPairListIfGiven:
      if (key.In<std::vector<double>>(c)->empty()) return OkStatus();
      [[fallthrough]];
    case ScalingKeyRule::kPairList: return rope_scaling::CheckFactorList(c, key.name, *key.In<std::vector<double>>(c));
  }
  return OkStatus();
}

}  // namespace posenc
