// An engine's RoPE dump against the reference, and the diagnosis of a failing one (rope_check.hpp).
//
// Every form of dump is rendered from one value, an EngineModel (model/rope_check_engine.hpp): the
// reference is one, and each known fault (model/rope_check_causes.hpp) turns the reference into the
// EngineModels an engine with that fault would be. The dump read from the caller's tensors
// (MakeRopeDump) and the report as JSON and text are here too.
#include "posenc/model/rope_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/enum_names.hpp"
#include "model/rope_check_causes.hpp"
#include "model/rope_check_engine.hpp"

namespace posenc {
namespace {

using rope_check_internal::Compare;
using rope_check_internal::Comparison;
using rope_check_internal::Context;
using rope_check_internal::Diagnose;
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
          "per element s*(2u + 2^-21*(1+|angle|) + j*2^-22*|angle|), u the dtype's unit roundoff "
          "(at least float32's), j the pair");
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
  report->diagnosis.push_back(RopeCause{
      "not_explained", fmt::format("no known cause explains it; the error is in {}", where), report->max_ratio});
}

constexpr detail::EnumName<RopeDumpKind> kDumpKindNames[] = {
    {RopeDumpKind::kRotated, "rotated"}, {RopeDumpKind::kCosSin, "cos_sin"}, {RopeDumpKind::kInvFreq, "inv_freq"}};

}  // namespace

std::string_view ToString(RopeDumpKind k) { return detail::NameOf(k, kDumpKindNames, "?"); }

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
