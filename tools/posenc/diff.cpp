// `posenc diff A B [--seq-len N] [--json]`: do two descriptions of one model (config.json in either
// spelling, GGUF, Hugging Face folder, safetensors with a config beside it) induce the same positional
// computation, layer by layer and site by site? Exit 0 equivalent, 1 not, 2 bad input.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "posenc/model/rope_diff.hpp"

namespace posenc::cli {
namespace {

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
    std::fputs(as_json ? (RopeDiffReportJson(*r) + "\n").c_str() : RopeDiffReportText(*r).c_str(), stdout);
    SetExitCode(r->equivalent ? 0 : 1);
  });
}

}  // namespace
POSENC_CLI_COMMAND(46, RegisterDiff);
}  // namespace posenc::cli
