// The known faults: each cause turns the reference into the EngineModels an engine with that fault
// would be, with the fits (base, scaling parameter, positions) they need, and the diagnosis that
// tries them (rope_check_causes.hpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "math/rope_scaling_table.hpp"
#include "model/rope_check_causes.hpp"
#include "posenc/math/multi_axis.hpp"

namespace posenc::rope_check_internal {
namespace {

// A candidate from a changed config (the reference's positions and precision).
void AddFromConfig(const Context& ctx, const RopeConfig& config, std::string detail, std::vector<Candidate>* out,
                   int64_t seq_len = -1) {
  Result<EngineModel> e = EngineOf(config, *ctx.dump, seq_len < 0 ? ctx.seq_len : seq_len, ctx.reference.positions);
  if (!e.ok() || e->inv_freq.size() != ctx.reference.inv_freq.size()) return;
  out->push_back({std::move(detail), std::move(e).value()});
}

// Estimated frequency of pair j from the observed angles: the angle change between the two tokens
// closest in position, over their distance (NaN when not observable).
double ObservedFrequency(const Context& ctx, int64_t j) {
  const RopeDump& d = *ctx.dump;
  const int64_t T = d.tokens, pairs = ctx.layout.num_pairs();
  if (ctx.observed.empty() || ctx.reference.num_components != 1) return NAN;
  if (d.kind == RopeDumpKind::kInvFreq) return d.inv_freq[static_cast<size_t>(j)];
  int64_t best_t1 = -1, best_t2 = -1, best_gap = std::numeric_limits<int64_t>::max();
  // Tokens sorted by position: the smallest positive gap, and position 0 against the least one.
  std::vector<int64_t> order(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) order[t] = t;
  const auto& pos = ctx.reference.positions;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return pos[a] < pos[b]; });
  for (size_t k = 0; k + 1 < order.size(); ++k) {
    const int64_t gap = pos[order[k + 1]] - pos[order[k]];
    if (gap > 0 && gap < best_gap) best_gap = gap, best_t1 = order[k], best_t2 = order[k + 1];
  }
  if (best_t1 < 0) return NAN;
  double delta = ctx.observed[best_t2 * pairs + j] - ctx.observed[best_t1 * pairs + j];
  delta = std::remainder(delta, 2 * std::numbers::pi);
  return delta / static_cast<double>(best_gap);
}

// Positions estimated from the observed angles, unwrapped from the slowest pair to the fastest.
std::vector<double> EstimatedPositions(const Context& ctx) {
  const RopeDump& d = *ctx.dump;
  const int64_t T = d.tokens, pairs = ctx.layout.num_pairs();
  std::vector<double> est(static_cast<size_t>(T), NAN);
  if (ctx.observed.empty() || ctx.reference.num_components != 1) return est;
  std::vector<int64_t> order;
  for (int64_t j = 0; j < pairs; ++j)
    if (ctx.reference.inv_freq[j] > 0) order.push_back(j);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return ctx.reference.inv_freq[a] < ctx.reference.inv_freq[b]; });
  const double noise = 8 * UnitRoundoff(d.dtype) + 1e-6;  // radians
  for (int64_t t = 0; t < T; ++t) {
    double p = NAN, sigma = 0;
    for (int64_t j : order) {
      const double w = ctx.reference.inv_freq[j];
      double a = ctx.observed[t * pairs + j];
      if (std::isnan(a)) continue;
      if (std::isnan(p)) {
        // The slowest pair has not turned half a turn at any real position: its angle is the position
        // (a small negative one is noise around position 0).
        p = a / w;
        sigma = noise / w;
        continue;
      }
      if (sigma * w > std::numbers::pi / 4) break;  // the next turn count would be a guess
      const double turns = std::round((p * w - a) / (2 * std::numbers::pi));
      p = (a + turns * 2 * std::numbers::pi) / w;
      sigma = noise / w;
    }
    est[static_cast<size_t>(t)] = p;
  }
  return est;
}

// Fits the base whose frequency of pair j (scaling kept) equals w_obs; 0 when none in range.
double FitBase(const RopeConfig& config, int64_t seq_len, int64_t j, double w_obs) {
  if (!(w_obs > 0)) return 0;
  auto freq = [&](double base) -> double {
    RopeConfig c = config;
    c.base = base;
    Result<SiteFrequencies> f = ComputeSiteFrequencies(c, seq_len);
    return f.ok() ? f->freqs.inv_freq[static_cast<size_t>(j)] : NAN;
  };
  double lo = std::log(1.5), hi = std::log(1e13);
  const double flo = freq(std::exp(lo)), fhi = freq(std::exp(hi));
  if (!(w_obs <= flo && w_obs >= fhi)) return 0;
  for (int it = 0; it < 80; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (freq(std::exp(mid)) > w_obs) lo = mid; else hi = mid;
  }
  return std::exp(0.5 * (lo + hi));
}

// The value of one config parameter (set by `set`, searched on a log grid over [lo, hi] and refined
// around the best points) whose frequencies best agree with what the dump shows: for rotated tensors
// and caches the largest sum over tokens and pairs of cos(observed angle - position * w), for
// frequencies the smallest sum of |log(w / observed)|. 0 when nothing is observable.
double FitCoherent(const Context& ctx, const std::function<void(RopeConfig&, double)>& set, double lo, double hi,
                   int grid_points) {
  const RopeDump& d = *ctx.dump;
  if (ctx.observed.empty() || ctx.reference.num_components != 1 || !(lo > 0) || !(hi > lo)) return 0;
  const int64_t T = d.tokens, pairs = ctx.layout.num_pairs();
  const RopeConfig& ref = ctx.target->config;
  const int64_t stride = std::max<int64_t>(1, T / 64);  // about 64 tokens at most: the fit, not the check
  auto score = [&](double log_value) {
    RopeConfig c = ref;
    set(c, std::exp(log_value));
    Result<SiteFrequencies> f = ComputeSiteFrequencies(c, ctx.seq_len);
    if (!f.ok() || static_cast<int64_t>(f->freqs.inv_freq.size()) != pairs) return -1e300;
    double sum = 0;
    for (int64_t j = 0; j < pairs; ++j) {
      const double w = f->freqs.inv_freq[j];
      if (d.kind == RopeDumpKind::kInvFreq) {
        const double o = ctx.observed[j];
        if (w > 0 && o > 0) sum -= std::abs(std::log(w / o));
        continue;
      }
      for (int64_t t = 0; t < T; t += stride) {
        const double a = ctx.observed[t * pairs + j];
        if (!std::isnan(a)) sum += std::cos(a - static_cast<double>(ctx.reference.positions[t]) * w);
      }
    }
    return sum;
  };
  const double llo = std::log(lo), lhi = std::log(hi);
  const double step = (lhi - llo) / grid_points;
  std::vector<std::pair<double, double>> grid;  // (score, log value)
  for (int k = 0; k <= grid_points; ++k) grid.emplace_back(score(llo + k * step), llo + k * step);
  std::partial_sort(grid.begin(), grid.begin() + std::min<size_t>(4, grid.size()), grid.end(), std::greater<>());
  double best = -1e300, best_log = 0;
  for (size_t g = 0; g < std::min<size_t>(4, grid.size()); ++g) {
    for (int k = -40; k <= 40; ++k) {
      const double x = grid[g].second + k * step / 40;
      const double v = score(x);
      if (v > best) best = v, best_log = x;
    }
  }
  return best > -1e299 ? std::exp(best_log) : 0;
}

// The values a config would write near a fit (2, 3 and 4 significant digits), then the fit itself.
std::vector<double> RoundedNear(double fit) {
  std::vector<double> out;
  for (int digits : {2, 3, 4}) {
    const double mag = std::pow(10.0, std::floor(std::log10(fit)) - (digits - 1));
    out.push_back(std::round(fit / mag) * mag);
  }
  out.push_back(fit);
  return out;
}

// ---------- the causes: one entry each ----------

using CauseFn = void (*)(const Context&, std::vector<Candidate>*);

struct Cause {
  std::string_view id;
  CauseFn candidates;
  // Costly candidates (a fit over every observation), tried only when no cause's `candidates` explain.
  CauseFn refine = nullptr;
};
void PairingCauses(const Context& ctx, std::vector<Candidate>* out) {
  Candidate c{"", ctx.reference};
  const RopePairing other = ctx.layout.pairing == RopePairing::kHalf ? RopePairing::kInterleaved : RopePairing::kHalf;
  c.engine.layout.pairing = other;
  c.detail = fmt::format("{} pairs instead of {}", ToString(other), ToString(ctx.layout.pairing));
  out->push_back(std::move(c));
}

void WindowCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  const RotaryLayout& l = ctx.layout;  // over the dump's width
  const int64_t W = l.head_dim, R = l.rotary_dim;
  // Frequencies over the whole head with the window kept (a partial factor read as proportional, or
  // ignored in the frequencies only).
  if (ref.layout.rotary_dim < ref.layout.head_dim) {
    RopeConfig c = ref;
    c.layout.rotary_dim = ref.layout.head_dim;
    c.layout.rotary_start = 0;
    if (Result<SiteFrequencies> f = ComputeSiteFrequencies(c, ctx.seq_len); f.ok()) {
      Candidate k{fmt::format("frequencies over the whole head of {} dims, rotating the {} window dims", ref.layout.head_dim,
                              R),
                  ctx.reference};
      k.engine.inv_freq.assign(f->freqs.inv_freq.begin(), f->freqs.inv_freq.begin() + l.num_pairs());
      out->push_back(std::move(k));
    }
  }
  // A proportional RoPE (Gemma 4's p-RoPE: pairs (i, i + D/2) over the whole head, the tail at
  // frequency 0) read as a partial one: the first share of the head rotated, frequencies over it.
  if (ref.scaling.type == RopeScalingType::kProportional && ctx.dump->kind == RopeDumpKind::kRotated) {
    RopeConfig c = ref;
    c.scaling = RopeScaling{};
    c.layout.rotary_start = 0;
    c.layout.rotary_dim = 2 * static_cast<int64_t>(std::floor(ref.scaling.partial_rotary_factor * W / 2));
    if (c.layout.rotary_dim > 0)
      if (Result<EngineModel> e = EngineOf(c, *ctx.dump, ctx.seq_len, ctx.reference.positions); e.ok())
        out->push_back({fmt::format("proportional RoPE read as partial: the first {} dims rotated, frequencies over "
                                    "them",
                                    c.layout.rotary_dim),
                        std::move(e).value()});
  }
  if (ctx.dump->kind != RopeDumpKind::kRotated) return;
  // Another window over the dump's head: the whole head, the front or back of it, half or a quarter.
  std::set<std::pair<int64_t, int64_t>> seen{{l.rotary_start, R}};
  auto window = [&](int64_t start, int64_t dim, const std::string& what) {
    if (dim <= 0 || dim % 2 != 0 || start < 0 || start + dim > W || !seen.insert({start, dim}).second) return;
    RopeConfig c = ref;
    c.layout.head_dim = W;
    c.layout.rotary_start = start;
    c.layout.rotary_dim = dim;
    Result<EngineModel> e = EngineOf(c, *ctx.dump, ctx.seq_len, ctx.reference.positions);
    if (!e.ok()) return;
    out->push_back({fmt::format("{} (dims [{}, {})) instead of dims [{}, {})", what, start, start + dim,
                                l.rotary_start, l.rotary_start + R),
                    std::move(e).value()});
  };
  window(0, W, "the whole head rotated (partial rotary ignored)");
  window(0, R, "the window at the front of the head");
  window(W - R, R, "the window at the back of the head");
  window(0, W / 2, "half the head rotated");
  window(0, W / 4, "a quarter of the head rotated");
}

void AddBases(const Context& ctx, const std::vector<double>& bases, std::vector<Candidate>* out);

void BaseCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  // Round values first (common bases, the fits to 3 digits), the raw fits last: among candidates that
  // explain equally well the first is named.
  std::vector<double> bases = {10000.0, 500000.0, 1000000.0, 100000.0, 5000000.0, 1e7, 75000000.0}, raw;
  const int64_t pairs = ctx.layout.num_pairs();
  for (int64_t j : {int64_t{1}, pairs / 4, pairs / 2}) {
    if (j < 1 || j >= pairs) continue;
    const double w = ObservedFrequency(ctx, j);
    const double fit = FitBase(ref, ctx.seq_len, j, w);
    if (fit <= 0) continue;
    const double mag = std::pow(10.0, std::floor(std::log10(fit)) - 2);
    bases.push_back(std::round(fit / mag) * mag);
    raw.push_back(fit);
  }
  bases.insert(bases.end(), raw.begin(), raw.end());
  AddBases(ctx, bases, out);
}

// When no quick fit explains it: the base fitted to every observation at once.
void BaseRefined(const Context& ctx, std::vector<Candidate>* out) {
  const double fit = FitCoherent(ctx, [](RopeConfig& c, double v) { c.base = v; }, 1.5, 1e13, 2000);
  if (fit > 0) AddBases(ctx, RoundedNear(fit), out);
}

void AddBases(const Context& ctx, const std::vector<double>& bases, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  std::set<double> seen;
  for (double b : bases) {
    if (!seen.insert(b).second) continue;
    if (std::abs(b - ref.base) <= 1e-9 * ref.base) continue;
    RopeConfig c = ref;
    c.base = b;
    AddFromConfig(ctx, c, fmt::format("base {:.10g} fits (model: {:.10g})", b, ref.base), out);
  }
}

void ScalingMissingCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  if (ref.scaling.type == RopeScalingType::kNone) return;
  RopeConfig c = ref;
  c.scaling = RopeScaling{};
  AddFromConfig(ctx, c, fmt::format("no scaling applied (model: {})", ToString(ref.scaling.type)), out);
}

void ScalingParamCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  if (ref.scaling.type == RopeScalingType::kNone) return;
  const RopeScalingSpec& row = RopeScalingOf(ref.scaling.type);
  auto try_config = [&](RopeConfig c, std::string detail, int64_t seq_len = -1) {
    if (ValidateRopeConfig(c).ok()) AddFromConfig(ctx, c, std::move(detail), out, seq_len);
  };
  // Each key of the scaling's row: its default, twice and half its value; booleans flipped.
  for (const RopeScalingKey& k : row.keys) {
    if (k.kind() == ScalingKeyKind::kBoolean) {
      RopeConfig c = ref;
      bool& b = *k.In<bool>(c);
      b = !b;
      try_config(c, fmt::format("{} {} (model: {})", k.name, b, !b));
      continue;
    }
    const std::optional<double> now_given = k.NumberIn(ref);
    if (!now_given.has_value()) continue;  // a list, or an optional number not given
    const double now = *now_given;
    std::vector<double> values = {k.default_value, now * 2, now / 2};
    if (k.name == "original_max_position_embeddings" && ref.max_position_embeddings > 0)
      values.push_back(static_cast<double>(ref.max_position_embeddings));
    for (double v : values) {
      if (v == now || !(v > 0)) continue;
      RopeConfig c = ref;
      k.SetNumber(c, v);
      try_config(c, fmt::format("{} {:.10g} (model: {:.10g})", k.name, v, now));
    }
  }
  // The length-dependent rows at the other regime: LongRoPE's short / long switch at the wrong length,
  // dynamic NTK grown or not.
  for (int64_t edge : {ref.scaling.original_max_position_embeddings, ref.max_position_embeddings}) {
    if (edge <= 0) continue;
    for (int64_t len : {edge, edge + 1}) {
      if (row.regime_of(ref, len) == row.regime_of(ref, ctx.seq_len)) continue;
      try_config(ref, fmt::format("frequencies of sequence length {} (the other regime; engine's length taken as {})",
                                  len, len), len);
      break;
    }
  }
  // Another kind with the same factor (and original length).
  for (RopeScalingType t : {RopeScalingType::kLinear, RopeScalingType::kNtk, RopeScalingType::kDynamicNtk,
                            RopeScalingType::kYarn, RopeScalingType::kLlama3}) {
    if (t == ref.scaling.type || !(ref.scaling.factor > 1)) continue;
    RopeConfig c = ref;
    c.scaling = RopeScaling{};
    c.scaling.type = t;
    c.scaling.factor = ref.scaling.factor;
    c.scaling.original_max_position_embeddings = ref.scaling.original_max_position_embeddings > 0
                                                     ? ref.scaling.original_max_position_embeddings
                                                     : ref.max_position_embeddings;
    try_config(c, fmt::format("{} scaling instead of {} (factor {:.10g})", ToString(t), ToString(ref.scaling.type),
                              ref.scaling.factor));
  }
}

// When no quick candidate explains it: each number key of the scaling's row fitted to every
// observation at once, over a sixteenth to sixteen times its value.
void ScalingParamRefined(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  if (ref.scaling.type == RopeScalingType::kNone) return;
  for (const RopeScalingKey& k : RopeScalingOf(ref.scaling.type).keys) {
    const ScalingKeyKind kind = k.kind();
    if (kind != ScalingKeyKind::kNumber && kind != ScalingKeyKind::kInteger) continue;
    const double now = *k.NumberIn(ref);
    if (!(now > 0)) continue;
    auto set = [&k, kind](RopeConfig& c, double v) {
      k.SetNumber(c, kind == ScalingKeyKind::kNumber ? v : std::max(1.0, static_cast<double>(std::llround(v))));
    };
    const double fit = FitCoherent(ctx, set, now / 16, now * 16, 400);
    if (fit <= 0) continue;
    for (double v : RoundedNear(fit)) {
      if (v == now) continue;
      RopeConfig c = ref;
      set(c, v);
      if (!ValidateRopeConfig(c).ok()) continue;
      AddFromConfig(ctx, c, fmt::format("{} {:.10g} fits (model: {:.10g})", k.name, v, now), out);
    }
  }
}

void AttentionScalingCauses(const Context& ctx, std::vector<Candidate>* out) {
  const double s = ctx.reference.scaling;
  if (std::abs(s - 1.0) < 1e-6) return;
  Candidate missing{fmt::format("attention scaling {:.8g} not applied", s), ctx.reference};
  missing.engine.scaling = 1.0;
  out->push_back(std::move(missing));
  Candidate twice{fmt::format("attention scaling {:.8g} applied twice", s), ctx.reference};
  twice.engine.scaling = s * s;
  out->push_back(std::move(twice));
}

void PositionOffsetCauses(const Context& ctx, std::vector<Candidate>* out) {
  const int64_t T = ctx.dump->tokens;
  if (ctx.dump->kind == RopeDumpKind::kInvFreq || T == 0) return;
  std::set<int64_t> offsets{1, -1};
  const std::vector<double> est = EstimatedPositions(ctx);
  std::vector<double> diffs;
  for (int64_t t = 0; t < T; ++t)
    if (!std::isnan(est[t])) diffs.push_back(est[t] - static_cast<double>(ctx.reference.positions[t]));
  if (!diffs.empty()) {
    std::nth_element(diffs.begin(), diffs.begin() + diffs.size() / 2, diffs.end());
    const double k = std::round(diffs[diffs.size() / 2]);
    if (std::abs(k) < static_cast<double>(kMaxRopePosition)) offsets.insert(static_cast<int64_t>(k));
  }
  for (int64_t k : offsets) {
    if (k == 0) continue;
    Candidate c{fmt::format("positions offset by {:+d} (a KV-cache offset)", k), ctx.reference};
    for (int64_t& p : c.engine.positions) p += k;
    out->push_back(std::move(c));
  }
}

void PositionResetCauses(const Context& ctx, std::vector<Candidate>* out) {
  const int64_t T = ctx.dump->tokens;
  if (ctx.dump->kind == RopeDumpKind::kInvFreq || T == 0 || ctx.reference.num_components != 1) return;
  const auto& pos = ctx.reference.positions;
  // The token index (positions reset to 0 at the start of what the engine took as one sequence).
  Candidate index{"positions 0..T-1 (the token index) instead of the given positions", ctx.reference};
  for (int64_t t = 0; t < T; ++t) index.engine.positions[t] = t;
  if (index.engine.positions != pos) out->push_back(std::move(index));
  // Packed sequences: the given positions restart; an engine that continues counts on.
  bool restarts = false;
  for (int64_t t = 1; t < T; ++t) restarts = restarts || pos[t] <= pos[t - 1];
  if (restarts) {
    Candidate cont{"positions counted on across sequence starts (no reset per packed sequence)", ctx.reference};
    for (int64_t t = 0; t < T; ++t) cont.engine.positions[t] = pos[0] + t;
    out->push_back(std::move(cont));
  }
  // Per sequence from its first token: the given positions minus the first one (left padding taken as
  // positions).
  if (pos[0] != 0) {
    Candidate shifted{fmt::format("positions counted from the first token (given positions start at {})", pos[0]),
                      ctx.reference};
    int64_t start = pos[0];
    for (int64_t t = 0; t < T; ++t) {
      if (t > 0 && pos[t] <= pos[t - 1]) start = pos[t];
      shifted.engine.positions[t] = pos[t] - start;
    }
    out->push_back(std::move(shifted));
  }
}

void PrecisionCauses(const Context& ctx, std::vector<Candidate>* out) {
  const std::pair<Precision, const char*> kinds[] = {
      {Precision::kPosF16, "positions in float16"},     {Precision::kPosBF16, "positions in bfloat16"},
      {Precision::kAngleF16, "angles in float16"},      {Precision::kAngleBF16, "angles in bfloat16"},
      {Precision::kCosSinF16, "cos/sin cached in float16"}, {Precision::kCosSinBF16, "cos/sin cached in bfloat16"}};
  for (const auto& [p, what] : kinds) {
    // Rounding cos/sin to the dump's own type is what the tolerance already allows.
    if ((p == Precision::kCosSinF16 && ctx.dump->dtype == DType::kF16) ||
        (p == Precision::kCosSinBF16 && ctx.dump->dtype == DType::kBF16))
      continue;
    Candidate c{what, ctx.reference};
    c.engine.precision = p;
    out->push_back(std::move(c));
  }
}

void DirectionCauses(const Context& ctx, std::vector<Candidate>* out) {
  Candidate c{"sin negated (rotation in the other direction)", ctx.reference};
  c.engine.negate_sin = true;
  out->push_back(std::move(c));
}

void CosSinSwappedCauses(const Context& ctx, std::vector<Candidate>* out) {
  Candidate c{"cos and sin swapped", ctx.reference};
  c.engine.swap_cos_sin = true;
  out->push_back(std::move(c));
}

void SectionCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  if (!ref.multi_axis.has_value()) return;
  const MultiAxisRope& m = *ref.multi_axis;
  // Every pair on the first component (sections ignored).
  Candidate flat{"sections ignored: every pair on the first position component", ctx.reference};
  flat.engine.pair_component.assign(flat.engine.pair_component.size(), 0);
  out->push_back(std::move(flat));
  // Chunked and interleaved read as each other.
  for (SectionLayout other : {SectionLayout::kChunked, SectionLayout::kInterleaved}) {
    if (other == m.layout) continue;
    RopeConfig c = ref;
    c.multi_axis->layout = other;
    AddFromConfig(ctx, c, fmt::format("sections read as {} (model: {})", ToString(other), ToString(m.layout)), out);
  }
  // The axes in another order (t, h, w read as t, w, h, ...).
  if (m.num_components > 1 && m.num_components <= 4) {
    std::vector<int64_t> order(static_cast<size_t>(m.num_components));
    for (int64_t c = 0; c < m.num_components; ++c) order[c] = c;
    while (std::next_permutation(order.begin(), order.end())) {
      Candidate perm{fmt::format("position components read in the order [{}]", fmt::join(order, ", ")),
                     ctx.reference};
      for (int64_t& comp : perm.engine.pair_component) comp = order[static_cast<size_t>(comp)];
      out->push_back(std::move(perm));
    }
  }
}

void LayerTypeCauses(const Context& ctx, std::vector<Candidate>* out) {
  for (const auto& [label, config] : ctx.target->other_layer_types)
    AddFromConfig(ctx, config, fmt::format("the parameters of {} layers", label), out);
}

// The list: a new cause is one entry here (its id, and a function giving its engine models).
constexpr Cause kCauses[] = {
    {"pairing", PairingCauses},
    {"window", WindowCauses},
    // Before base: another layer type's parameters that differ only in the base explain it as well as
    // the fitted base, and say more.
    {"layer_type", LayerTypeCauses},
    {"base", BaseCauses, BaseRefined},
    {"scaling_missing", ScalingMissingCauses},
    // Before scaling_param: a parameter that only sets the attention scaling (LongRoPE's factor) gives
    // the same output as the scaling left out.
    {"attention_scaling", AttentionScalingCauses},
    {"scaling_param", ScalingParamCauses, ScalingParamRefined},
    {"position_offset", PositionOffsetCauses},
    {"position_reset", PositionResetCauses},
    {"precision", PrecisionCauses},
    {"direction", DirectionCauses},
    {"cos_sin_swapped", CosSinSwappedCauses},
    {"sections", SectionCauses},
};

// The first two heads of a rotated dump: every head rotates with the same angles, so candidates are
// screened on these and only those that explain the screen are measured on the whole dump.
RopeDump ScreenOf(const RopeDump& d) {
  RopeDump screen = d;
  screen.heads = 2;
  screen.before.clear();
  screen.after.clear();
  for (int64_t t = 0; t < d.tokens; ++t)
    for (int64_t h = 0; h < 2; ++h) {
      const size_t b = static_cast<size_t>((t * d.heads + h) * d.width);
      screen.before.insert(screen.before.end(), d.before.begin() + b, d.before.begin() + b + d.width);
      screen.after.insert(screen.after.end(), d.after.begin() + b, d.after.begin() + b + d.width);
    }
  return screen;
}

// The best of `explaining` (ratio, candidate): one listed earlier wins when within a tenth of it (a
// round base before the raw fit it was rounded from). Infinite ratio when none explains.
std::pair<double, std::string> BestExplaining(const std::vector<std::pair<double, const Candidate*>>& explaining) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [ratio, c] : explaining) best = std::min(best, ratio);
  std::string detail;
  for (const auto& [ratio, c] : explaining)
    if (ratio <= best + 0.1) {
      best = ratio;
      detail = c->detail;
      break;
    }
  return {best, detail};
}

}  // namespace

std::vector<RopeCause> Diagnose(const Context& ctx, const std::vector<double>& got) {
  const RopeDump& d = *ctx.dump;
  const bool screening = d.kind == RopeDumpKind::kRotated && d.heads > 2;
  const RopeDump screen = screening ? ScreenOf(d) : RopeDump{};
  const std::vector<double> screen_got = screening ? Got(screen) : std::vector<double>{};
  auto explains = [&](const EngineModel& e, double* ratio) {
    if (screening && Compare(screen_got, Render(e, screen)).over > 0) return false;
    const Comparison m = Compare(got, Render(e, d));
    *ratio = m.max_ratio;
    return m.over == 0;
  };
  std::vector<RopeCause> diagnosis;
  // The quick candidates of every cause; only when none explains, the costly fits.
  for (bool refine : {false, true}) {
    if (refine && !diagnosis.empty()) break;
    for (const Cause& cause : kCauses) {
      const CauseFn fn = refine ? cause.refine : cause.candidates;
      if (fn == nullptr) continue;
      std::vector<Candidate> candidates;
      fn(ctx, &candidates);
      std::vector<std::pair<double, const Candidate*>> explaining;
      for (const Candidate& c : candidates) {
        double ratio = 0;
        if (explains(c.engine, &ratio)) explaining.emplace_back(ratio, &c);
      }
      const auto [best, detail] = BestExplaining(explaining);
      if (std::isfinite(best)) diagnosis.push_back(RopeCause{std::string(cause.id), detail, best});
    }
  }
  // Best first; ratios within a tenth of each other are a tie, kept in the list's order (the more
  // specific cause first: scaling_missing before the same computation as a scaling parameter).
  std::stable_sort(diagnosis.begin(), diagnosis.end(), [](const RopeCause& a, const RopeCause& b) {
    return std::floor(a.max_ratio * 10) < std::floor(b.max_ratio * 10);
  });
  return diagnosis;
}

}  // namespace posenc::rope_check_internal

namespace posenc {

std::vector<std::string> RopeCauseIds() {
  std::vector<std::string> ids;
  for (const rope_check_internal::Cause& c : rope_check_internal::kCauses) ids.emplace_back(c.id);
  return ids;
}

}  // namespace posenc
