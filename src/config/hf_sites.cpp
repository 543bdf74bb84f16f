// Hugging Face config.json: positions on or off, the RoPE sites of a family's attention layers, and the
// config as the RoPE reader sees it for the layer and site asked for.
#include "config/hf_sites.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/message.hpp"
#include "config/hf_config_internal.hpp"
#include "config/json_util.hpp"

namespace posenc::hf_json {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {

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

std::string SitesString(const std::vector<RotarySite>& sites) {
  std::string out;
  for (RotarySite site : sites) out += fmt::format("{}{}", out.empty() ? "" : ", ", ToString(site));
  return out;
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

// ---------- the site's view of the config: one helper a family's spelling ----------

// A family's RoPE parameters as one set per layer type (sliding_attention, full_attention).
void SetPerTypeSets(json sliding, json full, json* v, PositionScheme* s) {
  (*v)["rope_parameters"] = {{"sliding_attention", std::move(sliding)}, {"full_attention", std::move(full)}};
  s->rope_keys = {"sliding_attention", "full_attention"};
}

// Gemma4TextConfig: head_dim 256, global_head_dim 512; a partial_rotary_factor in a default set is
// not read.
void Gemma4View(const ModelFamily& f, json* view, PositionScheme* s) {
  json& v = *view;
  if (!Has(v, "head_dim")) v["head_dim"] = 256;
  if (!Has(v, std::string(f.full_head_dim_key))) v[std::string(f.full_head_dim_key)] = 512;
  json& rp = v["rope_parameters"];
  if (rp.is_object())
    for (auto it = rp.begin(); it != rp.end(); ++it)
      if (it.value().is_object()) {
        // Only a set that says "default" (or says nothing) drops the factor; a rope_type of another
        // type is left for the set's reader, whose error names it.
        const json* t = Find(it.value(), "rope_type");
        if (t == nullptr || (t->is_string() && t->get<std::string>() == "default"))
          it.value().erase("partial_rotary_factor");
      }
  s->rope_keys = {"sliding_attention", "full_attention"};
}

// Gemma 3 / 3n's config class (convert_rope_params_to_dict): one parameter set per layer type, sliding
// layers rope_local_base_freq (else its default local base), full layers rope_theta (else its default
// global base) with rope_scaling, whether or not the config names the keys.
Status Gemma3View(const std::string& source, const ModelFamily& f, json* view, PositionScheme* s) {
  json& v = *view;
  json full = {{"rope_type", "default"}}, sliding = {{"rope_type", "default"}};
  if (Has(v, "rope_scaling")) {
    if (!v["rope_scaling"].is_object()) return ExpectedError(source, "rope_scaling", v["rope_scaling"], "an object");
    for (auto it = v["rope_scaling"].begin(); it != v["rope_scaling"].end(); ++it) full[it.key()] = it.value();
    if (!Has(v["rope_scaling"], "rope_type") && Has(v["rope_scaling"], "type"))
      full["rope_type"] = v["rope_scaling"]["type"];  // the older spelling of the same key
  }
  full["rope_theta"] = Has(v, "rope_theta") ? v["rope_theta"] : json(f.full_base);
  sliding["rope_theta"] = Has(v, "rope_local_base_freq") ? v["rope_local_base_freq"] : json(f.sliding_base);
  for (const auto& [key, base] : {std::pair{"rope_theta", f.full_base}, {"rope_local_base_freq", f.sliding_base}})
    if (!Has(v, key)) Note(s, fmt::format("no {}: {}'s config class defaults it to {}", key, s->model_type, base));
  v.erase("rope_scaling");
  v.erase("rope_theta");
  v.erase("rope_local_base_freq");
  SetPerTypeSets(std::move(sliding), std::move(full), &v, s);
  return OkStatus();
}

// MiMo-V2's published spelling: rope_theta for full layers, swa_rope_theta for sliding ones.
Status MimoV2View(const std::string& source, json* view, PositionScheme* s) {
  json& v = *view;
  json full = {{"rope_type", "default"}}, sliding = {{"rope_type", "default"}};
  if (Has(v, "rope_theta")) full["rope_theta"] = v["rope_theta"];
  if (Has(v, "swa_rope_theta")) sliding["rope_theta"] = v["swa_rope_theta"];
  if (Has(v, "partial_rotary_factor")) {
    full["partial_rotary_factor"] = v["partial_rotary_factor"];
    sliding["partial_rotary_factor"] = v["partial_rotary_factor"];
  }
  if (Has(v, "rope_scaling") && v["rope_scaling"].is_object()) {
    const json& rs = v["rope_scaling"];
    POSENC_ASSIGN_OR_RETURN(std::optional<std::string> type, FindString(rs, "type", source));
    POSENC_ASSIGN_OR_RETURN(std::optional<std::string> rope_type, FindString(rs, "rope_type", source));
    const std::string t = rope_type.value_or(type.value_or("default"));
    if (t != "default")
      return UnimplementedError(fmt::format("config {}: key 'rope_scaling' type {} with hybrid_layer_pattern is not "
                                            "implemented",
                                            source, QuoteForMessage(t)));
  }
  v.erase("rope_scaling");
  v.erase("rope_theta");
  v.erase("swa_rope_theta");
  SetPerTypeSets(std::move(sliding), std::move(full), &v, s);
  return OkStatus();
}

// The DSA indexer's head: its FRONT qk_rope_head_dim dims rotate, with the MLA site's frequencies.
Status DsaIndexerView(const std::string& source, const ModelFamily& f, json* view,
                      std::optional<RopePairing>* pairing) {
  json& v = *view;
  if (!Has(v, "index_head_dim")) return KeyError(source, "index_head_dim", "is missing (the DSA indexer's head size)");
  POSENC_ASSIGN_OR_RETURN(const int64_t head, GetInt(v, "index_head_dim", source));
  if (!Has(v, "qk_rope_head_dim")) return KeyError(source, "qk_rope_head_dim", "is missing (the rotary width)");
  const json rope = v["qk_rope_head_dim"];
  for (const char* k : {"qk_rope_head_dim", "qk_nope_head_dim", "partial_rotary_factor", "rope_interleave"})
    v.erase(k);
  v["head_dim"] = head;
  v["rotary_dim"] = rope;
  *pairing = f.indexer_pairing;
  return OkStatus();
}

// DeepSeek-V4's head (head_dim, default 512), the site's head (the indexer's index_head_dim) and the
// rotary dims: the head times partial_rotary_factor (the set's, else the top level's, else
// qk_rope_head_dim / head_dim with qk_rope_head_dim's default 64).
struct DeepseekV4Dims {
  int64_t head = 512, rotary = 0, site_head = 0;
};

Result<DeepseekV4Dims> DeepseekV4HeadDims(const json& v, const json& p, const std::string& source, bool index_site) {
  DeepseekV4Dims d;
  if (Has(v, "head_dim")) { POSENC_ASSIGN_OR_RETURN(d.head, GetInt(v, "head_dim", source)); }
  if (d.head <= 0) return KeyError(source, "head_dim", fmt::format("is {}, must be positive", d.head));
  double factor = 0;
  if (Has(p, "partial_rotary_factor")) {
    POSENC_ASSIGN_OR_RETURN(factor, GetNumber(p, "partial_rotary_factor", source));
  } else if (Has(v, "partial_rotary_factor")) {
    POSENC_ASSIGN_OR_RETURN(factor, GetNumber(v, "partial_rotary_factor", source));
  } else {
    int64_t rope = 64;
    if (Has(v, "qk_rope_head_dim")) { POSENC_ASSIGN_OR_RETURN(rope, GetInt(v, "qk_rope_head_dim", source)); }
    factor = static_cast<double>(rope) / static_cast<double>(d.head);
  }
  if (!(factor > 0 && factor <= 1))
    return KeyError(source, "partial_rotary_factor", fmt::format("is {}, must be in (0, 1]", factor));
  d.rotary = static_cast<int64_t>(static_cast<double>(d.head) * factor);
  d.site_head = d.head;
  if (index_site) {
    if (!Has(v, "index_head_dim")) return KeyError(source, "index_head_dim", "is missing (the indexer's head size)");
    POSENC_ASSIGN_OR_RETURN(d.site_head, GetInt(v, "index_head_dim", source));
  }
  if (d.rotary <= 0 || d.rotary > d.site_head)
    return KeyError(source, index_site ? "index_head_dim" : "head_dim",
                    fmt::format("= {} cannot hold the {} rotary dims", d.site_head, d.rotary));
  return d;
}

// DeepSeek-V4: the layer type's (or site's) keyed set, flat, with the site's head as MLA's nope + rope.
Status DeepseekV4View(const std::string& source, HfConfigOptions* options, json* view, PositionScheme* s) {
  json& v = *view;
  const bool index_site = s->site == RotarySite::kIndexer;
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
  POSENC_ASSIGN_OR_RETURN(const DeepseekV4Dims d, DeepseekV4HeadDims(v, p, source, index_site));
  p.erase("partial_rotary_factor");
  if (Has(p, "truncate")) {
    p.erase("truncate");
    Note(s, "deepseek_v4: truncate is not read (transformers looks for it at the top of the keyed dict)");
  }
  for (const char* k : {"rope_scaling", "rope_theta", "compress_rope_theta", "partial_rotary_factor", "head_dim"})
    v.erase(k);
  v["rope_parameters"] = p;
  v["qk_rope_head_dim"] = d.rotary;
  v["qk_nope_head_dim"] = d.site_head - d.rotary;
  s->rope_keys = {"main", "compress"};
  s->rope_key = label;
  s->rope_layer_type = type;
  s->layer_head_dim = d.head;
  if (s->site == RotarySite::kAttentionOutput) s->rotation_sign = -1;
  options->layer_type.clear();  // resolved here: the flat set above is the layer's
  return OkStatus();
}

}  // namespace

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

Result<json> SiteView(const json& j, const std::string& source, const ModelFamily& f, HfConfigOptions* options,
                      std::optional<RopePairing>* pairing, PositionScheme* s) {
  json v = j;
  if (!f.default_rope_parameters.empty() && !Has(v, "rope_parameters") && !Has(v, "rope_scaling") &&
      !Has(v, "rope_theta")) {
    // The config class's own rope_parameters (the row's default_rope_parameters).
    v["rope_parameters"] = json::parse(f.default_rope_parameters);
    Note(s, fmt::format("no rope_parameters: {}'s config class defaults {}", s->model_type, f.default_rope_parameters));
  }
  if (f.layer_types_rule == LayerTypesRule::kGemma4Pattern) Gemma4View(f, &v, s);
  if (f.sliding_base > 0 && !Has(v, "rope_parameters")) {
    POSENC_RETURN_IF_ERROR(Gemma3View(source, f, &v, s));
  }
  if (f.layer_types_rule == LayerTypesRule::kHybridLayerPattern && !Has(v, "rope_parameters")) {
    POSENC_RETURN_IF_ERROR(MimoV2View(source, &v, s));
  }
  if (f.site_rule == SiteRule::kDsa && s->site == RotarySite::kIndexer) {
    POSENC_RETURN_IF_ERROR(DsaIndexerView(source, f, &v, pairing));
  }
  if (f.site_rule == SiteRule::kDeepseekV4) {
    POSENC_RETURN_IF_ERROR(DeepseekV4View(source, options, &v, s));
  }
  return v;
}

}  // namespace posenc::hf_json
