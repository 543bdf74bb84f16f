// Per-layer RoPE sites of a description, and the comparison of two descriptions (rope_diff.hpp).
#include "posenc/model/rope_diff.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numbers>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/layer_schedule.hpp"
#include "posenc/io/mapped_file.hpp"
#include "posenc/math/multi_axis.hpp"
#include "math/rope_scaling_table.hpp"

namespace posenc {
namespace {


std::string Num(double v) { return fmt::format("{:.10g}", v); }

// The scaling's keys as (name, text) in its row's order, read through the row's typed accessors.
// `set_only`: only the keys whose value is not the row's default (lists: not empty; optionals: given).
std::vector<std::pair<std::string, std::string>> ScalingKeyTexts(const RopeConfig& rc, bool set_only = false) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RopeScalingKey& k : RopeScalingOf(rc.scaling.type).keys) {
    const ScalingKeyKind kind = k.kind();
    if (set_only) {
      const bool at_default =
          (kind == ScalingKeyKind::kNumber && *k.In<double>(rc) == k.default_value) ||
          (kind == ScalingKeyKind::kInteger && static_cast<double>(*k.In<int64_t>(rc)) == k.default_value) ||
          (kind == ScalingKeyKind::kBoolean && static_cast<double>(*k.In<bool>(rc)) == k.default_value) ||
          (kind == ScalingKeyKind::kOptionalNumber && !k.In<std::optional<double>>(rc)->has_value()) ||
          (kind == ScalingKeyKind::kNumberList && k.In<std::vector<double>>(rc)->empty());
      if (at_default) continue;
    }
    std::string v;
    switch (kind) {
      case ScalingKeyKind::kNumber: v = Num(*k.In<double>(rc)); break;
      case ScalingKeyKind::kInteger: v = fmt::format("{}", *k.In<int64_t>(rc)); break;
      case ScalingKeyKind::kBoolean: v = *k.In<bool>(rc) ? "true" : "false"; break;
      case ScalingKeyKind::kOptionalNumber: {
        const std::optional<double>& o = *k.In<std::optional<double>>(rc);
        v = o.has_value() ? Num(*o) : "unset";
        break;
      }
      case ScalingKeyKind::kNumberList: {
        const std::vector<double>& list = *k.In<std::vector<double>>(rc);
        if (list.empty()) {
          v = "[]";
          break;
        }
        std::vector<std::string> items;
        for (double x : list) items.push_back(Num(x));
        v = items.size() <= 4 ? fmt::format("[{}]", fmt::join(items, ", "))
                              : fmt::format("[{}, {}, ... {} values]", items[0], items[1], items.size());
        // Two lists differing past the shown items still differ in the text: append a digest.
        size_t h = 0;
        for (const std::string& s : items) h = h * 1000003u ^ std::hash<std::string>{}(s);
        if (items.size() > 4) v += fmt::format(" #{:08x}", static_cast<uint32_t>(h));
        break;
      }
    }
    out.emplace_back(std::string(k.name), v);
  }
  return out;
}

std::string WindowText(const RotaryLayout& l) {
  if (l.rotary_start == 0 && l.rotary_dim == l.head_dim) return fmt::format("whole head ({} dims)", l.head_dim);
  return fmt::format("dims [{}, {}) of {}", l.rotary_start, l.rotary_start + l.rotary_dim, l.head_dim);
}

std::string SectionsText(const std::optional<MultiAxisRope>& m) {
  if (!m.has_value()) return "none (1-D RoPE)";
  return fmt::format("{} ({} rules) [{}] over {} components", ToString(m->layout), ToString(m->rules),
                     fmt::join(m->sections, ", "), m->num_components);
}

bool SameMultiAxis(const std::optional<MultiAxisRope>& a, const std::optional<MultiAxisRope>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a.has_value()) return true;
  return a->layout == b->layout && a->rules == b->rules && a->sections == b->sections &&
         a->num_components == b->num_components;
}

// The lengths (first sequence length of a new regime) where a config's frequencies change, within (1, n].
void RegimeBreaks(const RopeConfig& c, int64_t n, std::set<int64_t>* out) {
  const RopeScalingSpec& row = RopeScalingOf(c.scaling.type);
  for (int64_t edge : {c.scaling.original_max_position_embeddings, c.max_position_embeddings}) {
    if (edge <= 0 || edge + 1 > n) continue;
    if (row.regime_of(c, edge) != row.regime_of(c, edge + 1)) out->insert(edge + 1);
  }
}

struct SiteCost {
  bool structural = false;
  double max_angle = 0.0;
  int64_t max_pair = -1, max_pos = -1;
  double scale_a = 1.0, scale_b = 1.0;
  int64_t first_f32 = -1, first_1e3 = -1;
  bool affects() const { return structural || first_f32 >= 0; }
};

void TakeFirst(int64_t p, int64_t* slot) {
  if (p >= 0 && (*slot < 0 || p < *slot)) *slot = p;
}

// What running A's site instead of B's costs over positions [0, n).
Result<SiteCost> CostOf(const RopeConfig& a, const RopeConfig& b, int64_t n) {
  SiteCost c;
  if (a.layout.pairing != b.layout.pairing || a.layout.head_dim != b.layout.head_dim ||
      a.layout.rotary_start != b.layout.rotary_start || a.layout.rotary_dim != b.layout.rotary_dim ||
      !SameMultiAxis(a.multi_axis, b.multi_axis)) {
    c.structural = true;
    c.first_f32 = c.first_1e3 = n > 1 ? 1 : -1;
  }
  std::set<int64_t> breaks{1};
  RegimeBreaks(a, n, &breaks);
  RegimeBreaks(b, n, &breaks);
  breaks.insert(n + 1);
  const std::vector<int64_t> lengths(breaks.begin(), breaks.end());
  for (size_t k = 0; k + 1 < lengths.size(); ++k) {
    // Positions [lo, hi) are processed in sequences of length lo+1 .. hi; the frequencies at length
    // hi hold for the whole run (fixed regimes), or are its largest departure (dynamic NTK).
    const int64_t lo = lengths[k] - 1, hi = lengths[k + 1] - 1;
    if (hi <= lo) continue;
    POSENC_ASSIGN_OR_RETURN(SiteFrequencies fa, ComputeSiteFrequencies(a, hi));
    POSENC_ASSIGN_OR_RETURN(SiteFrequencies fb, ComputeSiteFrequencies(b, hi));
    c.scale_a = fa.freqs.attention_scaling;
    c.scale_b = fb.freqs.attention_scaling;
    const double ds = std::abs(c.scale_a - c.scale_b) / std::max(std::abs(c.scale_a), std::abs(c.scale_b));
    if (ds > 0x1p-23) TakeFirst(lo, &c.first_f32);
    if (ds > 1e-3) TakeFirst(lo, &c.first_1e3);
    const size_t pairs = std::min(fa.freqs.inv_freq.size(), fb.freqs.inv_freq.size());
    for (size_t i = 0; i < pairs; ++i) {
      const double wa = fa.freqs.inv_freq[i], wb = fb.freqs.inv_freq[i];
      const double d = std::abs(wa - wb), w = std::max(std::abs(wa), std::abs(wb));
      if (d == 0.0) continue;
      const double excess = d - 0x1p-23 * w;  // past the float32 rounding of the frequency and the angle
      if (excess > 0) {
        const double p = std::floor(0x1p-23 / excess) + 1;
        if (p < static_cast<double>(hi)) TakeFirst(std::max<int64_t>(lo, static_cast<int64_t>(p)), &c.first_f32);
      }
      const double p3 = std::floor(1e-3 / d) + 1;
      if (p3 < static_cast<double>(hi)) TakeFirst(std::max<int64_t>(lo, static_cast<int64_t>(p3)), &c.first_1e3);
      // The largest angle difference, modulo a full turn: pi once the drift reaches it.
      const double drift = static_cast<double>(hi - 1) * d;
      const double angle = std::min(drift, std::numbers::pi);
      if (angle > c.max_angle) {
        c.max_angle = angle;
        c.max_pair = static_cast<int64_t>(i);
        c.max_pos = drift >= std::numbers::pi ? std::max<int64_t>(lo, static_cast<int64_t>(std::ceil(std::numbers::pi / d)))
                                              : hi - 1;
      }
    }
  }
  return c;
}

struct FieldDiff {
  std::string site, field, a, b;
};

std::vector<FieldDiff> FieldDiffs(const RopeSite& sa, const RopeSite& sb) {
  std::vector<FieldDiff> out;
  const RopeConfig &a = sa.config, &b = sb.config;
  auto add = [&](std::string field, std::string va, std::string vb) {
    if (va != vb) out.push_back({sa.name, std::move(field), std::move(va), std::move(vb)});
  };
  add("pairing", std::string(ToString(a.layout.pairing)), std::string(ToString(b.layout.pairing)));
  add("head_dim", fmt::format("{}", a.layout.head_dim), fmt::format("{}", b.layout.head_dim));
  add("rotary_window", WindowText(a.layout), WindowText(b.layout));
  add("sections", SectionsText(a.multi_axis), SectionsText(b.multi_axis));
  add("base", Num(a.base), Num(b.base));
  add("scaling", std::string(ToString(a.scaling.type)), std::string(ToString(b.scaling.type)));
  if (a.scaling.type == b.scaling.type) {
    const auto ka = ScalingKeyTexts(a), kb = ScalingKeyTexts(b);
    for (size_t i = 0; i < ka.size() && i < kb.size(); ++i) add("scaling." + ka[i].first, ka[i].second, kb[i].second);
  } else {
    // Another kind: the keys of each that are not at their neutral default, so a dropped factor shows
    // what it was (and a ggml scaling with neutral parameters lists nothing).
    for (const auto& [k, v] : ScalingKeyTexts(a, true)) add("scaling." + k, v, "(not used)");
    for (const auto& [k, v] : ScalingKeyTexts(b, true)) add("scaling." + k, "(not used)", v);
  }
  add("max_position_embeddings", fmt::format("{}", a.max_position_embeddings),
      fmt::format("{}", b.max_position_embeddings));
  return out;
}

std::string LayersText(int64_t first, int64_t last) {
  if (first < 0) return "model";
  return first == last ? fmt::format("layer {}", first) : fmt::format("layers {}-{}", first, last);
}

std::string DifferenceText(const RopeDifference& d) {
  std::string t = fmt::format("{}: {}: A {}, B {}", LayersText(d.first_layer, d.last_layer), d.field, d.a, d.b);
  const std::string none(ToString(RopeScalingType::kNone));
  if (d.field == "scaling" && d.b == none) t += " (B applies no scaling)";
  if (d.field == "scaling" && d.a == none) t += " (A applies no scaling)";
  if (!d.affects) t += " (no effect on the computation)";
  return t;
}

// One side a GGUF with interleaved pairs, the other a Hugging Face config with half pairs: the GGUF
// converter's permutation of W_q / W_k (convert_hf_to_gguf's LlamaModel.permute) makes them equal.
bool ConverterPermutes(const RopeDescription& a, const RopeConfig& ca, const RopeDescription& b, const RopeConfig& cb) {
  if (ca.layout.pairing == cb.layout.pairing) return false;
  const bool a_gguf = a.scheme.rope_spelling == "gguf", b_gguf = b.scheme.rope_spelling == "gguf";
  if (a_gguf == b_gguf) return false;
  const RopeConfig& gguf = a_gguf ? ca : cb;
  return gguf.layout.pairing == RopePairing::kInterleaved;
}

// The positions the cost is measured over: the option, else the larger RoPE context, else 8192.
int64_t DiffLength(const PositionScheme& a, const PositionScheme& b, const RopeDiffOptions& options) {
  int64_t n = options.seq_len;
  if (n <= 0) {
    n = std::max(a.kind == PositionKind::kRope ? a.rope.max_position_embeddings : 0,
                 b.kind == PositionKind::kRope ? b.rope.max_position_embeddings : 0);
    if (n <= 0) n = 8192;
  }
  return std::min(n, kMaxRopePosition);
}

// A difference of the whole model (no layer), with its text.
void AddWholeModel(RopeDiffReport* r, std::string field, std::string va, std::string vb) {
  RopeDifference d{-1, -1, "", std::move(field), std::move(va), std::move(vb), true, ""};
  d.text = DifferenceText(d);
  r->differences.push_back(std::move(d));
}

// Not RoPE: the scheme's own parameters (the same for every layer), and the verdict.
void DiffOtherScheme(const PositionScheme& sa, const PositionScheme& sb, RopeDiffReport* r) {
  auto field = [&](const char* name, std::string va, std::string vb) {
    if (va != vb) AddWholeModel(r, name, std::move(va), std::move(vb));
  };
  switch (sa.kind) {
    case PositionKind::kAlibi:
      field("alibi_variant", sa.alibi_variant, sb.alibi_variant);
      field("alibi_bias_max", Num(sa.alibi_bias_max), Num(sb.alibi_bias_max));
      field("num_heads", fmt::format("{}", sa.num_heads), fmt::format("{}", sb.num_heads));
      break;
    case PositionKind::kT5Bucket:
      field("num_buckets", fmt::format("{}", sa.t5_num_buckets), fmt::format("{}", sb.t5_num_buckets));
      field("max_distance", fmt::format("{}", sa.t5_max_distance), fmt::format("{}", sb.t5_max_distance));
      field("bidirectional", sa.t5_bidirectional ? "true" : "false", sb.t5_bidirectional ? "true" : "false");
      break;
    case PositionKind::kSinusoidal:
      field("sinusoidal_layout", sa.sinusoidal_layout, sb.sinusoidal_layout);
      [[fallthrough]];
    case PositionKind::kLearned:
      field("max_position_embeddings", fmt::format("{}", sa.max_position_embeddings),
            fmt::format("{}", sb.max_position_embeddings));
      break;
    default: break;
  }
  r->equivalent = r->differences.empty();
  if (!r->equivalent) r->cost.first_position_f32 = r->cost.first_position_1e3 = 0;
  r->summary = r->equivalent ? fmt::format("equivalent: both {} with the same parameters", ToString(sa.kind))
                             : fmt::format("differs from position 0: {}", r->differences.front().text);
}

// The per-layer differences, each merged with the same difference on the previous layer.
struct LayerDifferences {
  std::vector<RopeDifference> list;
  void Add(int64_t l, RopeDifference d) {
    for (RopeDifference& prev : list)
      if (prev.last_layer == l - 1 && prev.site == d.site && prev.field == d.field && prev.a == d.a &&
          prev.b == d.b && prev.affects == d.affects) {
        prev.last_layer = l;
        return;
      }
    d.first_layer = d.last_layer = l;
    list.push_back(std::move(d));
  }
};

// Layer l of both descriptions, and the positions the cost is measured over.
struct SidePair {
  const RopeDescription &a, &b;
  const LayerRope &la, &lb;
  int64_t layer, n;
};

// Site s of a layer on both sides: its field differences, and its cost folded into `cost`.
Status DiffSite(const SidePair& p, size_t s, const RopeDiffOptions& options, LayerDifferences* per_layer,
                RopeDiffCost* cost) {
  const RopeSite &sa = p.la.sites[s], &sb = p.lb.sites[s];
  // A GGUF's interleaved pairs against the config's half pairs: llama.cpp's converter permuted the
  // rows of W_q and W_k, so the converted model computes the same (unless asked to count it).
  RopeConfig cb = sb.config;
  const bool permuted = !options.strict_pairing && ConverterPermutes(p.a, sa.config, p.b, cb);
  if (permuted) cb.layout.pairing = sa.config.layout.pairing;
  POSENC_ASSIGN_OR_RETURN(SiteCost c, CostOf(sa.config, cb, p.n));
  for (FieldDiff& f : FieldDiffs(sa, sb)) {
    if (f.field == "pairing" && permuted) {
      f.b += " (GGUF: llama.cpp's converter permutes W_q/W_k rows to it)";
      per_layer->Add(p.layer, RopeDifference{-1, -1, f.site, f.field, f.a, f.b, false, ""});
      continue;
    }
    per_layer->Add(p.layer, RopeDifference{-1, -1, f.site, f.field, f.a, f.b, c.affects(), ""});
  }
  cost->structural = cost->structural || c.structural;
  TakeFirst(c.first_f32, &cost->first_position_f32);
  TakeFirst(c.first_1e3, &cost->first_position_1e3);
  if (c.max_angle > cost->max_angle_diff) {
    cost->max_angle_diff = c.max_angle;
    cost->max_at_pair = c.max_pair;
    cost->max_at_position = c.max_pos;
    cost->max_at_layer = p.layer;
  }
  if (c.scale_a != c.scale_b || p.layer == 0) {
    cost->attention_scaling_a = c.scale_a;
    cost->attention_scaling_b = c.scale_b;
  }
  return OkStatus();
}

// The verdict of two RoPE models and its one-line summary.
void Conclude(int64_t n, RopeDiffReport* r) {
  bool affecting = false;
  for (const RopeDifference& d : r->differences) affecting = affecting || d.affects;
  r->equivalent = !affecting && !r->cost.structural && r->cost.first_position_f32 < 0;
  if (r->equivalent) {
    r->summary = fmt::format("equivalent: the same positional computation in every layer for positions below {}", n);
    if (!r->differences.empty()) r->summary += " (fields that differ have no effect)";
    return;
  }
  std::string first_cause;
  for (const RopeDifference& d : r->differences)
    if (d.affects) {
      first_cause = d.text;
      break;
    }
  const int64_t p = r->cost.first_position_f32;
  if (p > 1)
    r->summary = fmt::format("identical below position {}; beyond it {}", p, first_cause);
  else if (p >= 0)
    r->summary = fmt::format("differs from position {}: {}", p, first_cause);
  else
    r->summary = fmt::format("differs (structurally): {}", first_cause);
}

}  // namespace

Result<RopeDescription> OpenRopeDescription(const std::string& path, const ModelSchemeOptions& options) {
  RopeDescription d;
  d.path = path;
  d.options = options;
  if (!LooksLikeJsonConfig(path)) {
    POSENC_ASSIGN_OR_RETURN(ModelFile m, OpenModel(path));
    d.model = std::move(m);
  }
  POSENC_ASSIGN_OR_RETURN(d.scheme, SchemeOfLayerType(d, options.layer_type));
  return d;
}

Result<RopeDescription> RopeDescriptionFromConfigText(std::string text, const std::string& source,
                                                      const ModelSchemeOptions& options) {
  RopeDescription d;
  d.path = source;
  d.options = options;
  d.config_text = std::move(text);
  POSENC_ASSIGN_OR_RETURN(d.scheme, SchemeOfLayerType(d, options.layer_type));
  return d;
}

Result<PositionScheme> SchemeOfLayerType(const RopeDescription& d, const std::string& layer_type) {
  ModelSchemeOptions o = d.options;
  o.layer_type = layer_type;
  if (d.model.has_value()) return ModelScheme(*d.model, o);
  if (d.config_text.has_value()) return ConfigTextScheme(*d.config_text, d.path, o);
  return ConfigFileScheme(d.path, o);
}

Result<SiteFrequencies> ComputeSiteFrequencies(const RopeConfig& config, int64_t seq_len) {
  SiteFrequencies out;
  if (config.multi_axis.has_value()) {
    POSENC_ASSIGN_OR_RETURN(MultiAxisPlan plan, ComputeMultiAxisRope(config, seq_len));
    out.freqs = std::move(plan.freqs);
    out.pair_component = std::move(plan.pair_component);
    out.num_components = plan.num_components;
    return out;
  }
  POSENC_ASSIGN_OR_RETURN(out.freqs, ComputeRopeFrequencies(config, seq_len));
  out.pair_component.assign(out.freqs.inv_freq.size(), 0);
  return out;
}

Result<ModelRope> ModelRopeLayers(const RopeDescription& d) {
  ModelRope m;
  m.kind = d.scheme.kind;
  if (d.scheme.kind != PositionKind::kRope) return m;
  // The scheme of each layer type the config declares (one parse per type): types with their own
  // rope parameters, Gemma 3's rope_local_base_freq, OLMo 3's scaling on full layers only.
  std::map<std::string, PositionScheme> per_type;
  std::set<std::string> types(d.scheme.layer_types.begin(), d.scheme.layer_types.end());
  auto scheme_of = [&](const std::string& type) -> Result<const PositionScheme*> {
    if (type.empty() || types.size() < 2) return &d.scheme;
    auto it = per_type.find(type);
    if (it == per_type.end()) {
      Result<PositionScheme> s = SchemeOfLayerType(d, type);
      // A format with one RoPE for all layer types refuses the type: the default scheme is that RoPE.
      if (!s.ok() && s.status().code() == StatusCode::kNotFound) return &d.scheme;
      if (!s.ok()) return s.status();
      it = per_type.emplace(type, std::move(s).value()).first;
    }
    return &it->second;
  };
  // Each RoPE site of a layer (DeepSeek-V3.2 / GLM-5: mla and indexer; DeepSeek-V4: four), read for the
  // layer's type; a model with one site keeps the one name "rope".
  auto sites_of = [&](const PositionScheme& s, const std::string& type) -> Result<std::vector<RopeSite>> {
    if (s.sites.size() < 2) return std::vector<RopeSite>{RopeSite{"rope", s.rope}};
    std::vector<RopeSite> out;
    for (RotarySite site : s.sites) {
      ModelSchemeOptions o = d.options;
      o.layer_type = type;
      o.site = std::string(ToString(site));
      POSENC_ASSIGN_OR_RETURN(PositionScheme one,
                              d.model.has_value() ? ModelScheme(*d.model, o) : ConfigFileScheme(d.path, o));
      out.push_back(RopeSite{std::string(ToString(site)), one.rope});
    }
    return out;
  };
  if (d.scheme.num_layers <= 0) {
    POSENC_ASSIGN_OR_RETURN(std::vector<RopeSite> sites, sites_of(d.scheme, d.options.layer_type));
    m.layers.push_back(LayerRope{0, "", true, std::move(sites)});
    return m;
  }
  POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(d.scheme));
  m.layers_known = true;
  m.schedule_rule = schedule.rule;
  for (int64_t l = 0; l < schedule.num_layers(); ++l) {
    LayerRope layer;
    layer.layer = l;
    if (static_cast<size_t>(l) < d.scheme.layer_types.size()) layer.layer_type = d.scheme.layer_types[l];
    layer.rope = schedule.rope[static_cast<size_t>(l)];
    if (layer.rope) {
      POSENC_ASSIGN_OR_RETURN(const PositionScheme* s, scheme_of(layer.layer_type));
      POSENC_ASSIGN_OR_RETURN(layer.sites, sites_of(*s, layer.layer_type));
    }
    m.layers.push_back(std::move(layer));
  }
  return m;
}

Result<RopeDiffReport> DiffRope(const RopeDescription& a, const RopeDescription& b, const RopeDiffOptions& options) {
  RopeDiffReport r;
  r.a_source = a.path;
  r.b_source = b.path;
  POSENC_ASSIGN_OR_RETURN(ModelRope ma, ModelRopeLayers(a));
  POSENC_ASSIGN_OR_RETURN(ModelRope mb, ModelRopeLayers(b));
  const int64_t n = DiffLength(a.scheme, b.scheme, options);
  r.seq_len = n;
  if (ma.kind != mb.kind) {
    AddWholeModel(&r, "scheme", std::string(ToString(ma.kind)), std::string(ToString(mb.kind)));
    r.equivalent = false;
    r.cost.structural = true;
    r.cost.first_position_f32 = r.cost.first_position_1e3 = 0;
    r.summary = fmt::format("not equivalent: A is {}, B is {}", ToString(ma.kind), ToString(mb.kind));
    return r;
  }
  if (ma.kind != PositionKind::kRope) {
    DiffOtherScheme(a.scheme, b.scheme, &r);
    return r;
  }
  int64_t count = static_cast<int64_t>(std::max(ma.layers.size(), mb.layers.size()));
  if (ma.layers_known && mb.layers_known && ma.layers.size() != mb.layers.size()) {
    AddWholeModel(&r, "layers", fmt::format("{}", ma.layers.size()), fmt::format("{}", mb.layers.size()));
    r.cost.structural = true;
    count = static_cast<int64_t>(std::min(ma.layers.size(), mb.layers.size()));
  }
  // A description without a layer count stands for every layer with its one layer.
  auto layer_of = [](const ModelRope& m, int64_t l) -> const LayerRope& {
    return m.layers_known ? m.layers[static_cast<size_t>(l)] : m.layers.front();
  };
  LayerDifferences per_layer;
  for (int64_t l = 0; l < count; ++l) {
    const LayerRope &la = layer_of(ma, l), &lb = layer_of(mb, l);
    if (la.rope != lb.rope) {
      per_layer.Add(l, RopeDifference{-1, -1, "", "rope_applied", la.rope ? "RoPE" : "NoPE", lb.rope ? "RoPE" : "NoPE",
                                      true, ""});
      r.cost.structural = true;
      TakeFirst(n > 1 ? 1 : -1, &r.cost.first_position_f32);
      TakeFirst(n > 1 ? 1 : -1, &r.cost.first_position_1e3);
      continue;
    }
    const SidePair sides{a, b, la, lb, l, n};
    for (size_t s = 0; s < la.sites.size() && s < lb.sites.size(); ++s)
      POSENC_RETURN_IF_ERROR(DiffSite(sides, s, options, &per_layer, &r.cost));
  }
  for (RopeDifference& d : per_layer.list) {
    d.text = DifferenceText(d);
    r.differences.push_back(std::move(d));
  }
  Conclude(n, &r);
  return r;
}

std::string RopeDiffReportJson(const RopeDiffReport& r) {
  using nlohmann::json;
  json out;
  out["equivalent"] = r.equivalent;
  out["a"] = r.a_source;
  out["b"] = r.b_source;
  out["seq_len"] = r.seq_len;
  out["summary"] = r.summary;
  json diffs = json::array();
  for (const RopeDifference& d : r.differences) {
    json j = {{"field", d.field}, {"a", d.a}, {"b", d.b}, {"affects", d.affects}, {"text", d.text}};
    if (d.first_layer >= 0) j["layers"] = {d.first_layer, d.last_layer};
    if (!d.site.empty()) j["site"] = d.site;
    diffs.push_back(std::move(j));
  }
  out["differences"] = diffs;
  auto pos = [](int64_t p) { return p < 0 ? json(nullptr) : json(p); };
  out["cost"] = {{"structural", r.cost.structural},
                 {"max_angle_diff", r.cost.max_angle_diff},
                 {"max_at_pair", pos(r.cost.max_at_pair)},
                 {"max_at_position", pos(r.cost.max_at_position)},
                 {"max_at_layer", pos(r.cost.max_at_layer)},
                 {"attention_scaling_a", r.cost.attention_scaling_a},
                 {"attention_scaling_b", r.cost.attention_scaling_b},
                 {"first_position_over_f32_rounding", pos(r.cost.first_position_f32)},
                 {"first_position_over_1e-3_rad", pos(r.cost.first_position_1e3)}};
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string RopeDiffReportText(const RopeDiffReport& r) {
  std::string out = fmt::format("A: {}\nB: {}\n{}\n", r.a_source, r.b_source, r.summary);
  for (const RopeDifference& d : r.differences) out += fmt::format("  {}\n", d.text);
  if (r.equivalent) return out;
  auto pos = [](int64_t p) { return p < 0 ? std::string("never") : fmt::format("position {}", p); };
  out += fmt::format("cost over positions below {}:\n", r.seq_len);
  if (r.cost.max_at_pair >= 0)
    out += fmt::format("  largest angle difference {:.6g} rad at pair {}, position {}, layer {}\n", r.cost.max_angle_diff,
                       r.cost.max_at_pair, r.cost.max_at_position, r.cost.max_at_layer);
  if (r.cost.attention_scaling_a != r.cost.attention_scaling_b)
    out += fmt::format("  attention scaling A {:.10g}, B {:.10g}\n", r.cost.attention_scaling_a,
                       r.cost.attention_scaling_b);
  if (r.cost.structural)
    out += "  structural: the rotated dims themselves differ (pairing, window, sections or layers)\n";
  out += fmt::format("  past float32 rounding from {}; past 1e-3 rad from {}\n", pos(r.cost.first_position_f32),
                     pos(r.cost.first_position_1e3));
  return out;
}

}  // namespace posenc
