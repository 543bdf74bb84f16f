// `posenc check --model M` against what an engine computed for one layer: rotated tensors (--before X
// --after Y --positions P), a cos/sin cache (--cos C --sin S [--positions P]) or per-pair frequencies
// (--inv-freq F [--seq-len N]), from .npy. Pass or fail against posenc's reference with a tolerance for
// the dump's dtype, the worst element, and when it fails the causes that explain it, best first.
// Exit 0 pass, 1 fail, 2 bad input.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/message.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/safetensors.hpp"
#include "posenc/model/rope_check.hpp"

namespace posenc::cli {
namespace {

using nlohmann::json;

struct Loaded {
  std::vector<float> values;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
};

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

// A float .npy or safetensors tensor as float32 values (float16, bfloat16 and float64 converted
// exactly or rounded once).
Result<Loaded> LoadFloats(const std::string& flag, const std::string& path) {
  if (IsSafetensors(path)) {
    POSENC_ASSIGN_OR_RETURN(RawTensor r, LoadSafetensor(flag, path));
    Loaded l;
    l.shape = r.shape;
    const size_t n = r.bytes.size();
    if (r.dtype == "F32") {
      l.values.resize(n / 4);
      std::memcpy(l.values.data(), r.bytes.data(), n);
    } else if (r.dtype == "F16" || r.dtype == "BF16") {
      l.dtype = r.dtype == "F16" ? DType::kF16 : DType::kBF16;
      for (size_t i = 0; i + 1 < n; i += 2) {
        uint16_t bits;
        std::memcpy(&bits, r.bytes.data() + i, 2);
        l.values.push_back(r.dtype == "F16" ? F16ToF32(f16_t{bits}) : BF16ToF32(bf16_t{bits}));
      }
    } else {
      return InvalidArgumentError(fmt::format("{} {}: dtype {} is not F32, F16 or BF16", flag, path, r.dtype));
    }
    return l;
  }
  POSENC_ASSIGN_OR_RETURN(Array a, ReadNpy(path));
  Loaded l;
  l.shape = a.shape();
  l.dtype = a.dtype();
  switch (a.dtype()) {
    case DType::kF32: l.values.assign(a.span<float>().begin(), a.span<float>().end()); break;
    case DType::kF16:
      for (f16_t h : a.span<f16_t>()) l.values.push_back(F16ToF32(h));
      break;
    case DType::kF64:
      for (double v : a.span<double>()) l.values.push_back(static_cast<float>(v));
      l.dtype = DType::kF32;
      break;
    default:
      return InvalidArgumentError(fmt::format("{} {}: dtype {} is not a float type (float32, float16; bfloat16 saved "
                                              "as float32 with --dtype bf16)",
                                              flag, path, ToString(a.dtype())));
  }
  return l;
}

// Positions: an integer .npy ([T] or [C, T]) or a comma-separated list.
Result<std::vector<int64_t>> LoadPositions(const std::string& text) {
  if (IsSafetensors(text)) {
    POSENC_ASSIGN_OR_RETURN(RawTensor r, LoadSafetensor("--positions", text));
    std::vector<int64_t> out;
    if (r.dtype == "I64") {
      out.resize(r.bytes.size() / 8);
      std::memcpy(out.data(), r.bytes.data(), out.size() * 8);
    } else if (r.dtype == "I32") {
      for (size_t i = 0; i + 3 < r.bytes.size(); i += 4) {
        int32_t v;
        std::memcpy(&v, r.bytes.data() + i, 4);
        out.push_back(v);
      }
    } else {
      return InvalidArgumentError(fmt::format("--positions {}: dtype {} is not I32 or I64", text, r.dtype));
    }
    if (r.shape.size() != 1 && r.shape.size() != 2)
      return InvalidArgumentError(
          fmt::format("--positions {}: {} dims; expected [T] or [components, T]", text, r.shape.size()));
    return out;
  }
  if (!text.ends_with(".npy")) return ParseIntegerList("--positions", text, 0, kMaxRopePosition - 1);
  POSENC_ASSIGN_OR_RETURN(Array a, ReadNpy(text));
  std::vector<int64_t> out;
  switch (a.dtype()) {
    case DType::kI64: out.assign(a.span<int64_t>().begin(), a.span<int64_t>().end()); break;
    case DType::kI32:
      for (int32_t v : a.span<int32_t>()) out.push_back(v);
      break;
    default:
      return InvalidArgumentError(
          fmt::format("--positions {}: dtype {} is not int32 or int64", text, ToString(a.dtype())));
  }
  if (a.ndim() != 1 && a.ndim() != 2)
    return InvalidArgumentError(fmt::format("--positions {}: {} dims; expected [T] or [components, T]", text, a.ndim()));
  return out;
}

std::string ShapeText(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

json ReportJson(const RopeCheckReport& r) {
  json out;
  out["verdict"] = r.pass ? "pass" : "fail";
  out["target"] = r.target;
  out["form"] = r.form;
  out["tolerance"] = r.tolerance;
  out["seq_len"] = r.seq_len;
  out["elements"] = r.elements;
  out["elements_over_tolerance"] = r.elements_over;
  out["max_error_over_tolerance"] = r.max_ratio;
  auto opt = [](int64_t v) { return v < 0 ? json(nullptr) : json(v); };
  out["worst"] = {{"token", opt(r.worst.token)}, {"position", opt(r.worst.position)}, {"head", opt(r.worst.head)},
                  {"pair", opt(r.worst.pair)},   {"dim", opt(r.worst.dim)},           {"got", r.worst.got},
                  {"want", r.worst.want},        {"error", r.worst.error},            {"tolerance", r.worst.tolerance}};
  json diag = json::array();
  for (const RopeCause& c : r.diagnosis)
    diag.push_back({{"cause", c.id}, {"detail", c.detail}, {"max_error_over_tolerance", c.max_ratio}});
  out["diagnosis"] = diag;
  if (!r.pass && r.diagnosis.size() == 1 && r.diagnosis[0].id == "not_explained") {
    out["error_first_position"] = opt(r.error_first_position);
    out["error_pairs"] = r.error_pairs;
  }
  return out;
}

void PrintText(const RopeCheckReport& r) {
  std::printf("%s: %s (%s, %lld elements, tolerance %s)\n", r.pass ? "pass" : "FAIL", r.target.c_str(),
              r.form.c_str(), static_cast<long long>(r.elements), r.tolerance.c_str());
  auto at = [&] {
    std::string s;
    if (r.worst.token >= 0) s += fmt::format(" token {}", r.worst.token);
    if (r.worst.position >= 0) s += fmt::format(" position {}", r.worst.position);
    if (r.worst.head >= 0) s += fmt::format(" head {}", r.worst.head);
    if (r.worst.pair >= 0) s += fmt::format(" pair {}", r.worst.pair);
    if (r.worst.dim >= 0) s += fmt::format(" dim {}", r.worst.dim);
    return s;
  };
  std::printf("worst element:%s: got %.9g, want %.9g, error %.3g (%.3g x tolerance)\n", at().c_str(), r.worst.got,
              r.worst.want, r.worst.error, r.worst.tolerance > 0 ? r.worst.error / r.worst.tolerance : 0.0);
  if (r.pass) return;
  std::printf("%lld of %lld elements over tolerance\n", static_cast<long long>(r.elements_over),
              static_cast<long long>(r.elements));
  std::printf("diagnosis (best first):\n");
  for (const RopeCause& c : r.diagnosis)
    std::printf("  %-18s %s (max error %.3g x tolerance)\n", c.id.c_str(), c.detail.c_str(), c.max_ratio);
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

    RopeDump dump;
    dump.seq_len = seq_len;
    DType dump_dtype = DType::kF32;
    if (rotated) {
      dump.kind = RopeDumpKind::kRotated;
      dump.what = "--after " + after;
      Result<Loaded> b = LoadFloats("--before", before);
      if (!b.ok()) return fail(b.status());
      Result<Loaded> a = LoadFloats("--after", after);
      if (!a.ok()) return fail(a.status());
      if (b->shape != a->shape)
        return fail(InvalidArgumentError(fmt::format("--before is {} but --after is {}: the same shape is needed",
                                                     ShapeText(b->shape), ShapeText(a->shape))));
      std::vector<int64_t> s = a->shape;
      if (s.size() == 2) s = {s[0], 1, s[1]};
      if (s.size() != 3)
        return fail(InvalidArgumentError(fmt::format("--after {}: shape {}; expected [T, H, D] or [H, T, D]", after,
                                                     ShapeText(a->shape))));
      const bool heads_first = order == "heads-first";
      const int64_t T = heads_first ? s[1] : s[0], H = heads_first ? s[0] : s[1], D = s[2];
      dump.tokens = T, dump.heads = H, dump.width = D;
      auto to_tokens_first = [&](const std::vector<float>& v) {
        if (!heads_first) return v;
        std::vector<float> out(v.size());
        for (int64_t h = 0; h < H; ++h)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < D; ++k) out[(t * H + h) * D + k] = v[(h * T + t) * D + k];
        return out;
      };
      dump.before = to_tokens_first(b->values);
      dump.after = to_tokens_first(a->values);
      dump_dtype = a->dtype;
    } else if (cache) {
      dump.kind = RopeDumpKind::kCosSin;
      dump.what = "--cos " + cos;
      Result<Loaded> c = LoadFloats("--cos", cos);
      if (!c.ok()) return fail(c.status());
      Result<Loaded> s = LoadFloats("--sin", sin);
      if (!s.ok()) return fail(s.status());
      if (c->shape != s->shape || c->shape.size() != 2)
        return fail(InvalidArgumentError(fmt::format("--cos is {} and --sin {}: both [T, R] or [T, R/2] needed",
                                                     ShapeText(c->shape), ShapeText(s->shape))));
      dump.tokens = c->shape[0], dump.width = c->shape[1];
      dump.cos = c->values, dump.sin = s->values;
      dump_dtype = c->dtype;
    } else {
      dump.kind = RopeDumpKind::kInvFreq;
      dump.what = "--inv-freq " + inv_freq;
      Result<Loaded> f = LoadFloats("--inv-freq", inv_freq);
      if (!f.ok()) return fail(f.status());
      if (f->shape.size() != 1)
        return fail(InvalidArgumentError(
            fmt::format("--inv-freq {}: shape {}; expected [R/2]", inv_freq, ShapeText(f->shape))));
      dump.inv_freq = f->values;
      dump_dtype = f->dtype;
    }
    if (!positions.empty()) {
      Result<std::vector<int64_t>> p = LoadPositions(positions);
      if (!p.ok()) return fail(p.status());
      dump.positions = std::move(p).value();
    }
    dump.dtype = dump_dtype;
    if (!dtype_name.empty()) {
      DType t;
      const std::string n = dtype_name == "float32" ? "f32" : dtype_name == "float16" ? "f16"
                                                            : dtype_name == "bfloat16" ? "bf16" : dtype_name;
      if (!ParseDType(n, &t)) return fail(InvalidArgumentError("--dtype " + dtype_name + ": unknown"));
      dump.dtype = t;
      // A bfloat16 dump saved as float32 holds only bfloat16 values.
      if (t == DType::kBF16)
        for (const std::vector<float>* v : {&dump.after, &dump.cos, &dump.sin})
          for (float x : *v)
            if (std::isfinite(x) && BF16ToF32(F32ToBF16(x)) != x)
              return fail(InvalidArgumentError(fmt::format(
                  "{}: value {:.9g} is not a bfloat16 value: the dump is not bfloat16 (drop --dtype bf16)", dump.what,
                  x)));
    }
    Result<RopeCheckReport> r = CheckRope(*target, dump);
    if (!r.ok()) return fail(r.status());
    if (as_json)
      std::printf("%s\n", ReportJson(*r).dump(2, ' ', false, json::error_handler_t::replace).c_str());
    else
      PrintText(*r);
    SetExitCode(r->pass ? 0 : 1);
  });
}

}  // namespace
POSENC_CLI_COMMAND(47, RegisterCheck);
}  // namespace posenc::cli
