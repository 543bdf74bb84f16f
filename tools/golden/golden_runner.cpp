// Golden-case runner: reads case.json, computes each role with posenc, compares per FORMAT.md.
#include "golden_runner.hpp"

#include "golden_case.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/multi_axis_config.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/math/relative.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/math/sinusoidal.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/kernels/attn_temperature.hpp"

namespace posenc::golden {
using nlohmann::json;

namespace {

using Case = GoldenCase;

// The case's attention_scaling, if it states one, against posenc's (relative 1e-6); adds it to `checked`.
Status CheckAttentionScaling(const Case& c, double got, std::string* checked) {
  if (!c.j().contains("attention_scaling")) return OkStatus();
  const double want = c.j()["attention_scaling"].get<double>();
  if (!(std::fabs(got - want) <= 1e-6 * std::fabs(want)))
    return InvalidArgumentError(fmt::format("attention_scaling: got {:.9g}, want {:.9g}", got, want));
  *checked += "attention_scaling ";
  return OkStatus();
}

// --- rope -----------------------------------------------------------------------------------------

// The case's layout, head_dim and rotary_dim (where it states them) against what posenc derived from
// its config (checked, never used in place of the config), and the layout that rotates the input: the
// config's, or its rotary window alone when the input is that slice (DeepSeek's q_pe, as Hugging Face
// rotates it; RotaryLayoutForInput). A case's head_dim may name either width.
Result<RotaryLayout> CheckCaseLayout(const json& j, const RotaryLayout& layout, int64_t head_dim) {
  POSENC_ASSIGN_OR_RETURN(RotaryLayout apply, RotaryLayoutForInput(layout, head_dim, "input"));
  if (j.contains("layout")) {
    RopePairing p;
    if (!ParseRopePairing(j["layout"].get<std::string>(), &p))
      return DataLossError(fmt::format("unknown layout '{}'", j["layout"].dump()));
    if (p != layout.pairing)
      return InvalidArgumentError(
          fmt::format("config gives layout {}, case says {}", ToString(layout.pairing), ToString(p)));
  }
  for (const char* key : {"head_dim", "rotary_dim"}) {
    if (!j.contains(key)) continue;
    const int64_t want = j[key].get<int64_t>();
    const int64_t got = std::string(key) == "head_dim" ? layout.head_dim : layout.rotary_dim;
    if (got != want && !(std::string(key) == "head_dim" && want == apply.head_dim))
      return InvalidArgumentError(fmt::format("config gives {} {}, case says {}", key, got, want));
  }
  return apply;
}

// The layer and site a case holds (FORMAT.md: layer_index, layer_type, rotary_site): which of the
// model's rotations to derive, as `posenc rope --layer --layer-type --site` asks. Everything the
// rotation is made of still comes from the config.
HfConfigOptions CaseOptions(const Case& c) {
  const json& j = c.j();
  HfConfigOptions options;
  if (j.contains("layer_index")) options.layer = j["layer_index"].get<int64_t>();
  if (j.contains("layer_type")) options.layer_type = j["layer_type"].get<std::string>();
  if (j.contains("rotary_site")) options.site = j["rotary_site"].get<std::string>();
  return options;
}

// The case's RoPE config, derived from its `config` as FORMAT.md says: ggml parameters (n_dims and
// mode present; the mode fixes the pairing), a vision config read by vision_2d_variant (rope_vision_2d
// cases), or a Hugging Face config read with the case's hf_model_type as model_type (which fixes the
// pairing and rotary window of families such as gptj, cohere, glm4, llama4). `scheme` (may be null)
// receives the whole parsed Hugging Face scheme (left as it is for the other two). The case's own
// statements are checked by the callers, never used in place of what this derives.
Result<RopeConfig> CaseConfig(const Case& c, int64_t head_dim, PositionScheme* scheme) {
  const json& j = c.j();
  if (!j.contains("config") || !j["config"].is_object()) return DataLossError("case.json has no 'config' object");
  json config = j["config"];
  if (config.contains("n_dims") && config.contains("mode"))
    return RopeConfigFromGgmlParams(config.dump(), head_dim, "case config");
  if (j.value("scheme", std::string()) == "rope_vision_2d") {
    const std::string name = j.value("vision_2d_variant", std::string("(missing)"));
    Vision2dVariant variant;
    if (!ParseVision2dVariant(name, &variant))
      return DataLossError(fmt::format("unknown vision_2d_variant '{}'", name));
    return ParseHfVision2dConfig(config.dump(), variant, "case config");
  }
  if (!config.contains("model_type") && j.contains("hf_model_type")) config["model_type"] = j["hf_model_type"];
  POSENC_ASSIGN_OR_RETURN(PositionScheme s, ParseHfConfig(config.dump(), "case config", CaseOptions(c)));
  if (s.kind != PositionKind::kRope)
    return InvalidArgumentError(fmt::format("case config: the scheme is {}, not rope", ToString(s.kind)));
  RopeConfig rc = s.rope;
  if (scheme != nullptr) *scheme = std::move(s);
  return rc;
}

// The case's per-layer roles (FORMAT.md 2026 section) against the model's layer table: which layers
// have attention, the keyed set each uses (by name: the case's rope_keys order is its own), its head size.
Status CompareLayerTable(const Case& c, const PositionScheme& scheme, const std::string& role, const Array& want) {
  POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(scheme));
  std::vector<int64_t> got;
  if (role == "layer_attention") {
    for (bool a : schedule.attention) got.push_back(a ? 1 : 0);
  } else if (role == "layer_head_dim") {
    got = schedule.head_dim;
  } else {  // layer_rope_key
    const json& names = c.j().at("rope_keys");
    for (int64_t k : schedule.rope_key) {
      int64_t index = -1;
      if (k >= 0) {
        const std::string& name = scheme.rope_keys[static_cast<size_t>(k)];
        for (size_t i = 0; i < names.size(); ++i)
          if (names[i].get<std::string>() == name) index = static_cast<int64_t>(i);
        if (index < 0)
          return InvalidArgumentError(fmt::format("layer_rope_key: posenc's set '{}' is not in the case's rope_keys", name));
      }
      got.push_back(index);
    }
  }
  return CompareInts(fmt::format("{} ({})", role, schedule.rule), got, want);
}

// The case's statements of the site (rotary_offset, rotation_sign, rope_parameters_key) against the scheme.
Status CheckCaseSite(const Case& c, const PositionScheme& scheme) {
  const json& j = c.j();
  if (j.contains("rotary_offset") && j["rotary_offset"].get<int64_t>() != scheme.rope.layout.rotary_start)
    return InvalidArgumentError(fmt::format("config gives rotary_offset {}, case says {}",
                                            scheme.rope.layout.rotary_start, j["rotary_offset"].dump()));
  if (j.contains("rotation_sign") && j["rotation_sign"].get<int64_t>() != scheme.rotation_sign)
    return InvalidArgumentError(
        fmt::format("config gives rotation_sign {}, case says {}", scheme.rotation_sign, j["rotation_sign"].dump()));
  if (j.contains("rope_parameters_key") && j["rope_parameters_key"].get<std::string>() != scheme.rope_key)
    return InvalidArgumentError(fmt::format("config gives rope parameter set '{}', case says {}", scheme.rope_key,
                                            j["rope_parameters_key"].dump()));
  return OkStatus();
}

// The RoPE config of a 1-D rope case (CaseConfig), its layout, head_dim and rotary_dim checked, and
// the layout that rotates the input (*apply).
Result<RopeConfig> CaseRopeConfig(const Case& c, int64_t head_dim, RotaryLayout* apply,
                                  PositionScheme* scheme = nullptr) {
  POSENC_ASSIGN_OR_RETURN(RopeConfig rc, CaseConfig(c, head_dim, scheme));
  POSENC_ASSIGN_OR_RETURN(*apply, CheckCaseLayout(c.j(), rc.layout, head_dim));
  return rc;
}

// The `layer_schedule` role (1 = RoPE layer, 0 = NoPE), compared exactly with LayerRopeSchedule.
Status CompareLayerSchedule(const PositionScheme& scheme, const Array& want) {
  POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(scheme));
  std::vector<int64_t> got(schedule.rope.begin(), schedule.rope.end());
  return CompareInts(fmt::format("layer_schedule ({})", schedule.rule), got, want);
}

Result<std::vector<double>> RotateCase(const Array& input, DType storage, const RotaryLayout& layout,
                                       const RopeFrequencies& freqs, const std::vector<int64_t>& positions,
                                       RopePrecision precision, RopeDirection direction) {
  POSENC_ASSIGN_OR_RETURN(Array x, input.AsType(storage));
  POSENC_ASSIGN_OR_RETURN(HeadsView view, HeadsView::Of(x, "input"));
  int64_t max_pos = 0;
  for (int64_t p : positions) max_pos = std::max(max_pos, p);
  // A table over the prefix of positions, on-the-fly for any beyond: both paths are exercised.
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(freqs, std::min<int64_t>(max_pos + 1, 1 << 16), precision));
  RopeArgs args{layout, &table, positions, direction};
  POSENC_RETURN_IF_ERROR(ApplyRope(args, view));
  return ToDoubles(x);
}

Result<std::string> RunRope(const Case& c) {
  POSENC_ASSIGN_OR_RETURN(Array input, c.Read("input"));
  if (input.ndim() != 3)
    return DataLossError(fmt::format("input shape {} is not [T, H, D]", ShapeToString(input.shape())));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> positions, c.ReadInts("positions"));
  PositionScheme scheme;
  RotaryLayout apply;
  POSENC_ASSIGN_OR_RETURN(RopeConfig rc, CaseRopeConfig(c, input.dim(2), &apply, &scheme));
  if (c.Has("freq_factors")) {
    POSENC_ASSIGN_OR_RETURN(Array ff, c.Read("freq_factors"));
    rc.scaling.freq_factors = ToDoubles(ff);
  }
  const int64_t seq_len = c.SeqLen(positions);
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies freqs, ComputeRopeFrequencies(rc, seq_len));
  const DType storage = c.Storage();
  POSENC_RETURN_IF_ERROR(CheckCaseSite(c, scheme));
  const RopeDirection direction = scheme.rotation_sign < 0 ? RopeDirection::kBackward : RopeDirection::kForward;

  std::string checked;
  POSENC_RETURN_IF_ERROR(CheckAttentionScaling(c, freqs.attention_scaling, &checked));
  for (const std::string& role : c.OutputRoles()) {
    POSENC_ASSIGN_OR_RETURN(Array want, c.Read(role));
    if (role == "attn_scales" || role == "attn_scales_exact") {
      // Mistral 4: the query multiplier of every token (the config's llama_4_scaling_beta).
      const AttnTemperature& t = scheme.attn_temperature;
      if (!t.tuning) return InvalidArgumentError(fmt::format("{}: the config gives no query temperature", role));
      double max_scale = 1;
      POSENC_ASSIGN_OR_RETURN(std::vector<double> exact, AttnTemperatureScalesExact(t, positions));
      for (double v : exact) max_scale = std::max(max_scale, std::fabs(v));
      if (role == "attn_scales") {
        POSENC_ASSIGN_OR_RETURN(std::vector<float> scales, AttnTemperatureScales(t, positions));
        POSENC_RETURN_IF_ERROR(Compare(role, std::vector<double>(scales.begin(), scales.end()), want,
                                       c.Tol(role, {8 * std::ldexp(max_scale, -24), 0})));
      } else {
        POSENC_RETURN_IF_ERROR(Compare(role, exact, want, c.Tol(role, {std::ldexp(max_scale, -30), 0})));
      }
    } else if (role == "layer_attention" || role == "layer_rope_key" || role == "layer_head_dim") {
      POSENC_RETURN_IF_ERROR(CompareLayerTable(c, scheme, role, want));
    } else if (role == "inv_freq") {
      POSENC_RETURN_IF_ERROR(Compare(role, freqs.inv_freq, want, c.Tol(role, {0, kTwoUlpRtol})));
    } else if (role == "expected" || role == "expected_exact") {
      const RopePrecision precision = role == "expected" ? RopePrecision::kReference : RopePrecision::kExact;
      POSENC_ASSIGN_OR_RETURN(std::vector<double> got,
                              RotateCase(input, storage, apply, freqs, positions, precision, direction));
      POSENC_RETURN_IF_ERROR(
          Compare(fmt::format("{} ({} precision)", role, ToString(precision)), got, want, c.Tol(role, {})));
    } else if (role == "pair_component") {
      // 1-D RoPE: every pair is driven by the one position row.
      POSENC_RETURN_IF_ERROR(CompareInts(role, std::vector<int64_t>(freqs.inv_freq.size(), 0), want));
    } else if (role == "layer_schedule") {
      POSENC_RETURN_IF_ERROR(CompareLayerSchedule(scheme, want));
    } else {
      return UnimplementedError(fmt::format("rope case role '{}' is not known to this runner", role));
    }
    checked += role + " ";
  }
  return fmt::format("rope {} {} R={}/{} at {}, site {}{}, {}: {}", ToString(rc.scaling.type),
                     ToString(rc.layout.pairing), rc.layout.rotary_dim, rc.layout.head_dim, rc.layout.rotary_start,
                     ToString(scheme.site), scheme.rotation_sign < 0 ? " (inverse)" : "", ToString(storage), checked);
}

// --- nope (no positional transform) -------------------------------------------------------------

// The config must give no positions at the case's layer: the module hands its input on unchanged
// (`expected` equals `input` exactly), and the layer roles match the model's table.
Result<std::string> RunNope(const Case& c) {
  const json& j = c.j();
  if (!j.contains("config") || !j["config"].is_object()) return DataLossError("case.json has no 'config' object");
  json config = j["config"];
  if (!config.contains("model_type") && j.contains("hf_model_type")) config["model_type"] = j["hf_model_type"];
  POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, ParseHfConfig(config.dump(), "case config", CaseOptions(c)));
  if (scheme.kind != PositionKind::kNone)
    return InvalidArgumentError(fmt::format("case config: the scheme at layer {} is {}, the case says none",
                                            j.value("layer_index", int64_t{-1}), ToString(scheme.kind)));
  POSENC_ASSIGN_OR_RETURN(Array input, c.Read("input"));
  std::string checked;
  for (const std::string& role : c.OutputRoles()) {
    POSENC_ASSIGN_OR_RETURN(Array want, c.Read(role));
    if (role == "expected") {
      // No transform: what posenc hands on is the input itself, compared exactly.
      POSENC_RETURN_IF_ERROR(Compare(role, ToDoubles(input), want, c.Tol(role, {0, 0})));
    } else if (role == "layer_schedule") {
      POSENC_RETURN_IF_ERROR(CompareLayerSchedule(scheme, want));
    } else if (role == "layer_attention" || role == "layer_rope_key" || role == "layer_head_dim") {
      POSENC_RETURN_IF_ERROR(CompareLayerTable(c, scheme, role, want));
    } else {
      return UnimplementedError(fmt::format("nope case role '{}' is not known to this runner", role));
    }
    checked += role + " ";
  }
  POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(scheme));
  int64_t attention_layers = 0;
  for (bool a : schedule.attention) attention_layers += a ? 1 : 0;
  return fmt::format("nope {}: {} of {} layers with attention, none rotates: {}", scheme.model_type, attention_layers,
                     schedule.num_layers(), checked);
}

// --- multi-axis rope (mrope, rope_vision_2d) ----------------------------------------------------

std::string IntsString(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The RoPE config of an mrope / rope_vision_2d case (CaseConfig). The case's own statements (layout,
// head_dim, rotary_dim, section_layout, sections, rope_theta, position_components) are checked
// against what posenc derives, never used in its place.
Result<RopeConfig> MultiAxisCaseConfig(const Case& c, int64_t head_dim) {
  const json& j = c.j();
  POSENC_ASSIGN_OR_RETURN(RopeConfig rc, CaseConfig(c, head_dim, nullptr));
  if (!rc.multi_axis.has_value())
    return InvalidArgumentError("case config: not a multi-axis rope (no mrope_section / sections / vision variant)");
  const MultiAxisRope& m = *rc.multi_axis;
  POSENC_ASSIGN_OR_RETURN(RotaryLayout apply, CheckCaseLayout(j, rc.layout, head_dim));
  if (apply.head_dim != rc.layout.head_dim)
    return InvalidArgumentError(fmt::format(
        "config gives head_dim {}, input has {} (a multi-axis input is the whole head)", rc.layout.head_dim, head_dim));
  if (j.contains("section_layout")) {
    SectionLayout want;
    const std::string name = j["section_layout"].get<std::string>();
    if (!ParseSectionLayout(name, &want)) return DataLossError(fmt::format("unknown section_layout '{}'", name));
    if (want != m.layout)
      return InvalidArgumentError(
          fmt::format("config gives section layout {}, case says {}", ToString(m.layout), name));
  }
  if (j.contains("sections")) {
    const std::vector<int64_t> want = j["sections"].get<std::vector<int64_t>>();
    if (want != m.sections)
      return InvalidArgumentError(
          fmt::format("config gives sections {}, case says {}", IntsString(m.sections), IntsString(want)));
  }
  if (j.contains("rope_theta") && j["rope_theta"].get<double>() != rc.base)
    return InvalidArgumentError(fmt::format("config gives theta {}, case says {}", rc.base, j["rope_theta"].dump()));
  if (j.contains("position_components") && static_cast<int64_t>(j["position_components"].size()) != m.num_components)
    return InvalidArgumentError(fmt::format("config gives {} position components, case names {}", m.num_components,
                                            j["position_components"].size()));
  return rc;
}

Result<std::string> RunMultiAxis(const Case& c) {
  const json& j = c.j();
  POSENC_ASSIGN_OR_RETURN(Array input, c.Read("input"));
  if (input.ndim() != 3)
    return DataLossError(fmt::format("input shape {} is not [T, H, D]", ShapeToString(input.shape())));
  POSENC_ASSIGN_OR_RETURN(RopeConfig rc, MultiAxisCaseConfig(c, input.dim(2)));
  POSENC_ASSIGN_OR_RETURN(Array pos_array, c.Read("positions"));
  POSENC_ASSIGN_OR_RETURN(Array pos64, pos_array.AsType(DType::kI64));
  const std::vector<int64_t> positions(pos64.span<int64_t>().begin(), pos64.span<int64_t>().end());
  const int64_t components = rc.multi_axis->num_components;
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisPositions(pos64.shape(), positions, components, "positions.npy"));
  if (pos64.dim(1) != input.dim(0))
    return DataLossError(fmt::format("positions have {} tokens, input {}", pos64.dim(1), input.dim(0)));
  const int64_t seq_len = c.SeqLen(positions);
  POSENC_ASSIGN_OR_RETURN(MultiAxisPlan plan, ComputeMultiAxisRope(rc, seq_len));
  const DType storage = c.Storage();

  std::string checked;
  POSENC_RETURN_IF_ERROR(CheckAttentionScaling(c, plan.freqs.attention_scaling, &checked));
  for (const std::string& role : c.OutputRoles()) {
    POSENC_ASSIGN_OR_RETURN(Array want, c.Read(role));
    if (role == "pair_component") {
      POSENC_RETURN_IF_ERROR(CompareInts(role, plan.pair_component, want));
    } else if (role == "inv_freq") {
      POSENC_RETURN_IF_ERROR(Compare(role, plan.freqs.inv_freq, want, c.Tol(role, {0, kTwoUlpRtol})));
    } else if (role == "expected" || role == "expected_exact") {
      const RopePrecision precision = role == "expected" ? RopePrecision::kReference : RopePrecision::kExact;
      POSENC_ASSIGN_OR_RETURN(Array x, input.AsType(storage));
      POSENC_ASSIGN_OR_RETURN(HeadsView view, HeadsView::Of(x, "input"));
      const MultiAxisRopeArgs args{rc.layout, &plan.freqs, plan.pair_component, components, positions, precision};
      POSENC_RETURN_IF_ERROR(ApplyMultiAxisRope(args, view));
      POSENC_RETURN_IF_ERROR(
          Compare(fmt::format("{} ({} precision)", role, ToString(precision)), ToDoubles(x), want, c.Tol(role, {})));
    } else {
      return UnimplementedError(
          fmt::format("{} case role '{}' is not known to this runner", j.value("scheme", ""), role));
    }
    checked += role + " ";
  }
  return fmt::format("{} {} ({}) sections {} {} R={}/{}, {} components, {}: {}", j.value("scheme", std::string()),
                     ToString(rc.multi_axis->layout), ToString(rc.multi_axis->rules),
                     IntsString(rc.multi_axis->sections), ToString(rc.layout.pairing), rc.layout.rotary_dim,
                     rc.layout.head_dim, components, ToString(storage), checked);
}

// --- absolute ---------------------------------------------------------------------------------

Result<std::string> RunSinusoidal(const Case& c) {
  const json& j = c.j();
  SinusoidalLayout layout;
  if (!ParseSinusoidalLayout(j.value("layout", std::string()), &layout))
    return DataLossError(fmt::format("unknown sinusoidal layout {}", j.value("layout", std::string("(missing)"))));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> positions, c.ReadInts("positions"));
  const int64_t d_model = j.at("d_model").get<int64_t>();
  POSENC_ASSIGN_OR_RETURN(Array table, SinusoidalTable(positions, d_model, layout));
  POSENC_ASSIGN_OR_RETURN(Array want, c.Read("table"));
  POSENC_RETURN_IF_ERROR(Compare("table", ToDoubles(table), want, c.Tol("table", {0, kTwoUlpRtol})));
  return fmt::format("sinusoidal {} d_model {}: table", ToString(layout), d_model);
}

// --- relative ---------------------------------------------------------------------------------

Result<std::string> RunAlibi(const Case& c) {
  const json& j = c.j();
  const std::string variant_name = j.value("variant", std::string());
  AlibiVariant variant;
  if (!ParseAlibiVariant(variant_name, &variant))
    return DataLossError(fmt::format("unknown alibi variant '{}'", variant_name));
  const int64_t heads = j.at("num_heads").get<int64_t>();
  double bias_max = 8.0;
  if (j.contains("config") && j["config"].contains("attn_config"))
    bias_max = j["config"]["attn_config"].value("alibi_bias_max", 8.0);
  POSENC_ASSIGN_OR_RETURN(std::vector<double> slopes, AlibiSlopes(heads, variant, bias_max));
  std::string checked;
  for (const std::string& role : c.OutputRoles()) {
    POSENC_ASSIGN_OR_RETURN(Array want, c.Read(role));
    if (role == "slopes") {
      // The reference holds float32 slopes: compare ours rounded the same way.
      std::vector<double> got32(slopes.size());
      for (size_t h = 0; h < slopes.size(); ++h) got32[h] = static_cast<float>(slopes[h]);
      POSENC_RETURN_IF_ERROR(Compare(role, got32, want, c.Tol(role, {0, kTwoUlpRtol})));
    } else if (role == "bias") {
      if (want.ndim() != 3 || want.dim(0) != heads)
        return DataLossError(fmt::format("bias shape {} is not [{}, Tq, Tk]", ShapeToString(want.shape()), heads));
      POSENC_ASSIGN_OR_RETURN(Array bias, AlibiBias(slopes, want.dim(1), want.dim(2)));
      const std::vector<double> got = ToDoubles(bias);
      POSENC_RETURN_IF_ERROR(Compare(role, got, want, c.Tol(role, {0, kTwoUlpRtol})));
    } else {
      return UnimplementedError(fmt::format("alibi case role '{}' is not known to this runner", role));
    }
    checked += role + " ";
  }
  return fmt::format("alibi {} {} heads: {}", variant_name, heads, checked);
}

Result<std::string> RunT5(const Case& c) {
  const json& j = c.j();
  const bool bidirectional = j.at("bidirectional").get<bool>();
  const int64_t num_buckets = j.at("num_buckets").get<int64_t>();
  const int64_t max_distance = j.at("max_distance").get<int64_t>();
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> rel, c.ReadInts("relative_positions"));
  const T5BucketParams params{bidirectional, num_buckets, max_distance};
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> got, T5RelativeBuckets(rel, params));
  std::string checked;
  for (const std::string& role : c.OutputRoles()) {
    if (role != "buckets")
      return UnimplementedError(fmt::format("t5 case role '{}' is not known to this runner", role));
    POSENC_ASSIGN_OR_RETURN(Array want, c.Read(role));
    POSENC_RETURN_IF_ERROR(CompareInts(role, got, want));
    checked += role + " ";
  }
  return fmt::format("t5_bucket {} {} buckets, max_distance {}: {}", bidirectional ? "bidirectional" : "causal",
                     num_buckets, max_distance, checked);
}

// --- attention temperature (Llama 4 NoPE layers) ----------------------------------------------

// The temperature parameters come from the config (read with the case's hf_model_type); the case's
// floor_scale / attn_scale and the NoPE-ness of its layer_index are checked against them.
Result<std::string> RunAttnTemperature(const Case& c) {
  const json& j = c.j();
  if (!j.contains("config") || !j["config"].is_object()) return DataLossError("case.json has no 'config' object");
  json config = j["config"];
  if (!config.contains("model_type") && j.contains("hf_model_type")) config["model_type"] = j["hf_model_type"];
  POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, ParseHfConfig(config.dump(), "case config"));
  const AttnTemperature& t = scheme.attn_temperature;
  if (!t.tuning)
    return InvalidArgumentError("case config: attention temperature tuning is off (or not a Llama 4 config)");
  for (const char* key : {"floor_scale", "attn_scale"}) {
    if (!j.contains(key)) continue;
    const double want = j[key].get<double>();
    const double got = std::string(key) == "floor_scale" ? t.floor_scale : t.attn_scale;
    if (got != want) return InvalidArgumentError(fmt::format("config gives {} {}, case says {}", key, got, want));
  }
  POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(scheme));
  if (j.contains("layer_index")) {
    const int64_t layer = j["layer_index"].get<int64_t>();
    if (!QueryTemperatureApplies(scheme, schedule, layer))
      return InvalidArgumentError(
          fmt::format("layer_index {}: the schedule ({}) gives no temperature there", layer, schedule.rule));
  }
  POSENC_ASSIGN_OR_RETURN(Array input, c.Read("input"));
  if (input.ndim() != 3)
    return DataLossError(fmt::format("input shape {} is not [T, H, D]", ShapeToString(input.shape())));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> positions, c.ReadInts("positions"));
  POSENC_ASSIGN_OR_RETURN(std::vector<float> scales, AttnTemperatureScales(t, positions));
  POSENC_ASSIGN_OR_RETURN(std::vector<double> exact, AttnTemperatureScalesExact(t, positions));
  // FORMAT.md's tolerances, for a case that states none: float32 math 8 * 2^-24, float64 math
  // 2^-30, times the largest scale (and the largest |x| for the queries).
  double max_scale = 1, max_x = 0;
  for (double s : exact) max_scale = std::max(max_scale, std::fabs(s));
  for (double x : ToDoubles(input)) max_x = std::max(max_x, std::fabs(x));
  const double f32_math = 8 * std::ldexp(max_scale, -24), f64_math = std::ldexp(max_scale, -30);
  std::string checked;
  for (const std::string& role : c.OutputRoles()) {
    POSENC_ASSIGN_OR_RETURN(Array want, c.Read(role));
    if (role == "attn_scales") {
      POSENC_RETURN_IF_ERROR(
          Compare(role, std::vector<double>(scales.begin(), scales.end()), want, c.Tol(role, {f32_math, 0})));
    } else if (role == "attn_scales_exact") {
      POSENC_RETURN_IF_ERROR(Compare(role, exact, want, c.Tol(role, {f64_math, 0})));
    } else if (role == "expected") {
      // The kernel, float32 storage and float32 scales (Hugging Face's product).
      POSENC_ASSIGN_OR_RETURN(Array q, input.AsType(DType::kF32));
      POSENC_ASSIGN_OR_RETURN(HeadsView view, HeadsView::Of(q, "input"));
      POSENC_RETURN_IF_ERROR(ApplyQueryTemperature(view, scales));
      POSENC_RETURN_IF_ERROR(Compare(role, ToDoubles(q), want, c.Tol(role, {f32_math * max_x, 0})));
    } else if (role == "expected_exact") {
      // float64 math: the input times the float64 scale, no storage rounding.
      std::vector<double> got = ToDoubles(input);
      const size_t per_token = static_cast<size_t>(input.dim(1) * input.dim(2));
      if (exact.size() * per_token != got.size())
        return DataLossError(
            fmt::format("positions has {} entries, input shape {}", exact.size(), ShapeToString(input.shape())));
      for (size_t i = 0; i < got.size(); ++i) got[i] *= exact[i / per_token];
      POSENC_RETURN_IF_ERROR(Compare(role, got, want, c.Tol(role, {f64_math * max_x, 0})));
    } else if (role == "layer_schedule") {
      POSENC_RETURN_IF_ERROR(CompareLayerSchedule(scheme, want));
    } else {
      return UnimplementedError(fmt::format("attn_temperature case role '{}' is not known to this runner", role));
    }
    checked += role + " ";
  }
  return fmt::format("attn_temperature floor_scale {} attn_scale {}, {} NoPE of {} layers: {}", t.floor_scale,
                     t.attn_scale, schedule.num_nope_layers(), schedule.num_layers(), checked);
}

}  // namespace

GoldenResult RunGoldenCase(const std::string& dir) {
  GoldenResult r;
  r.name = dir;
  Result<Case> c = Case::Load(dir);
  if (!c.ok()) {
    r.detail = c.status().ToString();
    return r;
  }
  const std::string scheme = c->j().value("scheme", std::string("(missing)"));
  Result<std::string> out = UnimplementedError(fmt::format("scheme '{}' is not supported by this runner", scheme));
  try {
    if (scheme == "rope")
      out = RunRope(*c);
    else if (scheme == "nope")
      out = RunNope(*c);
    else if (scheme == "attn_temperature")
      out = RunAttnTemperature(*c);
    else if (scheme == "sinusoidal")
      out = RunSinusoidal(*c);
    else if (scheme == "alibi")
      out = RunAlibi(*c);
    else if (scheme == "t5_bucket")
      out = RunT5(*c);
    else if (scheme == "mrope" || scheme == "rope_vision_2d")
      out = RunMultiAxis(*c);
  } catch (const json::exception& e) {  // a field of the wrong type in case.json
    out = DataLossError(fmt::format("case.json: {}", e.what()));
  }
  r.passed = out.ok();
  r.detail = out.ok() ? *out : out.status().ToString();
  return r;
}

}  // namespace posenc::golden
