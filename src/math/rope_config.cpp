// RopeConfig: the scaling table's rows, validation (remembered for the configs validated last) and
// ComputeRopeFrequencies; each row's formulas are rope_scaling_formulas.cpp, its range rules
// rope_scaling_rules.cpp.
#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <cmath>
#include <limits>
#include <memory>
#include <iterator>

#include <fmt/format.h>

#include "posenc/math/rope_config.hpp"
#include "core/enum_names.hpp"
#include "math/rope_scaling_formulas.hpp"
#include "math/rope_scaling_rules.hpp"
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

using namespace rope_scaling;  // NOLINT: the rows' formulas, regimes and rules

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
    {RopeScalingType::kYarn, "yarn", kYarnNames, kYarnKeys, kYarnOrders, nullptr, OneRegime, Yarn, ByFactor},
    {RopeScalingType::kLlama3, "llama3", kLlama3Names, kLlama3Keys, kLlama3Orders, nullptr, OneRegime, Llama3,
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
     Proportional,
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
  // A scaling whose frequencies keep changing with the length (dynamic NTK's base grows with it) is
  // also checked at the longest sequence posenc positions, so a config that reads well cannot fail at a
  // length it allows; ComputeRopeFrequencies refuses such a scaling past that length.
  if (kMaxRopePosition > LongLength(c)) {
    const int64_t regime = row.regime_of(c, kMaxRopePosition);
    bool seen = false;
    for (const auto& r : check->regimes) seen |= r.first == regime;
    if (!seen) {
      POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, ComputeUnchecked(c, regime));
      POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(f, FrequenciesWhat(c)));
    }
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
  if (seq_len > kMaxRopePosition)
    return InvalidArgumentError(fmt::format("{}: seq_len {} is past 2^31, the longest sequence posenc positions",
                                            FrequenciesWhat(config), seq_len));
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
