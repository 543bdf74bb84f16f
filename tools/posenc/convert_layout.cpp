// `posenc convert-layout --from interleaved --to half IN OUT`: permutes the rows of W_q and W_k (and their
// biases, grouped-query key heads, fused qkv) so that a model trained for one RoPE pair layout runs with
// the other, every attention score unchanged (posenc/layout_convert.hpp). llama2.c, safetensors, GGUF.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "status_callback.hpp"
#include "posenc/model/layout_convert.hpp"

namespace posenc::cli {
namespace {

struct Options {
  std::string from, to, in, out, format = "auto", config;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0, rotary_start = -1;
};

Status Run(const Options& o) {
  LayoutConvertOptions c;
  if (!ParseRopePairing(o.from, &c.from))
    return InvalidArgumentError(fmt::format("--from '{}': expected half or interleaved", o.from));
  if (!ParseRopePairing(o.to, &c.to))
    return InvalidArgumentError(fmt::format("--to '{}': expected half or interleaved", o.to));
  if (c.from == c.to)
    return InvalidArgumentError(fmt::format("--from and --to are both '{}': there is nothing to convert", o.from));
  for (ModelFormat f : {ModelFormat::kLlama2c, ModelFormat::kSafetensors, ModelFormat::kGguf})
    if (o.format == ToString(f)) c.format = f;
  if (o.format != "auto" && !c.format.has_value())
    return InvalidArgumentError(fmt::format("--format '{}': expected auto, llama2c, safetensors or gguf", o.format));
  c.num_heads = o.heads;
  c.num_kv_heads = o.kv_heads;
  c.head_dim = o.head_dim;
  c.rotary_dim = o.rotary_dim;
  c.rotary_start = o.rotary_start;
  c.config_path = o.config;
  // ConvertLayoutFile refuses an output that is an input and writes atomically.
  POSENC_ASSIGN_OR_RETURN(LayoutConvertReport r, ConvertLayoutFile(o.in, o.out, c));
  std::printf("%s (%s): %s -> %s; %lld heads, %lld kv heads, head_dim %lld, rotary dims [%lld, %lld)\n", o.in.c_str(),
              std::string(ToString(r.format)).c_str(), std::string(ToString(c.from)).c_str(),
              std::string(ToString(c.to)).c_str(), static_cast<long long>(r.num_heads),
              static_cast<long long>(r.num_kv_heads), static_cast<long long>(r.from_layout.head_dim),
              static_cast<long long>(r.from_layout.rotary_start),
              static_cast<long long>(r.from_layout.rotary_start + r.from_layout.rotary_dim));
  std::printf("permuted %zu tensors:", r.permuted.size());
  for (size_t i = 0; i < r.permuted.size(); ++i) std::printf("%s %s", i ? "," : "", r.permuted[i].c_str());
  std::printf("\n");
  for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());
  std::printf("wrote %s\n", o.out.c_str());
  return OkStatus();
}

void RegisterConvertLayout(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert-layout",
                                 "Permute W_q/W_k rows so a model trained for one RoPE pair layout runs with the other "
                                 "(llama2.c, safetensors, GGUF)");
  auto o = std::make_shared<Options>();
  cmd->add_option("--from", o->from, "Layout the model was trained for: half or interleaved")->required();
  cmd->add_option("--to", o->to, "Layout to convert to: half or interleaved")->required();
  cmd->add_option("IN", o->in, "Input model file")->required();
  cmd->add_option("OUT", o->out, "Output model file (must differ from IN)")->required();
  cmd->add_option("--format", o->format, "auto (by magic), llama2c, safetensors or gguf")->capture_default_str();
  cmd->add_option("--config", o->config, "safetensors: config.json with the heads (default: the one beside IN)");
  // 0 (and -1 for --rotary-start) means "from the file"; 2^20 is the head_dim bound of the configs.
  constexpr int64_t kMax = int64_t{1} << 20;
  AddIntOption(cmd, "--heads", o->heads, "Override the number of query heads", 0, kMax);
  AddIntOption(cmd, "--kv-heads", o->kv_heads, "Override the number of key/value heads", 0, kMax);
  AddIntOption(cmd, "--head-dim", o->head_dim, "Override the head dimension", 0, kMax);
  AddIntOption(cmd, "--rotary-dim", o->rotary_dim, "Override the rotary window size (partial rotary)", 0, kMax);
  AddIntOption(cmd, "--rotary-start", o->rotary_start, "Override the first rotary dim (rope part after no-rope part)",
               -1, kMax);
  OnRunReportError(cmd, "convert-layout", [o] { return Run(*o); });
}

}  // namespace
POSENC_CLI_COMMAND(60, RegisterConvertLayout);
}  // namespace posenc::cli
