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
#include "posenc/config/scheme_description.hpp"
#include "posenc/io/mapped_file.hpp"
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
    Result<std::string> text = DescribeSchemeJson(*s, path, seq_len);
    if (!text.ok()) return ReportError("inspect", text.status());
    json d = json::parse(*text);
    if (model) {
      d["file"] = {{"path", model->path()},
                   {"format", std::string(ToString(model->format()))},
                   {"num_tensors", model->tensors().size()}};
      d["tensors"] = IdentityTensors(*model);
    }
    // JSON text is UTF-8: a byte of a path or a file's string that is not (a Latin-1 file name, say)
    // is written as U+FFFD rather than failing the whole command.
    if (as_json)
      std::printf("%s\n", d.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    else
      PrintText(d);
    SetExitCode(0);
  });
}

}  // namespace
POSENC_CLI_COMMAND(40, RegisterInspect);
}  // namespace posenc::cli
