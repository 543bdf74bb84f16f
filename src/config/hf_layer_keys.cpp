// Hugging Face config.json: the per-layer keys (the layer schedule's inputs) and Llama 4's temperature.
#include "config/hf_layer_keys.hpp"

#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/layer_schedule.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/core/message.hpp"
#include "config/hf_config_internal.hpp"
#include "config/json_util.hpp"

namespace posenc::hf_json {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {

// Ministral 3 / Mistral 4 (modeling_ministral3.py get_llama_4_attn_scale): every layer's queries times
// 1 + beta * log(1 + floor(position / original_max_position_embeddings)), both read from the rope
// parameters (rope_parameters, or rope_scaling in older spellings). Without the key there is no scale.
Status ParseScalingBeta(const json& j, const std::string& source, PositionScheme* s) {
  for (const char* spelling : {"rope_parameters", "rope_scaling"}) {
    if (!Has(j, spelling) || !j[spelling].is_object() || !Has(j[spelling], "llama_4_scaling_beta")) continue;
    const json& p = j[spelling];
    const std::string where = fmt::format("{} ({})", source, spelling);
    AttnTemperature& t = s->attn_temperature;
    t = AttnTemperature{.tuning = true, .offset = 0, .every_layer = true};
    POSENC_ASSIGN_OR_RETURN(t.attn_scale, GetNumber(p, "llama_4_scaling_beta", where));
    if (!Has(p, "original_max_position_embeddings"))
      return KeyError(where, "original_max_position_embeddings",
                      "is missing: llama_4_scaling_beta scales queries by steps of it (get_llama_4_attn_scale)");
    POSENC_ASSIGN_OR_RETURN(t.floor_scale, GetNumber(p, "original_max_position_embeddings", where));
    if (Status st = ValidateAttnTemperature(t); !st.ok())
      return InvalidArgumentError(fmt::format("config {}: {}", where, st.message()));
    return OkStatus();
  }
  return OkStatus();
}

// The family's own keys that SiteView reads only for the layer or site asked for (MiMo-V2's
// swa_rope_theta, DeepSeek-V4's compress_rope_theta, the DSA / V4 indexer's index_head_dim): checked for
// every config, whichever layer and site it is read for, and named as the config spells them (SiteView
// hands their values on under the generic names).
Status CheckFamilyKeyTypes(const json& j, const std::string& source, const ModelFamily& f) {
  if (f.layer_types_rule == LayerTypesRule::kHybridLayerPattern && Has(j, "swa_rope_theta")) {
    POSENC_ASSIGN_OR_RETURN(const double base, GetNumber(j, "swa_rope_theta", source));
    if (!(base > 0)) return KeyError(source, "swa_rope_theta", fmt::format("is {}, must be positive", base));
  }
  if (f.keying == RopeKeying::kMainCompress && Has(j, "compress_rope_theta")) {
    POSENC_ASSIGN_OR_RETURN(const double base, GetNumber(j, "compress_rope_theta", source));
    if (!(base > 0)) return KeyError(source, "compress_rope_theta", fmt::format("is {}, must be positive", base));
  }
  if ((f.site_rule == SiteRule::kDsa || f.site_rule == SiteRule::kDeepseekV4) && Has(j, "index_head_dim")) {
    POSENC_ASSIGN_OR_RETURN(const int64_t head, GetInt(j, "index_head_dim", source));
    if (head <= 0) return KeyError(source, "index_head_dim", fmt::format("is {}, must be positive", head));
  }
  return OkStatus();
}

// ---------- layer types the family derives (LayerTypesRule), one helper a rule ----------

// Gemma 4: every 6th layer full where the config lists none; the last layer always full.
void Gemma4LayerTypes(PositionScheme* s) {
  std::vector<std::string>& types = s->layer_types;
  if (types.empty())
    for (int64_t i = 0; i < s->num_layers; ++i)
      types.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  if (!types.empty() && types.back() != "full_attention") {
    Note(s, fmt::format("{}: the last layer is always full_attention (layer_types[{}] was '{}')", s->model_type,
                        types.size() - 1, types.back()));
    types.back() = "full_attention";
  }
}

// The config class's __post_init__: layer_types, else one full layer every `period`, the rest sliding.
void PeriodicLayerTypes(const ModelFamily& family, PositionScheme* s) {
  const int64_t n = s->num_layers;
  std::vector<std::string>& types = s->layer_types;
  if (!types.empty()) return;
  const bool from_key =
      family.layer_types_rule == LayerTypesRule::kSlidingWindowPattern && s->sliding_window_pattern > 0;
  const int64_t period = from_key ? s->sliding_window_pattern : family.full_layer_period;
  if (period <= 0) return;
  for (int64_t i = 0; i < n; ++i) types.push_back((i + 1) % period == 0 ? "full_attention" : "sliding_attention");
  if (n > 0)
    Note(s, fmt::format("{}: no layer_types: every {}th layer full_attention, the others sliding_attention ({})",
                        s->model_type, period, from_key ? "sliding_window_pattern" : "the config class's default"));
}

// DeepSeek-V4's compress_ratios: 0 sliding, 4 compressed sparse, 128 heavily compressed; entries past
// num_hidden_layers (MTP) are not layers.
Status CompressRatioLayerTypes(const json& j, const std::string& source, PositionScheme* s) {
  const int64_t n = s->num_layers;
  std::vector<std::string>& types = s->layer_types;
  if (!types.empty() || !Has(j, "compress_ratios")) return OkStatus();
  POSENC_ASSIGN_OR_RETURN(const json* list, FindList(j, "compress_ratios", source, "a list of integers"));
  const json& r = *list;
  if (static_cast<int64_t>(r.size()) < n)
    return KeyError(source, "compress_ratios", fmt::format("has {} entries, num_hidden_layers is {}", r.size(), n));
  for (int64_t i = 0; i < n; ++i) {
    const json& v = r[static_cast<size_t>(i)];
    const int64_t ratio = v.is_number_integer() ? v.get<int64_t>() : -1;
    if (ratio == 0)
      types.push_back("sliding_attention");
    else if (ratio == 4)
      types.push_back("compressed_sparse_attention");
    else if (ratio == 128)
      types.push_back("heavily_compressed_attention");
    else
      return KeyError(source, fmt::format("compress_ratios[{}]", i),
                      fmt::format("is {}, {} knows 0, 4 and 128", JsonForMessage(v), s->model_type));
  }
  if (static_cast<int64_t>(r.size()) > n)
    Note(s, fmt::format("compress_ratios has {} entries: the {} after num_hidden_layers {} (MTP) are not layers",
                        r.size(), static_cast<int64_t>(r.size()) - n, n));
  return OkStatus();
}

// Nemotron-H's hybrid_override_pattern (M mamba, E moe, - mlp, * attention), or its transformers 5
// spelling layers_block_type, a list of the layer kinds.
Status HybridOverrideLayerTypes(const json& j, const std::string& source, PositionScheme* s) {
  const int64_t n = s->num_layers;
  std::vector<std::string>& types = s->layer_types;
  // transformers 5 spells them as layer kinds: keep, naming the attention ones as such.
  if (!types.empty()) return OkStatus();
  if (Has(j, "layers_block_type")) {
    POSENC_ASSIGN_OR_RETURN(const json* list, FindList(j, "layers_block_type", source, "a list of strings"));
    const json& t = *list;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string())
        return ExpectedError(source, fmt::format("layers_block_type[{}]", i), t[i], "a string");
      types.push_back(t[i].get<std::string>());
    }
  } else if (Has(j, "hybrid_override_pattern")) {
    POSENC_ASSIGN_OR_RETURN(const std::string pattern, GetString(j, "hybrid_override_pattern", source));
    for (size_t i = 0; i < pattern.size(); ++i) {
      switch (pattern[i]) {
        case 'M': types.push_back("mamba"); break;
        case 'E': types.push_back("moe"); break;
        case '-': types.push_back("mlp"); break;
        case '*': types.push_back("attention"); break;
        default:
          return KeyError(source, "hybrid_override_pattern",
                          fmt::format("has {} at index {}: M (mamba), E (moe), - (mlp) and * (attention) are known",
                                      QuoteForMessage(std::string(1, pattern[i])), i));
      }
    }
  }
  if (!types.empty() && n > 0 && static_cast<int64_t>(types.size()) != n)
    return KeyError(source, Has(j, "layers_block_type") ? "layers_block_type" : "hybrid_override_pattern",
                    fmt::format("names {} layers, num_hidden_layers is {}", types.size(), n));
  return OkStatus();
}

// MiMo-V2's hybrid_layer_pattern: 1 sliding, 0 full.
Status HybridLayerPatternTypes(const json& j, const std::string& source, PositionScheme* s) {
  std::vector<std::string>& types = s->layer_types;
  if (!types.empty() || !Has(j, "hybrid_layer_pattern")) return OkStatus();
  POSENC_ASSIGN_OR_RETURN(const json* list, FindList(j, "hybrid_layer_pattern", source, "a list of 0 and 1"));
  const json& t = *list;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].is_number_integer() || (t[i].get<int64_t>() != 0 && t[i].get<int64_t>() != 1))
      return ExpectedError(source, fmt::format("hybrid_layer_pattern[{}]", i), t[i], "0 (full) or 1 (sliding)");
    types.push_back(t[i].get<int64_t>() == 1 ? "sliding_attention" : "full_attention");
  }
  return OkStatus();
}

// Kimi Linear's linear_attn_config.kda_layers (1-based): linear attention there, full attention elsewhere.
Status KdaLayerTypes(const json& j, const std::string& source, PositionScheme* s) {
  const int64_t n = s->num_layers;
  std::vector<std::string>& types = s->layer_types;
  if (!types.empty() || !Has(j, "linear_attn_config")) return OkStatus();
  const json& cfg = j["linear_attn_config"];
  if (!cfg.is_object())
    return ExpectedError(source, "linear_attn_config", cfg, "an object (kda_layers, full_attn_layers)");
  const std::string where = source + " (linear_attn_config)";
  types.assign(static_cast<size_t>(n), "full_attention");
  POSENC_ASSIGN_OR_RETURN(const json* list, FindList(cfg, "kda_layers", where, "a list of layer numbers"));
  if (list == nullptr) return OkStatus();
  const json& t = *list;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].is_number_integer() || t[i].get<int64_t>() < 1 || t[i].get<int64_t>() > n)
      return ExpectedError(where, fmt::format("kda_layers[{}]", i), t[i],
                           fmt::format("a 1-based layer number in [1, {}]", n));
    types[static_cast<size_t>(t[i].get<int64_t>() - 1)] = "linear_attention";
  }
  return OkStatus();
}

// The type of every decoder layer where the family derives it from keys other than layer_types
// (LayerTypesRule, model_families.hpp). Types of layers without attention are named as
// LayerTypeHasAttention knows them ("mamba", "moe", "mlp", "linear_attention").
Status DeriveLayerTypes(const json& j, const std::string& source, const ModelFamily& family, PositionScheme* s) {
  switch (family.layer_types_rule) {
    case LayerTypesRule::kConfigOnly: return OkStatus();
    case LayerTypesRule::kGemma4Pattern: Gemma4LayerTypes(s); return OkStatus();
    case LayerTypesRule::kSlidingWindowPattern:
    case LayerTypesRule::kEveryNthFull: PeriodicLayerTypes(family, s); return OkStatus();
    case LayerTypesRule::kMambaUnlessListed:
      if (s->layer_types.empty() && s->num_layers > 0) {
        s->layer_types.assign(static_cast<size_t>(s->num_layers), "mamba");
        Note(s, fmt::format("{}: no layer_types: every layer is a Mamba-2 mixer (the config class's default)",
                            s->model_type));
      }
      return OkStatus();
    case LayerTypesRule::kCompressRatios: return CompressRatioLayerTypes(j, source, s);
    case LayerTypesRule::kHybridOverride: return HybridOverrideLayerTypes(j, source, s);
    case LayerTypesRule::kHybridLayerPattern: return HybridLayerPatternTypes(j, source, s);
    case LayerTypesRule::kKdaLayers: return KdaLayerTypes(j, source, s);
  }
  return OkStatus();
}

// ---------- the keys every config may have ----------

// num_hidden_layers (or its other spellings) and layer_types as listed.
Status ReadLayerCountAndTypes(const json& j, const std::string& source, PositionScheme* s) {
  if (std::string k = FirstKey(j, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}); !k.empty()) {
    POSENC_ASSIGN_OR_RETURN(s->num_layers, GetInt(j, k, source));
    if (s->num_layers <= 0 || s->num_layers > kMaxLayers)
      return KeyError(source, k, fmt::format("is {}, must be in [1, {}]", s->num_layers, kMaxLayers));
  }
  POSENC_ASSIGN_OR_RETURN(const json* list, FindList(j, "layer_types", source, "a list of strings"));
  if (list == nullptr) return OkStatus();
  const json& t = *list;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].is_string()) return ExpectedError(source, fmt::format("layer_types[{}]", i), t[i], "a string");
    s->layer_types.push_back(t[i].get<std::string>());
  }
  return OkStatus();
}

// Layer indices: Mllama's cross_attention_layers; LFM2's full_attn_idxs (its layer types where the
// config lists none: full_attention at those indices, conv elsewhere).
Status ReadLayerIndexLists(const json& j, const std::string& source, PositionScheme* s) {
  for (const char* key : {"cross_attention_layers", "full_attn_idxs"}) {
    POSENC_ASSIGN_OR_RETURN(const json* list, FindList(j, key, source, "a list of layer indices"));
    if (list == nullptr) continue;
    const json& t = *list;
    std::vector<int64_t> idx;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_number_integer() || t[i].get<int64_t>() < 0 ||
          (s->num_layers > 0 && t[i].get<int64_t>() >= s->num_layers))
        return ExpectedError(source, fmt::format("{}[{}]", key, i), t[i],
                             fmt::format("a layer index in [0, {})", s->num_layers));
      idx.push_back(t[i].get<int64_t>());
    }
    if (std::string_view(key) == "cross_attention_layers") {
      s->cross_attention_layers = idx;
    } else if (s->layer_types.empty() && s->num_layers > 0) {
      s->layer_types.assign(static_cast<size_t>(s->num_layers), "conv");
      for (int64_t i : idx) s->layer_types[static_cast<size_t>(i)] = "full_attention";
    }
  }
  return OkStatus();
}

// SmolLM3's no_rope_layers: 1 (or true) where the layer rotates, 0 where it is NoPE.
Status ReadNoRopeLayers(const json& j, const std::string& source, PositionScheme* s) {
  POSENC_ASSIGN_OR_RETURN(const json* list, FindList(j, "no_rope_layers", source, "a list of 0 and 1"));
  if (list == nullptr) return OkStatus();
  const json& t = *list;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool ok =
        t[i].is_boolean() || (t[i].is_number_integer() && (t[i].get<int64_t>() == 0 || t[i].get<int64_t>() == 1));
    if (!ok) return ExpectedError(source, fmt::format("no_rope_layers[{}]", i), t[i], "0 or 1");
    s->no_rope_layers.push_back(t[i].is_boolean() ? int64_t{t[i].get<bool>()} : t[i].get<int64_t>());
  }
  return OkStatus();
}

// sliding_window, sliding_window_pattern (an integer, or EXAONE 4's string), and the intervals of
// NoPE and full layers.
Status ReadWindowKeys(const json& j, const std::string& source, PositionScheme* s) {
  s->has_sliding_window = Has(j, "sliding_window") && !j["sliding_window"].is_null();
  // EXAONE 4 spells sliding_window_pattern as a string, "LLLG": layer i is sliding (L) or global (G)
  // by pattern[i % length]; it gives layer_types where the config does not list them.
  if (Has(j, "sliding_window_pattern") && j["sliding_window_pattern"].is_string()) {
    const std::string pattern = j["sliding_window_pattern"].get<std::string>();
    if (pattern.empty() || pattern.find_first_not_of("LG") != std::string::npos)
      return ExpectedError(source, "sliding_window_pattern", j["sliding_window_pattern"],
                           "an integer or a string of L (sliding) and G (global)");
    if (s->layer_types.empty())
      for (int64_t i = 0; i < s->num_layers; ++i)
        s->layer_types.push_back(pattern[static_cast<size_t>(i) % pattern.size()] == 'L' ? "sliding_attention"
                                                                                         : "full_attention");
  }
  for (auto [key, dst] : {std::pair{"no_rope_layer_interval", &s->no_rope_layer_interval},
                          std::pair{"sliding_window_pattern", &s->sliding_window_pattern},
                          std::pair{"full_attention_interval", &s->full_attention_interval}}) {
    if (!Has(j, key) || (std::string_view(key) == "sliding_window_pattern" && j[key].is_string())) continue;
    POSENC_ASSIGN_OR_RETURN(*dst, GetInt(j, key, source));
    if (*dst <= 0) return KeyError(source, key, fmt::format("is {}, must be > 0", *dst));
  }
  return OkStatus();
}

// The family's facts about its layers: a default window, its own keys' types, the layer types it
// derives, and its query/key norm (on unless the family's key turns it off).
Status ApplyFamilyLayerFacts(const json& j, const std::string& source, const ModelFamily& family,
                             PositionScheme* s) {
  if (family.layer_rule == LayerRule::kSlidingRopeIfWindowed && !(j.is_object() && j.contains("sliding_window"))) {
    // Exaone4Config's sliding_window defaults to 4096: a config without the key is windowed (null is not).
    s->has_sliding_window = true;
    Note(s, fmt::format("{}: no sliding_window: the config class's default 4096 applies", s->model_type));
  }
  POSENC_RETURN_IF_ERROR(CheckFamilyKeyTypes(j, source, family));
  POSENC_RETURN_IF_ERROR(DeriveLayerTypes(j, source, family, s));
  if (family.qk_norm == QkNorm::kNone) return OkStatus();
  bool on = true;
  if (!family.qk_norm_key.empty()) {
    on = false;  // the config classes' default
    if (Has(j, family.qk_norm_key)) {
      POSENC_ASSIGN_OR_RETURN(on, GetBool(j, family.qk_norm_key, source));
    }
  }
  if (on) s->qk_norm = family.qk_norm;
  return OkStatus();
}

// Llama4TextConfig: attn_temperature_tuning (a truthy value: Scout's config says 4), floor_scale,
// attn_scale, with the class defaults true, 8192, 0.1.
Status ParseLlama4Temperature(const json& j, const std::string& source, PositionScheme* s) {
  AttnTemperature& t = s->attn_temperature;
  t = AttnTemperature{true, 8192.0, 0.1};
  if (Has(j, "attn_temperature_tuning")) {
    const json& v = j["attn_temperature_tuning"];
    if (v.is_boolean())
      t.tuning = v.get<bool>();
    else if (v.is_number())
      t.tuning = v.get<double>() != 0.0;
    else
      return ExpectedError(source, "attn_temperature_tuning", v, "a boolean or a number");
  } else {
    s->notes.push_back("no attn_temperature_tuning: true assumed (Llama4TextConfig's default)");
  }
  for (auto [key, dst, def] :
       {std::tuple{"floor_scale", &t.floor_scale, 8192.0}, std::tuple{"attn_scale", &t.attn_scale, 0.1}}) {
    if (Has(j, key)) {
      POSENC_ASSIGN_OR_RETURN(*dst, GetNumber(j, key, source));
    } else {
      s->notes.push_back(fmt::format("no {}: {} assumed (Llama4TextConfig's default)", key, def));
    }
  }
  if (Status st = ValidateAttnTemperature(t); !st.ok())
    return InvalidArgumentError(fmt::format("config {}: {}", source, st.message()));
  return OkStatus();
}

}  // namespace

Status ParseLayerKeys(const json& j, const std::string& source, PositionScheme* s) {
  POSENC_RETURN_IF_ERROR(ReadLayerCountAndTypes(j, source, s));
  POSENC_RETURN_IF_ERROR(ReadLayerIndexLists(j, source, s));
  POSENC_RETURN_IF_ERROR(ReadNoRopeLayers(j, source, s));
  POSENC_RETURN_IF_ERROR(ReadWindowKeys(j, source, s));
  const ModelFamily* family = FamilyOf(*s);
  if (family == nullptr) return OkStatus();
  POSENC_RETURN_IF_ERROR(ApplyFamilyLayerFacts(j, source, *family, s));
  if (family->query_temperature == QueryTemperatureForm::kNone) return OkStatus();
  if (family->query_temperature == QueryTemperatureForm::kScalingBeta) return ParseScalingBeta(j, source, s);
  return ParseLlama4Temperature(j, source, s);
}

Status SelectLayer(const std::string& source, HfConfigOptions* options, PositionScheme* s) {
  if (options->layer < 0) return OkStatus();
  if (s->num_layers <= 0)
    return InvalidArgumentError(
        fmt::format("config {}: layer {} asked for, but the config gives no num_hidden_layers", source, options->layer));
  if (options->layer >= s->num_layers)
    return OutOfRangeError(fmt::format("config {}: layer {} is outside [0, {}) (num_hidden_layers)", source,
                                       options->layer, s->num_layers));
  s->layer = options->layer;
  if (s->layer_types.empty()) return OkStatus();
  const std::string& t = s->layer_types[static_cast<size_t>(options->layer)];
  if (!options->layer_type.empty() && options->layer_type != t)
    return InvalidArgumentError(fmt::format("config {}: layer {} is {}, not the layer type {} asked for", source,
                                            options->layer, QuoteForMessage(t), QuoteForMessage(options->layer_type)));
  // A layer without attention has no parameters of its own to read: the scheme is decided after.
  if (LayerTypeHasAttention(t)) options->layer_type = t;
  return OkStatus();
}

void ApplyLayerSchedule(PositionScheme* s) {
  if (s->layer < 0) return;
  Result<LayerSchedule> schedule = LayerRopeSchedule(*s);
  if (!schedule.ok() || schedule->rope[static_cast<size_t>(s->layer)]) return;
  const size_t l = static_cast<size_t>(s->layer);
  const bool attention = schedule->attention.empty() || schedule->attention[l];
  Note(s, fmt::format("layer {} ({}) {}: no positional transform ({})", s->layer,
                      s->layer_types.empty() ? std::string("untyped") : s->layer_types[l],
                      attention ? "is a NoPE attention layer" : "has no attention", schedule->rule));
  s->kind = PositionKind::kNone;
  s->sites.clear();
}

}  // namespace posenc::hf_json
