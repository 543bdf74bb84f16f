// Hugging Face config.json -> PositionScheme.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/core/checked_math.hpp"
#include "posenc/core/message.hpp"
#include "config/config_json.hpp"
#include "config/json_util.hpp"
#include "config/multi_axis_json.hpp"

namespace posenc {

namespace {

using nlohmann::json;
using namespace json_util;  // NOLINT: the config readers' shared getters

// The first of `keys` present (non-null) in `j`, or "".
std::string FirstKey(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (Has(j, k)) return k;
  return "";
}

void Note(PositionScheme* s, std::string note) {
  s->rope.notes.push_back(note);
  s->notes.push_back(std::move(note));
}

bool IsOneOf(const std::string& v, std::initializer_list<const char*> set) {
  for (const char* x : set)
    if (v == x) return true;
  return false;
}

// ---------- family facts ----------

// The registry row of the scheme's model_type (model_families.hpp), or nullptr.
const ModelFamily* FamilyOf(const PositionScheme& s) { return FindModelFamily(s.model_type); }

// A config without model_type, or with one the registry does not have (InternLM2's 'internlm', OLMo 2's
// early 'olmo_1124'): the family its architectures or auto_map names ("modeling_qwen.QWenLMHeadModel",
// "repo--modeling_qwen.QWenLMHeadModel", or an in-library class such as GPT2LMHeadModel), noted; else
// nothing.
void FamilyFromClasses(const json& j, PositionScheme* s) {
  std::vector<std::string> names;
  if (Has(j, "architectures") && j["architectures"].is_array())
    for (const json& a : j["architectures"])
      if (a.is_string()) names.push_back(a.get<std::string>());
  if (Has(j, "auto_map") && j["auto_map"].is_object())
    for (auto it = j["auto_map"].begin(); it != j["auto_map"].end(); ++it)
      if (it.value().is_string()) {
        std::string v = it.value().get<std::string>();
        if (const size_t dash = v.find("--"); dash != std::string::npos) v = v.substr(dash + 2);
        names.push_back(v);
      }
  for (const std::string& n : names) {
    if (const ModelFamily* f = FindModelFamilyByClass(n); f != nullptr) {
      s->notes.push_back(
          fmt::format("{}: class {} is the {}family '{}' ({})",
                      s->model_type.empty()
                          ? std::string("no model_type")
                          : fmt::format("model_type {} is not in the family registry", QuoteForMessage(s->model_type)),
                      QuoteForMessage(n), f->remote_code ? "remote-code " : "", f->model_type, f->source));
      s->model_type = std::string(f->model_type);
      return;
    }
  }
}

// A RoPE config's family must be known: the pair layout is in the family's code, not in any key.
// Returns the note to add after the RoPE keys' notes ("" none).
Result<std::string> CheckFamilyKnown(const std::string& source, const HfConfigOptions& options,
                                     const PositionScheme& s) {
  if (FamilyOf(s) != nullptr) return std::string();
  if (options.assume_layout.has_value())
    return fmt::format(
        "model_type {} is not in the family registry: {} pairing over the whole head, as stated (assume_layout)",
        s.model_type.empty() ? "(none)" : QuoteForMessage(s.model_type), ToString(*options.assume_layout));
  if (s.model_type.empty())
    return InvalidArgumentError(fmt::format(
        "config {}: no model_type (and no architectures class posenc knows), so its RoPE pair layout is unknown: "
        "state it with --assume-layout half|interleaved (HfConfigOptions::assume_layout)",
        source));
  return InvalidArgumentError(fmt::format(
      "config {}: model_type {} is not a family posenc knows (`posenc families` lists them), so its RoPE pair layout "
      "is unknown: state it with --assume-layout half|interleaved (HfConfigOptions::assume_layout)",
      source, QuoteForMessage(s.model_type)));
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

// ---------- per-layer keys: the layer schedule's inputs, Llama 4's temperature ----------

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

// The type of every decoder layer where the family derives it from keys other than layer_types
// (LayerTypesRule, model_families.hpp). Types of layers without attention are named as
// LayerTypeHasAttention knows them ("mamba", "moe", "mlp", "linear_attention").
Status DeriveLayerTypes(const json& j, const std::string& source, const ModelFamily& family, PositionScheme* s) {
  const int64_t n = s->num_layers;
  std::vector<std::string>& types = s->layer_types;
  switch (family.layer_types_rule) {
    case LayerTypesRule::kConfigOnly: return OkStatus();
    case LayerTypesRule::kGemma4Pattern:
      if (types.empty())
        for (int64_t i = 0; i < n; ++i) types.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
      if (!types.empty() && types.back() != "full_attention") {
        Note(s, fmt::format("{}: the last layer is always full_attention (layer_types[{}] was '{}')", s->model_type,
                            types.size() - 1, types.back()));
        types.back() = "full_attention";
      }
      return OkStatus();
    case LayerTypesRule::kSlidingWindowPattern:
    case LayerTypesRule::kEveryNthFull: {
      // The config class's __post_init__: layer_types, else one full layer every `period`, the rest sliding.
      if (!types.empty()) return OkStatus();
      const bool from_key =
          family.layer_types_rule == LayerTypesRule::kSlidingWindowPattern && s->sliding_window_pattern > 0;
      const int64_t period = from_key ? s->sliding_window_pattern : family.full_layer_period;
      if (period <= 0) return OkStatus();
      for (int64_t i = 0; i < n; ++i) types.push_back((i + 1) % period == 0 ? "full_attention" : "sliding_attention");
      if (n > 0)
        Note(s, fmt::format("{}: no layer_types: every {}th layer full_attention, the others sliding_attention ({})",
                            s->model_type, period,
                            from_key ? "sliding_window_pattern" : "the config class's default"));
      return OkStatus();
    }
    case LayerTypesRule::kMambaUnlessListed:
      if (types.empty() && n > 0) {
        types.assign(static_cast<size_t>(n), "mamba");
        Note(s, fmt::format("{}: no layer_types: every layer is a Mamba-2 mixer (the config class's default)",
                            s->model_type));
      }
      return OkStatus();
    case LayerTypesRule::kCompressRatios: {
      if (!types.empty() || !Has(j, "compress_ratios")) return OkStatus();
      const json& r = j["compress_ratios"];
      if (!r.is_array())
        return KeyError(source, "compress_ratios", fmt::format("is {}, expected a list of integers", JsonForMessage(r)));
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
    case LayerTypesRule::kHybridOverride: {
      if (!types.empty()) {
        // transformers 5 spells them as layer kinds: keep, naming the attention ones as such.
        return OkStatus();
      }
      if (Has(j, "layers_block_type")) {
        const json& t = j["layers_block_type"];
        if (!t.is_array())
          return KeyError(source, "layers_block_type",
                          fmt::format("is {}, expected a list of strings", JsonForMessage(t)));
        for (size_t i = 0; i < t.size(); ++i) {
          if (!t[i].is_string())
            return KeyError(source, fmt::format("layers_block_type[{}]", i),
                            fmt::format("is {}, expected a string", JsonForMessage(t[i])));
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
    case LayerTypesRule::kHybridLayerPattern: {
      if (!types.empty() || !Has(j, "hybrid_layer_pattern")) return OkStatus();
      const json& t = j["hybrid_layer_pattern"];
      if (!t.is_array())
        return KeyError(source, "hybrid_layer_pattern", fmt::format("is {}, expected a list of 0 and 1", JsonForMessage(t)));
      for (size_t i = 0; i < t.size(); ++i) {
        if (!t[i].is_number_integer() || (t[i].get<int64_t>() != 0 && t[i].get<int64_t>() != 1))
          return KeyError(source, fmt::format("hybrid_layer_pattern[{}]", i),
                          fmt::format("is {}, expected 0 (full) or 1 (sliding)", JsonForMessage(t[i])));
        types.push_back(t[i].get<int64_t>() == 1 ? "sliding_attention" : "full_attention");
      }
      return OkStatus();
    }
    case LayerTypesRule::kKdaLayers: {
      if (!types.empty() || !Has(j, "linear_attn_config")) return OkStatus();
      const json& cfg = j["linear_attn_config"];
      if (!cfg.is_object())
        return KeyError(source, "linear_attn_config",
                        fmt::format("is {}, expected an object (kda_layers, full_attn_layers)", JsonForMessage(cfg)));
      const std::string where = source + " (linear_attn_config)";
      types.assign(static_cast<size_t>(n), "full_attention");
      if (!Has(cfg, "kda_layers")) return OkStatus();
      const json& t = cfg["kda_layers"];
      if (!t.is_array())
        return KeyError(where, "kda_layers", fmt::format("is {}, expected a list of layer numbers", JsonForMessage(t)));
      for (size_t i = 0; i < t.size(); ++i) {
        if (!t[i].is_number_integer() || t[i].get<int64_t>() < 1 || t[i].get<int64_t>() > n)
          return KeyError(where, fmt::format("kda_layers[{}]", i),
                          fmt::format("is {}, expected a 1-based layer number in [1, {}]", JsonForMessage(t[i]), n));
        types[static_cast<size_t>(t[i].get<int64_t>() - 1)] = "linear_attention";
      }
      return OkStatus();
    }
  }
  return OkStatus();
}

Status ParseLayerKeys(const json& j, const std::string& source, PositionScheme* s) {
  if (std::string k = FirstKey(j, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}); !k.empty()) {
    POSENC_ASSIGN_OR_RETURN(s->num_layers, GetInt(j, k, source));
    if (s->num_layers <= 0 || s->num_layers > kMaxLayers)
      return KeyError(source, k, fmt::format("is {}, must be in [1, {}]", s->num_layers, kMaxLayers));
  }
  if (Has(j, "layer_types")) {
    const json& t = j["layer_types"];
    if (!t.is_array())
      return KeyError(source, "layer_types", fmt::format("is {}, expected a list of strings", JsonForMessage(t)));
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string())
        return KeyError(source, fmt::format("layer_types[{}]", i),
                        fmt::format("is {}, expected a string", JsonForMessage(t[i])));
      s->layer_types.push_back(t[i].get<std::string>());
    }
  }
  // Layer indices: Mllama's cross_attention_layers; LFM2's full_attn_idxs (its layer types where the
  // config lists none: full_attention at those indices, conv elsewhere).
  for (const char* key : {"cross_attention_layers", "full_attn_idxs"}) {
    if (!Has(j, key)) continue;
    const json& t = j[key];
    if (!t.is_array())
      return KeyError(source, key, fmt::format("is {}, expected a list of layer indices", JsonForMessage(t)));
    std::vector<int64_t> idx;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_number_integer() || t[i].get<int64_t>() < 0 ||
          (s->num_layers > 0 && t[i].get<int64_t>() >= s->num_layers))
        return KeyError(source, fmt::format("{}[{}]", key, i),
                        fmt::format("is {}, expected a layer index in [0, {})", JsonForMessage(t[i]), s->num_layers));
      idx.push_back(t[i].get<int64_t>());
    }
    if (std::string_view(key) == "cross_attention_layers") {
      s->cross_attention_layers = idx;
    } else if (s->layer_types.empty() && s->num_layers > 0) {
      s->layer_types.assign(static_cast<size_t>(s->num_layers), "conv");
      for (int64_t i : idx) s->layer_types[static_cast<size_t>(i)] = "full_attention";
    }
  }
  if (Has(j, "no_rope_layers")) {
    const json& t = j["no_rope_layers"];
    if (!t.is_array())
      return KeyError(source, "no_rope_layers", fmt::format("is {}, expected a list of 0 and 1", JsonForMessage(t)));
    for (size_t i = 0; i < t.size(); ++i) {
      const bool ok =
          t[i].is_boolean() || (t[i].is_number_integer() && (t[i].get<int64_t>() == 0 || t[i].get<int64_t>() == 1));
      if (!ok)
        return KeyError(source, fmt::format("no_rope_layers[{}]", i),
                        fmt::format("is {}, expected 0 or 1", JsonForMessage(t[i])));
      s->no_rope_layers.push_back(t[i].is_boolean() ? int64_t{t[i].get<bool>()} : t[i].get<int64_t>());
    }
  }
  s->has_sliding_window = Has(j, "sliding_window") && !j["sliding_window"].is_null();
  // EXAONE 4 spells sliding_window_pattern as a string, "LLLG": layer i is sliding (L) or global (G)
  // by pattern[i % length]; it gives layer_types where the config does not list them.
  if (Has(j, "sliding_window_pattern") && j["sliding_window_pattern"].is_string()) {
    const std::string pattern = j["sliding_window_pattern"].get<std::string>();
    if (pattern.empty() || pattern.find_first_not_of("LG") != std::string::npos)
      return KeyError(source, "sliding_window_pattern",
                      fmt::format("is {}, expected an integer or a string of L (sliding) and G (global)",
                                  JsonForMessage(j["sliding_window_pattern"])));
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
  const ModelFamily* family = FamilyOf(*s);
  if (family != nullptr && family->layer_rule == LayerRule::kSlidingRopeIfWindowed &&
      !(j.is_object() && j.contains("sliding_window"))) {
    // Exaone4Config's sliding_window defaults to 4096: a config without the key is windowed (null is not).
    s->has_sliding_window = true;
    Note(s, fmt::format("{}: no sliding_window: the config class's default 4096 applies", s->model_type));
  }
  if (family != nullptr) {
    POSENC_RETURN_IF_ERROR(CheckFamilyKeyTypes(j, source, *family));
    POSENC_RETURN_IF_ERROR(DeriveLayerTypes(j, source, *family, s));
  }
  if (family != nullptr && family->qk_norm != QkNorm::kNone) {
    bool on = true;
    if (!family->qk_norm_key.empty()) {
      on = false;  // the config classes' default
      if (Has(j, family->qk_norm_key)) {
        POSENC_ASSIGN_OR_RETURN(on, GetBool(j, family->qk_norm_key, source));
      }
    }
    if (on) s->qk_norm = family->qk_norm;
  }
  if (family == nullptr || family->query_temperature == QueryTemperatureForm::kNone) return OkStatus();
  if (family->query_temperature == QueryTemperatureForm::kScalingBeta) return ParseScalingBeta(j, source, s);
  // Llama4TextConfig: attn_temperature_tuning (a truthy value: Scout's config says 4), floor_scale,
  // attn_scale, with the class defaults true, 8192, 0.1.
  AttnTemperature& t = s->attn_temperature;
  t = AttnTemperature{true, 8192.0, 0.1};
  if (Has(j, "attn_temperature_tuning")) {
    const json& v = j["attn_temperature_tuning"];
    if (v.is_boolean())
      t.tuning = v.get<bool>();
    else if (v.is_number())
      t.tuning = v.get<double>() != 0.0;
    else
      return KeyError(source, "attn_temperature_tuning",
                      fmt::format("is {}, expected a boolean or a number", JsonForMessage(v)));
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

// ---------- fused query_key_value ----------

// Which row order a fused query_key_value weight has (FusedQkvLayout), and Falcon's key/value heads,
// as modeling_falcon.py / modeling_gpt_neox.py / modeling_persimmon.py split the projection.
Status ParseFusedQkv(const json& j, const std::string& source, PositionScheme* s) {
  const std::string& mt = s->model_type;
  if (IsOneOf(mt, {"gpt_neox", "persimmon"})) {
    s->fused_qkv = FusedQkvLayout::kPerHead;
    return OkStatus();
  }
  if (!IsOneOf(mt, {"falcon", "RefinedWeb", "RefinedWebModel"})) return OkStatus();
  // FalconConfig: multi_query defaults to true, new_decoder_architecture to false, num_kv_heads
  // (n_head_kv in RefinedWeb configs) to num_attention_heads; the attention uses num_kv_heads only with
  // the new architecture or without multi-query, else one shared key/value head.
  bool new_arch = false, multi_query = true;
  if (Has(j, "new_decoder_architecture")) {
    POSENC_ASSIGN_OR_RETURN(new_arch, GetBool(j, "new_decoder_architecture", source));
  }
  if (Has(j, "multi_query")) { POSENC_ASSIGN_OR_RETURN(multi_query, GetBool(j, "multi_query", source)); }
  int64_t kv = s->num_heads;
  if (std::string k = FirstKey(j, {"num_kv_heads", "n_head_kv"}); !k.empty()) {
    POSENC_ASSIGN_OR_RETURN(kv, GetInt(j, k, source));
  }
  if (new_arch) {
    s->fused_qkv = FusedQkvLayout::kPerKvGroup;
    s->num_kv_heads = kv;
  } else if (multi_query) {
    s->fused_qkv = FusedQkvLayout::kQThenKThenV;
    s->num_kv_heads = 1;
  } else {
    s->fused_qkv = FusedQkvLayout::kPerHead;
    s->num_kv_heads = s->num_heads;
  }
  return OkStatus();
}

// ---------- schemes that are not RoPE ----------

// An absolute position table's width and length: the first of `length_keys` present, > 0.
Status ReadAbsoluteTable(const json& j, const std::string& source, std::initializer_list<const char*> length_keys,
                         PositionScheme* s) {
  std::string dk = FirstKey(j, {"hidden_size", "n_embd", "d_model", "emb_dim"});
  if (!dk.empty()) { POSENC_ASSIGN_OR_RETURN(s->hidden_size, GetInt(j, dk, source)); }
  std::string pk = FirstKey(j, length_keys);
  if (pk.empty()) return KeyError(source, "n_positions", "is missing (an absolute position table needs its length)");
  POSENC_ASSIGN_OR_RETURN(s->max_position_embeddings, GetInt(j, pk, source));
  if (s->max_position_embeddings <= 0)
    return KeyError(source, pk, fmt::format("is {}, must be > 0", s->max_position_embeddings));
  return OkStatus();
}

// Returns true (and fills s) when the config names a non-RoPE scheme.
Result<bool> ParseNonRope(const json& j, const std::string& source, PositionScheme* s) {
  const std::string& mt = s->model_type;
  const ModelFamily* family = FamilyOf(*s);
  const PositionKind family_kind = family != nullptr ? family->scheme : PositionKind::kRope;
  std::string hk = FirstKey(j, {"num_attention_heads", "n_head", "n_heads", "num_heads"});
  if (!hk.empty()) { POSENC_ASSIGN_OR_RETURN(s->num_heads, GetInt(j, hk, source)); }
  // ALiBi.
  POSENC_ASSIGN_OR_RETURN(const json* attn, FindObject(j, "attn_config", source));
  bool mpt_alibi = false;
  if (attn != nullptr && Has(*attn, "alibi")) {
    POSENC_ASSIGN_OR_RETURN(mpt_alibi, GetBool(*attn, "alibi", source));
  } else if (mt == "mpt") {
    mpt_alibi = true;
    s->notes.push_back("mpt config without attn_config.alibi: ALiBi assumed (MptAttentionConfig's default)");
  }
  bool falcon_alibi = false;
  if (Has(j, "alibi")) { POSENC_ASSIGN_OR_RETURN(falcon_alibi, GetBool(j, "alibi", source)); }
  // A family whose code is ALiBi at one size and RoPE at another (Baichuan 2: 13B ALiBi, 7B RoPE),
  // with nothing in the config saying which.
  bool size_alibi = false;
  if (family != nullptr && family->alibi_hidden_size > 0 && Has(j, "hidden_size")) {
    POSENC_ASSIGN_OR_RETURN(const int64_t hidden, GetInt(j, "hidden_size", source));
    size_alibi = hidden == family->alibi_hidden_size;
    s->notes.push_back(fmt::format("{}: hidden_size {} is the {} model (its modeling code; no config key states it)",
                                   mt, hidden, size_alibi ? "ALiBi" : "RoPE"));
  }
  // A family whose code chooses between ALiBi and a learned table by a key: JAIS's
  // position_embedding_type ("alibi" or "learned", modeling_jais.py), MPT's attn_config.alibi false
  // (MosaicML's modeling_mpt.py then adds its learned wpe table, learned_pos_emb default true;
  // transformers' MptModel builds ALiBi whatever the key says and has no such table, so it cannot run
  // these checkpoints as trained).
  bool learned_instead = false;
  if (mt == "jais" && Has(j, "position_embedding_type")) {
    POSENC_ASSIGN_OR_RETURN(std::string pet, GetString(j, "position_embedding_type", source));
    if (pet == "learned") {
      learned_instead = true;
    } else if (pet != "alibi") {
      return KeyError(source, "position_embedding_type",
                      fmt::format("is {}, modeling_jais.py knows alibi and learned", QuoteForMessage(pet)));
    }
  }
  if (mt == "mpt" && attn != nullptr && Has(*attn, "alibi") && !mpt_alibi) {
    bool rope = false;
    if (Has(*attn, "rope")) { POSENC_ASSIGN_OR_RETURN(rope, GetBool(*attn, "rope", source)); }
    if (rope)
      return UnimplementedError(fmt::format(
          "config {}: key 'attn_config.rope' is true: MosaicML's RoPE variant of MPT (rope_impl) is not implemented",
          source));
    bool learned = true;
    if (Has(j, "learned_pos_emb")) { POSENC_ASSIGN_OR_RETURN(learned, GetBool(j, "learned_pos_emb", source)); }
    if (!learned) {
      s->kind = PositionKind::kNone;
      s->notes.push_back("mpt: attn_config.alibi and learned_pos_emb false: no positional encoding (modeling_mpt.py)");
      return true;
    }
    learned_instead = true;
    s->notes.push_back(
        "mpt: attn_config.alibi false: the learned wpe table of MosaicML's modeling_mpt.py (learned_pos_emb); "
        "transformers' MptModel would apply ALiBi regardless");
  }
  if (learned_instead) {
    s->kind = PositionKind::kLearned;
    POSENC_RETURN_IF_ERROR(ReadAbsoluteTable(j, source, {"n_positions", "max_position_embeddings", "max_seq_len"}, s));
    return true;
  }
  if ((family_kind == PositionKind::kAlibi && mt != "mpt") || mpt_alibi || falcon_alibi || size_alibi) {
    s->kind = PositionKind::kAlibi;
    s->alibi_variant = mpt_alibi ? "mpt" : "bloom";
    if (mpt_alibi) {
      if (attn != nullptr && Has(*attn, "alibi_bias_max")) {
        POSENC_ASSIGN_OR_RETURN(s->alibi_bias_max, GetNumber(*attn, "alibi_bias_max", source));
      } else {
        s->alibi_bias_max = 8.0;
        s->notes.push_back("no attn_config.alibi_bias_max: 8 assumed (MPT's default)");
      }
      if (!(s->alibi_bias_max > 0))
        return KeyError(source, "attn_config.alibi_bias_max", fmt::format("is {}, must be > 0", s->alibi_bias_max));
    }
    if (s->num_heads <= 0)
      return KeyError(source, hk.empty() ? "n_head" : hk, "is missing or not positive (ALiBi needs the head count)");
    return true;
  }
  // T5 relative buckets.
  if (Has(j, "relative_attention_num_buckets") || family_kind == PositionKind::kT5Bucket) {
    s->kind = PositionKind::kT5Bucket;
    if (!Has(j, "relative_attention_num_buckets")) {
      s->t5_num_buckets = 32;
      s->notes.push_back("no relative_attention_num_buckets: 32 assumed (T5Config's default)");
    } else {
      POSENC_ASSIGN_OR_RETURN(s->t5_num_buckets, GetInt(j, "relative_attention_num_buckets", source));
    }
    if (!Has(j, "relative_attention_max_distance")) {
      s->t5_max_distance = 128;
      s->notes.push_back("no relative_attention_max_distance: 128 assumed (T5Config's default)");
    } else {
      POSENC_ASSIGN_OR_RETURN(s->t5_max_distance, GetInt(j, "relative_attention_max_distance", source));
    }
    if (s->t5_num_buckets <= 0)
      return KeyError(source, "relative_attention_num_buckets", fmt::format("is {}, must be > 0", s->t5_num_buckets));
    if (s->t5_max_distance <= 0)
      return KeyError(source, "relative_attention_max_distance", fmt::format("is {}, must be > 0", s->t5_max_distance));
    bool is_decoder = false;
    if (Has(j, "is_decoder")) { POSENC_ASSIGN_OR_RETURN(is_decoder, GetBool(j, "is_decoder", source)); }
    // T5's encoder self-attention is bidirectional; its decoder's is causal (unidirectional).
    s->t5_bidirectional = !is_decoder;
    return true;
  }
  // Absolute positions.
  bool xlm_sin = false;
  if (Has(j, "sinusoidal_embeddings")) {
    POSENC_ASSIGN_OR_RETURN(xlm_sin, GetBool(j, "sinusoidal_embeddings", source));
  }
  if (family_kind == PositionKind::kNone) {
    s->kind = PositionKind::kNone;
    s->notes.push_back(fmt::format("{}: no positional encoding ({})", mt, family->source));
    return true;
  }
  const bool sinusoidal = xlm_sin || family_kind == PositionKind::kSinusoidal;
  const bool learned = !sinusoidal && family_kind == PositionKind::kLearned;
  if (!sinusoidal && !learned) return false;
  s->kind = sinusoidal ? PositionKind::kSinusoidal : PositionKind::kLearned;
  if (sinusoidal) s->sinusoidal_layout = xlm_sin || mt == "xlm" ? "interleaved" : "concat";
  POSENC_RETURN_IF_ERROR(ReadAbsoluteTable(j, source, {"n_positions", "max_position_embeddings"}, s));
  if (mt == "opt") s->notes.push_back("OPT's learned table is indexed by position + 2 (its offset)");
  return true;
}

// ---------- RoPE ----------

// The rope parameter object (flat), the spelling, and the layer types of a nested form.
struct RopeSource {
  const json* params = nullptr;  // rope_parameters / rope_scaling object, or nullptr
  std::string spelling = "plain";
  bool plain_type = false;  // the layer type takes plain RoPE: the params' base, not their scaling (OLMo 3)
};

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

// Head counts, hidden size, the fused qkv layout and the head: head_dim, DeepSeek MLA's
// qk_rope_head_dim after qk_nope_head_dim, or hidden / heads.
struct RopeDims {
  int64_t head_dim = 0;
  int64_t rotary_start = 0;
  int64_t rotary_dim = -1;  // -1: not fixed yet
};

Result<RopeDims> ReadDims(const json& j, const std::string& source, PositionScheme* s) {
  std::string hk = FirstKey(j, {"num_attention_heads", "n_head", "n_heads"});
  int64_t heads = 0;
  if (!hk.empty()) { POSENC_ASSIGN_OR_RETURN(heads, GetInt(j, hk, source)); }
  s->num_heads = heads;
  if (Has(j, "num_key_value_heads")) {
    POSENC_ASSIGN_OR_RETURN(s->num_kv_heads, GetInt(j, "num_key_value_heads", source));
  }
  POSENC_RETURN_IF_ERROR(ParseFusedQkv(j, source, s));
  std::string dk = FirstKey(j, {"hidden_size", "n_embd", "d_model"});
  int64_t hidden = 0;
  if (!dk.empty()) { POSENC_ASSIGN_OR_RETURN(hidden, GetInt(j, dk, source)); }
  s->hidden_size = hidden;
  RopeDims d;
  std::string head_key = "head_dim";
  const ModelFamily* row = FamilyOf(*s);
  const std::string full_key = row != nullptr && !row->full_head_dim_key.empty() ? std::string(row->full_head_dim_key)
                                                                                 : std::string("global_head_dim");
  if (Has(j, "head_dim")) { POSENC_ASSIGN_OR_RETURN(s->layer_head_dim, GetInt(j, "head_dim", source)); }
  if (Has(j, full_key)) { POSENC_ASSIGN_OR_RETURN(s->full_attention_head_dim, GetInt(j, full_key, source)); }
  if (s->rope_layer_type == "full_attention" && Has(j, full_key)) head_key = full_key;
  // A family's own spelling of the head size (Qwen, ChatGLM: kv_channels).
  if (const ModelFamily* family = FamilyOf(*s);
      family != nullptr && !family->head_dim_key.empty() && Has(j, family->head_dim_key))
    head_key = family->head_dim_key;
  if (Has(j, "qk_rope_head_dim")) {
    // DeepSeek MLA: the query/key head is [nope part | rope part]; only the rope part rotates.
    POSENC_ASSIGN_OR_RETURN(d.rotary_dim, GetInt(j, "qk_rope_head_dim", source));
    int64_t nope = 0;
    if (Has(j, "qk_nope_head_dim")) { POSENC_ASSIGN_OR_RETURN(nope, GetInt(j, "qk_nope_head_dim", source)); }
    if (nope < 0) return KeyError(source, "qk_nope_head_dim", fmt::format("is {}, must be >= 0", nope));
    if (!CheckedAdd(nope, d.rotary_dim, &d.head_dim))
      return KeyError(source, "qk_nope_head_dim",
                      fmt::format("= {} plus qk_rope_head_dim = {} overflows int64", nope, d.rotary_dim));
    d.rotary_start = nope;
    s->layer_head_dim = d.head_dim;
  } else if (Has(j, head_key)) {
    POSENC_ASSIGN_OR_RETURN(d.head_dim, GetInt(j, head_key, source));
    if (d.head_dim <= 0) return KeyError(source, head_key, fmt::format("is {}, must be positive", d.head_dim));
  } else {
    if (hidden <= 0)
      return KeyError(source, dk.empty() ? "hidden_size" : dk, "is missing or not positive, and there is no head_dim");
    if (heads <= 0)
      return KeyError(source, hk.empty() ? "num_attention_heads" : hk,
                      "is missing or not positive, and there is no head_dim");
    if (hidden % heads != 0)
      return KeyError(source, hk, fmt::format("= {} does not divide {} = {} evenly", heads, dk, hidden));
    d.head_dim = hidden / heads;
    s->layer_head_dim = d.head_dim;
  }
  return d;
}

// Partial rotary (rope_parameters' partial_rotary_factor, top-level partial_rotary_factor,
// rotary_pct (GPT-NeoX), rotary_dim (GPT-J, CodeGen), the family's default) and the pairing: the
// config's layout.
Status ReadRotaryLayout(const json& j, const json& p, const RopeSource& src, const std::string& source, RopeDims d,
                        std::optional<RopePairing> assume_layout, std::optional<RopePairing> site_pairing,
                        PositionScheme* s) {
  RopeConfig& rc = s->rope;
  RopeScaling& sc = rc.scaling;
  std::optional<double> partial;
  std::string partial_key;
  if (Has(p, "partial_rotary_factor")) {
    POSENC_ASSIGN_OR_RETURN(double v, GetNumber(p, "partial_rotary_factor", source));
    partial = v;
    partial_key = "partial_rotary_factor";
  }
  // The same fraction under the names families give it: rotary_pct (GPT-NeoX), rope_pct (StableLM's remote
  // StableLMEpoch), rope_percent (Nemotron's old spelling).
  for (const char* k : {"partial_rotary_factor", "rotary_pct", "rope_pct", "rope_percent"}) {
    if (!Has(j, k)) continue;
    POSENC_ASSIGN_OR_RETURN(double v, GetNumber(j, k, source));
    if (partial.has_value() && *partial != v)
      return KeyError(source, k, fmt::format("= {} disagrees with {}.{} = {}", v, src.spelling, partial_key, *partial));
    if (!partial.has_value()) {
      partial = v;
      partial_key = k;
    }
  }
  const ModelFamily* family = FamilyOf(*s);
  if (!partial.has_value() && family != nullptr && family->window == RotaryWindow::kFrontPartial &&
      family->default_partial_rotary_factor != 1.0 && d.rotary_dim < 0 && !Has(j, "rotary_dim")) {
    partial = family->default_partial_rotary_factor;
    partial_key = "partial_rotary_factor";
    Note(s, fmt::format("no partial_rotary_factor: {} assumed ({}'s config default)", *partial, s->model_type));
  }
  if (partial.has_value() && !(*partial > 0 && *partial <= 1))
    return KeyError(source, partial_key, fmt::format("is {}, must be in (0, 1]", *partial));
  if (sc.type == RopeScalingType::kProportional) {
    // p-RoPE: the layout spans the whole head; the factor decides how many pairs get a frequency.
    d.rotary_dim = d.head_dim;
    sc.partial_rotary_factor = partial.value_or(1.0);
    if (!partial.has_value())
      Note(s, "proportional rope without partial_rotary_factor: 1.0 assumed (Hugging Face's default)");
  } else if (d.rotary_dim < 0 && Has(j, "rotary_dim")) {
    POSENC_ASSIGN_OR_RETURN(d.rotary_dim, GetInt(j, "rotary_dim", source));
    if (partial.has_value()) {
      // Redundant keys that agree (phi-1: rotary_dim 32 and partial_rotary_factor 0.5 of 64) are
      // accepted, as Hugging Face reads either; keys that disagree are refused.
      const auto from_factor = static_cast<int64_t>(static_cast<double>(d.head_dim) * *partial);
      if (from_factor != d.rotary_dim)
        return KeyError(source, "rotary_dim",
                        fmt::format("= {} disagrees with {} = {} (int({} * {}) = {})", d.rotary_dim, partial_key,
                                    *partial, d.head_dim, *partial, from_factor));
      Note(s, fmt::format("rotary_dim {} and {} {} both given; they agree", d.rotary_dim, partial_key, *partial));
    }
  } else if (d.rotary_dim < 0) {
    d.rotary_dim = d.head_dim;
    if (partial.has_value()) {
      // Hugging Face truncates: int(head_dim * factor).
      d.rotary_dim = static_cast<int64_t>(static_cast<double>(d.head_dim) * *partial);
      if (d.rotary_dim <= 0 || d.rotary_dim % 2 != 0)
        return KeyError(source, partial_key,
                        fmt::format("= {} gives rotary dimension int({} * {}) = {}, which must be even and positive",
                                    *partial, d.head_dim, *partial, d.rotary_dim));
    }
  }
  if (d.rotary_dim <= 0 || d.rotary_dim % 2 != 0 || d.rotary_start + d.rotary_dim > d.head_dim)
    return InvalidArgumentError(
        fmt::format("config {}: rotary dimension {} (of head_dim {}) must be even, positive and at most head_dim",
                    source, d.rotary_dim, d.head_dim));
  rc.layout.head_dim = d.head_dim;
  rc.layout.rotary_dim = d.rotary_dim;
  rc.layout.rotary_start = d.rotary_start;
  rc.layout.pairing = family != nullptr ? family->pairing : assume_layout.value_or(RopePairing::kHalf);
  if (Has(j, "qk_rope_head_dim")) {
    // MLA: rope_interleave states the pairing; without it, the family's (DeepSeek: interleaved).
    if (Has(j, "rope_interleave")) {
      POSENC_ASSIGN_OR_RETURN(const bool interleave, GetBool(j, "rope_interleave", source));
      rc.layout.pairing = interleave ? RopePairing::kInterleaved : RopePairing::kHalf;
    } else if (family != nullptr && family->window == RotaryWindow::kBackOfHead &&
               family->pairing == RopePairing::kInterleaved) {
      Note(s, fmt::format("no rope_interleave: true assumed ({}'s default: interleaved pairs)", s->model_type));
    }
  }
  if (site_pairing.has_value()) rc.layout.pairing = *site_pairing;
  return OkStatus();
}

// Base: rope_theta (rope_parameters, then top level), rotary_emb_base (GPT-NeoX). Then the context
// length.
Status ReadBaseAndLength(const json& j, const json& p, const std::string& source,
                         PositionScheme* s) {
  RopeConfig& rc = s->rope;
  bool have_base = false;
  const ModelFamily* family = FamilyOf(*s);
  // The family's own base key (Phi-3-small: rope_embedding_base) wins; then rope_theta, rotary_emb_base.
  // A dotted base_key names a key of a nested object (DBRX: attn_config.rope_theta).
  std::string base_key;
  if (family != nullptr && !family->base_key.empty() && !have_base) {
    const std::string_view key = family->base_key;
    const size_t dot = key.find('.');
    const std::string outer(key.substr(0, dot));
    const json* scope = &j;
    std::string leaf(key);
    std::string where = source;
    if (dot != std::string_view::npos) {
      POSENC_ASSIGN_OR_RETURN(scope, FindObject(j, outer, source));
      leaf = std::string(key.substr(dot + 1));
      where = fmt::format("{} ({})", source, outer);
    }
    if (scope != nullptr && Has(*scope, leaf)) {
      base_key = std::string(key);
      POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(*scope, leaf, where));
      have_base = true;
    }
  }
  for (const json* scope : {&p, &j}) {
    if (have_base) break;
    for (const char* k : {"rope_theta", "rotary_emb_base"}) {
      if (Has(*scope, k)) {
        POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(*scope, k, source));
        have_base = true;
        base_key = k;
        break;
      }
    }
  }
  if (!have_base) {
    base_key = "rope_theta";
    if (family != nullptr && family->fixed_base > 0) {
      rc.base = family->fixed_base;
      Note(s, fmt::format("{} fixes its RoPE base at {} (no key in its config)", s->model_type, rc.base));
    } else {
      rc.base = 10000.0;
      Note(s, "no rope_theta in the config: base 10000 assumed (Hugging Face's default_theta)");
    }
  }
  // A key that multiplies the base (ChatGLM: base = 10000 * rope_ratio).
  if (family != nullptr && !family->base_scale_key.empty() && Has(j, family->base_scale_key)) {
    const std::string k(family->base_scale_key);
    POSENC_ASSIGN_OR_RETURN(const double ratio, GetNumber(j, k, source));
    if (!(ratio > 0) || !std::isfinite(ratio))
      return KeyError(source, k, fmt::format("is {}, must be finite and positive", ratio));
    Note(s, fmt::format("{} {}: base {} * {} = {} ({})", k, ratio, rc.base, ratio, rc.base * ratio, family->source));
    rc.base *= ratio;
    base_key = k;
  }
  if (!(rc.base > 0) || !std::isfinite(rc.base))
    return KeyError(source, base_key, fmt::format("is {}, must be finite and positive", rc.base));
  std::string mk =
      FirstKey(j, {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len"});
  if (!mk.empty()) {
    POSENC_ASSIGN_OR_RETURN(rc.max_position_embeddings, GetInt(j, mk, source));
    if (rc.max_position_embeddings < 0)
      return KeyError(source, mk, fmt::format("is {}, must be >= 0", rc.max_position_embeddings));
  }
  s->max_position_embeddings = rc.max_position_embeddings;
  return OkStatus();
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

// ---------- never a guess: positional keys nobody reads ----------

// Keys the reader reads for any family (or checks the value of), by name.
constexpr std::string_view kReadKeys[] = {
    "rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base",
    "partial_rotary_factor", "rotary_pct", "rope_pct", "rope_percent", "rotary_dim", "max_position_embeddings",
    "original_max_position_embeddings", "n_positions", "qk_rope_head_dim", "rope_interleave", "no_rope_layers",
    "no_rope_layer_interval", "max_sequence_length", "sinusoidal_embeddings",
    "relative_attention_num_buckets", "relative_attention_max_distance", "learned_pos_emb"};

// Positional-looking keys that no family's modeling code reads for its positions, and why.
struct IgnoredKey {
  std::string_view key, why;
};
constexpr IgnoredKey kIgnoredEverywhere[] = {
    {"use_mrope", "Qwen2's flag of its M-RoPE variant: the text model's code never reads it"},
    {"rope_type", "a top-level copy: the rope_type inside rope_parameters / rope_scaling is read"},
    {"max_window_layers", "sliding-window layer count, not positions"},
};

bool NamesPositions(std::string_view key) {
  for (std::string_view w : {"rope", "rotary", "position", "nope", "mrope", "theta", "partial"})
    if (key.find(w) != std::string_view::npos) return true;
  return false;
}

// Does `text` (a registry row's free-text column) name `key` as a whole identifier?
bool TextNamesKey(std::string_view text, std::string_view key) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
    const bool left = at == 0 || !ident(text[at - 1]);
    const bool right = at + key.size() == text.size() || !ident(text[at + key.size()]);
    if (left && right) return true;
  }
  return false;
}

// The family's row (and the rows it derives from) names the key as one it reads or ignores.
bool FamilyNamesKey(const ModelFamily* f, std::string_view key) {
  for (int depth = 0; f != nullptr && depth < 8; ++depth) {
    for (std::string_view text : {f->own_keys, f->ignored_keys, f->layer_schedule, f->position_scaling, f->base_key,
                                  f->base_scale_key, f->head_dim_key, f->position_scale_key, f->dynamic_ntk_key,
                                  f->refused_key, f->full_head_dim_key})
      if (TextNamesKey(text, key)) return true;
    f = f->derives_from.empty() ? nullptr : FindModelFamily(f->derives_from);
  }
  return false;
}

// Refuses a config key that names positions or rotation and that neither the reader nor the family
// reads or knowingly ignores: its meaning would otherwise be guessed. Keys the caller states as
// understood are noted instead.
Status CheckPositionalKeys(const json& j, const std::string& source, const HfConfigOptions& options,
                           PositionScheme* s) {
  const ModelFamily* family = FamilyOf(*s);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (it.value().is_null() || !NamesPositions(key)) continue;
    // A RoPE model's position_embedding_type that says rotary agrees with the answer.
    if (key == "position_embedding_type" && s->kind == PositionKind::kRope && it.value().is_string() &&
        (it.value().get<std::string>() == "rope" || it.value().get<std::string>() == "rotary"))
      continue;
    if (std::find(std::begin(kReadKeys), std::end(kReadKeys), key) != std::end(kReadKeys)) continue;
    if (std::any_of(std::begin(kIgnoredEverywhere), std::end(kIgnoredEverywhere),
                    [&](const IgnoredKey& k) { return k.key == key; }))
      continue;
    if (FamilyNamesKey(family, key)) continue;
    if (std::find(options.understood_keys.begin(), options.understood_keys.end(), key) !=
        options.understood_keys.end()) {
      Note(s, fmt::format("key '{}' = {} not read (stated as understood by the caller)", key,
                          JsonForMessage(it.value())));
      continue;
    }
    return InvalidArgumentError(fmt::format(
        "config {}: key '{}' = {} names positions, but posenc's reader of model_type {} neither reads nor knowingly "
        "ignores it: if it does not change the positions, state so with --accept-key {} "
        "(HfConfigOptions::understood_keys); otherwise posenc cannot answer for this model",
        source, key, JsonForMessage(it.value()), s->model_type.empty() ? std::string("(none)") : QuoteForMessage(s->model_type),
        key));
  }
  return OkStatus();
}

// ---------- layers and sites (2026 structure) ----------

// The family's positions switch (PositionSwitch): false when the config turns positions off, noted.
Result<bool> PositionsOn(const json& j, const std::string& source, const ModelFamily& f, PositionScheme* s) {
  switch (f.positions) {
    case PositionSwitch::kAlways: break;
    case PositionSwitch::kNever:
      Note(s, fmt::format("{}: no layer applies a positional transform ({}); its RoPE keys are not read",
                          s->model_type, f.source));
      return false;
    case PositionSwitch::kPositionEmbeddingTypeRope: {
      if (!Has(j, "position_embedding_type")) {
        Note(s, fmt::format("{}: position_embedding_type null or absent: no positions (only \"rope\" turns RoPE on)",
                            s->model_type));
        return false;
      }
      const json& v = j["position_embedding_type"];
      if (!v.is_string())
        return KeyError(source, "position_embedding_type",
                        fmt::format("is {}, expected \"rope\", \"nope\" or null", JsonForMessage(v)));
      const std::string t = v.get<std::string>();
      if (t == "rope") break;
      if (t == "nope") {
        Note(s, fmt::format("{}: position_embedding_type \"nope\": no positions", s->model_type));
        return false;
      }
      return KeyError(source, "position_embedding_type",
                      fmt::format("is {}, {} knows \"rope\", \"nope\" and null", QuoteForMessage(t), s->model_type));
    }
    case PositionSwitch::kMlaUseNope: {
      if (!Has(j, "mla_use_nope")) break;
      POSENC_ASSIGN_OR_RETURN(const bool nope, GetBool(j, "mla_use_nope", source));
      if (nope) {
        Note(s, fmt::format("{}: mla_use_nope true: the MLA layers apply no RoPE, the linear layers carry no "
                            "positions",
                            s->model_type));
        return false;
      }
      break;
    }
  }
  // An MLA family whose rope slice is empty has no rotary part at all.
  if (f.window == RotaryWindow::kBackOfHead && Has(j, "qk_rope_head_dim") && j["qk_rope_head_dim"].is_number() &&
      j["qk_rope_head_dim"].get<double>() == 0) {
    Note(s, fmt::format("{}: qk_rope_head_dim 0: no rotary slice, no positions", s->model_type));
    return false;
  }
  return true;
}

// The RoPE sites of the family's attention layers (SiteRule).
std::vector<RotarySite> FamilySites(const ModelFamily* f, const json& j) {
  if (f == nullptr) return {RotarySite::kAttention};
  switch (f->site_rule) {
    case SiteRule::kDsa: return {RotarySite::kMla, RotarySite::kIndexer};
    case SiteRule::kDeepseekV4:
      return {RotarySite::kAttention, RotarySite::kAttentionOutput, RotarySite::kIndexer, RotarySite::kCompressor};
    case SiteRule::kAttention: break;
  }
  if (f->window == RotaryWindow::kBackOfHead && Has(j, "qk_rope_head_dim")) return {RotarySite::kMla};
  return {RotarySite::kAttention};
}

// Which layers run their own DSA indexer (ModelFamily::indexer_types), as GlmMoeDsaConfig derives them:
// indexer_types ("full" / "shared"), else index_topk_pattern (a string of F / S, or a list of those names),
// else "full" where max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (defaults 2 and 1: every
// layer). A "shared" layer reuses the previous layer's top-k and has no indexer. Empty: none of these keys.
Result<std::vector<bool>> IndexerLayers(const json& j, const std::string& source, int64_t n) {
  std::vector<bool> own;
  auto from_names = [&](const char* key, const json& t) -> Status {
    if (!t.is_array())
      return KeyError(source, key, fmt::format("is {}, expected a list of \"full\" / \"shared\"", JsonForMessage(t)));
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string() || (t[i] != "full" && t[i] != "shared"))
        return KeyError(source, fmt::format("{}[{}]", key, i),
                        fmt::format("is {}, expected \"full\" or \"shared\"", JsonForMessage(t[i])));
      own.push_back(t[i] == "full");
    }
    return OkStatus();
  };
  if (Has(j, "indexer_types") && !j["indexer_types"].is_null()) {
    POSENC_RETURN_IF_ERROR(from_names("indexer_types", j["indexer_types"]));
  } else if (Has(j, "index_topk_pattern") && !j["index_topk_pattern"].is_null()) {
    const json& p = j["index_topk_pattern"];
    if (p.is_string()) {
      const std::string t = p.get<std::string>();
      for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] != 'F' && t[i] != 'S')
          return KeyError(source, "index_topk_pattern",
                          fmt::format("has {} at {}, expected F (full) or S (shared)",
                                      QuoteForMessage(std::string(1, t[i])), i));
        own.push_back(t[i] == 'F');
      }
    } else {
      POSENC_RETURN_IF_ERROR(from_names("index_topk_pattern", p));
    }
  } else if (Has(j, "index_topk_freq") || Has(j, "index_skip_topk_offset")) {
    int64_t freq = 1, offset = 2;
    if (Has(j, "index_topk_freq")) { POSENC_ASSIGN_OR_RETURN(freq, GetInt(j, "index_topk_freq", source)); }
    if (Has(j, "index_skip_topk_offset")) {
      POSENC_ASSIGN_OR_RETURN(offset, GetInt(j, "index_skip_topk_offset", source, -kMaxLayers, kMaxLayers));
    }
    freq = std::max<int64_t>(freq, 1);
    for (int64_t i = 0; i < n; ++i) own.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0);
    return own;
  } else {
    return own;
  }
  if (n > 0 && static_cast<int64_t>(own.size()) < n)
    return KeyError(source, Has(j, "indexer_types") && !j["indexer_types"].is_null() ? "indexer_types" : "index_topk_pattern",
                    fmt::format("has {} entries for {} layers (num_hidden_layers)", own.size(), n));
  return own;
}

// A DSA family's indexer site on the layer asked for: gone where that layer reuses the previous layer's
// top-k (IndexerLayers), refused by name when it is the site asked for; without a layer, a note says how
// many layers have it.
Status ApplyIndexerLayers(const json& j, const std::string& source, const ModelFamily& f, const HfConfigOptions& options,
                          PositionScheme* s) {
  if (f.site_rule != SiteRule::kDsa || !f.indexer_types) return OkStatus();
  POSENC_ASSIGN_OR_RETURN(const std::vector<bool> own, IndexerLayers(j, source, s->num_layers));
  if (own.empty()) return OkStatus();
  const auto with = static_cast<int64_t>(std::count(own.begin(), own.end(), true));
  if (s->layer < 0) {
    if (with < static_cast<int64_t>(own.size()))
      Note(s, fmt::format("{}: a DSA indexer on {} of {} layers (the others reuse the previous layer's top-k and have "
                          "no indexer site; choose a layer with the layer option)",
                          s->model_type, with, own.size()));
    return OkStatus();
  }
  if (own[static_cast<size_t>(s->layer)]) return OkStatus();
  if (options.site == "indexer")
    return InvalidArgumentError(fmt::format(
        "config {}: layer {} has no indexer site: its indexer type is \"shared\" (it reuses the previous layer's "
        "top-k indices; indexer_types / index_topk_pattern / index_topk_freq)",
        source, s->layer));
  s->sites.erase(std::remove(s->sites.begin(), s->sites.end(), RotarySite::kIndexer), s->sites.end());
  Note(s, fmt::format("layer {}: indexer type \"shared\": no indexer site (it reuses the previous layer's top-k)",
                      s->layer));
  return OkStatus();
}

std::string SitesString(const std::vector<RotarySite>& sites) {
  std::string out;
  for (RotarySite site : sites) out += fmt::format("{}{}", out.empty() ? "" : ", ", ToString(site));
  return out;
}

// The site asked for (options.site; empty: the family's first), refused naming the sites there are.
Status SelectSite(const HfConfigOptions& options, const std::string& source, PositionScheme* s) {
  if (options.site.empty()) {
    s->site = s->sites.front();
    if (s->sites.size() > 1)
      Note(s, fmt::format("{} RoPE sites per attention layer ({}): {} described (choose with the site option)",
                          s->sites.size(), SitesString(s->sites), ToString(s->site)));
    return OkStatus();
  }
  RotarySite want;
  if (!ParseRotarySite(options.site, &want) || std::find(s->sites.begin(), s->sites.end(), want) == s->sites.end())
    return InvalidArgumentError(fmt::format("config {}: site {} is not one of {}'s RoPE sites ({})", source,
                                            QuoteForMessage(options.site),
                                            s->model_type.empty() ? "the model" : s->model_type, SitesString(s->sites)));
  s->site = want;
  return OkStatus();
}

// DeepSeek-V4's keyed parameter sets: rope_parameters {main, compress} when the config has them, else
// main = default RoPE at rope_theta and compress = the flat rope_scaling (or rope_parameters) at
// compress_rope_theta (attention_factor 1 for yarn when it gives none), as DeepseekV4Config builds them.
Result<json> DeepseekV4Set(const json& j, const std::string& source, const std::string& label) {
  if (Has(j, "rope_parameters") && j["rope_parameters"].is_object() && Has(j["rope_parameters"], "main") &&
      Has(j["rope_parameters"], "compress")) {
    const json& p = j["rope_parameters"][label];
    if (!p.is_object())
      return KeyError(source, "rope_parameters." + label, fmt::format("is {}, expected an object", JsonForMessage(p)));
    return p;
  }
  json p = json::object();
  if (label == "main") {
    p["rope_type"] = "default";
    if (Has(j, "rope_theta")) p["rope_theta"] = j["rope_theta"];
    return p;
  }
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!Has(j, key)) continue;
    if (!j[key].is_object())
      return KeyError(source, key, fmt::format("is {}, expected an object", JsonForMessage(j[key])));
    p = j[key];
    break;
  }
  if (Has(j, "compress_rope_theta")) p["rope_theta"] = j["compress_rope_theta"];
  const std::string type = Has(p, "rope_type") && p["rope_type"].is_string() ? p["rope_type"].get<std::string>()
                           : Has(p, "type") && p["type"].is_string()          ? p["type"].get<std::string>()
                                                                              : "default";
  if (type == "yarn" && !Has(p, "attention_factor")) p["attention_factor"] = 1.0;
  return p;
}

// The config as the generic RoPE reader must see it for the chosen layer and site: the family's keyed
// sets and defaults resolved, and a second site's head and window spelled as the reader knows them
// (head_dim + rotary_dim for a front window, qk_nope_head_dim + qk_rope_head_dim for a back one).
// *pairing: a site whose pairing is fixed by the family rather than the row (the DSA indexer).
Result<json> SiteView(const json& j, const std::string& source, const ModelFamily& f, HfConfigOptions* options,
                      std::optional<RopePairing>* pairing, PositionScheme* s) {
  json v = j;
  if (!f.default_rope_parameters.empty() && !Has(v, "rope_parameters") && !Has(v, "rope_scaling") &&
      !Has(v, "rope_theta")) {
    // The config class's own rope_parameters (the row's default_rope_parameters).
    v["rope_parameters"] = json::parse(f.default_rope_parameters);
    Note(s, fmt::format("no rope_parameters: {}'s config class defaults {}", s->model_type, f.default_rope_parameters));
  }
  if (f.layer_types_rule == LayerTypesRule::kGemma4Pattern) {
    // Gemma4TextConfig: head_dim 256, global_head_dim 512; a partial_rotary_factor in a default set is
    // not read.
    if (!Has(v, "head_dim")) v["head_dim"] = 256;
    if (!Has(v, std::string(f.full_head_dim_key))) v[std::string(f.full_head_dim_key)] = 512;
    json& rp = v["rope_parameters"];
    if (rp.is_object())
      for (auto it = rp.begin(); it != rp.end(); ++it)
        if (it.value().is_object() && it.value().value("rope_type", std::string("default")) == "default")
          it.value().erase("partial_rotary_factor");
    s->rope_keys = {"sliding_attention", "full_attention"};
  }
  if (f.sliding_base > 0 && !Has(v, "rope_parameters")) {
    // Gemma 3 / 3n's config class (convert_rope_params_to_dict): one parameter set per layer type, sliding
    // layers rope_local_base_freq (else its default local base), full layers rope_theta (else its default
    // global base) with rope_scaling, whether or not the config names the keys.
    json full = {{"rope_type", "default"}}, sliding = {{"rope_type", "default"}};
    if (Has(v, "rope_scaling")) {
      if (!v["rope_scaling"].is_object())
        return KeyError(source, "rope_scaling",
                        fmt::format("is {}, expected an object", JsonForMessage(v["rope_scaling"])));
      for (auto it = v["rope_scaling"].begin(); it != v["rope_scaling"].end(); ++it) full[it.key()] = it.value();
      if (!Has(v["rope_scaling"], "rope_type") && Has(v["rope_scaling"], "type"))
        full["rope_type"] = v["rope_scaling"]["type"];  // the older spelling of the same key
    }
    full["rope_theta"] = Has(v, "rope_theta") ? v["rope_theta"] : json(f.full_base);
    sliding["rope_theta"] = Has(v, "rope_local_base_freq") ? v["rope_local_base_freq"] : json(f.sliding_base);
    for (const auto& [key, base] : {std::pair{"rope_theta", f.full_base}, {"rope_local_base_freq", f.sliding_base}})
      if (!Has(v, key))
        Note(s, fmt::format("no {}: {}'s config class defaults it to {}", key, s->model_type, base));
    v.erase("rope_scaling");
    v.erase("rope_theta");
    v.erase("rope_local_base_freq");
    v["rope_parameters"] = {{"sliding_attention", sliding}, {"full_attention", full}};
    s->rope_keys = {"sliding_attention", "full_attention"};
  }
  if (f.layer_types_rule == LayerTypesRule::kHybridLayerPattern && !Has(v, "rope_parameters")) {
    // MiMo-V2's published spelling: rope_theta for full layers, swa_rope_theta for sliding ones.
    json full = {{"rope_type", "default"}}, sliding = {{"rope_type", "default"}};
    if (Has(v, "rope_theta")) full["rope_theta"] = v["rope_theta"];
    if (Has(v, "swa_rope_theta")) sliding["rope_theta"] = v["swa_rope_theta"];
    if (Has(v, "partial_rotary_factor")) {
      full["partial_rotary_factor"] = v["partial_rotary_factor"];
      sliding["partial_rotary_factor"] = v["partial_rotary_factor"];
    }
    if (Has(v, "rope_scaling") && v["rope_scaling"].is_object()) {
      const std::string t = v["rope_scaling"].value("rope_type", v["rope_scaling"].value("type", std::string("default")));
      if (t != "default")
        return UnimplementedError(fmt::format("config {}: key 'rope_scaling' type {} with hybrid_layer_pattern is not "
                                              "implemented",
                                              source, QuoteForMessage(t)));
    }
    v.erase("rope_scaling");
    v.erase("rope_theta");
    v.erase("swa_rope_theta");
    v["rope_parameters"] = {{"sliding_attention", sliding}, {"full_attention", full}};
    s->rope_keys = {"sliding_attention", "full_attention"};
  }
  const bool index_site = s->site == RotarySite::kIndexer;
  if (f.site_rule == SiteRule::kDsa && index_site) {
    // The index head: its FRONT qk_rope_head_dim dims rotate, with the MLA site's frequencies.
    if (!Has(v, "index_head_dim"))
      return KeyError(source, "index_head_dim", "is missing (the DSA indexer's head size)");
    POSENC_ASSIGN_OR_RETURN(const int64_t head, GetInt(v, "index_head_dim", source));
    if (!Has(v, "qk_rope_head_dim")) return KeyError(source, "qk_rope_head_dim", "is missing (the rotary width)");
    const json rope = v["qk_rope_head_dim"];
    for (const char* k : {"qk_rope_head_dim", "qk_nope_head_dim", "partial_rotary_factor", "rope_interleave"})
      v.erase(k);
    v["head_dim"] = head;
    v["rotary_dim"] = rope;
    *pairing = f.indexer_pairing;
  }
  if (f.site_rule == SiteRule::kDeepseekV4) {
    // Label: the indexer and compressor always take compress; attention and its output the layer's.
    const std::string type = options->layer_type.empty() ? std::string("sliding_attention") : options->layer_type;
    if (type != "sliding_attention" && type != "compressed_sparse_attention" && type != "heavily_compressed_attention")
      return InvalidArgumentError(fmt::format(
          "config {}: layer type {} is not one of {}'s (sliding_attention, compressed_sparse_attention, "
          "heavily_compressed_attention)",
          source, QuoteForMessage(type), s->model_type));
    if (options->layer_type.empty())
      Note(s, "deepseek_v4: sliding_attention layers described (main set); choose another with the layer type option");
    const bool compress = index_site || s->site == RotarySite::kCompressor || type != "sliding_attention";
    const std::string label = compress ? "compress" : "main";
    POSENC_ASSIGN_OR_RETURN(json p, DeepseekV4Set(v, source, label));
    int64_t head = 512;
    if (Has(v, "head_dim")) { POSENC_ASSIGN_OR_RETURN(head, GetInt(v, "head_dim", source)); }
    if (head <= 0) return KeyError(source, "head_dim", fmt::format("is {}, must be positive", head));
    double factor = 0;
    if (Has(p, "partial_rotary_factor")) {
      POSENC_ASSIGN_OR_RETURN(factor, GetNumber(p, "partial_rotary_factor", source));
    } else if (Has(v, "partial_rotary_factor")) {
      POSENC_ASSIGN_OR_RETURN(factor, GetNumber(v, "partial_rotary_factor", source));
    } else {
      int64_t rope = 64;
      if (Has(v, "qk_rope_head_dim")) { POSENC_ASSIGN_OR_RETURN(rope, GetInt(v, "qk_rope_head_dim", source)); }
      factor = static_cast<double>(rope) / static_cast<double>(head);
    }
    if (!(factor > 0 && factor <= 1))
      return KeyError(source, "partial_rotary_factor", fmt::format("is {}, must be in (0, 1]", factor));
    const auto rotary = static_cast<int64_t>(static_cast<double>(head) * factor);
    int64_t site_head = head;
    if (index_site) {
      if (!Has(v, "index_head_dim")) return KeyError(source, "index_head_dim", "is missing (the indexer's head size)");
      POSENC_ASSIGN_OR_RETURN(site_head, GetInt(v, "index_head_dim", source));
    }
    if (rotary <= 0 || rotary > site_head)
      return KeyError(source, index_site ? "index_head_dim" : "head_dim",
                      fmt::format("= {} cannot hold the {} rotary dims", site_head, rotary));
    p.erase("partial_rotary_factor");
    if (Has(p, "truncate")) {
      p.erase("truncate");
      Note(s, "deepseek_v4: truncate is not read (transformers looks for it at the top of the keyed dict)");
    }
    for (const char* k : {"rope_scaling", "rope_theta", "compress_rope_theta", "partial_rotary_factor", "head_dim"})
      v.erase(k);
    v["rope_parameters"] = p;
    v["qk_rope_head_dim"] = rotary;
    v["qk_nope_head_dim"] = site_head - rotary;
    s->rope_keys = {"main", "compress"};
    s->rope_key = label;
    s->rope_layer_type = type;
    s->layer_head_dim = head;
    if (s->site == RotarySite::kAttentionOutput) s->rotation_sign = -1;
    options->layer_type.clear();  // resolved here: the flat set above is the layer's
  }
  return v;
}

// The layer asked for (options->layer): its type from the derived layer types, checked against
// options->layer_type, becomes the layer type read.
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

// After the parse: a layer asked for that applies no RoPE (a NoPE layer, or one without attention)
// makes the scheme "none" for that layer, said in a note.
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

}  // namespace

namespace config_json {

namespace {

// Multimodal configs nest the language model's keys one level deep (text_config); a few levels are
// accepted, deeper is refused before it recurses (each level copies its object: depth squared).
constexpr int kMaxTextConfigDepth = 4;

Result<PositionScheme> ParseHfConfigJsonAt(const json& j, const std::string& source, const HfConfigOptions& options,
                                           int depth);

}  // namespace

Result<PositionScheme> ParseHfConfigJson(const json& j, const std::string& source, const HfConfigOptions& options) {
  return ParseHfConfigJsonAt(j, source, options, 0);
}

namespace {

Result<PositionScheme> ParseHfConfigJsonAt(const json& j, const std::string& source, const HfConfigOptions& options,
                                           int depth) {
  if (!j.is_object()) return InvalidArgumentError(fmt::format("config {}: top level is not a JSON object", source));
  PositionScheme s;
  POSENC_ASSIGN_OR_RETURN(std::optional<std::string> model_type, FindString(j, "model_type", source, NullIs::kWrongType));
  if (model_type) s.model_type = std::move(*model_type);
  if (s.model_type.empty() || FindModelFamily(s.model_type) == nullptr) FamilyFromClasses(j, &s);
  // Multimodal configs keep the language model's keys in text_config; some (transformers 5's Qwen3-VL) also
  // copy hidden_size to the top level, so the outer config is the model only where it has its own heads
  // or RoPE keys.
  const bool outer_is_model = Has(j, "rope_theta") || Has(j, "num_attention_heads") || Has(j, "n_head") ||
                              Has(j, "rope_scaling") || Has(j, "rope_parameters");
  // A nested language-model config of another type than an object (null: absent) is refused by name, not
  // skipped: the outer keys alone would describe some other model.
  for (const char* nested : {"text_config", "thinker_config"})
    if (Has(j, nested) && !j[nested].is_object() && !j[nested].is_null())
      return KeyError(source, nested,
                      fmt::format("is {}, expected an object (the language model's config) or null",
                                  JsonForMessage(j[nested])));
  if (Has(j, "thinker_config") && j["thinker_config"].is_object() && !outer_is_model && !Has(j, "text_config")) {
    // Qwen3-Omni: thinker_config.text_config holds the language model.
    if (depth >= kMaxTextConfigDepth)
      return KeyError(source, "thinker_config",
                      fmt::format("is nested more than {} levels deep", kMaxTextConfigDepth));
    json thinker = j["thinker_config"];
    if (!Has(thinker, "model_type") && !s.model_type.empty()) thinker["model_type"] = s.model_type;
    auto inner = ParseHfConfigJsonAt(thinker, source + " (thinker_config)", options, depth + 1);
    if (inner.ok()) inner->notes.insert(inner->notes.begin(), "read from thinker_config");
    return inner;
  }
  if (Has(j, "text_config") && j["text_config"].is_object() && !outer_is_model) {
    if (depth >= kMaxTextConfigDepth)
      return KeyError(
          source, "text_config",
          fmt::format("is nested more than {} levels deep (a model's config nests it once)", kMaxTextConfigDepth));
    json text = j["text_config"];
    if (!Has(text, "model_type") && !s.model_type.empty()) text["model_type"] = s.model_type;
    auto inner = ParseHfConfigJsonAt(text, source + " (text_config)", options, depth + 1);
    if (inner.ok()) inner->notes.insert(inner->notes.begin(), "read from text_config");
    return inner;
  }
  POSENC_ASSIGN_OR_RETURN(bool non_rope, ParseNonRope(j, source, &s));
  if (non_rope) return s;
  s.kind = PositionKind::kRope;
  const ModelFamily* family = FamilyOf(s);
  HfConfigOptions opts = options;
  if (family != nullptr) {
    // A family whose config can switch positions off (Granite 4.0-H, Kimi Linear) or whose attention
    // never rotates (Nemotron-H): "none", with the layer table (which layers have attention).
    POSENC_ASSIGN_OR_RETURN(const bool on, PositionsOn(j, source, *family, &s));
    if (!on) {
      s.kind = PositionKind::kNone;
      POSENC_RETURN_IF_ERROR(ParseLayerKeys(j, source, &s));
      POSENC_RETURN_IF_ERROR(SelectLayer(source, &opts, &s));
      POSENC_RETURN_IF_ERROR(CheckPositionalKeys(j, source, options, &s));
      return s;
    }
  }
  POSENC_ASSIGN_OR_RETURN(std::string family_note, CheckFamilyKnown(source, options, s));
  // The layer keys first: a layer type asked for is checked against the config's layer_types.
  POSENC_RETURN_IF_ERROR(ParseLayerKeys(j, source, &s));
  POSENC_RETURN_IF_ERROR(SelectLayer(source, &opts, &s));
  s.sites = FamilySites(family, j);
  if (family != nullptr) POSENC_RETURN_IF_ERROR(ApplyIndexerLayers(j, source, *family, opts, &s));
  POSENC_RETURN_IF_ERROR(SelectSite(opts, source, &s));
  std::optional<RopePairing> site_pairing;
  if (family != nullptr) {
    POSENC_ASSIGN_OR_RETURN(const json view, SiteView(j, source, *family, &opts, &site_pairing, &s));
    POSENC_RETURN_IF_ERROR(ParseRope(view, source, opts, site_pairing, &s));
  } else {
    POSENC_RETURN_IF_ERROR(ParseRope(j, source, opts, site_pairing, &s));
  }
  POSENC_RETURN_IF_ERROR(CheckPositionalKeys(j, source, options, &s));
  ApplyLayerSchedule(&s);
  if (!family_note.empty()) Note(&s, std::move(family_note));
  return s;
}

}  // namespace

}  // namespace config_json

Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source,
                                     const HfConfigOptions& options) {
  POSENC_ASSIGN_OR_RETURN(const json j, config_json::ParseText(json_text, fmt::format("config {}", source)));
  return config_json::ParseHfConfigJson(j, source, options);
}

Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source) {
  return ParseHfConfig(json_text, source, HfConfigOptions{});
}

Result<PositionScheme> LoadHfConfig(const std::string& path, const HfConfigOptions& options) {
  POSENC_ASSIGN_OR_RETURN(const json j, config_json::ReadFileJson(path, fmt::format("config {}", path)));
  return config_json::ParseHfConfigJson(j, path, options);
}

}  // namespace posenc
