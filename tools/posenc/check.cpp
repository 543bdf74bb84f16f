// `posenc check --model M` against what an engine computed for one layer: rotated tensors (--before X
// --after Y --positions P), a cos/sin cache (--cos C --sin S [--positions P]) or per-pair frequencies
// (--inv-freq F [--seq-len N]), from .npy or safetensors; the dump and the report are the library's
// (MakeRopeDump, RopeCheckReportJson / RopeCheckReportText), which Python's posenc.check shares. Pass or fail against posenc's reference with a tolerance for
// the dump's dtype, the worst element, and when it fails the causes that explain it, best first.
// Exit 0 pass, 1 fail, 2 bad input.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/message.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/safetensors.hpp"
#include "posenc/model/rope_check.hpp"

namespace posenc::cli {
namespace {

// A tensor of a safetensors file named "FILE.safetensors:NAME" (or "FILE.safetensors" holding one
// tensor): its dtype, shape and bytes.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};
bool IsSafetensors(const std::string& spec) {
  return spec.ends_with(".safetensors") || spec.find(".safetensors:") != std::string::npos;
}
Result<RawTensor> LoadSafetensor(const std::string& flag, const std::string& spec) {
  std::string path = spec, name;
  if (const size_t at = spec.rfind(".safetensors:"); at != std::string::npos) {
    path = spec.substr(0, at + 12);
    name = spec.substr(at + 13);
  }
  POSENC_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
  const SafetensorsTensor* t = nullptr;
  if (name.empty()) {
    if (f.tensors().size() != 1) {
      std::vector<std::string> names;
      for (const SafetensorsTensor& x : f.tensors()) names.push_back(EscapeForMessage(x.name));
      return InvalidArgumentError(fmt::format("{} {}: {} tensors ({}): name one as {}:NAME", flag, path,
                                              names.size(), fmt::join(names, ", "), path));
    }
    t = &f.tensors().front();
  } else {
    POSENC_ASSIGN_OR_RETURN(t, f.FindTensor(name));
  }
  const std::span<const std::byte> data = f.TensorData(*t);
  return RawTensor{t->dtype, t->shape, std::vector<std::byte>(data.begin(), data.end())};
}

// A dump tensor as the file holds it (.npy or safetensors), its bytes owned here and read in place by
// MakeRopeDump. Values: float32, float16, bfloat16 (safetensors; a .npy of bfloat16 values is saved as
// float32 and named with --dtype bf16) or float64; positions: int32 or int64.
struct Loaded {
  Array npy;
  std::vector<std::byte> bytes;
  std::vector<int64_t> list;
  RopeDumpTensor view;
};
Result<Loaded> LoadTensor(const std::string& flag, const std::string& path) {
  Loaded l;
  l.view.name = flag + " " + path;
  if (IsSafetensors(path)) {
    POSENC_ASSIGN_OR_RETURN(RawTensor r, LoadSafetensor(flag, path));
    static const std::pair<const char*, DType> kTypes[] = {{"F32", DType::kF32}, {"F16", DType::kF16},
                                                           {"BF16", DType::kBF16}, {"F64", DType::kF64},
                                                           {"I32", DType::kI32}, {"I64", DType::kI64}};
    bool known = false;
    for (const auto& [name, t] : kTypes)
      if (r.dtype == name) l.view.dtype = t, known = true;
    if (!known) return InvalidArgumentError(fmt::format("{} {}: dtype {} is not F32, F16, BF16, I32 or I64", flag, path, r.dtype));
    l.bytes = std::move(r.bytes);
    l.view.shape = r.shape;
    l.view.data = l.bytes.data();
    return l;
  }
  POSENC_ASSIGN_OR_RETURN(l.npy, ReadNpy(path));
  l.view.dtype = l.npy.dtype();
  l.view.shape = l.npy.shape();
  l.view.data = l.npy.bytes();
  return l;
}

// Positions: an integer .npy or safetensors tensor ([T] or [C, T]) or a comma-separated list.
Result<Loaded> LoadPositions(const std::string& text) {
  if (IsSafetensors(text) || text.ends_with(".npy")) return LoadTensor("--positions", text);
  Loaded l;
  POSENC_ASSIGN_OR_RETURN(l.list, ParseIntegerList("--positions", text, 0, kMaxRopePosition - 1));
  l.view = RopeDumpTensor{.data = l.list.data(), .dtype = DType::kI64,
                          .shape = {static_cast<int64_t>(l.list.size())}, .strides = {}, .name = "--positions"};
  return l;
}

void RegisterCheck(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check",
      "Check an engine's RoPE for one layer against the model: rotated q/k (--before --after --positions), a "
      "cos/sin cache (--cos --sin) or per-pair frequencies (--inv-freq); pass/fail with a tolerance "
      "for the dump's dtype, the worst element, and the causes that explain a failure; each file a .npy or "
      "FILE.safetensors[:NAME] (F32/F16/BF16, positions I32/I64). Exit 0 pass, 1 fail, "
      "2 bad input");
  static std::string model, before, after, positions, cos, sin, inv_freq, order = "tokens-first", dtype_name,
                                                                         assume_layout;
  static LayerSelection sel;
  static int64_t seq_len = 0;
  static bool as_json = false;
  cmd->add_option("--model", model, "config.json, .gguf, .safetensors or Hugging Face folder")->required();
  cmd->add_option("--before", before,
                  ".npy (or FILE.safetensors[:NAME]) of q or k before RoPE: [T, H, D] (or [H, T, D] with --order)");
  cmd->add_option("--after", after, ".npy of the engine's rotated q or k, the same shape");
  cmd->add_option("--positions", positions, ".npy of int positions [T] ([C, T] multi-axis) or a list 0,1,2");
  cmd->add_option("--cos", cos, ".npy of the engine's cos cache [T, R] or [T, R/2]");
  cmd->add_option("--sin", sin, ".npy of the engine's sin cache, the same shape");
  cmd->add_option("--inv-freq", inv_freq, ".npy of the engine's per-pair frequencies [R/2]");
  cmd->add_option("--order", order, "Layout of --before/--after: tokens-first [T, H, D] or heads-first [H, T, D]")
      ->check(CLI::IsMember({"tokens-first", "heads-first"}));
  cmd->add_option("--dtype", dtype_name,
                  "The engine's dtype: f32, f16 or bf16 (default: the dump's; bfloat16 dumps are saved as float32 "
                  "and named here)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "float32", "float16", "bfloat16"}));
  AddLayerSelection(cmd, sel, /*accept_keys=*/false);  // default: the first RoPE layer, its only site
  AddIntOption(cmd, "--seq-len", seq_len,
               "Sequence length the engine computed frequencies for (default: largest position + 1; "
               "inv_freq: max_position_embeddings)",
               1, kMaxRopePosition);
  cmd->add_option("--assume-layout", assume_layout, "Pair layout for a config.json of an unknown model_type")
      ->check(CLI::IsMember({"half", "interleaved"}));
  cmd->add_flag("--json", as_json, "Print verdict, worst element and diagnosis as JSON");
  cmd->callback([] {
    auto fail = [](const Status& s) { ReportError("check", s); };
    const bool rotated = !before.empty() || !after.empty();
    const bool cache = !cos.empty() || !sin.empty();
    const bool freqs = !inv_freq.empty();
    if (rotated + cache + freqs != 1)
      return fail(InvalidArgumentError("give exactly one dump: --before/--after, --cos/--sin, or --inv-freq"));
    if (rotated && (before.empty() || after.empty() || positions.empty()))
      return fail(InvalidArgumentError("rotated tensors need --before, --after and --positions"));
    if (cache && (cos.empty() || sin.empty())) return fail(InvalidArgumentError("a cache needs both --cos and --sin"));
    ModelSchemeOptions options;
    if (RopePairing p; !assume_layout.empty() && ParseRopePairing(assume_layout, &p)) options.assume_layout = p;
    Result<RopeDescription> d = OpenRopeDescription(model, options);
    if (!d.ok()) return fail(d.status());
    Result<RopeCheckTarget> target =
        RopeCheckTargetOf(*d, RopeCheckSelect{.layer = sel.layer, .layer_type = sel.layer_type, .site = sel.site});
    if (!target.ok()) return fail(target.status());

    RopeDumpTensors t;
    t.heads_first = order == "heads-first";
    t.seq_len = seq_len;
    Loaded files[6];
    const std::pair<const std::string*, RopeDumpTensor*> wanted[] = {
        {&before, &t.before}, {&after, &t.after}, {&cos, &t.cos}, {&sin, &t.sin}, {&inv_freq, &t.inv_freq}};
    const char* flags[] = {"--before", "--after", "--cos", "--sin", "--inv-freq"};
    for (size_t i = 0; i < 5; ++i) {
      if (wanted[i].first->empty()) continue;
      Result<Loaded> l = LoadTensor(flags[i], *wanted[i].first);
      if (!l.ok()) return fail(l.status());
      files[i] = std::move(l).value();
      *wanted[i].second = files[i].view;
    }
    if (!positions.empty()) {
      Result<Loaded> p = LoadPositions(positions);
      if (!p.ok()) return fail(p.status());
      files[5] = std::move(p).value();
      t.positions = files[5].view;
    }
    if (!dtype_name.empty()) {
      DType engine;  // CLI11 checked the name; ParseDType takes both spellings
      if (!ParseDType(dtype_name, &engine)) return fail(InvalidArgumentError("--dtype " + dtype_name + ": unknown"));
      t.dtype = engine;
    }
    Result<RopeDump> dump = MakeRopeDump(t);
    if (!dump.ok()) return fail(dump.status());
    Result<RopeCheckReport> r = CheckRope(*target, *dump);
    if (!r.ok()) return fail(r.status());
    std::fputs(as_json ? (RopeCheckReportJson(*r) + "\n").c_str() : RopeCheckReportText(*r).c_str(), stdout);
    SetExitCode(r->pass ? 0 : 1);
  });
}

}  // namespace
POSENC_CLI_COMMAND(47, RegisterCheck);
}  // namespace posenc::cli
