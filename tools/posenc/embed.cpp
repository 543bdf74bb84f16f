// `posenc embed MODEL --ids 1,2,3 | --ids-file ids.npy [--positions P.npy] --output X.npy`: the token
// embedding rows e_t of any model file (GGUF in any supported type, safetensors, HF folder, llama2.c,
// .npy), plus the learned position rows p_t where the model has a position table; `--rope-check`
// reports the RoPE scheme layer 0 will apply; `--report-rss` measures the resident memory the lookup
// touched.
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "status_callback.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/io/mapped_file.hpp"
#include "posenc/model/model_file.hpp"
#include "posenc/model/model_scheme.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/quant.hpp"

namespace posenc::cli {
namespace {

struct EmbedOptions {
  std::string model, ids, ids_file, positions, output;
  std::string dtype = "f32";
  float multiplier = 1.0f;
  bool rope_check = false;
  bool report_rss = false;
};

Result<std::vector<int64_t>> ReadIdsNpy(const std::string& path, const char* what) {
  POSENC_ASSIGN_OR_RETURN(Array a, ReadNpy(path));
  if (a.ndim() != 1) {
    return InvalidArgumentError(fmt::format("{} {}: shape {} is not [tokens]", what, path, ShapeToString(a.shape())));
  }
  if (a.dtype() != DType::kI64 && a.dtype() != DType::kI32) {
    return InvalidArgumentError(fmt::format("{} {}: dtype {} is not int64 or int32", what, path, ToString(a.dtype())));
  }
  POSENC_ASSIGN_OR_RETURN(Array b, a.AsType(DType::kI64));
  return std::vector<int64_t>(b.span<int64_t>().begin(), b.span<int64_t>().end());
}

// Resident file-backed and total memory of this process, in KiB (Linux /proc/self/status).
struct Rss {
  int64_t rss_kib = -1, file_kib = -1, hwm_kib = -1;
};
Rss ReadRss() {
  Rss r;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    auto num = [&line]() { return std::stoll(line.substr(line.find(':') + 1)); };
    if (line.rfind("VmRSS:", 0) == 0)
      r.rss_kib = num();
    else if (line.rfind("RssFile:", 0) == 0)
      r.file_kib = num();
    else if (line.rfind("VmHWM:", 0) == 0)
      r.hwm_kib = num();
  }
  return r;
}

// The model's scheme as ModelScheme reads it (a GGUF without freq_base at llama.cpp's 10000, as it runs).
Result<PositionScheme> EmbedScheme(const ModelFile& m) {
  ModelSchemeOptions options;
  options.allow_default_freq_base = true;
  return ModelScheme(m, options);
}

// Where the pair layout of a RoPE scheme comes from, for the one-line summary: the format's runtime
// (llama2.c's run.c, llama.cpp's rope type per architecture) or Hugging Face's default and the family.
std::string PairingSource(const ModelFile& m, const PositionScheme& s) {
  const RopePairing pairing = s.rope.layout.pairing;
  switch (m.format()) {
    case ModelFormat::kLlama2c: return "llama2.c's run.c (theta and pairs fixed in the code)";
    case ModelFormat::kGguf:
      return pairing == RopePairing::kInterleaved
                 ? fmt::format("llama.cpp rotates adjacent pairs (LLAMA_ROPE_TYPE_NORM) for '{}'", s.model_type)
                 : fmt::format("llama.cpp rotates halves (LLAMA_ROPE_TYPE_NEOX) for '{}'", s.model_type);
    case ModelFormat::kHuggingFaceFolder:
    case ModelFormat::kSafetensors:
    case ModelFormat::kNpy: break;
  }
  std::string source = "config.json (Hugging Face pairs x[i] with x[i + d/2] unless the family says otherwise)";
  if (const ModelFamily* family = FindModelFamily(s.model_type);
      family != nullptr && family->pairing != RopePairing::kHalf) {
    // The modeling file and function, not the folder they sit in.
    std::string_view file = family->source;
    if (const size_t slash = file.rfind('/', file.find(".py")); slash != std::string_view::npos)
      file = file.substr(slash + 1);
    source += fmt::format("; '{}' pairs {}: {}", family->model_type, ToString(family->pairing), file);
  }
  return source;
}

// What ModelScheme read: one line of the RoPE it applies, where the pairing comes from, and the
// scheme's notes (the values the file left to a default among them).
void PrintRopeCheck(const ModelFile& m, const Result<PositionScheme>& scheme) {
  if (!scheme.ok()) {
    if (m.format() == ModelFormat::kGguf || !m.config_path().empty()) {
      std::printf("rope-check: config reader: %s\n", scheme.status().ToString().c_str());
      return;
    }
  }
  if (!scheme.ok() || scheme->kind != PositionKind::kRope) {
    std::printf("rope-check: %s states no RoPE (architecture '%s'%s)\n", m.path().c_str(), m.architecture().c_str(),
                m.position_embedding() ? ", learned absolute positions" : "");
    return;
  }
  const RopeConfig& rc = scheme->rope;
  std::printf("rope-check: layer 0 applies RoPE: theta %s, rotary_dim %s of head_dim %lld, pairing %s, scaling %s\n",
              fmt::format("{}", rc.base).c_str(),
              rc.layout.rotary_dim == rc.layout.head_dim ? "whole head" : std::to_string(rc.layout.rotary_dim).c_str(),
              static_cast<long long>(rc.layout.head_dim), std::string(ToString(rc.layout.pairing)).c_str(),
              std::string(ToString(rc.scaling.type)).c_str());
  std::printf("rope-check: pairing from %s\n", PairingSource(m, *scheme).c_str());
  for (const std::string& n : rc.notes) std::printf("rope-check: note: %s\n", n.c_str());
}

Status RunEmbed(const EmbedOptions& o) {
  POSENC_RETURN_IF_ERROR(RefuseOutputIsAnInput(o.output, {o.model, o.ids_file, o.positions}));
  if (o.ids.empty() == o.ids_file.empty()) return InvalidArgumentError("give exactly one of --ids and --ids-file");
  LookupOptions lo;
  lo.multiplier = o.multiplier;
  if (!ParseDType(o.dtype, &lo.out_dtype) || (lo.out_dtype != DType::kF32 && lo.out_dtype != DType::kBF16)) {
    return InvalidArgumentError(fmt::format("--dtype '{}' (expected f32 or bf16)", o.dtype));
  }
  std::vector<int64_t> ids;
  if (!o.ids.empty()) {
    POSENC_ASSIGN_OR_RETURN(ids, ParseIntegerList("--ids", o.ids, 0, std::numeric_limits<int64_t>::max()));
  } else {
    POSENC_ASSIGN_OR_RETURN(ids, ReadIdsNpy(o.ids_file, "--ids-file"));
  }
  const Rss before_open = ReadRss();
  POSENC_ASSIGN_OR_RETURN(ModelFile model, OpenModel(o.model));
  // The positional scheme, read once when a message below needs it.
  std::optional<Result<PositionScheme>> scheme;
  auto model_scheme = [&]() -> const Result<PositionScheme>& {
    if (!scheme) scheme.emplace(EmbedScheme(model));
    return *scheme;
  };
  POSENC_ASSIGN_OR_RETURN(QuantizedTable table, model.TokenEmbeddingTable());
  const ModelTensor* e = model.token_embedding();
  // A lookup reads a few scattered rows: no readahead, so only those pages become resident.
  AdviseRandomAccess(table.data);
  const Rss before = ReadRss();
  // An id outside the table: the error names the file and the table as well as the id.
  Result<Array> looked_up = LookupRows(table, ids, lo);
  if (!looked_up.ok()) return looked_up.status().WithContext(fmt::format("embed {} ('{}')", o.model, e->name));
  Array x = std::move(looked_up).value();
  const Rss after = ReadRss();
  // What was done, said on stderr once the output is written (an error is then the only line).
  std::vector<std::string> progress;
  progress.push_back(fmt::format("embed: {} ids from '{}' [{}, {}] {} ({})", ids.size(), e->name, table.rows,
                                 table.row_length, e->type_name, ToString(model.format())));

  if (model.position_embedding() != nullptr) {
    std::vector<int64_t> positions;
    if (!o.positions.empty()) {
      POSENC_ASSIGN_OR_RETURN(positions, ReadIdsNpy(o.positions, "--positions"));
    } else {
      for (size_t t = 0; t < ids.size(); ++t) positions.push_back(static_cast<int64_t>(t));
      progress.push_back(fmt::format("embed: learned positions, --positions not given: using 0..{}", ids.size() - 1));
    }
    if (positions.size() != ids.size()) {
      return InvalidArgumentError(fmt::format("--positions has {} entries for {} ids", positions.size(), ids.size()));
    }
    POSENC_ASSIGN_OR_RETURN(QuantizedTable ptable, model.PositionTable());
    if (ptable.row_length != table.row_length) {
      return InvalidArgumentError(fmt::format("position table width {} differs from the embedding width {}",
                                              ptable.row_length, table.row_length));
    }
    // Learned positions, not token ids: their errors name a position and the table's length.
    POSENC_ASSIGN_OR_RETURN(EmbeddingTable wpe, ptable.AsEmbeddingTable());
    Result<Array> learned = LookupLearnedPositions(wpe, positions);
    if (!learned.ok())
      return learned.status().WithContext(fmt::format("embed {} ('{}')", o.model, model.position_embedding()->name));
    Array p = std::move(learned).value();
    if (lo.out_dtype != DType::kF32) {
      return InvalidArgumentError("--dtype bf16 with learned positions: add in float32 (omit --dtype)");
    }
    POSENC_RETURN_IF_ERROR(AddPositions(p, x));
    progress.push_back(fmt::format("embed: added learned positions from '{}'", model.position_embedding()->name));
  } else if (!o.positions.empty()) {
    progress.push_back(fmt::format("embed: the model has no learned position table; --positions ignored ({})",
                                   model_scheme().ok() && model_scheme()->kind == PositionKind::kRope
                                       ? "RoPE rotates q and k inside attention instead"
                                       : "no absolute scheme"));
  }
  if (o.rope_check) PrintRopeCheck(model, model_scheme());
  if (o.report_rss) {
    std::set<int64_t> unique(ids.begin(), ids.end());
    const double row_bytes = static_cast<double>(table.data.size()) / static_cast<double>(table.rows);
    std::printf("rss: table %.1f MiB (%lld rows of %.0f bytes); %zu distinct rows asked = %.1f KiB\n",
                table.data.size() / 1048576.0, static_cast<long long>(table.rows), row_bytes, unique.size(),
                unique.size() * row_bytes / 1024.0);
    std::printf(
        "rss: file-backed resident KiB: %lld after open, %lld after lookup (+%lld); VmRSS %lld -> %lld KiB, "
        "peak %lld KiB (before open %lld)\n",
        static_cast<long long>(before.file_kib), static_cast<long long>(after.file_kib),
        static_cast<long long>(after.file_kib - before.file_kib), static_cast<long long>(before.rss_kib),
        static_cast<long long>(after.rss_kib), static_cast<long long>(after.hwm_kib),
        static_cast<long long>(before_open.rss_kib));
  }
  POSENC_RETURN_IF_ERROR(WriteNpy(o.output, x));
  for (const std::string& line : progress) std::fprintf(stderr, "%s\n", line.c_str());
  return OkStatus();
}

void RegisterEmbed(CLI::App& app) {
  auto* cmd = app.add_subcommand("embed", "Token embedding rows (plus learned positions) straight from a model file");
  static EmbedOptions o;
  cmd->add_option("model", o.model, "GGUF, safetensors, Hugging Face folder, llama2.c .bin or .npy table")->required();
  cmd->add_option("--ids", o.ids, "Comma-separated token ids, e.g. 1,2,3");
  cmd->add_option("--ids-file", o.ids_file, ".npy int64/int32 [tokens]");
  cmd->add_option("--positions", o.positions, ".npy int64 [tokens]: positions for a learned table (default 0..T-1)");
  cmd->add_option("--output", o.output, ".npy to write: [tokens, d_model]")->required();
  cmd->add_option("--dtype", o.dtype, "Output dtype: f32 or bf16")->capture_default_str();
  AddRealOption(cmd, "--multiplier", o.multiplier, "Scale rows (Gemma: sqrt(d_model))",
                -static_cast<double>(std::numeric_limits<float>::max()),
                static_cast<double>(std::numeric_limits<float>::max()))
      ->capture_default_str();
  cmd->add_flag("--rope-check", o.rope_check, "Also report the RoPE scheme layer 0 will apply");
  cmd->add_flag("--report-rss", o.report_rss, "Report resident memory touched by the lookup (Linux)");
  OnRunReportError(cmd, "embed", [] { return RunEmbed(o); });
}

}  // namespace
POSENC_CLI_COMMAND(45, RegisterEmbed);
}  // namespace posenc::cli
