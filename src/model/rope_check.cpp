// An engine's RoPE dump against the reference, and the diagnosis of a failing one (rope_check.hpp).
//
// Every form of dump is rendered from one value, an EngineModel (layout, per-pair frequencies,
// attention scaling, positions, precision, sign and order of cos/sin): the reference is one, and each
// cause in kCauses turns the reference into the EngineModels an engine with that fault would be.
#include "posenc/model/rope_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/math/multi_axis.hpp"

namespace posenc {
namespace {

enum class Precision { kF32, kPosF16, kPosBF16, kAngleF16, kAngleBF16, kCosSinF16, kCosSinBF16 };

// How one engine computes the dump.
struct EngineModel {
  RotaryLayout layout;  // over the dump's head width
  std::vector<double> inv_freq;
  double scaling = 1.0;
  std::vector<int64_t> pair_component;  // per pair, the row of `positions`
  int64_t num_components = 1;
  std::vector<int64_t> positions;  // [num_components, tokens]
  Precision precision = Precision::kF32;
  bool negate_sin = false;
  bool swap_cos_sin = false;
};

struct Candidate {
  std::string detail;
  EngineModel engine;
};

// The reference and what the causes need from it.
struct Context {
  const RopeCheckTarget* target = nullptr;
  const RopeDump* dump = nullptr;
  int64_t seq_len = 0;
  RotaryLayout layout;  // the reference layout over the dump's width
  EngineModel reference;
  // Observed angle per (token, pair) under the reference layout; NaN where not observable.
  std::vector<double> observed;
};

double UnitRoundoff(DType t) {
  switch (t) {
    case DType::kF16: return 0x1p-11;
    case DType::kBF16: return 0x1p-8;
    default: return 0x1p-24;
  }
}

float RoundF16(float v) { return F16ToF32(F32ToF16(v)); }
float RoundBF16(float v) { return BF16ToF32(F32ToBF16(v)); }

// cos and sin (with the scaling) of one pair at one position as the engine computes them, and the angle.
struct CosSin {
  double c, s, angle;
};
CosSin EngineCosSin(const EngineModel& e, int64_t pos, double w) {
  float p = static_cast<float>(pos);
  if (e.precision == Precision::kPosF16) p = RoundF16(p);
  if (e.precision == Precision::kPosBF16) p = RoundBF16(p);
  float a = p * static_cast<float>(w);
  if (e.precision == Precision::kAngleF16) a = RoundF16(a);
  if (e.precision == Precision::kAngleBF16) a = RoundBF16(a);
  const float sc = static_cast<float>(e.scaling);
  float c = static_cast<float>(std::cos(static_cast<double>(a))) * sc;
  float s = static_cast<float>(std::sin(static_cast<double>(a))) * sc;
  if (e.precision == Precision::kCosSinF16) c = RoundF16(c), s = RoundF16(s);
  if (e.precision == Precision::kCosSinBF16) c = RoundBF16(c), s = RoundBF16(s);
  if (e.negate_sin) s = -s;
  if (e.swap_cos_sin) std::swap(c, s);
  return {c, s, static_cast<double>(a)};
}

int64_t PositionOf(const EngineModel& e, int64_t tokens, int64_t t, int64_t pair) {
  const int64_t comp = e.pair_component.empty() ? 0 : e.pair_component[static_cast<size_t>(pair)];
  return e.positions[static_cast<size_t>(comp * tokens + t)];
}

// The slack for a float32 angle of pair j computed another way than posenc's (radians): 2^-21 (1 +
// |angle|) for the position, the frequency and their product each rounded to float32 and cos/sin
// rounded, plus j 2^-22 |angle| for ggml's frequency powers, theta *= theta_scale once per pair in
// float32 (each step and theta_scale itself rounded: about j 2^-22 relative by pair j).
double AngleSlack(int64_t j, double angle) {
  return 0x1p-21 * (1 + std::abs(angle)) + static_cast<double>(j) * 0x1p-22 * std::abs(angle);
}

// The engine's dump and each element's tolerance, in the dump's own element order.
struct Rendered {
  std::vector<double> want, tol;
};

Rendered Render(const EngineModel& e, const RopeDump& d) {
  Rendered r;
  const double u = UnitRoundoff(d.dtype);
  const int64_t pairs = e.layout.num_pairs();
  switch (d.kind) {
    case RopeDumpKind::kRotated: {
      const int64_t T = d.tokens, H = d.heads, W = d.width;
      r.want.assign(d.before.begin(), d.before.end());
      r.tol.resize(r.want.size());
      for (size_t i = 0; i < r.want.size(); ++i) r.tol[i] = u * std::abs(r.want[i]);
      std::vector<CosSin> cs(static_cast<size_t>(pairs));
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < pairs; ++j)
          cs[j] = EngineCosSin(e, PositionOf(e, T, t, j), e.inv_freq[static_cast<size_t>(j)]);
        for (int64_t h = 0; h < H; ++h) {
          const size_t base = static_cast<size_t>((t * H + h) * W);
          for (int64_t j = 0; j < pairs; ++j) {
            const size_t i1 = base + static_cast<size_t>(e.layout.first(j));
            const size_t i2 = base + static_cast<size_t>(e.layout.second(j));
            const double x1 = d.before[i1], x2 = d.before[i2];
            const CosSin& k = cs[static_cast<size_t>(j)];
            r.want[i1] = x1 * k.c - x2 * k.s;
            r.want[i2] = x2 * k.c + x1 * k.s;
            const double tol =
                std::sqrt(x1 * x1 + x2 * x2) * std::abs(e.scaling) * (4 * u + AngleSlack(j, k.angle)) + 1e-30;
            r.tol[i1] = r.tol[i2] = tol;
          }
        }
      }
      return r;
    }
    case RopeDumpKind::kCosSin: {
      // cos then sin, each [T, width]; the width is R (both dims of each pair) or R/2.
      const int64_t T = d.tokens, W = d.width;
      r.want.resize(static_cast<size_t>(2 * T * W));
      r.tol.resize(r.want.size());
      const double up = std::max(u, 0x1p-24);
      const bool full = W == 2 * pairs;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < pairs; ++j) {
          const CosSin k = EngineCosSin(e, PositionOf(e, T, t, j), e.inv_freq[static_cast<size_t>(j)]);
          const double tol = std::abs(e.scaling) * (2 * up + AngleSlack(j, k.angle)) + 1e-30;
          std::vector<int64_t> cols;
          if (!full) {
            cols = {j};
          } else if (e.layout.pairing == RopePairing::kHalf) {
            cols = {j, j + pairs};
          } else {
            cols = {2 * j, 2 * j + 1};
          }
          for (int64_t col : cols) {
            const size_t ic = static_cast<size_t>(t * W + col), is = ic + static_cast<size_t>(T * W);
            r.want[ic] = k.c;
            r.want[is] = k.s;
            r.tol[ic] = r.tol[is] = tol;
          }
        }
      return r;
    }
    case RopeDumpKind::kInvFreq: {
      r.want.assign(e.inv_freq.begin(), e.inv_freq.end());
      for (size_t j = 0; j < r.want.size(); ++j)
        r.tol.push_back(std::abs(r.want[j]) * (0x1p-21 + static_cast<double>(j) * 0x1p-22 + 2 * u) + 1e-30);
      return r;
    }
  }
  return r;
}

// The dump's values in the rendered order.
std::vector<double> Got(const RopeDump& d) {
  switch (d.kind) {
    case RopeDumpKind::kRotated: return {d.after.begin(), d.after.end()};
    case RopeDumpKind::kCosSin: {
      std::vector<double> g(d.cos.begin(), d.cos.end());
      g.insert(g.end(), d.sin.begin(), d.sin.end());
      return g;
    }
    case RopeDumpKind::kInvFreq: return {d.inv_freq.begin(), d.inv_freq.end()};
  }
  return {};
}

struct Comparison {
  double max_ratio = 0.0;
  size_t worst = 0;
  int64_t over = 0;
};

Comparison Compare(const std::vector<double>& got, const Rendered& r, std::vector<bool>* over_mask = nullptr) {
  Comparison c;
  if (over_mask) over_mask->assign(got.size(), false);
  for (size_t i = 0; i < got.size(); ++i) {
    const double ratio = std::abs(got[i] - r.want[i]) / r.tol[i];
    if (ratio > 1.0) {
      ++c.over;
      if (over_mask) (*over_mask)[i] = true;
    }
    if (ratio > c.max_ratio || !std::isfinite(ratio)) {
      c.max_ratio = std::isfinite(ratio) ? ratio : std::numeric_limits<double>::infinity();
      c.worst = i;
    }
  }
  return c;
}

// Where element i of the dump sits: token, head, pair and dim within the head (-1 where none).
struct Where {
  int64_t token = -1, head = -1, pair = -1, dim = -1;
};
Where Locate(const RopeDump& d, const RotaryLayout& layout, size_t i) {
  Where w;
  const int64_t pairs = layout.num_pairs();
  switch (d.kind) {
    case RopeDumpKind::kRotated: {
      const int64_t idx = static_cast<int64_t>(i);
      w.dim = idx % d.width;
      w.head = (idx / d.width) % d.heads;
      w.token = idx / (d.width * d.heads);
      const int64_t k = w.dim - layout.rotary_start;  // within the window when in [0, R)
      if (k >= 0 && k < layout.rotary_dim)
        w.pair = layout.pairing == RopePairing::kHalf ? k % pairs : k / 2;
      return w;
    }
    case RopeDumpKind::kCosSin: {
      const int64_t idx = static_cast<int64_t>(i) % (d.tokens * d.width);
      w.token = idx / d.width;
      const int64_t col = idx % d.width;
      w.dim = col;
      w.pair = d.width == pairs ? col : (layout.pairing == RopePairing::kHalf ? col % pairs : col / 2);
      return w;
    }
    case RopeDumpKind::kInvFreq: w.pair = static_cast<int64_t>(i); return w;
  }
  return w;
}

// ---------- the engine models of a config ----------

Result<EngineModel> EngineOf(const RopeConfig& config, const RopeDump& d, int64_t seq_len,
                             std::vector<int64_t> positions) {
  EngineModel e;
  if (d.kind == RopeDumpKind::kRotated) {
    POSENC_ASSIGN_OR_RETURN(e.layout, RotaryLayoutForInput(config.layout, d.width, d.what));
  } else {
    e.layout = config.layout;
  }
  POSENC_ASSIGN_OR_RETURN(SiteFrequencies f, ComputeSiteFrequencies(config, seq_len));
  e.inv_freq = std::move(f.freqs.inv_freq);
  e.scaling = f.freqs.attention_scaling;
  e.pair_component = std::move(f.pair_component);
  e.num_components = f.num_components;
  e.positions = std::move(positions);
  return e;
}

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
    c.checked.reset();
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
    c.checked.reset();
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
    c.checked.reset();
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
    c.checked.reset();
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
    c.checked.reset();
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
    c.checked.reset();
    AddFromConfig(ctx, c, fmt::format("base {:.10g} fits (model: {:.10g})", b, ref.base), out);
  }
}

void ScalingMissingCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  if (ref.scaling.type == RopeScalingType::kNone) return;
  RopeConfig c = ref;
  c.scaling = RopeScaling{};
  c.checked.reset();
  AddFromConfig(ctx, c, fmt::format("no scaling applied (model: {})", ToString(ref.scaling.type)), out);
}

void ScalingParamCauses(const Context& ctx, std::vector<Candidate>* out) {
  const RopeConfig& ref = ctx.target->config;
  if (ref.scaling.type == RopeScalingType::kNone) return;
  const RopeScalingSpec& row = RopeScalingOf(ref.scaling.type);
  auto try_config = [&](RopeConfig c, std::string detail, int64_t seq_len = -1) {
    c.checked.reset();
    if (ValidateRopeConfig(c).ok()) AddFromConfig(ctx, c, std::move(detail), out, seq_len);
  };
  // Each key of the scaling's row: its default, twice and half its value; booleans flipped.
  for (const RopeScalingKey& k : row.keys) {
    RopeConfig probe = ref;
    const ScalingField f = k.field(probe);
    std::vector<double> values;
    double now = 0;
    if (k.kind == ScalingKeyKind::kNumber) now = *f.number;
    else if (k.kind == ScalingKeyKind::kInteger) now = static_cast<double>(*f.integer);
    else if (k.kind == ScalingKeyKind::kOptionalNumber && f.optional->has_value()) now = **f.optional;
    else if (k.kind == ScalingKeyKind::kBoolean) {
      *f.boolean = !*f.boolean;
      try_config(probe, fmt::format("{} {} (model: {})", k.name, *f.boolean, !*f.boolean));
      continue;
    } else {
      continue;
    }
    values = {k.default_value, now * 2, now / 2};
    if (k.name == "original_max_position_embeddings" && ref.max_position_embeddings > 0)
      values.push_back(static_cast<double>(ref.max_position_embeddings));
    for (double v : values) {
      if (v == now || !(v > 0)) continue;
      RopeConfig c = ref;
      const ScalingField g = k.field(c);
      if (k.kind == ScalingKeyKind::kNumber) *g.number = v;
      else if (k.kind == ScalingKeyKind::kInteger) *g.integer = static_cast<int64_t>(v);
      else *g.optional = v;
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
    if (k.kind != ScalingKeyKind::kNumber && k.kind != ScalingKeyKind::kInteger) continue;
    RopeConfig probe = ref;
    const double now = k.kind == ScalingKeyKind::kNumber ? *k.field(probe).number
                                                         : static_cast<double>(*k.field(probe).integer);
    if (!(now > 0)) continue;
    auto set = [&k](RopeConfig& c, double v) {
      const ScalingField g = k.field(c);
      if (k.kind == ScalingKeyKind::kNumber) *g.number = v;
      else *g.integer = std::max<int64_t>(1, static_cast<int64_t>(std::llround(v)));
    };
    const double fit = FitCoherent(ctx, set, now / 16, now * 16, 400);
    if (fit <= 0) continue;
    for (double v : RoundedNear(fit)) {
      if (v == now) continue;
      RopeConfig c = ref;
      set(c, v);
      c.checked.reset();
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
    c.checked.reset();
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

bool SameConfigOutput(const RopeConfig& a, const RopeConfig& b) {
  return a.layout.pairing == b.layout.pairing && a.layout.head_dim == b.layout.head_dim &&
         a.layout.rotary_start == b.layout.rotary_start && a.layout.rotary_dim == b.layout.rotary_dim &&
         a.base == b.base && a.scaling == b.scaling && a.max_position_embeddings == b.max_position_embeddings &&
         a.multi_axis.has_value() == b.multi_axis.has_value() &&
         (!a.multi_axis || (a.multi_axis->sections == b.multi_axis->sections &&
                            a.multi_axis->layout == b.multi_axis->layout));
}

std::string LayerLabel(const LayerRope& l, bool known) {
  std::string s = known ? fmt::format("layer {}", l.layer) : std::string("every layer");
  if (!l.layer_type.empty()) s += fmt::format(" ({})", l.layer_type);
  return s;
}

Status CheckFinite(const std::vector<float>& v, const std::string& what, int64_t row_width) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      return InvalidArgumentError(fmt::format("{}: {} at element {} (row {}, column {}): the engine's dump holds a "
                                              "non-finite value",
                                              what, std::isnan(v[i]) ? "NaN" : "infinity", i,
                                              static_cast<int64_t>(i) / row_width, static_cast<int64_t>(i) % row_width));
  return Status();
}

std::string Ranges(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size();) {
    size_t k = i;
    while (k + 1 < v.size() && v[k + 1] == v[k] + 1) ++k;
    parts.push_back(k == i ? fmt::format("{}", v[i]) : fmt::format("{}-{}", v[i], v[k]));
    i = k + 1;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string_view ToString(RopeDumpKind k) {
  switch (k) {
    case RopeDumpKind::kRotated: return "rotated";
    case RopeDumpKind::kCosSin: return "cos_sin";
    case RopeDumpKind::kInvFreq: return "inv_freq";
  }
  return "?";
}

std::vector<std::string> RopeCauseIds() {
  std::vector<std::string> ids;
  for (const Cause& c : kCauses) ids.emplace_back(c.id);
  return ids;
}

Result<RopeCheckTarget> RopeCheckTargetOf(const RopeDescription& d, const RopeCheckSelect& select) {
  POSENC_ASSIGN_OR_RETURN(ModelRope m, ModelRopeLayers(d));
  if (m.kind != PositionKind::kRope)
    return InvalidArgumentError(fmt::format("{}: the model's scheme is {}, not RoPE: nothing to check", d.path,
                                            ToString(m.kind)));
  const LayerRope* chosen = nullptr;
  if (select.layer >= 0) {
    if (m.layers_known && select.layer >= static_cast<int64_t>(m.layers.size()))
      return OutOfRangeError(fmt::format("--layer {}: the model has {} layers (0-{})", select.layer, m.layers.size(),
                                         m.layers.size() - 1));
    chosen = m.layers_known ? &m.layers[static_cast<size_t>(select.layer)] : &m.layers.front();
    if (!select.layer_type.empty() && chosen->layer_type != select.layer_type && m.layers_known)
      return InvalidArgumentError(fmt::format("--layer {} is a {} layer, not --layer-type {}", select.layer,
                                              chosen->layer_type.empty() ? "plain" : chosen->layer_type,
                                              select.layer_type));
  } else {
    std::set<std::string> types;
    for (const LayerRope& l : m.layers) {
      if (!l.layer_type.empty()) types.insert(l.layer_type);
      if (chosen == nullptr && l.rope && (select.layer_type.empty() || l.layer_type == select.layer_type)) chosen = &l;
    }
    if (chosen == nullptr && !select.layer_type.empty())
      return NotFoundError(fmt::format("--layer-type {}: no RoPE layer of that type (the model's types: {})",
                                       select.layer_type, types.empty() ? "none" : fmt::format("{}", fmt::join(types, ", "))));
  }
  if (chosen == nullptr || !chosen->rope)
    return InvalidArgumentError(fmt::format("{}: {} applies no RoPE (NoPE): nothing to check", d.path,
                                            chosen ? LayerLabel(*chosen, m.layers_known) : "the model"));
  const RopeSite* site = nullptr;
  std::vector<std::string> names;
  for (const RopeSite& s : chosen->sites) {
    names.push_back(s.name);
    if (select.site.empty() || s.name == select.site) site = site ? site : &s;
  }
  if (site == nullptr)
    return NotFoundError(fmt::format("--site {}: {} has sites {}", select.site, LayerLabel(*chosen, m.layers_known),
                                     fmt::join(names, ", ")));
  RopeCheckTarget t;
  t.config = site->config;
  t.label = fmt::format("{}, site {}", LayerLabel(*chosen, m.layers_known), site->name);
  std::set<std::string> seen{chosen->layer_type};
  for (const LayerRope& l : m.layers) {
    if (!l.rope || !seen.insert(l.layer_type).second) continue;
    for (const RopeSite& s : l.sites)
      if (s.name == site->name && !SameConfigOutput(s.config, site->config))
        t.other_layer_types.emplace_back(l.layer_type.empty() ? LayerLabel(l, true) : l.layer_type, s.config);
  }
  return t;
}

Result<RopeCheckReport> CheckRope(const RopeCheckTarget& target, const RopeDump& d) {
  if (d.dtype != DType::kF32 && d.dtype != DType::kF16 && d.dtype != DType::kBF16)
    return InvalidArgumentError(fmt::format("{}: dtype {} is not float32, float16 or bfloat16", d.what, ToString(d.dtype)));
  const RopeConfig& config = target.config;
  const int64_t pairs = config.layout.num_pairs();
  const int64_t C = config.multi_axis.has_value() ? config.multi_axis->num_components : 1;
  RopeCheckReport report;
  report.target = target.label;
  report.form = std::string(ToString(d.kind));
  // Shapes against the model.
  int64_t T = d.tokens;
  switch (d.kind) {
    case RopeDumpKind::kRotated: {
      const size_t n = static_cast<size_t>(d.tokens * d.heads * d.width);
      if (d.tokens <= 0 || d.heads <= 0 || d.width <= 0 || d.before.size() != n || d.after.size() != n)
        return InvalidArgumentError(fmt::format("{}: before and after must both be [tokens, heads, head_dim] of the "
                                                "same shape",
                                                d.what));
      POSENC_RETURN_IF_ERROR(RotaryLayoutForInput(config.layout, d.width, d.what).status());
      POSENC_RETURN_IF_ERROR(CheckFinite(d.before, d.what + " (before)", d.width));
      POSENC_RETURN_IF_ERROR(CheckFinite(d.after, d.what + " (after)", d.width));
      if (d.positions.empty()) return InvalidArgumentError(fmt::format("{}: rotated tensors need positions", d.what));
      report.tolerance = "per element s*|pair|*(4u + 2^-21*(1+|angle|) + j*2^-22*|angle|), u the dtype's unit roundoff, j the pair";
      break;
    }
    case RopeDumpKind::kCosSin: {
      if (d.width != pairs && d.width != 2 * pairs)
        return InvalidArgumentError(fmt::format("{}: a cos/sin cache {} wide: the model's rotary window has {} dims ({} "
                                                "pairs), so [T, {}] or [T, {}]",
                                                d.what, d.width, 2 * pairs, pairs, 2 * pairs, pairs));
      const size_t n = static_cast<size_t>(d.tokens * d.width);
      if (d.tokens <= 0 || d.cos.size() != n || d.sin.size() != n)
        return InvalidArgumentError(fmt::format("{}: cos and sin must both be [tokens, width] of the same shape", d.what));
      POSENC_RETURN_IF_ERROR(CheckFinite(d.cos, d.what + " (cos)", d.width));
      POSENC_RETURN_IF_ERROR(CheckFinite(d.sin, d.what + " (sin)", d.width));
      report.tolerance = "per element s*(2u + 2^-21*(1+|angle|) + j*2^-22*|angle|), u the dtype's unit roundoff (at least float32's), j the pair";
      break;
    }
    case RopeDumpKind::kInvFreq: {
      if (static_cast<int64_t>(d.inv_freq.size()) != pairs)
        return InvalidArgumentError(fmt::format("{}: {} frequencies; the model's rotary window has {} pairs", d.what,
                                                d.inv_freq.size(), pairs));
      POSENC_RETURN_IF_ERROR(CheckFinite(d.inv_freq, d.what, static_cast<int64_t>(d.inv_freq.size())));
      T = 0;
      report.tolerance = "per pair |w|*(2^-21 + j*2^-22 + 2u), u the dtype's unit roundoff, j the pair";
      break;
    }
  }
  // Positions: [C, T], or row i = position i for caches.
  std::vector<int64_t> positions = d.positions;
  if (d.kind != RopeDumpKind::kInvFreq) {
    if (positions.empty()) {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t < T; ++t) positions.push_back(t);
    }
    if (d.position_rows > 0 && (d.position_rows != C || static_cast<int64_t>(positions.size()) != C * T))
      return InvalidArgumentError(fmt::format("{}: positions of shape [{}, {}] for {} tokens; the model's RoPE takes {}",
                                              d.what, d.position_rows,
                                              static_cast<int64_t>(positions.size()) / d.position_rows, T,
                                              C > 1 ? fmt::format("[{}, {}]", C, T) : fmt::format("[{}]", T)));
    if (static_cast<int64_t>(positions.size()) != C * T)
      return InvalidArgumentError(fmt::format("{}: {} positions for {} tokens; the model's RoPE takes {} per token{}",
                                              d.what, positions.size(), T, C, C > 1 ? " ([components, tokens])" : ""));
    for (size_t i = 0; i < positions.size(); ++i)
      if (positions[i] < 0 || positions[i] >= kMaxRopePosition)
        return OutOfRangeError(fmt::format("{}: position {} (index {}) is outside [0, 2^31)", d.what, positions[i], i));
  }
  int64_t seq_len = d.seq_len;
  if (seq_len <= 0) {
    if (d.kind == RopeDumpKind::kInvFreq) {
      seq_len = config.max_position_embeddings > 0 ? config.max_position_embeddings : 1;
    } else {
      seq_len = 1;
      for (int64_t p : positions) seq_len = std::max(seq_len, p + 1);
    }
  }
  report.seq_len = seq_len;

  Context ctx;
  ctx.target = &target;
  ctx.dump = &d;
  ctx.seq_len = seq_len;
  POSENC_ASSIGN_OR_RETURN(ctx.reference, EngineOf(config, d, seq_len, positions));
  ctx.layout = ctx.reference.layout;

  const std::vector<double> got = Got(d);
  const Rendered ref = Render(ctx.reference, d);
  std::vector<bool> over;
  const Comparison cmp = Compare(got, ref, &over);
  report.elements = static_cast<int64_t>(got.size());
  report.elements_over = cmp.over;
  report.max_ratio = cmp.max_ratio;
  report.pass = cmp.over == 0;
  {
    const Where w = Locate(d, ctx.layout, cmp.worst);
    report.worst = RopeWorstElement{w.token, -1, w.head, w.pair, w.dim, got[cmp.worst], ref.want[cmp.worst],
                                    std::abs(got[cmp.worst] - ref.want[cmp.worst]), ref.tol[cmp.worst]};
    if (w.token >= 0 && w.pair >= 0) report.worst.position = PositionOf(ctx.reference, T, w.token, w.pair);
  }
  if (report.pass) return report;

  // Observed angles per (token, pair) under the reference layout, for the fitted causes.
  if (d.kind == RopeDumpKind::kRotated) {
    ctx.observed.assign(static_cast<size_t>(T * pairs), NAN);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        double re = 0, im = 0;  // sum over heads of after * conj(before)
        for (int64_t h = 0; h < d.heads; ++h) {
          const size_t b = static_cast<size_t>((t * d.heads + h) * d.width);
          const double a1 = d.before[b + ctx.layout.first(j)], a2 = d.before[b + ctx.layout.second(j)];
          const double y1 = d.after[b + ctx.layout.first(j)], y2 = d.after[b + ctx.layout.second(j)];
          re += y1 * a1 + y2 * a2;
          im += y2 * a1 - y1 * a2;
        }
        if (re != 0 || im != 0) ctx.observed[t * pairs + j] = std::atan2(im, re);
      }
  } else if (d.kind == RopeDumpKind::kCosSin) {
    ctx.observed.assign(static_cast<size_t>(T * pairs), NAN);
    const bool full = d.width == 2 * pairs;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        const int64_t col = !full ? j : (ctx.layout.pairing == RopePairing::kHalf ? j : 2 * j);
        ctx.observed[t * pairs + j] = std::atan2(d.sin[t * d.width + col], d.cos[t * d.width + col]);
      }
  } else {
    ctx.observed.assign(d.inv_freq.begin(), d.inv_freq.end());
  }

  // Candidates are screened on two heads of the dump (every head rotates with the same angles), and
  // only those that explain the screen are measured on the whole dump.
  RopeDump screen;
  const bool screening = d.kind == RopeDumpKind::kRotated && d.heads > 2;
  if (screening) {
    screen = d;
    screen.heads = 2;
    screen.before.clear();
    screen.after.clear();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < 2; ++h) {
        const size_t b = static_cast<size_t>((t * d.heads + h) * d.width);
        screen.before.insert(screen.before.end(), d.before.begin() + b, d.before.begin() + b + d.width);
        screen.after.insert(screen.after.end(), d.after.begin() + b, d.after.begin() + b + d.width);
      }
  }
  const std::vector<double> screen_got = screening ? Got(screen) : std::vector<double>{};
  auto explains = [&](const EngineModel& e, double* ratio) {
    if (screening && Compare(screen_got, Render(e, screen)).over > 0) return false;
    const Comparison m = Compare(got, Render(e, d));
    *ratio = m.max_ratio;
    return m.over == 0;
  };
  // The quick candidates of every cause; only when none explains, the costly fits.
  for (bool refine : {false, true}) {
    if (refine && !report.diagnosis.empty()) break;
    for (const Cause& cause : kCauses) {
      const CauseFn fn = refine ? cause.refine : cause.candidates;
      if (fn == nullptr) continue;
      std::vector<Candidate> candidates;
      fn(ctx, &candidates);
      // The best candidate; one listed earlier wins when within a tenth of it (a round base before
      // the raw fit it was rounded from).
      std::vector<std::pair<double, const Candidate*>> explaining;
      for (const Candidate& c : candidates) {
        double ratio = 0;
        if (explains(c.engine, &ratio)) explaining.emplace_back(ratio, &c);
      }
      double best = std::numeric_limits<double>::infinity();
      for (const auto& [ratio, c] : explaining) best = std::min(best, ratio);
      std::string detail;
      for (const auto& [ratio, c] : explaining)
        if (ratio <= best + 0.1) {
          best = ratio;
          detail = c->detail;
          break;
        }
      if (std::isfinite(best)) report.diagnosis.push_back(RopeCause{std::string(cause.id), detail, best});
    }
  }
  // Best first; ratios within a tenth of each other are a tie, kept in the list's order (the more
  // specific cause first: scaling_missing before the same computation as a scaling parameter).
  std::stable_sort(report.diagnosis.begin(), report.diagnosis.end(), [](const RopeCause& a, const RopeCause& b) {
    return std::floor(a.max_ratio * 10) < std::floor(b.max_ratio * 10);
  });
  if (report.diagnosis.empty()) {
    std::vector<bool> pair_over(static_cast<size_t>(pairs), false);
    int64_t first = -1;
    for (size_t i = 0; i < over.size(); ++i) {
      if (!over[i]) continue;
      const Where w = Locate(d, ctx.layout, i);
      if (w.pair >= 0) pair_over[static_cast<size_t>(w.pair)] = true;
      if (w.token >= 0 && w.pair >= 0) {
        const int64_t p = PositionOf(ctx.reference, T, w.token, w.pair);
        if (first < 0 || p < first) first = p;
      }
    }
    for (int64_t j = 0; j < pairs; ++j)
      if (pair_over[static_cast<size_t>(j)]) report.error_pairs.push_back(j);
    report.error_first_position = first;
    std::string where = report.error_pairs.empty() ? std::string("dims outside the rotary window")
                                                   : fmt::format("pairs {} of {}", Ranges(report.error_pairs), pairs);
    if (first >= 0) where += fmt::format(", from position {}", first);
    report.diagnosis.push_back(
        RopeCause{"not_explained", fmt::format("no known cause explains it; the error is in {}", where), report.max_ratio});
  }
  return report;
}


// ---------- the dump from the caller's tensors, and the report as JSON and text ----------

namespace {

bool Given(const RopeDumpTensor& t) { return t.data != nullptr || !t.shape.empty(); }

std::string ShapeText(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The element strides of `t` (C-contiguous when it states none), checked against its shape.
Result<std::vector<int64_t>> StridesOf(const RopeDumpTensor& t) {
  if (t.strides.empty()) {
    std::vector<int64_t> s(t.shape.size(), 1);
    for (size_t i = t.shape.size(); i-- > 1;) s[i - 1] = s[i] * t.shape[i];
    return s;
  }
  if (t.strides.size() != t.shape.size())
    return InvalidArgumentError(fmt::format("{}: {} strides for {} dims", t.name, t.strides.size(), t.shape.size()));
  return t.strides;
}

Status CheckExtents(const RopeDumpTensor& t) {
  int64_t n = 1;
  for (int64_t e : t.shape) {
    if (e < 0) return InvalidArgumentError(fmt::format("{}: shape {} has a negative extent", t.name, ShapeText(t.shape)));
    if (e != 0 && n > (int64_t{1} << 40) / e)
      return InvalidArgumentError(fmt::format("{}: shape {} is too large for a dump", t.name, ShapeText(t.shape)));
    n *= e;
  }
  if (n > 0 && t.data == nullptr) return InvalidArgumentError(fmt::format("{}: no data", t.name));
  return OkStatus();
}

// The values of `t` in the order of `perm` (the tensor's axes as the dump reads them), as float.
Result<std::vector<float>> FloatsOf(const RopeDumpTensor& t, const std::vector<size_t>& perm) {
  POSENC_RETURN_IF_ERROR(CheckExtents(t));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> st, StridesOf(t));
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16 && t.dtype != DType::kF64)
    return InvalidArgumentError(
        fmt::format("{}: dtype {} is not float32, float16, bfloat16 or float64", t.name, ToString(t.dtype)));
  const size_t nd = perm.size();
  std::vector<int64_t> shape(nd), stride(nd), idx(nd, 0);
  int64_t n = 1;
  for (size_t k = 0; k < nd; ++k) {
    shape[k] = t.shape[perm[k]];
    stride[k] = st[perm[k]];
    n *= shape[k];
  }
  std::vector<float> out(static_cast<size_t>(n));
  const auto* base = static_cast<const std::byte*>(t.data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < nd; ++k) off += idx[k] * stride[k];
    const std::byte* p = base + off * static_cast<int64_t>(SizeOf(t.dtype));
    float v = 0.0f;
    switch (t.dtype) {
      case DType::kF32: std::memcpy(&v, p, 4); break;
      case DType::kF64: {
        double x;
        std::memcpy(&x, p, 8);
        v = static_cast<float>(x);
        break;
      }
      case DType::kF16: {
        f16_t h;
        std::memcpy(&h, p, 2);
        v = F16ToF32(h);
        break;
      }
      default: {
        bf16_t h;
        std::memcpy(&h, p, 2);
        v = BF16ToF32(h);
        break;
      }
    }
    out[static_cast<size_t>(i)] = v;
    for (size_t k = nd; k-- > 0;)  // the next index, last axis fastest
      if (++idx[k] < shape[k]) break;
      else idx[k] = 0;
  }
  return out;
}

std::vector<size_t> Identity(size_t n) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  return p;
}

Result<std::vector<int64_t>> PositionsOf(const RopeDumpTensor& t) {
  POSENC_RETURN_IF_ERROR(CheckExtents(t));
  if (t.shape.size() != 1 && t.shape.size() != 2)
    return InvalidArgumentError(
        fmt::format("{}: shape {}; expected [T] or [components, T]", t.name, ShapeText(t.shape)));
  if (t.dtype != DType::kI32 && t.dtype != DType::kI64)
    return InvalidArgumentError(fmt::format("{}: dtype {} is not int32 or int64", t.name, ToString(t.dtype)));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> st, StridesOf(t));
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1, cols = t.shape.back();
  const int64_t rs = t.shape.size() == 2 ? st[0] : 0, cs = st.back();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(rows * cols));
  const auto* base = static_cast<const std::byte*>(t.data);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const std::byte* p = base + (r * rs + c * cs) * static_cast<int64_t>(SizeOf(t.dtype));
      if (t.dtype == DType::kI32) {
        int32_t v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
      } else {
        int64_t v;
        std::memcpy(&v, p, 8);
        out.push_back(v);
      }
    }
  return out;
}

// The dump's dtype: the engine's where the caller names it, else the values' own (float64 reads as float32).
DType DumpDType(const RopeDumpTensor& t, const std::optional<DType>& engine) {
  if (engine.has_value()) return *engine;
  return t.dtype == DType::kF64 ? DType::kF32 : t.dtype;
}

}  // namespace

Result<RopeDump> MakeRopeDump(const RopeDumpTensors& t) {
  const bool rotated = Given(t.before) || Given(t.after);
  const bool cache = Given(t.cos) || Given(t.sin);
  const bool freqs = Given(t.inv_freq);
  if (rotated + cache + freqs != 1)
    return InvalidArgumentError("give exactly one dump: before/after, cos/sin, or inv_freq");
  RopeDump dump;
  dump.seq_len = t.seq_len;
  if (rotated) {
    if (!Given(t.before) || !Given(t.after) || !Given(t.positions))
      return InvalidArgumentError("rotated tensors need before, after and positions");
    if (t.before.shape != t.after.shape)
      return InvalidArgumentError(fmt::format("{} is {} but {} is {}: the same shape is needed", t.before.name,
                                              ShapeText(t.before.shape), t.after.name, ShapeText(t.after.shape)));
    const std::vector<int64_t>& s = t.after.shape;
    if (s.size() != 2 && s.size() != 3)
      return InvalidArgumentError(
          fmt::format("{}: shape {}; expected [T, H, D] or [H, T, D]", t.after.name, ShapeText(s)));
    // Read as [T, H, D]: heads-first [H, T, D] through its axes swapped; [T, D] (either order) is one head.
    std::vector<size_t> perm = s.size() == 2 ? Identity(2) : (t.heads_first ? std::vector<size_t>{1, 0, 2} : Identity(3));
    dump.kind = RopeDumpKind::kRotated;
    dump.what = t.after.name;
    dump.tokens = t.after.shape[perm[0]];
    dump.heads = s.size() == 2 ? 1 : t.after.shape[perm[1]];
    dump.width = s.back();
    POSENC_ASSIGN_OR_RETURN(dump.before, FloatsOf(t.before, perm));
    POSENC_ASSIGN_OR_RETURN(dump.after, FloatsOf(t.after, perm));
    dump.dtype = DumpDType(t.after, t.dtype);
  } else if (cache) {
    if (!Given(t.cos) || !Given(t.sin)) return InvalidArgumentError("a cache needs both cos and sin");
    if (t.cos.shape != t.sin.shape || t.cos.shape.size() != 2)
      return InvalidArgumentError(fmt::format("{} is {} and {} {}: both [T, R] or [T, R/2] needed", t.cos.name,
                                              ShapeText(t.cos.shape), t.sin.name, ShapeText(t.sin.shape)));
    dump.kind = RopeDumpKind::kCosSin;
    dump.what = t.cos.name;
    dump.tokens = t.cos.shape[0], dump.width = t.cos.shape[1];
    POSENC_ASSIGN_OR_RETURN(dump.cos, FloatsOf(t.cos, Identity(2)));
    POSENC_ASSIGN_OR_RETURN(dump.sin, FloatsOf(t.sin, Identity(2)));
    dump.dtype = DumpDType(t.cos, t.dtype);
  } else {
    if (t.inv_freq.shape.size() != 1)
      return InvalidArgumentError(
          fmt::format("{}: shape {}; expected [R/2]", t.inv_freq.name, ShapeText(t.inv_freq.shape)));
    dump.kind = RopeDumpKind::kInvFreq;
    dump.what = t.inv_freq.name;
    POSENC_ASSIGN_OR_RETURN(dump.inv_freq, FloatsOf(t.inv_freq, Identity(1)));
    dump.dtype = DumpDType(t.inv_freq, t.dtype);
  }
  if (Given(t.positions)) {
    POSENC_ASSIGN_OR_RETURN(dump.positions, PositionsOf(t.positions));
    if (t.positions.shape.size() == 2) dump.position_rows = t.positions.shape[0];
  }
  // A bfloat16 engine's dump stored wider holds only bfloat16 values.
  if (t.dtype == DType::kBF16)
    for (const std::vector<float>* v : {&dump.after, &dump.cos, &dump.sin, &dump.inv_freq})
      for (float x : *v)
        if (std::isfinite(x) && BF16ToF32(F32ToBF16(x)) != x)
          return InvalidArgumentError(fmt::format(
              "{}: value {:.9g} is not a bfloat16 value: the dump is not bfloat16 (do not name bf16 as its dtype)",
              dump.what, x));
  return dump;
}

std::string RopeCheckReportJson(const RopeCheckReport& r) {
  using nlohmann::json;
  json out;
  out["verdict"] = r.pass ? "pass" : "fail";
  out["target"] = r.target;
  out["form"] = r.form;
  out["tolerance"] = r.tolerance;
  out["seq_len"] = r.seq_len;
  out["elements"] = r.elements;
  out["elements_over_tolerance"] = r.elements_over;
  out["max_error_over_tolerance"] = r.max_ratio;
  auto opt = [](int64_t v) { return v < 0 ? json(nullptr) : json(v); };
  out["worst"] = {{"token", opt(r.worst.token)}, {"position", opt(r.worst.position)}, {"head", opt(r.worst.head)},
                  {"pair", opt(r.worst.pair)},   {"dim", opt(r.worst.dim)},           {"got", r.worst.got},
                  {"want", r.worst.want},        {"error", r.worst.error},            {"tolerance", r.worst.tolerance}};
  json diag = json::array();
  for (const RopeCause& c : r.diagnosis)
    diag.push_back({{"cause", c.id}, {"detail", c.detail}, {"max_error_over_tolerance", c.max_ratio}});
  out["diagnosis"] = diag;
  if (!r.pass && r.diagnosis.size() == 1 && r.diagnosis[0].id == "not_explained") {
    out["error_first_position"] = opt(r.error_first_position);
    out["error_pairs"] = r.error_pairs;
  }
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string RopeCheckReportText(const RopeCheckReport& r) {
  std::string out = fmt::format("{}: {} ({}, {} elements, tolerance {})\n", r.pass ? "pass" : "FAIL", r.target,
                                r.form, r.elements, r.tolerance);
  std::string at;
  if (r.worst.token >= 0) at += fmt::format(" token {}", r.worst.token);
  if (r.worst.position >= 0) at += fmt::format(" position {}", r.worst.position);
  if (r.worst.head >= 0) at += fmt::format(" head {}", r.worst.head);
  if (r.worst.pair >= 0) at += fmt::format(" pair {}", r.worst.pair);
  if (r.worst.dim >= 0) at += fmt::format(" dim {}", r.worst.dim);
  out += fmt::format("worst element:{}: got {:.9g}, want {:.9g}, error {:.3g} ({:.3g} x tolerance)\n", at, r.worst.got,
                     r.worst.want, r.worst.error, r.worst.tolerance > 0 ? r.worst.error / r.worst.tolerance : 0.0);
  if (r.pass) return out;
  out += fmt::format("{} of {} elements over tolerance\n", r.elements_over, r.elements);
  out += "diagnosis (best first):\n";
  for (const RopeCause& c : r.diagnosis)
    out += fmt::format("  {:<18} {} (max error {:.3g} x tolerance)\n", c.id, c.detail, c.max_ratio);
  return out;
}

}  // namespace posenc
