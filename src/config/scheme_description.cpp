// DescribeSchemeJson: the scheme as the JSON object `posenc inspect` and the web explorer show.
#include "posenc/config/scheme_description.hpp"

#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/layer_schedule.hpp"
#include "posenc/math/rope_pairs.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_scaling_facts.hpp"

namespace posenc {
namespace {

using nlohmann::json;

// The parameters the scaling uses, as (key, value) pairs in the config's own words (ScalingParamsOf:
// its row's keys; an optional number or a list that may be empty is shown when given).
json ScalingParams(const RopeConfig& rc) {
  json p = json::object();
  for (const ScalingParam& param : ScalingParamsOf(rc)) {
    json& v = p[std::string(param.name)];
    switch (param.kind) {
      case ScalingKeyKind::kNumber:
      case ScalingKeyKind::kOptionalNumber: v = param.number; break;
      case ScalingKeyKind::kInteger: v = param.integer; break;
      case ScalingKeyKind::kBoolean: v = param.boolean; break;
      case ScalingKeyKind::kNumberList: v = param.list; break;
    }
  }
  return p;
}

// The per-layer table (LayerRopeSchedule, the family's rule): which layers have attention, which rotate
// (R) or not (N: NoPE; "-": no attention), the parameter set and head size of each.
json LayersJson(const PositionScheme& s, const LayerSchedule& schedule) {
  json layers;
  layers["count"] = schedule.num_layers();
  layers["rule"] = schedule.rule;
  layers["rope"] = std::vector<int>(schedule.rope.begin(), schedule.rope.end());
  layers["attention"] = std::vector<int>(schedule.attention.begin(), schedule.attention.end());
  layers["nope_layers"] = schedule.num_nope_layers();
  if (!s.rope_keys.empty()) {
    layers["rope_keys"] = s.rope_keys;
    layers["rope_key"] = schedule.rope_key;
  }
  if (s.full_attention_head_dim > 0 && s.full_attention_head_dim != s.layer_head_dim)
    layers["head_dim"] = schedule.head_dim;
  if (!s.layer_types.empty()) layers["types"] = s.layer_types;
  return layers;
}

// The fields of a scheme that is not RoPE (ALiBi, T5 buckets, absolute tables, none); false for RoPE.
Result<bool> DescribeNonRope(const PositionScheme& s, json* out) {
  json& o = *out;
  switch (s.kind) {
    case PositionKind::kAlibi:
      o["alibi_variant"] = s.alibi_variant;
      if (s.alibi_variant == "mpt") o["alibi_bias_max"] = s.alibi_bias_max;
      return true;
    case PositionKind::kT5Bucket:
      o["num_buckets"] = s.t5_num_buckets;
      o["max_distance"] = s.t5_max_distance;
      o["bidirectional"] = s.t5_bidirectional;
      return true;
    case PositionKind::kLearned:
    case PositionKind::kSinusoidal:
      o["max_position_embeddings"] = s.max_position_embeddings;
      if (!s.sinusoidal_layout.empty()) o["layout"] = s.sinusoidal_layout;
      return true;
    case PositionKind::kNone:
      // Layers with and without attention, none rotating (a hybrid model, or positions switched off).
      if (s.num_layers > 0) {
        POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(s));
        o["layers"] = LayersJson(s, schedule);
      }
      if (s.layer >= 0) o["layer"] = s.layer;
      return true;
    case PositionKind::kRope: break;
  }
  return false;
}

// Which RoPE was read: multi-axis sections, the spelling, layer type, site and set, the head's layout,
// the base and the scaling.
void DescribeRopeConfig(const PositionScheme& s, json* out) {
  json& o = *out;
  const RopeConfig& rc = s.rope;
  if (rc.multi_axis.has_value()) {
    json ma;
    ma["section_layout"] = std::string(ToString(rc.multi_axis->layout));
    ma["rules"] = std::string(ToString(rc.multi_axis->rules));
    ma["sections"] = rc.multi_axis->sections;
    ma["num_components"] = rc.multi_axis->num_components;
    o["multi_axis"] = ma;
  }
  o["spelling"] = s.rope_spelling;
  if (!s.rope_layer_types.empty()) {
    o["layer_types"] = s.rope_layer_types;
    o["layer_type"] = s.rope_layer_type;
  }
  if (!s.sites.empty()) {
    std::vector<std::string> sites;
    for (RotarySite site : s.sites) sites.emplace_back(ToString(site));
    o["sites"] = sites;
    o["site"] = std::string(ToString(s.site));
    o["rotation_sign"] = s.rotation_sign;
  }
  if (!s.rope_key.empty()) o["rope_key"] = s.rope_key;
  if (s.layer >= 0) o["layer"] = s.layer;
  o["layout"] = std::string(ToString(rc.layout.pairing));
  o["head_dim"] = rc.layout.head_dim;
  o["rotary_start"] = rc.layout.rotary_start;
  o["rotary_dim"] = rc.layout.rotary_dim;
  o["base"] = rc.base;
  if (rc.max_position_embeddings > 0) o["max_position_embeddings"] = rc.max_position_embeddings;
  o["scaling"] = std::string(ToString(rc.scaling.type));
  o["scaling_params"] = ScalingParams(rc);
  o["nominal_factor"] = NominalScalingFactor(rc);
  o["original_max_position_embeddings"] = rc.scaling.original_max_position_embeddings;
}

// Position-dependent query temperature (Llama 4 on NoPE layers; Ministral 3 on every layer), with the
// layers it applies to when there is a layer table.
json QueryTemperatureJson(const PositionScheme& s, const std::optional<LayerSchedule>& schedule) {
  const AttnTemperature& t = s.attn_temperature;
  json qt;
  qt["formula"] =
      fmt::format("1 + {} * ln(1 + floor((p{}) / {}))", t.attn_scale, t.offset ? " + 1" : "", t.floor_scale);
  qt["attn_scale"] = t.attn_scale;
  qt["floor_scale"] = t.floor_scale;
  qt["offset"] = t.offset;
  qt["on"] = t.every_layer ? "every layer" : "NoPE layers";
  if (schedule.has_value()) {
    std::vector<int> applies;
    for (int64_t i = 0; i < schedule->num_layers(); ++i) applies.push_back(QueryTemperatureApplies(s, *schedule, i));
    qt["layers"] = applies;
  }
  return qt;
}

// Each pair of the table: dims, frequency, wavelength (null when unrotated), divisor, regime, component.
json PairsJson(const RopePairTable& table) {
  json pairs = json::array();
  for (const RopePairInfo& q : table.pairs) {
    json p;
    p["pair"] = q.pair;
    p["dims"] = {q.first_dim, q.second_dim};
    p["frequency"] = q.frequency;
    // JSON has no infinity: an unrotated pair's wavelength is null.
    if (q.wavelength)
      p["wavelength"] = *q.wavelength;
    else
      p["wavelength"] = nullptr;
    if (q.divisor) p["divisor"] = *q.divisor;
    p["regime"] = std::string(ToString(q.regime));
    if (q.component >= 0) p["component"] = q.component;
    pairs.push_back(p);
  }
  return pairs;
}

// Everything `inspect` reports, as JSON (the text form is printed from it).
Result<json> Describe(const PositionScheme& s, const std::string& path, int64_t seq_len_opt) {
  json out;
  out["source"] = path;
  out["scheme"] = std::string(ToString(s.kind));
  if (!s.model_type.empty()) out["model_type"] = s.model_type;
  if (s.num_heads > 0) out["num_heads"] = s.num_heads;
  if (s.num_kv_heads > 0) out["num_kv_heads"] = s.num_kv_heads;
  if (s.hidden_size > 0) out["hidden_size"] = s.hidden_size;
  if (s.fused_qkv != FusedQkvLayout::kNone) out["fused_qkv"] = std::string(ToString(s.fused_qkv));
  out["qk_norm"] = std::string(ToString(s.qk_norm));  // the family row's QK-norm before RoPE
  out["notes"] = s.notes;
  POSENC_ASSIGN_OR_RETURN(const bool described, DescribeNonRope(s, &out));
  if (described) return out;
  const RopeConfig& rc = s.rope;
  int64_t seq_len = seq_len_opt;
  if (seq_len < 0) {
    seq_len = rc.max_position_embeddings;
    out["seq_len_note"] = rc.max_position_embeddings > 0 ? "no --seq-len: max_position_embeddings used"
                                                         : "no --seq-len and no max_position_embeddings: 0 used";
  }
  // Each pair at this length: DescribeRopePairs, the library's one table (Python's Scheme.pairs reads it too).
  POSENC_ASSIGN_OR_RETURN(const RopePairTable table, DescribeRopePairs(rc, seq_len));
  DescribeRopeConfig(s, &out);
  out["seq_len"] = seq_len;
  out["attention_scaling"] = table.attention_scaling;
  // The per-layer table (LayerRopeSchedule, the family's rule): which layers rotate, which are NoPE.
  std::optional<LayerSchedule> schedule;
  if (s.num_layers > 0) {
    POSENC_ASSIGN_OR_RETURN(schedule, LayerRopeSchedule(s));
    out["layers"] = LayersJson(s, *schedule);
  }
  if (s.attn_temperature.tuning) out["query_temperature"] = QueryTemperatureJson(s, schedule);
  out["pairs"] = PairsJson(table);
  // Each pair's wavelength without the scaling (2 pi / base^(-2i/R)), the explorer's reference line.
  std::vector<double> unscaled;
  for (double w : UnscaledFrequencies(rc)) unscaled.push_back(2.0 * std::numbers::pi / w);
  out["unscaled_wavelengths"] = unscaled;
  return out;
}

}  // namespace

Result<std::string> DescribeSchemeJson(const PositionScheme& scheme, const std::string& source, int64_t seq_len) {
  POSENC_ASSIGN_OR_RETURN(json d, Describe(scheme, source, seq_len));
  return d.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace posenc
