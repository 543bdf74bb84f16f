// `posenc rope`: rotate an array [tokens, heads, head_dim] (or [heads, tokens, head_dim]) for a model config.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "status_callback.hpp"
#include "posenc/io/file_io.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/model/model_file.hpp"
#include "posenc/model/model_scheme.hpp"

namespace posenc::cli {
namespace {

struct RopeOptions {
  std::string config, model, positions, input, output;
  std::string precision = "reference";
  std::string layout;
  std::string assume_layout;  // a config.json of a model_type posenc does not know: its pair layout
  std::string direction = "forward";
  std::string order = "tokens-first";
  int64_t seq_len = 0;
  // Which layer (index or type) and RoPE site of the model to rotate for, and the positional-looking
  // config keys stated as understood.
  LayerSelection sel;
};

// What the model does at the layer and site asked for: its RoPE, the direction of the site (DeepSeek-V4's
// attention output rotates backwards), or no positional transform at all (a NoPE or mamba layer).
struct SiteRope {
  RopeConfig rope;
  bool inverse = false;
  bool none = false;
  std::string why_none{};
};

// The RoPE of --model (any model OpenModel reads: GGUF, Hugging Face folder, safetensors with its
// config.json, llama2.c) or of --config: a .gguf model likewise, else a JSON text that is ggml_rope_ext
// parameters (n_dims, mode, freq_base, ...; head_dim from the input) or a Hugging Face config.json in
// either spelling. The file is read once; a model's scheme comes from ModelScheme.
Result<SiteRope> SiteOf(const PositionScheme& scheme, const std::string& path) {
  SiteRope out;
  if (scheme.kind == PositionKind::kNone) {
    out.none = true;
    out.why_none = scheme.notes.empty() ? std::string("no positions") : scheme.notes.back();
    return out;
  }
  if (scheme.kind != PositionKind::kRope)
    return InvalidArgumentError(
        fmt::format("config {}: the model's scheme is {}, not rope", path, ToString(scheme.kind)));
  out.rope = scheme.rope;
  out.inverse = scheme.rotation_sign < 0;
  return out;
}

Result<SiteRope> LoadRopeConfig(const RopeOptions& o, int64_t input_head_dim) {
  if (o.model.empty() == o.config.empty()) return InvalidArgumentError("give exactly one of --config and --model");
  const std::string& path = o.model.empty() ? o.config : o.model;
  ModelSchemeOptions scheme_options;
  scheme_options.layer = o.sel.layer;
  scheme_options.layer_type = o.sel.layer_type;
  scheme_options.site = o.sel.site;
  scheme_options.understood_keys = o.sel.accept_keys;
  const bool asked_layer =
      o.sel.layer >= 0 || !o.sel.layer_type.empty() || !o.sel.site.empty() || !o.sel.accept_keys.empty();
  if (RopePairing pairing; !o.assume_layout.empty()) {
    if (!ParseRopePairing(o.assume_layout, &pairing))
      return InvalidArgumentError(fmt::format("--assume-layout '{}' (expected half or interleaved)", o.assume_layout));
    scheme_options.assume_layout = pairing;
  }
  if (o.model.empty() && !o.config.ends_with(".gguf") && (scheme_options.assume_layout.has_value() || asked_layer)) {
    // --assume-layout, --layer, --layer-type or --site state that --config is a Hugging Face config.json
    // (ggml parameters give their mode and have one rotation).
    POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, ConfigFileScheme(o.config, scheme_options));
    return SiteOf(scheme, o.config);
  }
  if (o.model.empty() && !o.config.ends_with(".gguf")) {
    Result<std::string> text = ReadFileToString(o.config);  // a regular file, bounded, never blocking
    if (!text.ok()) return text.status().WithContext(fmt::format("config {}: cannot open file: ", o.config));
    POSENC_ASSIGN_OR_RETURN(RopeConfig rc, ParseRopeConfigJson(*text, input_head_dim, o.config));
    return SiteRope{.rope = std::move(rc)};
  }
  POSENC_ASSIGN_OR_RETURN(ModelFile model, OpenModel(path));
  POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, ModelScheme(model, scheme_options));
  return SiteOf(scheme, path);
}

HeadsView ViewOf(Array& x, bool heads_first) {
  // Heads first ([heads, tokens, head_dim], one batch element of a [batch, heads, seq, head_dim]
  // tensor): tokens are head_dim apart, heads tokens * head_dim.
  const int64_t tokens = x.dim(heads_first ? 1 : 0), heads = x.dim(heads_first ? 0 : 1), head_dim = x.dim(2);
  return heads_first ? HeadsView{x.bytes(), x.dtype(), tokens, heads, head_dim, head_dim, tokens * head_dim}
                     : HeadsView::Dense(x.bytes(), x.dtype(), tokens, heads, head_dim);
}

// The length the frequencies are computed for: --seq-len, or max(position) + 1, saturating at 2^63-1
// (the positions are range-checked later, by the kernels: a position of 2^63-1 must reach that check
// as itself, not wrap the length to a negative number first).
int64_t SeqLenFor(int64_t seq_len, std::span<const int64_t> positions) {
  for (int64_t p : positions) seq_len = std::max(seq_len, p == INT64_MAX ? INT64_MAX : p + 1);
  return seq_len;
}

// A multi-axis config (M-RoPE, ggml MROPE / IMROPE / VISION): positions [components, tokens], one row
// per position component (posenc/math/multi_axis.hpp); a [tokens] file is refused, naming the shape.
Status RunMultiAxisRope(const RopeOptions& o, const RopeConfig& rc, const Array& pos_array, Array x,
                        RopePrecision precision) {
  const bool heads_first = o.order == "heads-first";
  const HeadsView view = ViewOf(x, heads_first);
  if (view.head_dim != rc.layout.head_dim)
    return InvalidArgumentError(
        fmt::format("input {}: head_dim {} differs from the config's {}", o.input, view.head_dim, rc.layout.head_dim));
  if (pos_array.dtype() != DType::kI64 && pos_array.dtype() != DType::kI32)
    return InvalidArgumentError(
        fmt::format("positions {}: dtype {} is not int64 or int32", o.positions, ToString(pos_array.dtype())));
  POSENC_ASSIGN_OR_RETURN(Array pos64, pos_array.AsType(DType::kI64));
  const int64_t components = rc.multi_axis->num_components;
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisPositions(
      pos64.shape(), pos64.span<int64_t>(), components,
      fmt::format("positions {} ({} rope, {} components)", o.positions, ToString(rc.multi_axis->layout), components)));
  if (pos64.dim(1) != view.tokens)
    return InvalidArgumentError(
        fmt::format("input {} has {} tokens, positions {} has {}", o.input, view.tokens, o.positions, pos64.dim(1)));
  const int64_t seq_len = SeqLenFor(o.seq_len, pos64.span<int64_t>());
  POSENC_ASSIGN_OR_RETURN(MultiAxisPlan plan, ComputeMultiAxisRope(rc, seq_len));
  MultiAxisRopeArgs args{rc.layout,
                         &plan.freqs,
                         plan.pair_component,
                         components,
                         pos64.span<int64_t>(),
                         precision,
                         o.direction == "backward" ? RopeDirection::kBackward : RopeDirection::kForward};
  POSENC_RETURN_IF_ERROR(ApplyMultiAxisRope(args, view).WithContext(o.input));
  return WriteNpy(o.output, x);
}

Status RunRope(const RopeOptions& o) {
  POSENC_RETURN_IF_ERROR(RefuseOutputIsAnInput(o.output, {o.config, o.model, o.positions, o.input}));
  RopePrecision precision;
  if (!ParseRopePrecision(o.precision, &precision))
    return InvalidArgumentError(fmt::format("--precision '{}' (expected reference or exact)", o.precision));
  POSENC_ASSIGN_OR_RETURN(Array x, ReadNpy(o.input));
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kF16)
    return InvalidArgumentError(
        fmt::format("input {}: dtype {} is not float32 or float16", o.input, ToString(x.dtype())));
  const bool heads_first = o.order == "heads-first";
  if (x.ndim() != 3)
    return InvalidArgumentError(fmt::format("input {}: shape {} is not {}", o.input, ShapeToString(x.shape()),
                                            heads_first ? "[heads, tokens, head_dim]" : "[tokens, heads, head_dim]"));
  const int64_t tokens = x.dim(heads_first ? 1 : 0), heads = x.dim(heads_first ? 0 : 1), head_dim = x.dim(2);
  POSENC_ASSIGN_OR_RETURN(SiteRope site, LoadRopeConfig(o, head_dim));
  if (site.none) {
    // No positional transform at this layer: what the model hands its attention is the input itself.
    std::fprintf(stderr, "posenc rope: %s; the output is the input unchanged\n", site.why_none.c_str());
    return WriteNpy(o.output, x);
  }
  RopeConfig rc = std::move(site.rope);
  RopeOptions directed = o;
  if (site.inverse) directed.direction = o.direction == "backward" ? "forward" : "backward";
  if (!o.layout.empty() && !ParseRopePairing(o.layout, &rc.layout.pairing))
    return InvalidArgumentError(fmt::format("--layout '{}' (expected half or interleaved)", o.layout));
  POSENC_ASSIGN_OR_RETURN(Array pos_array, ReadNpy(o.positions));
  if (rc.multi_axis.has_value()) return RunMultiAxisRope(directed, rc, pos_array, std::move(x), precision);
  if (pos_array.ndim() != 1)
    return InvalidArgumentError(
        fmt::format("positions {}: shape {} is not [tokens]", o.positions, ShapeToString(pos_array.shape())));
  if (pos_array.dtype() != DType::kI64 && pos_array.dtype() != DType::kI32)
    return InvalidArgumentError(
        fmt::format("positions {}: dtype {} is not int64 or int32", o.positions, ToString(pos_array.dtype())));
  POSENC_ASSIGN_OR_RETURN(Array pos64, pos_array.AsType(DType::kI64));
  std::span<const int64_t> positions = pos64.span<int64_t>();
  // The whole head, or the rotary slice alone (DeepSeek's q_pe / k_pe, as Hugging Face rotates it).
  POSENC_ASSIGN_OR_RETURN(RotaryLayout layout,
                          RotaryLayoutForInput(rc.layout, head_dim, fmt::format("input {}", o.input)));
  if (tokens != static_cast<int64_t>(positions.size()))
    return InvalidArgumentError(
        fmt::format("input {} has {} tokens, positions {} has {}", o.input, tokens, o.positions, positions.size()));
  const int64_t seq_len = SeqLenFor(o.seq_len, positions);
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies freqs, ComputeRopeFrequencies(rc, seq_len));
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(freqs, 0, precision));  // on the fly: any position
  // Heads first ([heads, tokens, head_dim], one batch element of a [batch, heads, seq, head_dim]
  // tensor): tokens are head_dim apart, heads tokens * head_dim.
  const HeadsView view = heads_first
                             ? HeadsView{x.bytes(), x.dtype(), tokens, heads, head_dim, head_dim, tokens * head_dim}
                             : HeadsView::Dense(x.bytes(), x.dtype(), tokens, heads, head_dim);
  RopeArgs args{layout, &table, positions,
                directed.direction == "backward" ? RopeDirection::kBackward : RopeDirection::kForward};
  POSENC_RETURN_IF_ERROR(ApplyRope(args, view).WithContext(o.input));
  return WriteNpy(o.output, x);
}

void RegisterRope(CLI::App& app) {
  auto* cmd = app.add_subcommand("rope",
                                 "Rotate queries or keys [tokens, heads, head_dim] for a model config (Hugging Face, "
                                 "ggml parameters) or a model file (GGUF, HF folder, safetensors, llama2.c)");
  static RopeOptions o;
  auto* config = cmd->add_option("--config", o.config,
                                 "Hugging Face config.json (either spelling), ggml_rope_ext parameters (JSON with "
                                 "n_dims, mode, freq_base, ...), or a .gguf model");
  cmd->add_option("--model", o.model,
                  "Instead of --config: a model file or folder (GGUF, Hugging Face folder, safetensors with "
                  "config.json beside it, llama2.c .bin)")
      ->excludes(config);
  cmd->add_option("--positions", o.positions,
                  ".npy int64 [tokens]: position of each token ([components, tokens] for a multi-axis config: M-RoPE, "
                  "ggml modes 8/24/40)")
      ->required();
  cmd->add_option("--input", o.input, ".npy float32 or float16 [tokens, heads, head_dim] (see --order)")->required();
  cmd->add_option("--output", o.output, ".npy to write, same dtype and shape as the input")->required();
  cmd->add_option("--precision", o.precision, "reference (float32 angles, as PyTorch/ggml) or exact (float64 angles)")
      ->capture_default_str();
  cmd->add_option("--layout", o.layout,
                  "Override the pair layout: half (GPT-NeoX, HF Llama) or interleaved (GPT-J, Meta Llama)");
  cmd->add_option("--assume-layout", o.assume_layout,
                  "Hugging Face config.json whose model_type posenc does not know (see posenc families): read it with "
                  "this pair layout, half or interleaved")
      ->check(CLI::IsMember({"half", "interleaved"}));
  cmd->add_option("--seq-len", o.seq_len, "Sequence length for length-dependent scalings (default: max position + 1)")
      ->check(NonNegativeInteger());
  AddLayerSelection(cmd, o.sel, /*accept_keys=*/true);
  cmd->add_option("--direction", o.direction, "forward, or backward (rotate by -angle: the gradient)")
      ->check(CLI::IsMember({"forward", "backward"}))
      ->capture_default_str();
  cmd->add_option("--order", o.order,
                  "tokens-first: input [tokens, heads, head_dim]; heads-first: [heads, tokens, head_dim], as one batch "
                  "element of Hugging Face's [batch, heads, seq, head_dim] q and k")
      ->check(CLI::IsMember({"tokens-first", "heads-first"}))
      ->capture_default_str();
  OnRunReportError(cmd, "rope", [] { return RunRope(o); });
}

}  // namespace
POSENC_CLI_COMMAND(30, RegisterRope);
}  // namespace posenc::cli
