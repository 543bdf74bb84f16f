// Hugging Face config.json, RoPE: the parameter set, its scaling row and keys, the family's keys.
#include "config/hf_rope_params.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/model_families.hpp"
#include "posenc/core/message.hpp"
#include "config/config_json.hpp"
#include "config/hf_config_internal.hpp"
#include "config/hf_rope_dims.hpp"
#include "config/json_util.hpp"
#include "config/multi_axis_json.hpp"
#include "math/rope_scaling_table.hpp"

namespace posenc::hf_json {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {

Result<RopeSource> SelectRopeParams(const json& j, const std::string& source, const HfConfigOptions& options,
                                    PositionScheme* s) {
  RopeSource r;
  if (Has(j, "rope_parameters")) {
    if (!j["rope_parameters"].is_object())
      return KeyError(source, "rope_parameters",
                      fmt::format("is {}, expected an object", JsonForMessage(j["rope_parameters"])));
    r.params = &j["rope_parameters"];
    r.spelling = "rope_parameters";
  } else if (Has(j, "rope_scaling")) {
    if (!j["rope_scaling"].is_object())
      return KeyError(source, "rope_scaling",
                      fmt::format("is {}, expected an object or null", JsonForMessage(j["rope_scaling"])));
    r.params = &j["rope_scaling"];
    r.spelling = "rope_scaling";
  }
  // Nested per-layer-type form: every value an object, keys are layer types.
  if (r.params != nullptr && !r.params->empty()) {
    bool nested = true;
    for (auto it = r.params->begin(); it != r.params->end(); ++it)
      if (!it.value().is_object()) nested = false;
    if (nested) {
      std::set<std::string> declared;
      if (Has(j, "layer_types") && j["layer_types"].is_array())
        for (const auto& t : j["layer_types"])
          if (t.is_string()) declared.insert(t.get<std::string>());
      for (auto it = r.params->begin(); it != r.params->end(); ++it) {
        s->rope_layer_types.push_back(it.key());
        if (!declared.empty() && declared.count(it.key()) == 0)
          s->notes.push_back(fmt::format("rope_parameters entry '{}' is not one of layer_types", it.key()));
      }
      std::string pick = options.layer_type;
      if (pick.empty()) {
        pick = r.params->contains("full_attention") ? "full_attention" : s->rope_layer_types.front();
        if (s->rope_layer_types.size() > 1)
          s->notes.push_back(
              fmt::format("nested rope_parameters: '{}' described (others: choose with the layer type option)", pick));
      }
      if (!r.params->contains(pick)) {
        std::string have;
        for (const auto& t : s->rope_layer_types) have += (have.empty() ? "" : ", ") + t;
        return NotFoundError(
            fmt::format("config {}: layer type '{}' is not in {} (it has: {})", source, pick, r.spelling, have));
      }
      s->rope_layer_type = pick;
      if (s->rope_keys.empty()) s->rope_keys = s->rope_layer_types;
      s->rope_key = pick;
      r.params = &(*r.params)[pick];
      r.spelling += "." + pick;
    }
  }
  if (s->rope_layer_types.empty() && !options.layer_type.empty()) {
    // (Gemma 3's legacy spelling, rope_local_base_freq for the sliding layers, is its parameter sets:
    // SiteView.) One RoPE section: a layer type the config declares takes it (OLMo 3's sliding layers without its
    // scaling); one it does not declare is refused naming those it does.
    std::vector<std::string> declared;
    for (const std::string& t : s->layer_types)
      if (std::find(declared.begin(), declared.end(), t) == declared.end()) declared.push_back(t);
    const bool known = std::find(declared.begin(), declared.end(), options.layer_type) != declared.end() ||
                       (declared.empty() && options.layer_type == "full_attention");
    if (!known) {
      std::string have;
      for (const auto& t : declared) have += (have.empty() ? "" : ", ") + t;
      return NotFoundError(
          declared.empty()
              ? fmt::format("config {}: layer type '{}' requested but the config declares no layer_types (one RoPE "
                            "for all layers)",
                            source, options.layer_type)
              : fmt::format("config {}: layer type '{}' is not one of the config's layer_types ({})", source,
                            options.layer_type, have));
    }
    s->rope_layer_types = declared;
    s->rope_layer_type = options.layer_type;
    const ModelFamily* family = FamilyOf(*s);
    if (family != nullptr && family->layer_rule == LayerRule::kScalingOnFullLayersOnly &&
        options.layer_type != "full_attention") {
      r.plain_type = true;
      Note(s, fmt::format("{}: {} layers take plain RoPE; {} applies to full_attention layers only", s->model_type,
                          options.layer_type, r.params != nullptr ? r.spelling : "the scaling"));
    } else if (declared.size() > 1) {
      Note(s, fmt::format("layer type '{}': the config has one RoPE for every layer type", options.layer_type));
    }
  }
  return r;
}

// The scaling's row, from rope_type (or type); the sliding layers of Gemma 3's legacy spelling are
// plain RoPE.
Result<const RopeScalingSpec*> ReadScalingType(const json& p, const RopeSource& src,
                                               const std::string& source, PositionScheme* s, std::string* type) {
  *type = "default";
  std::string type_key;
  if (Has(p, "rope_type"))
    type_key = "rope_type";
  else if (Has(p, "type"))
    type_key = "type";
  if (!type_key.empty()) {
    if (!p[type_key].is_string())
      return KeyError(source, type_key, fmt::format("is {}, expected a string", JsonForMessage(p[type_key])));
    *type = p[type_key].get<std::string>();
    if (type_key == "rope_type" && Has(p, "type") && p["type"].is_string() && p["type"].get<std::string>() != *type)
      Note(s, fmt::format("rope_type '{}' and type '{}' disagree: rope_type used (as Hugging Face)", *type,
                          p["type"].get<std::string>()));
  }
  if (src.plain_type) *type = "default";
  const ScalingSpelling* spelling = nullptr;
  const RopeScalingSpec* row = FindRopeScaling(*type, &spelling);
  if (row == nullptr) {
    std::string known;  // every row's Hugging Face name, old names left out
    for (const RopeScalingSpec& r : RopeScalings())
      if (!r.spellings.empty()) known += (known.empty() ? "" : ", ") + std::string(r.spellings.front().name);
    return UnimplementedError(
        fmt::format("config {}: key '{}' = '{}' is not a rope type posenc knows ({})", source, type_key, *type, known));
  }
  if (!spelling->note.empty()) Note(s, std::string(spelling->note));
  s->rope.scaling.type = row->type;
  return row;
}

// original_max_position_embeddings, for the rows that have it: Phi-3 keeps it at the top level,
// where Hugging Face prefers it; else the rope parameters; else max_position_embeddings (noted).
Status ReadOriginalLength(const json& j, const json& p, const RopeSource& src, const RopeScalingSpec& row,
                          const std::string& type, const std::string& source, PositionScheme* s) {
  const RopeScalingKey* key = FindScalingKey(row, "original_max_position_embeddings");
  if (key == nullptr) return OkStatus();
  RopeConfig& rc = s->rope;
  RopeScaling& sc = rc.scaling;
  const bool top = Has(j, "original_max_position_embeddings");
  const bool inner = Has(p, "original_max_position_embeddings");
  if (top) {
    POSENC_ASSIGN_OR_RETURN(sc.original_max_position_embeddings, GetInt(j, "original_max_position_embeddings", source));
    if (inner) {
      POSENC_ASSIGN_OR_RETURN(int64_t v, GetInt(p, "original_max_position_embeddings", source));
      if (v != sc.original_max_position_embeddings)
        Note(s, fmt::format("original_max_position_embeddings {} at the top level wins over {} in {} (as Hugging Face)",
                            sc.original_max_position_embeddings, v, src.spelling));
    }
  } else if (inner) {
    POSENC_ASSIGN_OR_RETURN(sc.original_max_position_embeddings, GetInt(p, "original_max_position_embeddings", source));
  } else {
    if (rc.max_position_embeddings <= 0)
      return KeyError(source, "original_max_position_embeddings",
                      fmt::format("is missing for rope type '{}' and there is no max_position_embeddings", type));
    sc.original_max_position_embeddings = rc.max_position_embeddings;
    Note(s, fmt::format("no original_max_position_embeddings: max_position_embeddings {} used (Hugging Face's default)",
                        rc.max_position_embeddings));
  }
  // Checked here already: an inferred factor divides by it.
  return CheckRopeScalingKey(rc, *key);
}

// factor: read (and checked, for every type), required, inferred from the lengths (yarn, longrope) or 1.
Status ReadFactor(const json& p, const RopeScalingSpec& row, const std::string& type, const std::string& source,
                  PositionScheme* s) {
  RopeConfig& rc = s->rope;
  RopeScaling& sc = rc.scaling;
  const RopeScalingKey* key = FindScalingKey(row, "factor");
  if (Has(p, "factor")) {
    POSENC_ASSIGN_OR_RETURN(sc.factor, GetNumber(p, "factor", source));
    // A row without a factor (default) still refuses a bad one, by the rule every factor has.
    POSENC_RETURN_IF_ERROR(CheckRopeScalingKey(
        rc, key != nullptr ? *key : *FindScalingKey(RopeScalingOf(RopeScalingType::kLinear), "factor")));
    if (sc.factor < 1.0 && sc.type != RopeScalingType::kNone)
      Note(s, fmt::format("factor {} < 1 shortens the context (Hugging Face warns)", sc.factor));
  } else if (key != nullptr && key->read == ScalingKeyRead::kRequired) {
    return KeyError(source, "factor", fmt::format("is missing (rope type '{}' requires it)", type));
  } else if (key != nullptr && key->read == ScalingKeyRead::kInferred) {
    if (rc.max_position_embeddings <= 0)
      return KeyError(
          source, "factor",
          fmt::format("is missing for rope type '{}' and there is no max_position_embeddings to infer it", type));
    sc.factor =
        static_cast<double>(rc.max_position_embeddings) / static_cast<double>(sc.original_max_position_embeddings);
    Note(s,
         fmt::format(
             "no factor: max_position_embeddings / original_max_position_embeddings = {} / {} = {} used (Hugging Face)",
             rc.max_position_embeddings, sc.original_max_position_embeddings, sc.factor));
  } else {
    sc.factor = 1.0;
  }
  return OkStatus();
}

// Every other key of the row the rope parameters give (kOptional, kRequired), by its kind; range
// rules are ValidateRopeConfig's.
Status ReadRowKeys(const json& p, const RopeScalingSpec& row, const std::string& type, const std::string& source,
                   RopeConfig* rc) {
  for (const RopeScalingKey& k : row.keys) {
    if (k.name == "factor" || (k.read != ScalingKeyRead::kOptional && k.read != ScalingKeyRead::kRequired)) continue;
    POSENC_ASSIGN_OR_RETURN(bool present, config_json::ReadScalingKey(p, k, source, rc));
    if (!present && k.read == ScalingKeyRead::kRequired)
      return KeyError(source, k.name, fmt::format("is missing (rope type '{}' requires it)", type));
  }
  return OkStatus();
}

// What Hugging Face does silently or with a warning, for the values read.
void ScalingNotes(const json& p, PositionScheme* s) {
  const RopeConfig& rc = s->rope;
  const RopeScaling& sc = rc.scaling;
  if (sc.type == RopeScalingType::kDynamicNtk && Has(p, "original_max_position_embeddings"))
    Note(s,
         "dynamic NTK: Hugging Face ignores original_max_position_embeddings and scales from max_position_embeddings");
  if (sc.type == RopeScalingType::kYarn) {
    if (sc.beta_fast == sc.beta_slow)
      Note(s,
           fmt::format("yarn: beta_fast = beta_slow = {}: a one-pair ramp (Hugging Face computes it)", sc.beta_fast));
    if (sc.attention_factor.has_value() && (sc.mscale.has_value() || sc.mscale_all_dim.has_value()))
      Note(s, "yarn: attention_factor given, so mscale / mscale_all_dim are ignored (as Hugging Face)");
    else if (sc.mscale.has_value() != sc.mscale_all_dim.has_value() ||
             (sc.mscale.has_value() && (*sc.mscale == 0 || *sc.mscale_all_dim == 0)))
      Note(s,
           "yarn: mscale without a non-zero mscale_all_dim (or the reverse) is ignored: 0.1 ln(factor) + 1 used "
           "(Hugging Face)");
    if (rc.max_position_embeddings > 0 && Has(p, "factor") &&
        rc.max_position_embeddings != sc.original_max_position_embeddings) {
      const double implicit =
          static_cast<double>(rc.max_position_embeddings) / static_cast<double>(sc.original_max_position_embeddings);
      if (implicit != sc.factor)
        Note(s,
             fmt::format(
                 "yarn: factor {} differs from max_position_embeddings / original = {}; factor used (as Hugging Face)",
                 sc.factor, implicit));
    }
  }
  if (sc.type == RopeScalingType::kLlama3 && sc.high_freq_factor == sc.low_freq_factor)
    Note(s, fmt::format("llama3: low_freq_factor = high_freq_factor = {}: no smooth band, wavelengths past {} / {} "
                        "divided by factor, the rest kept (Hugging Face warns and computes it)",
                        sc.low_freq_factor, sc.original_max_position_embeddings, sc.low_freq_factor));
}

// Family keys read after the scaling: a position multiplier (Phi-3-small's rope_position_scale, a
// linear scaling by 1 / scale) and a key selecting code posenc does not implement.
Status ReadFamilyKeys(const json& j, const std::string& source, PositionScheme* s) {
  const ModelFamily* family = FamilyOf(*s);
  if (family == nullptr) return OkStatus();
  if (!family->refused_key.empty() && Has(j, family->refused_key)) {
    const json& v = j[std::string(family->refused_key)];
    POSENC_ASSIGN_OR_RETURN(const bool on, GetFlag(j, family->refused_key, source));
    if (on)
      return UnimplementedError(fmt::format("config {}: key '{}' = {}: {} with it is not implemented ({})", source,
                                            family->refused_key, JsonForMessage(v), family->model_type,
                                            family->source));
  }
  if (!family->dynamic_ntk_key.empty() && Has(j, family->dynamic_ntk_key)) {
    // Qwen 1.0: use_dynamic_ntk scales the base past seq_length (rope scaling qwen_dynamic_ntk).
    const std::string k(family->dynamic_ntk_key);
    POSENC_ASSIGN_OR_RETURN(const bool on, GetBool(j, k, source));
    RopeScaling& sc = s->rope.scaling;
    if (on && sc.type != RopeScalingType::kNone)
      return UnimplementedError(
          fmt::format("config {}: key '{}' = true together with rope scaling '{}' is not "
                      "implemented",
                      source, k, ToString(sc.type)));
    if (on) {
      if (!Has(j, "seq_length"))
        return KeyError(source, "seq_length", fmt::format("is missing ({} = true scales past it)", k));
      POSENC_ASSIGN_OR_RETURN(sc.original_max_position_embeddings, GetInt(j, "seq_length", source));
      if (sc.original_max_position_embeddings <= 0)
        return KeyError(source, "seq_length", fmt::format("is {}, must be > 0", sc.original_max_position_embeddings));
      sc.type = RopeScalingType::kQwenDynamicNtk;
      Note(s, fmt::format("{} = true: dynamic NTK past seq_length {}: base * alpha^(R/(R-2)), alpha = "
                          "max(2^ceil(log2(L / {}) + 1) - 1, 1) at sequence length L ({}; Qwen fixes alpha at the "
                          "prefill length, so pass that length)",
                          k, sc.original_max_position_embeddings, sc.original_max_position_embeddings, family->source));
    }
    if (Has(j, "use_logn_attn") && j["use_logn_attn"].is_boolean() && j["use_logn_attn"].get<bool>())
      Note(s,
           "use_logn_attn = true: Qwen also scales queries past seq_length by log(position + 1) / "
           "log(seq_length); posenc does not apply it");
  }
  if (family->position_scale_key.empty() || !Has(j, family->position_scale_key)) return OkStatus();
  const std::string k(family->position_scale_key);
  POSENC_ASSIGN_OR_RETURN(const double scale, GetNumber(j, k, source));
  if (!(scale > 0) || !std::isfinite(scale))
    return KeyError(source, k, fmt::format("is {}, must be finite and positive", scale));
  if (scale == 1.0) return OkStatus();
  RopeScaling& sc = s->rope.scaling;
  if (sc.type != RopeScalingType::kNone)
    return UnimplementedError(fmt::format("config {}: key '{}' = {} together with rope scaling '{}' is not implemented",
                                          source, k, scale, ToString(sc.type)));
  sc.type = RopeScalingType::kLinear;
  sc.factor = 1.0 / scale;
  Note(s, fmt::format("{} {}: positions times {}, i.e. linear scaling by factor {} ({})", k, scale, scale, sc.factor,
                      family->source));
  return OkStatus();
}

}  // namespace

Status ParseRope(const json& j, const std::string& source, const HfConfigOptions& options,
                 std::optional<RopePairing> site_pairing, PositionScheme* s) {
  RopeConfig& rc = s->rope;
  rc.source = source;
  POSENC_ASSIGN_OR_RETURN(RopeSource src, SelectRopeParams(j, source, options, s));
  s->rope_spelling = src.spelling;
  static const json kEmpty = json::object();
  const json& p = src.params != nullptr ? *src.params : kEmpty;
  std::string type;
  POSENC_ASSIGN_OR_RETURN(const RopeScalingSpec* row, ReadScalingType(p, src, source, s, &type));
  POSENC_ASSIGN_OR_RETURN(RopeDims dims, ReadDims(j, source, s));
  POSENC_RETURN_IF_ERROR(ReadRotaryLayout(j, p, src, source, dims, options.assume_layout, site_pairing, s));
  POSENC_RETURN_IF_ERROR(ReadBaseAndLength(j, p, source, s));
  POSENC_RETURN_IF_ERROR(ReadOriginalLength(j, p, src, *row, type, source, s));
  POSENC_RETURN_IF_ERROR(ReadFactor(p, *row, type, source, s));
  POSENC_RETURN_IF_ERROR(ReadRowKeys(p, *row, type, source, &rc));
  // Hunyuan (modeling_hunyuan_v1_dense.py, vLLM's DynamicNTKAlphaRotaryEmbedding): a dynamic rope_scaling
  // with an `alpha` is NTK-alpha, base * alpha^(R/(R-2)) at every length up to max_position_embeddings:
  // static NTK with factor alpha.
  if (rc.scaling.type == RopeScalingType::kDynamicNtk && Has(p, "alpha")) {
    POSENC_ASSIGN_OR_RETURN(const double alpha, GetNumber(p, "alpha", source));
    if (!(alpha > 0) || !std::isfinite(alpha))
      return KeyError(source, "alpha", fmt::format("is {}, must be finite and positive", alpha));
    rc.scaling.type = RopeScalingType::kNtk;
    rc.scaling.factor = alpha;
    Note(s, fmt::format("{}.alpha {}: NTK-alpha, base {} * alpha^(R/(R-2)) (Hunyuan's DynamicNTKAlpha); past "
                        "max_position_embeddings transformers' dynamic update recomputes from rope_theta instead",
                        src.spelling, alpha, rc.base));
  }
  ScalingNotes(p, s);
  POSENC_RETURN_IF_ERROR(ReadFamilyKeys(j, source, s));
  // M-RoPE (mrope_section; the section layout by model_type): multi_axis_config.cpp.
  POSENC_RETURN_IF_ERROR(multi_axis_json::ReadHfMultiAxis(j, p, source, s));
  // The row's range rules and the frequencies, checked once; ComputeRopeFrequencies trusts the record.
  return ValidateRopeConfig(rc);
}

}  // namespace posenc::hf_json
