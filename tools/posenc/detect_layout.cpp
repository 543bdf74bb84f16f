// `posenc detect-layout MODEL --tokens 1,403,...`: next-token loss under each RoPE pair layout, the
// layout with the clearly lower loss (or "evidence too weak"), a warning when the file's declared
// layout disagrees, and the per-token evidence (posenc/layout_detect.hpp).
#include <cstdio>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "status_callback.hpp"
#include "posenc/model/layout_detect.hpp"

namespace posenc::cli {
namespace {

struct Options {
  std::string model, tokens;
  double min_margin = 0.1, z = 3.0;
  bool quiet = false;
};

Status Run(const Options& o) {
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                          ParseIntegerList("--tokens", o.tokens, 0, std::numeric_limits<int64_t>::max()));
  POSENC_ASSIGN_OR_RETURN(LayoutDetection d, DetectLayout(o.model, ids, {o.min_margin, o.z}));
  std::printf("%-12s %s\n", "layout", "mean next-token loss (nats)");
  for (const auto& e : d.candidates) std::printf("%-12s %.4f\n", std::string(ToString(e.pairing)).c_str(), e.mean_loss);
  if (!o.quiet) {
    std::printf("per-token loss (half / interleaved) for predicting token[t+1]:\n");
    for (size_t t = 0; t < d.candidates[0].token_losses.size(); ++t)
      std::printf("  t=%-4zu next=%-6lld %8.3f %8.3f\n", t, static_cast<long long>(ids[t + 1]),
                  d.candidates[0].token_losses[t], d.candidates[1].token_losses[t]);
  }
  std::printf("%s\n", d.summary.c_str());
  if (d.declared_disagrees)
    std::printf(
        "warning: the file's format declares %s, but the evidence says %s (a converted file, or one its runtime would "
        "run wrongly)\n",
        d.declared.c_str(), std::string(ToString(*d.verdict)).c_str());
  return OkStatus();
}

void RegisterDetectLayout(CLI::App& app) {
  auto* cmd = app.add_subcommand("detect-layout",
                                 "Which RoPE pair layout a Llama model (llama2.c, GGUF, safetensors) was trained for, "
                                 "from next-token loss under each");
  auto o = std::make_shared<Options>();
  cmd->add_option("MODEL", o->model,
                  "Llama-architecture model: llama2.c checkpoint, GGUF, safetensors file or HF folder")
      ->required();
  cmd->add_option("--tokens", o->tokens, "Comma-separated token ids of a natural text (BOS first), at least 2")
      ->required();
  AddRealOption(cmd, "--min-margin", o->min_margin, "Loss gap (nats/token) needed for a verdict", 0.0, 1e6)
      ->capture_default_str();
  AddRealOption(cmd, "--z", o->z, "Standard errors the gap must exceed", 0.0, 1e6)->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "Omit the per-token table");
  OnRunReportError(cmd, "detect-layout", [o] { return Run(*o); });
}

}  // namespace
POSENC_CLI_COMMAND(61, RegisterDetectLayout);
}  // namespace posenc::cli
