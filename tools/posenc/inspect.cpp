// `posenc inspect CONFIG.json|MODEL.gguf [--seq-len N] [--json]`: what positional scheme a model's
// config describes, with every RoPE pair's frequency, wavelength and regime at one sequence length.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/io/mapped_file.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_pairs.hpp"
#include "posenc/model/model_file.hpp"
#include "posenc/model/model_scheme.hpp"

namespace posenc::cli {
namespace {

using nlohmann::json;

// The tensors that carry identity and position, with their stored types and shapes.
json IdentityTensors(const ModelFile& m) {
  json out = json::array();
  auto add = [&](const char* role, const ModelTensor* t) {
    if (t == nullptr) return;
    out.push_back({{"role", role}, {"name", t->name}, {"type", t->type_name}, {"shape", t->shape}});
  };
  add("token_embedding", m.token_embedding());
  add("position_embedding", m.position_embedding());
  add("rope_freqs", m.rope_freqs());
  return out;
}

// The parameters the scaling uses, as (key, value) pairs in the config's own words: its row's keys
// (RopeScalings()); an optional number or a list that may be empty is shown when given.
json ScalingParams(const RopeConfig& rc) {
  json p = json::object();
  RopeConfig& c = const_cast<RopeConfig&>(rc);  // ScalingField points into it; only read here
  for (const RopeScalingKey& k : RopeScalingOf(rc.scaling.type).keys) {
    const ScalingField f = k.field(c);
    switch (k.kind) {
      case ScalingKeyKind::kNumber: p[std::string(k.name)] = *f.number; break;
      case ScalingKeyKind::kInteger: p[std::string(k.name)] = *f.integer; break;
      case ScalingKeyKind::kBoolean: p[std::string(k.name)] = *f.boolean; break;
      case ScalingKeyKind::kOptionalNumber:
        if (f.optional->has_value()) p[std::string(k.name)] = **f.optional;
        break;
      case ScalingKeyKind::kNumberList:
        if (k.rule != ScalingKeyRule::kPairListIfGiven || !f.list->empty()) p[std::string(k.name)] = *f.list;
        break;
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
  switch (s.kind) {
    case PositionKind::kAlibi:
      out["alibi_variant"] = s.alibi_variant;
      if (s.alibi_variant == "mpt") out["alibi_bias_max"] = s.alibi_bias_max;
      return out;
    case PositionKind::kT5Bucket:
      out["num_buckets"] = s.t5_num_buckets;
      out["max_distance"] = s.t5_max_distance;
      out["bidirectional"] = s.t5_bidirectional;
      return out;
    case PositionKind::kLearned:
    case PositionKind::kSinusoidal:
      out["max_position_embeddings"] = s.max_position_embeddings;
      if (!s.sinusoidal_layout.empty()) out["layout"] = s.sinusoidal_layout;
      return out;
    case PositionKind::kNone:
      // Layers with and without attention, none rotating (a hybrid model, or positions switched off).
      if (s.num_layers > 0) {
        POSENC_ASSIGN_OR_RETURN(LayerSchedule schedule, LayerRopeSchedule(s));
        out["layers"] = LayersJson(s, schedule);
      }
      if (s.layer >= 0) out["layer"] = s.layer;
      return out;
    case PositionKind::kRope: break;
  }
  const RopeConfig& rc = s.rope;
  int64_t seq_len = seq_len_opt;
  if (seq_len < 0) {
    seq_len = rc.max_position_embeddings;
    out["seq_len_note"] = rc.max_position_embeddings > 0 ? "no --seq-len: max_position_embeddings used"
                                                         : "no --seq-len and no max_position_embeddings: 0 used";
  }
  POSENC_ASSIGN_OR_RETURN(RopePairTable table, DescribeRopePairs(rc, seq_len));
  if (rc.multi_axis.has_value()) {
    json ma;
    ma["section_layout"] = std::string(ToString(rc.multi_axis->layout));
    ma["rules"] = std::string(ToString(rc.multi_axis->rules));
    ma["sections"] = rc.multi_axis->sections;
    ma["num_components"] = rc.multi_axis->num_components;
    out["multi_axis"] = ma;
  }
  out["spelling"] = s.rope_spelling;
  if (!s.rope_layer_types.empty()) {
    out["layer_types"] = s.rope_layer_types;
    out["layer_type"] = s.rope_layer_type;
  }
  if (!s.sites.empty()) {
    std::vector<std::string> sites;
    for (RotarySite site : s.sites) sites.emplace_back(ToString(site));
    out["sites"] = sites;
    out["site"] = std::string(ToString(s.site));
    out["rotation_sign"] = s.rotation_sign;
  }
  if (!s.rope_key.empty()) out["rope_key"] = s.rope_key;
  if (s.layer >= 0) out["layer"] = s.layer;
  out["layout"] = std::string(ToString(rc.layout.pairing));
  out["head_dim"] = rc.layout.head_dim;
  out["rotary_start"] = rc.layout.rotary_start;
  out["rotary_dim"] = rc.layout.rotary_dim;
  out["base"] = rc.base;
  if (rc.max_position_embeddings > 0) out["max_position_embeddings"] = rc.max_position_embeddings;
  out["scaling"] = std::string(ToString(rc.scaling.type));
  out["scaling_params"] = ScalingParams(rc);
  out["seq_len"] = seq_len;
  out["attention_scaling"] = table.attention_scaling;
  // The per-layer table (LayerRopeSchedule, the family's rule): which layers rotate, which are NoPE.
  std::optional<LayerSchedule> schedule;
  if (s.num_layers > 0) {
    POSENC_ASSIGN_OR_RETURN(schedule, LayerRopeSchedule(s));
    out["layers"] = LayersJson(s, *schedule);
  }
  // Position-dependent query temperature (Llama 4 on NoPE layers; Ministral 3 on every layer).
  if (s.attn_temperature.tuning) {
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
    out["query_temperature"] = qt;
  }
  // Each pair (DescribeRopePairs: the library's table, which the Python package reads too).
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
  out["pairs"] = pairs;
  return out;
}


void PrintText(const json& d) {
  auto num = [](const json& v) { return v.is_number_float() ? fmt::format("{:.10g}", v.get<double>()) : v.dump(); };
  std::printf("source: %s\n", d["source"].get<std::string>().c_str());
  std::printf("scheme: %s\n", d["scheme"].get<std::string>().c_str());
  for (const char* k : {"model_type", "num_heads", "num_kv_heads", "hidden_size", "fused_qkv", "qk_norm", "alibi_variant",
                        "alibi_bias_max", "num_buckets", "max_distance", "bidirectional", "spelling", "layer",
                        "layer_type", "rope_key", "site", "rotation_sign", "layout", "head_dim", "rotary_start",
                        "rotary_dim", "base", "max_position_embeddings"}) {
    if (!d.contains(k)) continue;
    const json& v = d[k];
    std::printf("%s: %s\n", k, v.is_string() ? v.get<std::string>().c_str() : num(v).c_str());
  }
  if (d.contains("layer_types")) std::printf("layer_types: %s\n", d["layer_types"].dump().c_str());
  if (d.contains("sites") && d["sites"].size() > 1) std::printf("sites: %s\n", d["sites"].dump().c_str());
  if (d.contains("multi_axis"))
    std::printf("multi_axis: %s (%s rules) sections %s over %lld components\n",
                d["multi_axis"]["section_layout"].get<std::string>().c_str(),
                d["multi_axis"]["rules"].get<std::string>().c_str(), d["multi_axis"]["sections"].dump().c_str(),
                static_cast<long long>(d["multi_axis"]["num_components"].get<int64_t>()));
  if (d.contains("scaling")) {
    std::printf("scaling: %s\n", d["scaling"].get<std::string>().c_str());
    for (auto it = d["scaling_params"].begin(); it != d["scaling_params"].end(); ++it) {
      const std::string v = it->is_array() ? fmt::format("[{} values]", it->size()) : num(*it);
      std::printf("  %s: %s\n", it.key().c_str(), v.c_str());
    }
    std::printf("seq_len: %lld%s\n", static_cast<long long>(d["seq_len"].get<int64_t>()),
                d.contains("seq_len_note") ? fmt::format(" ({})", d["seq_len_note"].get<std::string>()).c_str() : "");
    std::printf("attention_scaling: %s\n", num(d["attention_scaling"]).c_str());
  }
  if (d.contains("layers")) {
    // R = the layer applies RoPE, N = NoPE attention, - = no attention (mamba, linear attention, ...);
    // eight layers a group.
    const json& l = d["layers"];
    std::string map;
    int64_t without = 0;
    for (size_t i = 0; i < l["rope"].size(); ++i) {
      const bool attention = l["attention"][i].get<int>() != 0;
      without += attention ? 0 : 1;
      map += std::string(i > 0 && i % 8 == 0 ? " " : "") + (!attention ? "-" : l["rope"][i].get<int>() ? "R" : "N");
    }
    std::printf("layers: %lld (%s), %lld NoPE, %lld without attention: %s\n",
                static_cast<long long>(l["count"].get<int64_t>()), l["rule"].get<std::string>().c_str(),
                static_cast<long long>(l["nope_layers"].get<int64_t>() - without), static_cast<long long>(without),
                map.c_str());
    if (l.contains("rope_keys")) {
      std::string keys;
      for (size_t i = 0; i < l["rope_key"].size(); ++i) {
        const int64_t k = l["rope_key"][i].get<int64_t>();
        keys += std::string(i > 0 && i % 8 == 0 ? " " : "") + (k < 0 ? std::string("-") : std::to_string(k));
      }
      std::printf("parameter sets: %s per layer: %s\n", l["rope_keys"].dump().c_str(), keys.c_str());
    }
    if (l.contains("head_dim")) std::printf("head_dim per layer: %s\n", l["head_dim"].dump().c_str());
  }
  if (d.contains("query_temperature")) {
    const json& q = d["query_temperature"];
    std::printf("query_temperature: %s, on %s\n", q["formula"].get<std::string>().c_str(),
                q["on"].get<std::string>().c_str());
  }
  if (!d["notes"].empty()) {
    std::printf("notes:\n");
    for (const auto& n : d["notes"]) std::printf("  - %s\n", n.get<std::string>().c_str());
  }
  if (d.contains("tensors")) {
    std::printf("file: %s (%s), %zu tensors\n", d["file"]["path"].get<std::string>().c_str(),
                d["file"]["format"].get<std::string>().c_str(), d["file"]["num_tensors"].get<size_t>());
    for (const auto& t : d["tensors"])
      std::printf("  %-18s %-28s %-6s %s\n", t["role"].get<std::string>().c_str(), t["name"].get<std::string>().c_str(),
                  t["type"].get<std::string>().c_str(), t["shape"].dump().c_str());
  }
  if (d.contains("pairs")) {
    std::printf("%5s %11s %16s %16s %10s  %s\n", "pair", "dims", "frequency", "wavelength", "divisor", "regime");
    for (const auto& p : d["pairs"]) {
      const std::string dims = fmt::format("({},{})", p["dims"][0].get<int64_t>(), p["dims"][1].get<int64_t>());
      const std::string wl = p["wavelength"].is_null() ? "inf" : fmt::format("{:.6g}", p["wavelength"].get<double>());
      const std::string dv = p.contains("divisor") ? fmt::format("{:.6g}", p["divisor"].get<double>()) : "-";
      std::printf("%5lld %11s %16.9e %16s %10s  %s\n", static_cast<long long>(p["pair"].get<int64_t>()), dims.c_str(),
                  p["frequency"].get<double>(), wl.c_str(), dv.c_str(), p["regime"].get<std::string>().c_str());
    }
  }
}

void RegisterInspect(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "Show the positional scheme of a Hugging Face config.json or a model file (GGUF, safetensors, HF folder, "
      "llama2.c), its embedding / position / rope_freqs tensors, layout, rotary dims, base, "
      "scaling and its parameters, attention scaling, notes on defaulted values, and every RoPE pair's "
      "frequency, wavelength (2*pi/frequency, in tokens) and regime (defined below) at a sequence length");
  {
    // The regimes' one definition (PairRegimeMeaning), as docs/LEARNING.md quotes it.
    std::string footer = "Regimes (R: rotary dims, L: the original context, factor: the scaling's factor):";
    for (PairRegime r : kPairRegimes) footer += fmt::format("\n  {:<13}{}", ToString(r), PairRegimeMeaning(r));
    cmd->footer(footer);
  }
  static std::string path;
  static int64_t seq_len = -1;
  static bool as_json = false;
  static LayerSelection sel;
  static bool allow_default_base = false, require_freq_base = false;
  static std::string assume_layout;
  cmd->add_option("config", path, "config.json, or a model: .gguf, .safetensors, a Hugging Face folder, llama2.c .bin")
      ->required();
  cmd->add_option("--seq-len", seq_len, "Sequence length (largest position + 1); default max_position_embeddings")
      ->check(NonNegativeInteger());
  cmd->add_flag("--json", as_json, "Print the same as JSON");
  AddLayerSelection(cmd, sel, /*accept_keys=*/true);
  cmd->add_option("--assume-layout", assume_layout,
                  "Pair layout for a config.json whose model_type posenc does not know (see posenc families): "
                  "half or interleaved")
      ->check(CLI::IsMember({"half", "interleaved"}));
  cmd->add_flag("--allow-default-base", allow_default_base,
                "GGUF without <arch>.rope.freq_base: take llama.cpp's 10000, noted (the default; kept for scripts)");
  cmd->add_flag("--require-freq-base", require_freq_base,
                "GGUF without <arch>.rope.freq_base: fail naming the key instead of taking llama.cpp's 10000")
      ->excludes("--allow-default-base");
  cmd->callback([] {
    // A config.json describes the scheme alone; a model file (GGUF, safetensors, HF folder, llama2.c,
    // .npy) also lists its identity and position tensors, and the scheme comes from its metadata or
    // the config.json beside it.
    std::optional<ModelFile> model;
    if (!LooksLikeJsonConfig(path)) {
      Result<ModelFile> m = OpenModel(path);
      if (!m.ok()) return ReportError("inspect", m.status());
      model = std::move(m).value();
    }
    ModelSchemeOptions options;
    options.layer_type = sel.layer_type;
    options.layer = sel.layer;
    options.site = sel.site;
    options.understood_keys = sel.accept_keys;
    options.allow_default_freq_base = !require_freq_base;
    if (RopePairing pairing; !assume_layout.empty() && ParseRopePairing(assume_layout, &pairing))
      options.assume_layout = pairing;
    Result<PositionScheme> s = model ? ModelScheme(*model, options) : ConfigFileScheme(path, options);
    if (!s.ok()) return ReportError("inspect", s.status());
    Result<json> d = Describe(*s, path, seq_len);
    if (!d.ok()) return ReportError("inspect", d.status());
    if (model) {
      (*d)["file"] = {{"path", model->path()},
                      {"format", std::string(ToString(model->format()))},
                      {"num_tensors", model->tensors().size()}};
      (*d)["tensors"] = IdentityTensors(*model);
    }
    // JSON text is UTF-8: a byte of a path or a file's string that is not (a Latin-1 file name, say)
    // is written as U+FFFD rather than failing the whole command.
    if (as_json)
      std::printf("%s\n", d->dump(2, ' ', false, json::error_handler_t::replace).c_str());
    else
      PrintText(*d);
    SetExitCode(0);
  });
}

}  // namespace
POSENC_CLI_COMMAND(40, RegisterInspect);
}  // namespace posenc::cli
