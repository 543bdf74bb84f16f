// An engine's RoPE dump against the reference, and the diagnosis of a failing one (rope_check.hpp).
//
// Every form of dump is rendered from one value, an EngineModel (model/rope_check_internal.hpp): the
// reference is one, and each cause in Causes() turns the reference into the EngineModels an engine
// with that fault would be.
#include "posenc/model/rope_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/enum_names.hpp"
#include "model/rope_check_internal.hpp"

namespace posenc {
namespace {

using rope_check_internal::Candidate;
using rope_check_internal::Cause;
using rope_check_internal::CauseFn;
using rope_check_internal::Causes;
using rope_check_internal::Compare;
using rope_check_internal::Comparison;
using rope_check_internal::Context;
using rope_check_internal::EngineModel;
using rope_check_internal::EngineOf;
using rope_check_internal::Got;
using rope_check_internal::Locate;
using rope_check_internal::PositionOf;
using rope_check_internal::Render;
using rope_check_internal::Rendered;
using rope_check_internal::Where;

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

// The dump's shape against the model's rotary window, and its values finite; the tolerance's words.
Result<std::string> CheckDumpShape(const RopeConfig& config, const RopeDump& d) {
  const int64_t pairs = config.layout.num_pairs();
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
      return std::string(
          "per element s*|pair|*(4u + 2^-21*(1+|angle|) + j*2^-22*|angle|), u the dtype's unit roundoff, j the pair");
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
      return std::string(
          "per element s*(2u + 2^-21*(1+|angle|) + j*2^-22*|angle|), u the dtype's unit roundoff (at least float32's), j "
          "the pair");
    }
    case RopeDumpKind::kInvFreq: {
      if (static_cast<int64_t>(d.inv_freq.size()) != pairs)
        return InvalidArgumentError(fmt::format("{}: {} frequencies; the model's rotary window has {} pairs", d.what,
                                                d.inv_freq.size(), pairs));
      POSENC_RETURN_IF_ERROR(CheckFinite(d.inv_freq, d.what, static_cast<int64_t>(d.inv_freq.size())));
      return std::string("per pair |w|*(2^-21 + j*2^-22 + 2u), u the dtype's unit roundoff, j the pair");
    }
  }
  return std::string();
}

// The dump's positions, [C, T] (row i = position i for caches that give none), checked; none for inv_freq.
Result<std::vector<int64_t>> DumpPositions(const RopeDump& d, int64_t C, int64_t T) {
  std::vector<int64_t> positions = d.positions;
  if (d.kind == RopeDumpKind::kInvFreq) return positions;
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
  return positions;
}

// The sequence length the frequencies are computed for: the dump's, else the model's context for
// frequencies, else one past the largest position.
int64_t SeqLenOf(const RopeConfig& config, const RopeDump& d, const std::vector<int64_t>& positions) {
  if (d.seq_len > 0) return d.seq_len;
  if (d.kind == RopeDumpKind::kInvFreq)
    return config.max_position_embeddings > 0 ? config.max_position_embeddings : 1;
  int64_t seq_len = 1;
  for (int64_t p : positions) seq_len = std::max(seq_len, p + 1);
  return seq_len;
}

RopeWorstElement WorstElement(const Context& ctx, const std::vector<double>& got, const Rendered& ref, size_t i,
                              int64_t T) {
  const Where w = Locate(*ctx.dump, ctx.layout, i);
  RopeWorstElement worst{w.token, -1, w.head, w.pair, w.dim, got[i], ref.want[i], std::abs(got[i] - ref.want[i]),
                         ref.tol[i]};
  if (w.token >= 0 && w.pair >= 0) worst.position = PositionOf(ctx.reference, T, w.token, w.pair);
  return worst;
}

// Observed angles per (token, pair) under the reference layout, for the fitted causes (NaN where a
// rotated pair is zero in every head); the frequencies themselves for an inv_freq dump.
std::vector<double> ObservedAngles(const RopeDump& d, const RotaryLayout& layout, int64_t T) {
  const int64_t pairs = layout.num_pairs();
  if (d.kind == RopeDumpKind::kInvFreq) return {d.inv_freq.begin(), d.inv_freq.end()};
  std::vector<double> observed(static_cast<size_t>(T * pairs), NAN);
  if (d.kind == RopeDumpKind::kRotated) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < pairs; ++j) {
        double re = 0, im = 0;  // sum over heads of after * conj(before)
        for (int64_t h = 0; h < d.heads; ++h) {
          const size_t b = static_cast<size_t>((t * d.heads + h) * d.width);
          const double a1 = d.before[b + layout.first(j)], a2 = d.before[b + layout.second(j)];
          const double y1 = d.after[b + layout.first(j)], y2 = d.after[b + layout.second(j)];
          re += y1 * a1 + y2 * a2;
          im += y2 * a1 - y1 * a2;
        }
        if (re != 0 || im != 0) observed[t * pairs + j] = std::atan2(im, re);
      }
    return observed;
  }
  const bool full = d.width == 2 * pairs;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < pairs; ++j) {
      const int64_t col = !full ? j : (layout.pairing == RopePairing::kHalf ? j : 2 * j);
      observed[t * pairs + j] = std::atan2(d.sin[t * d.width + col], d.cos[t * d.width + col]);
    }
  return observed;
}

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

// The causes whose candidates explain the dump, best first.
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
    for (const Cause& cause : Causes()) {
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

// No cause explains it: where the error is (its pairs, its first position), as the one diagnosis.
void AddNotExplained(const Context& ctx, const std::vector<bool>& over, int64_t T, RopeCheckReport* report) {
  const int64_t pairs = ctx.layout.num_pairs();
  std::vector<bool> pair_over(static_cast<size_t>(pairs), false);
  int64_t first = -1;
  for (size_t i = 0; i < over.size(); ++i) {
    if (!over[i]) continue;
    const Where w = Locate(*ctx.dump, ctx.layout, i);
    if (w.pair >= 0) pair_over[static_cast<size_t>(w.pair)] = true;
    if (w.token >= 0 && w.pair >= 0) {
      const int64_t p = PositionOf(ctx.reference, T, w.token, w.pair);
      if (first < 0 || p < first) first = p;
    }
  }
  for (int64_t j = 0; j < pairs; ++j)
    if (pair_over[static_cast<size_t>(j)]) report->error_pairs.push_back(j);
  report->error_first_position = first;
  std::string where = report->error_pairs.empty() ? std::string("dims outside the rotary window")
                                                  : fmt::format("pairs {} of {}", Ranges(report->error_pairs), pairs);
  if (first >= 0) where += fmt::format(", from position {}", first);
  report->diagnosis.push_back(
      RopeCause{"not_explained", fmt::format("no known cause explains it; the error is in {}", where), report->max_ratio});
}

constexpr detail::EnumName<RopeDumpKind> kDumpKindNames[] = {
    {RopeDumpKind::kRotated, "rotated"}, {RopeDumpKind::kCosSin, "cos_sin"}, {RopeDumpKind::kInvFreq, "inv_freq"}};

}  // namespace

std::string_view ToString(RopeDumpKind k) { return detail::NameOf(k, kDumpKindNames, "?"); }

std::vector<std::string> RopeCauseIds() {
  std::vector<std::string> ids;
  for (const Cause& c : Causes()) ids.emplace_back(c.id);
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
  const int64_t C = config.multi_axis.has_value() ? config.multi_axis->num_components : 1;
  RopeCheckReport report;
  report.target = target.label;
  report.form = std::string(ToString(d.kind));
  POSENC_ASSIGN_OR_RETURN(report.tolerance, CheckDumpShape(config, d));
  const int64_t T = d.kind == RopeDumpKind::kInvFreq ? 0 : d.tokens;
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> positions, DumpPositions(d, C, T));
  report.seq_len = SeqLenOf(config, d, positions);

  Context ctx;
  ctx.target = &target;
  ctx.dump = &d;
  ctx.seq_len = report.seq_len;
  POSENC_ASSIGN_OR_RETURN(ctx.reference, EngineOf(config, d, report.seq_len, positions));
  ctx.layout = ctx.reference.layout;

  const std::vector<double> got = Got(d);
  const Rendered ref = Render(ctx.reference, d);
  std::vector<bool> over;
  const Comparison cmp = Compare(got, ref, &over);
  report.elements = static_cast<int64_t>(got.size());
  report.elements_over = cmp.over;
  report.max_ratio = cmp.max_ratio;
  report.pass = cmp.over == 0;
  report.worst = WorstElement(ctx, got, ref, cmp.worst, T);
  if (report.pass) return report;

  ctx.observed = ObservedAngles(d, ctx.layout, T);
  report.diagnosis = Diagnose(ctx, got);
  if (report.diagnosis.empty()) AddNotExplained(ctx, over, T, &report);
  return report;
}

}  // namespace posenc
