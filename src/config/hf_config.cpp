// Hugging Face config.json -> PositionScheme: the top-level parse (nested text configs, the order of
// the reader's steps), the family a config names, and the refusal of positional keys nobody reads. The
// steps are the reader's parts (hf_config_internal.hpp lists them).
#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/core/message.hpp"
#include "config/config_json.hpp"
#include "config/hf_config_internal.hpp"
#include "config/hf_layer_keys.hpp"
#include "config/hf_non_rope.hpp"
#include "config/hf_rope_params.hpp"
#include "config/hf_sites.hpp"
#include "config/json_util.hpp"

namespace posenc {

namespace {

using nlohmann::json;
using namespace json_util;  // NOLINT: the config readers' shared getters
using namespace hf_json;    // NOLINT: the reader's parts and their shared helpers

// ---------- family facts ----------

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
  return NoJsonThrow(fmt::format("config {}", source), [&] { return ParseHfConfigJsonAt(j, source, options, 0); });
}

namespace {

// The language model's config nested under `key` (text_config, thinker_config), read one level down with
// the outer model_type where it has none, and noted; refused past kMaxTextConfigDepth (`deep_note` ends
// that message).
Result<PositionScheme> ParseNested(const json& j, const char* key, const std::string& source,
                                   const HfConfigOptions& options, int depth, const std::string& model_type,
                                   std::string_view deep_note) {
  if (depth >= kMaxTextConfigDepth)
    return KeyError(source, key, fmt::format("is nested more than {} levels deep{}", kMaxTextConfigDepth, deep_note));
  json nested = j[key];
  if (!Has(nested, "model_type") && !model_type.empty()) nested["model_type"] = model_type;
  auto inner = ParseHfConfigJsonAt(nested, fmt::format("{} ({})", source, key), options, depth + 1);
  if (inner.ok()) inner->notes.insert(inner->notes.begin(), fmt::format("read from {}", key));
  return inner;
}

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
      return ExpectedError(source, nested, j[nested], "an object (the language model's config) or null");
  if (Has(j, "thinker_config") && j["thinker_config"].is_object() && !outer_is_model && !Has(j, "text_config")) {
    // Qwen3-Omni: thinker_config.text_config holds the language model.
    return ParseNested(j, "thinker_config", source, options, depth, s.model_type, "");
  }
  if (Has(j, "text_config") && j["text_config"].is_object() && !outer_is_model)
    return ParseNested(j, "text_config", source, options, depth, s.model_type, " (a model's config nests it once)");
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
