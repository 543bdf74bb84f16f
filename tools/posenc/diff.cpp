// `posenc diff A B [--seq-len N] [--json]`: do two descriptions of one model (config.json in either
// spelling, GGUF, Hugging Face folder, safetensors with a config beside it) induce the same positional
// computation, layer by layer and site by site? Exit 0 equivalent, 1 not, 2 bad input.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "posenc/model/rope_diff.hpp"

namespace posenc::cli {
namespace {

using nlohmann::json;

json ReportJson(const RopeDiffReport& r) {
  json out;
  out["equivalent"] = r.equivalent;
  out["a"] = r.a_source;
  out["b"] = r.b_source;
  out["seq_len"] = r.seq_len;
  out["summary"] = r.summary;
  json diffs = json::array();
  for (const RopeDifference& d : r.differences) {
    json j = {{"field", d.field}, {"a", d.a}, {"b", d.b}, {"affects", d.affects}, {"text", d.text}};
    if (d.first_layer >= 0) j["layers"] = {d.first_layer, d.last_layer};
    if (!d.site.empty()) j["site"] = d.site;
    diffs.push_back(std::move(j));
  }
  out["differences"] = diffs;
  auto pos = [](int64_t p) { return p < 0 ? json(nullptr) : json(p); };
  out["cost"] = {{"structural", r.cost.structural},
                 {"max_angle_diff", r.cost.max_angle_diff},
                 {"max_at_pair", pos(r.cost.max_at_pair)},
                 {"max_at_position", pos(r.cost.max_at_position)},
                 {"max_at_layer", pos(r.cost.max_at_layer)},
                 {"attention_scaling_a", r.cost.attention_scaling_a},
                 {"attention_scaling_b", r.cost.attention_scaling_b},
                 {"first_position_over_f32_rounding", pos(r.cost.first_position_f32)},
                 {"first_position_over_1e-3_rad", pos(r.cost.first_position_1e3)}};
  return out;
}

void PrintText(const RopeDiffReport& r) {
  std::printf("A: %s\nB: %s\n", r.a_source.c_str(), r.b_source.c_str());
  std::printf("%s\n", r.summary.c_str());
  for (const RopeDifference& d : r.differences) std::printf("  %s\n", d.text.c_str());
  if (r.equivalent) return;
  auto pos = [](int64_t p) { return p < 0 ? std::string("never") : fmt::format("position {}", p); };
  std::printf("cost over positions below %lld:\n", static_cast<long long>(r.seq_len));
  if (r.cost.max_at_pair >= 0)
    std::printf("  largest angle difference %.6g rad at pair %lld, position %lld, layer %lld\n", r.cost.max_angle_diff,
                static_cast<long long>(r.cost.max_at_pair), static_cast<long long>(r.cost.max_at_position),
                static_cast<long long>(r.cost.max_at_layer));
  if (r.cost.attention_scaling_a != r.cost.attention_scaling_b)
    std::printf("  attention scaling A %.10g, B %.10g\n", r.cost.attention_scaling_a, r.cost.attention_scaling_b);
  if (r.cost.structural) std::printf("  structural: the rotated dims themselves differ (pairing, window, sections or layers)\n");
  std::printf("  past float32 rounding from %s; past 1e-3 rad from %s\n", pos(r.cost.first_position_f32).c_str(),
              pos(r.cost.first_position_1e3).c_str());
}

void RegisterDiff(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "diff",
      "Compare two descriptions of one model (config.json in either spelling, GGUF, HF folder, safetensors): "
      "the same positional computation layer by layer? What differs and from which position it matters. "
      "Exit 0 equivalent, 1 not, 2 bad input");
  static std::string a, b, assume_layout;
  static int64_t seq_len = 0;
  static bool as_json = false, strict_pairing = false;
  cmd->add_option("A", a, "config.json, .gguf, .safetensors, Hugging Face folder")->required();
  cmd->add_option("B", b, "the other description")->required();
  AddIntOption(cmd, "--seq-len", seq_len,
               "Positions compared: [0, N); length-dependent scalings evaluated up to N (default: the larger "
               "max_position_embeddings)",
               1, kMaxRopePosition);
  cmd->add_flag("--json", as_json, "Print the report as JSON");
  cmd->add_flag("--strict-pairing", strict_pairing,
                "Count a GGUF's interleaved pairs against a config's half pairs as a difference (by default the "
                "converter's W_q/W_k permutation makes them the same computation)");
  cmd->add_option("--assume-layout", assume_layout,
                  "Pair layout for a config.json of a model_type posenc does not know: half or interleaved")
      ->check(CLI::IsMember({"half", "interleaved"}));
  cmd->callback([] {
    ModelSchemeOptions options;
    if (RopePairing p; !assume_layout.empty() && ParseRopePairing(assume_layout, &p)) options.assume_layout = p;
    Result<RopeDescription> da = OpenRopeDescription(a, options);
    if (!da.ok()) return ReportError("diff", da.status());
    Result<RopeDescription> db = OpenRopeDescription(b, options);
    if (!db.ok()) return ReportError("diff", db.status());
    Result<RopeDiffReport> r = DiffRope(*da, *db, RopeDiffOptions{.seq_len = seq_len, .strict_pairing = strict_pairing});
    if (!r.ok()) return ReportError("diff", r.status());
    if (as_json)
      std::printf("%s\n", ReportJson(*r).dump(2, ' ', false, json::error_handler_t::replace).c_str());
    else
      PrintText(*r);
    SetExitCode(r->equivalent ? 0 : 1);
  });
}

}  // namespace
POSENC_CLI_COMMAND(46, RegisterDiff);
}  // namespace posenc::cli
