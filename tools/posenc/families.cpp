// `posenc families`: the model-family registry (posenc/config/model_families.hpp), one row per family.
#include <cstdio>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "posenc/config/model_families.hpp"

namespace posenc::cli {
namespace {

using nlohmann::json;

// The rotary window as one word: whole, front(0.25), back, none.
std::string WindowText(const ModelFamily& f) {
  if (f.window == RotaryWindow::kFrontPartial) return fmt::format("front({})", f.default_partial_rotary_factor);
  return std::string(ToString(f.window));
}

json RowJson(const ModelFamily& f) {
  json r = {{"model_type", f.model_type},
            {"scheme", ToString(f.scheme)},
            {"window", ToString(f.window)},
            {"remote_code", f.remote_code},
            {"source", f.source}};
  if (f.scheme == PositionKind::kRope) r["pairing"] = ToString(f.pairing);
  if (f.window == RotaryWindow::kFrontPartial) r["default_partial_rotary_factor"] = f.default_partial_rotary_factor;
  // The text columns, each written where the row has it.
  using Text = std::string_view ModelFamily::*;
  static constexpr std::pair<const char*, Text> kText[] = {{"gguf_architecture", &ModelFamily::gguf_architecture},
                                                           {"base_key", &ModelFamily::base_key},
                                                           {"base_scale_key", &ModelFamily::base_scale_key},
                                                           {"head_dim_key", &ModelFamily::head_dim_key},
                                                           {"position_scale_key", &ModelFamily::position_scale_key},
                                                           {"refused_key", &ModelFamily::refused_key},
                                                           {"own_keys", &ModelFamily::own_keys},
                                                           {"layer_schedule", &ModelFamily::layer_schedule},
                                                           {"position_scaling", &ModelFamily::position_scaling},
                                                           {"derives_from", &ModelFamily::derives_from},
                                                           {"full_head_dim_key", &ModelFamily::full_head_dim_key},
                                                           {"ignored_keys", &ModelFamily::ignored_keys},
                                                           {"classes", &ModelFamily::classes}};
  for (const auto& [key, field] : kText)
    if (!(f.*field).empty()) r[key] = f.*field;
  if (const GgufArchitecture* a = FindGgufArchitecture(f.gguf_architecture)) r["gguf_rope"] = ToString(a->rope);
  if (f.fixed_base > 0) r["fixed_base"] = f.fixed_base;
  if (f.alibi_hidden_size > 0) r["alibi_hidden_size"] = f.alibi_hidden_size;
  if (f.sections != FamilySections::kNone) r["sections"] = ToString(f.sections);
  if (f.query_temperature == QueryTemperatureForm::kLlama4Tuning) r["query_temperature"] = "attn_temperature_tuning";
  if (f.query_temperature == QueryTemperatureForm::kScalingBeta) r["query_temperature"] = "llama_4_scaling_beta";
  if (f.qk_norm != QkNorm::kNone) r["qk_norm"] = ToString(f.qk_norm);
  if (!f.qk_norm_key.empty()) r["qk_norm_key"] = f.qk_norm_key;
  if (f.positions != PositionSwitch::kAlways) r["positions"] = ToString(f.positions);
  if (f.layer_types_rule != LayerTypesRule::kConfigOnly) r["layer_types_rule"] = ToString(f.layer_types_rule);
  if (f.site_rule != SiteRule::kAttention) r["sites"] = ToString(f.site_rule);
  if (f.site_rule == SiteRule::kDsa) r["indexer_pairing"] = ToString(f.indexer_pairing);
  if (f.site_rule == SiteRule::kDsa && f.indexer_types)
    r["indexer_layers"] = "indexer_types / index_topk_pattern / index_topk_freq: shared layers have no indexer site";
  if (f.keying == RopeKeying::kMainCompress) r["rope_keys"] = "main (sliding layers), compress (compressed layers)";
  return r;
}

void RegisterFamilies(CLI::App& app) {
  auto* cmd = app.add_subcommand("families",
                                 "List the model-family registry: per Hugging Face model_type the positional scheme, "
                                 "pair layout, rotary window, GGUF architecture, the family's own keys, layer "
                                 "schedule, and the modeling file each row was read from");
  static bool as_json = false;
  cmd->add_flag("--json", as_json, "Print a JSON array, one object per family");
  cmd->callback([] {
    if (as_json) {
      json rows = json::array();
      for (const ModelFamily& f : ModelFamilies()) rows.push_back(RowJson(f));
      std::printf("%s\n", rows.dump(2).c_str());
      SetExitCode(0);
      return;
    }
    std::printf("%-20s %-10s %-11s %-11s %-20s %s\n", "model_type", "scheme", "pairing", "window", "gguf (ggml rope)",
                "source");
    for (const ModelFamily& f : ModelFamilies()) {
      const std::string pairing = f.scheme == PositionKind::kRope ? std::string(ToString(f.pairing)) : "-";
      const GgufArchitecture* arch = FindGgufArchitecture(f.gguf_architecture);
      const std::string gguf = arch ? fmt::format("{} ({})", arch->name, ToString(arch->rope))
                                    : std::string(f.gguf_architecture.empty() ? "-" : "?");
      std::printf("%-20s %-10s %-11s %-11s %-20s %s%s\n", std::string(f.model_type).c_str(),
                  std::string(ToString(f.scheme)).c_str(), pairing.c_str(), WindowText(f).c_str(), gguf.c_str(),
                  f.remote_code ? "[remote] " : "", std::string(f.source).c_str());
      if (f.positions != PositionSwitch::kAlways)
        std::printf("%-20s   positions: %s\n", "", std::string(ToString(f.positions)).c_str());
      if (f.site_rule != SiteRule::kAttention)
        std::printf("%-20s   sites: %s\n", "", std::string(ToString(f.site_rule)).c_str());
      for (auto [label, v] : {std::pair{"keys", f.own_keys}, std::pair{"layers", f.layer_schedule},
                              std::pair{"scaling", f.position_scaling}, std::pair{"derives from", f.derives_from},
                              std::pair{"ignores", f.ignored_keys}})
        if (!v.empty()) std::printf("%-20s   %s: %s\n", "", label, std::string(v).c_str());
    }
    std::printf("%zu families\n", ModelFamilies().size());
    SetExitCode(0);
  });
}

}  // namespace
POSENC_CLI_COMMAND(42, RegisterFamilies);
}  // namespace posenc::cli
