// Row permutation of W_q / W_k between RoPE pair layouts, for llama2.c, safetensors and GGUF files.
#include "posenc/model/layout_convert.hpp"

#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "posenc/config/hf_config.hpp"
#include "posenc/io/file_io.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/mapped_file.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/safetensors.hpp"

namespace posenc {

Result<std::vector<int64_t>> RotaryRowPermutation(const RotaryLayout& from, RopePairing to) {
  POSENC_RETURN_IF_ERROR(from.Validate());
  RotaryLayout target = from;
  target.pairing = to;
  std::vector<int64_t> perm(static_cast<size_t>(from.head_dim));
  for (int64_t j = 0; j < from.head_dim; ++j) perm[static_cast<size_t>(j)] = j;  // pass-through dims stay
  for (int64_t i = 0; i < from.num_pairs(); ++i) {
    perm[static_cast<size_t>(target.first(i))] = from.first(i);
    perm[static_cast<size_t>(target.second(i))] = from.second(i);
  }
  return perm;
}

Status PermuteHeadRows(std::span<const std::byte> src, std::span<std::byte> dst, int64_t heads, int64_t head_dim,
                       size_t row_bytes, std::span<const int64_t> perm) {
  if (heads < 0 || head_dim <= 0 || static_cast<int64_t>(perm.size()) != head_dim)
    return InvalidArgumentError(fmt::format("permute rows: {} heads of {} rows with a permutation of {} entries", heads,
                                            head_dim, perm.size()));
  const size_t need = static_cast<size_t>(heads * head_dim) * row_bytes;
  if (src.size() != need || dst.size() != need)
    return InvalidArgumentError(fmt::format("permute rows: {} heads x {} rows x {} bytes = {} bytes, got src {} dst {}",
                                            heads, head_dim, row_bytes, need, src.size(), dst.size()));
  if (need > 0 && src.data() < dst.data() + need && dst.data() < src.data() + need)
    return InvalidArgumentError("permute rows: source and destination overlap");
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < head_dim; ++j)
      std::memcpy(dst.data() + static_cast<size_t>(h * head_dim + j) * row_bytes,
                  src.data() + static_cast<size_t>(h * head_dim + perm[static_cast<size_t>(j)]) * row_bytes, row_bytes);
  return OkStatus();
}

namespace {

// What a converter knows about the model's attention heads.
struct Heads {
  int64_t q = 0, kv = 0;
  RotaryLayout layout;                           // with the source pairing
  FusedQkvLayout fused = FusedQkvLayout::kNone;  // safetensors query_key_value (from config.json)
};

// A run of consecutive heads in a tensor's rows: q or k heads (permuted) or v heads (left as they are).
struct Segment {
  int64_t heads = 0;
  bool permute = true;
};

// One tensor to permute: where its bytes are in the file, its row count and row size, and the head
// segments its rows hold from the top. `what` names them in messages ("2 heads", "2+1 heads",
// "4 x [q, k, v] heads"); `rows_may_follow`: rows past the segments stay (the v part of a q|k|v
// tensor), otherwise the segments are the whole tensor.
struct Job {
  std::string name;
  uint64_t offset = 0;
  int64_t rows = 0;
  size_t row_bytes = 0;
  std::vector<Segment> segments;
  std::string what;
  bool rows_may_follow = false;
};

Status RunJobs(const std::vector<Job>& jobs, const Heads& heads, std::span<const std::byte> in,
               std::vector<std::byte>* out, const std::string& name, RopePairing to) {
  const int64_t D = heads.layout.head_dim;
  // Every tensor's rows are checked against the heads before anything is allocated or moved: head
  // counts and head_dim come from the file (or the options) and may be absurd.
  for (const Job& j : jobs) {
    int64_t need = 0;
    bool overflow = false;
    for (const Segment& g : j.segments) {
      int64_t n = 0;
      overflow = overflow || __builtin_mul_overflow(g.heads, D, &n) || __builtin_add_overflow(need, n, &need);
    }
    if (overflow)
      return InvalidArgumentError(fmt::format("{}: tensor '{}' has {} rows, but {} of head_dim {} need more than 2^63",
                                              name, j.name, j.rows, j.what, D));
    if (j.rows_may_follow ? j.rows < need : j.rows != need)
      return InvalidArgumentError(fmt::format("{}: tensor '{}' has {} rows, but {} of head_dim {} need {}", name,
                                              j.name, j.rows, j.what, D, need));
  }
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, RotaryRowPermutation(heads.layout, to));
  for (const Job& j : jobs) {
    uint64_t off = j.offset;
    for (const Segment& g : j.segments) {
      const size_t bytes = static_cast<size_t>(g.heads * D) * j.row_bytes;
      if (off + bytes > in.size())
        return OutOfRangeError(fmt::format("{}: tensor '{}' lies past the end of the file", name, j.name));
      if (g.permute)
        POSENC_RETURN_IF_ERROR(PermuteHeadRows(in.subspan(off, bytes), std::span<std::byte>(out->data() + off, bytes),
                                               g.heads, D, j.row_bytes, perm));
      off += bytes;
    }
  }
  return OkStatus();
}

// Fills the rotary window from the options or the defaults (the whole head).
Status FinishHeads(const LayoutConvertOptions& o, const std::string& name, int64_t q, int64_t kv, int64_t head_dim,
                   int64_t rotary_dim, int64_t rotary_start, Heads* h) {
  h->q = o.num_heads > 0 ? o.num_heads : q;
  h->kv = o.num_kv_heads > 0 ? o.num_kv_heads : (kv > 0 ? kv : h->q);
  h->layout.pairing = o.from;
  h->layout.head_dim = o.head_dim > 0 ? o.head_dim : head_dim;
  h->layout.rotary_dim = o.rotary_dim > 0 ? o.rotary_dim : (rotary_dim > 0 ? rotary_dim : h->layout.head_dim);
  h->layout.rotary_start = o.rotary_start >= 0 ? o.rotary_start : std::max<int64_t>(rotary_start, 0);
  if (h->q <= 0) return InvalidArgumentError(fmt::format("{}: number of attention heads unknown (give --heads)", name));
  if (h->layout.head_dim <= 0) return InvalidArgumentError(fmt::format("{}: head_dim unknown (give --head-dim)", name));
  if (h->q % h->kv != 0)
    return InvalidArgumentError(
        fmt::format("{}: {} query heads are not a multiple of {} key heads", name, h->q, h->kv));
  Status s = h->layout.Validate();
  if (!s.ok()) return InvalidArgumentError(fmt::format("{}: {}", name, s.message()));
  return OkStatus();
}

// A tensor of `heads` q or k heads, all permuted (q_proj, k_proj, attn_q, attn_k, llama2.c wq / wk).
Job HeadsJob(std::string name, int64_t heads) {
  Job j;
  j.name = std::move(name);
  j.segments = {{heads, true}};
  j.what = fmt::format("{} heads", heads);
  return j;
}

// The head segments of a fused query_key_value weight with h.fused's row order (FusedQkvLayout).
Result<Job> FusedQkvJob(std::string_view tensor, const Heads& h, const std::string& name) {
  Job j;
  switch (h.fused) {
    case FusedQkvLayout::kPerHead:
      if (h.kv != h.q)
        return InvalidArgumentError(
            fmt::format("{}: tensor '{}' holds [q, k, v] per head, which needs as many key "
                        "heads as query heads ({} and {})",
                        name, tensor, h.q, h.kv));
      for (int64_t i = 0; i < h.q; ++i) j.segments.insert(j.segments.end(), {{1, true}, {1, true}, {1, false}});
      j.what = fmt::format("{} x [q, k, v] heads", h.q);
      return j;
    case FusedQkvLayout::kPerKvGroup:
      for (int64_t i = 0; i < h.kv; ++i)
        j.segments.insert(j.segments.end(), {{h.q / h.kv, true}, {1, true}, {1, false}});
      j.what = fmt::format("{} x [{} q, k, v] heads", h.kv, h.q / h.kv);
      return j;
    case FusedQkvLayout::kQThenKThenV:
      j.segments = {{h.q, true}, {h.kv, true}, {h.kv, false}};
      j.what = fmt::format("{}+{}+{} heads", h.q, h.kv, h.kv);
      return j;
    case FusedQkvLayout::kNone: break;
  }
  return InvalidArgumentError(fmt::format(
      "{}: tensor '{}' is a fused query_key_value, whose row order depends on the architecture; give the model's "
      "config.json (model_type gpt_neox, persimmon or falcon)",
      name, tensor));
}

// The job for a q/k tensor, by its name; nullopt = not a q/k tensor.
Result<std::optional<Job>> JobFor(std::string_view n, const Heads& h, bool gguf, const std::string& name) {
  const char* q[] = {"q_proj.weight", "q_proj.bias"};
  const char* k[] = {"k_proj.weight", "k_proj.bias"};
  const char* qkv[] = {"qkv_proj.weight", "qkv_proj.bias"};
  const char* gq[] = {".attn_q.weight", ".attn_q.bias"};
  const char* gk[] = {".attn_k.weight", ".attn_k.bias"};
  const char* gqkv[] = {".attn_qkv.weight", ".attn_qkv.bias"};
  const char* fused[] = {"query_key_value.weight", "query_key_value.bias"};
  Job j;
  j.name = std::string(n);
  for (int i = 0; i < 2; ++i) {
    if (n.ends_with(gguf ? gqkv[i] : qkv[i])) {  // [q | k | v]; GGUF's attn_qkv is so for every architecture
      j.segments = {{h.q, true}, {h.kv, true}};
      j.what = fmt::format("{}+{} heads", h.q, h.kv);
      j.rows_may_follow = true;
      return std::optional<Job>(std::move(j));
    }
    if (!gguf && n.ends_with(fused[i])) {
      POSENC_ASSIGN_OR_RETURN(Job f, FusedQkvJob(n, h, name));
      f.name = j.name;
      return std::optional<Job>(std::move(f));
    }
    const bool is_q = n.ends_with(gguf ? gq[i] : q[i]);
    if (is_q || n.ends_with(gguf ? gk[i] : k[i])) return std::optional<Job>(HeadsJob(j.name, is_q ? h.q : h.kv));
  }
  return std::optional<Job>();
}

Result<LayoutConvertReport> ConvertLlama2c(std::span<const std::byte> in, const std::string& name,
                                           const LayoutConvertOptions& o, std::vector<std::byte>* out) {
  POSENC_ASSIGN_OR_RETURN(Llama2cFile f, Llama2cFile::FromBytes(in, name));
  const Llama2cConfig& c = f.config();
  Heads h;
  POSENC_RETURN_IF_ERROR(FinishHeads(o, name, c.n_heads, c.n_kv_heads, c.head_size(), 0, 0, &h));
  if (h.q != c.n_heads || h.kv != c.n_kv_heads || h.layout.head_dim != c.head_size())
    return InvalidArgumentError(
        fmt::format("{}: llama2.c heads come from the header ({} heads, {} kv heads, head_size {})", name, c.n_heads,
                    c.n_kv_heads, c.head_size()));
  // Offsets of wq / wk relative to the file start: the spans point into the reader's copy.
  const auto* base =
      reinterpret_cast<const std::byte*>(f.weights().token_embedding_table.data()) - Llama2cFile::kHeaderBytes;
  const size_t row = static_cast<size_t>(c.dim) * sizeof(float);
  std::vector<Job> jobs;
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const auto* wq = reinterpret_cast<const std::byte*>(f.weights().wq.data()) + static_cast<size_t>(l) * c.dim * row;
    const auto* wk =
        reinterpret_cast<const std::byte*>(f.weights().wk.data()) + static_cast<size_t>(l) * c.kv_dim() * row;
    Job q = HeadsJob(fmt::format("wq[{}]", l), h.q), k = HeadsJob(fmt::format("wk[{}]", l), h.kv);
    q.offset = static_cast<uint64_t>(wq - base);
    q.rows = c.dim;
    k.offset = static_cast<uint64_t>(wk - base);
    k.rows = c.kv_dim();
    q.row_bytes = k.row_bytes = row;
    jobs.push_back(std::move(q));
    jobs.push_back(std::move(k));
  }
  POSENC_RETURN_IF_ERROR(RunJobs(jobs, h, in, out, name, o.to));
  LayoutConvertReport r;
  r.format = ModelFormat::kLlama2c;
  r.num_heads = h.q;
  r.num_kv_heads = h.kv;
  r.from_layout = h.layout;
  r.permuted = {fmt::format("wq ({} layers)", c.n_layers), fmt::format("wk ({} layers)", c.n_layers)};
  r.notes.push_back(
      "llama2.c's run.c always rotates interleaved pairs; run the converted file with an engine told its layout");
  return r;
}

Result<LayoutConvertReport> ConvertSafetensors(std::span<const std::byte> in, const std::string& name,
                                               const LayoutConvertOptions& o, std::vector<std::byte>* out) {
  POSENC_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::FromBytes(in, name));
  uint64_t header_len = 0;
  std::memcpy(&header_len, in.data(), 8);
  const uint64_t data_start = 8 + header_len;
  // Heads and window from config.json (beside the file, or given), then the options.
  int64_t q = 0, kv = 0, hd = 0, rd = 0, rs = 0;
  FusedQkvLayout fused = FusedQkvLayout::kNone;
  std::string cfg = o.config_path;
  if (cfg.empty()) {
    const std::string beside = ConfigJsonFor(name);
    if (std::filesystem::exists(beside)) cfg = beside;
  }
  LayoutConvertReport r;
  if (!cfg.empty()) {
    POSENC_ASSIGN_OR_RETURN(PositionScheme s, LoadHfConfig(cfg));
    if (s.kind != PositionKind::kRope)
      return InvalidArgumentError(fmt::format("{}: {} describes a {} model, not RoPE", name, cfg, ToString(s.kind)));
    q = s.num_heads;
    kv = s.num_kv_heads;
    hd = s.rope.layout.head_dim;
    rd = s.rope.layout.rotary_dim;
    rs = s.rope.layout.rotary_start;
    fused = s.fused_qkv;
    r.notes.push_back(fmt::format("heads and rotary window from {}", cfg));
  }
  Heads h;
  POSENC_RETURN_IF_ERROR(FinishHeads(o, name, q, kv, hd, rd, rs, &h));
  h.fused = fused;
  std::vector<Job> jobs;
  for (const SafetensorsTensor& t : f.tensors()) {
    POSENC_ASSIGN_OR_RETURN(std::optional<Job> job, JobFor(t.name, h, false, name));
    if (!job) continue;
    if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
      return UnimplementedError(
          fmt::format("{}: tensor '{}' has dtype {}; convert-layout handles F32, F16, BF16", name, t.name, t.dtype));
    if (t.shape.empty() || t.shape.size() > 2)
      return InvalidArgumentError(fmt::format(
          "{}: tensor '{}' has {} dims; expected a [out, in] weight or an [out] bias", name, t.name, t.shape.size()));
    job->offset = data_start + t.begin;
    job->rows = t.shape[0];
    job->row_bytes = t.element_size * static_cast<size_t>(t.shape.size() == 2 ? t.shape[1] : 1);
    jobs.push_back(std::move(*job));
    r.permuted.push_back(t.name);
  }
  if (jobs.empty())
    return NotFoundError(fmt::format("{}: no q_proj / k_proj / qkv_proj / query_key_value tensor to permute", name));
  if (h.fused != FusedQkvLayout::kNone)
    r.notes.push_back(fmt::format("query_key_value rows (model_type in config.json): {}", ToString(h.fused)));
  POSENC_RETURN_IF_ERROR(RunJobs(jobs, h, in, out, name, o.to));
  r.format = ModelFormat::kSafetensors;
  r.num_heads = h.q;
  r.num_kv_heads = h.kv;
  r.from_layout = h.layout;
  return r;
}

Result<LayoutConvertReport> ConvertGguf(std::span<const std::byte> in, const std::string& name,
                                        const LayoutConvertOptions& o, std::vector<std::byte>* out) {
  POSENC_ASSIGN_OR_RETURN(GgufFile f, GgufFile::FromBytes(in, name));
  LayoutConvertReport r;
  std::string arch;
  if (auto a = f.GetString("general.architecture"); a.ok()) arch = a.value();
  auto get = [&](const std::string& key) -> int64_t {
    auto v = f.GetInt(arch + "." + key);
    return v.ok() ? v.value() : 0;
  };
  const int64_t q = get("attention.head_count"), kv = get("attention.head_count_kv");
  int64_t hd = get("attention.key_length");
  if (hd == 0 && q > 0) hd = get("embedding_length") / q;
  Heads h;
  POSENC_RETURN_IF_ERROR(FinishHeads(o, name, q, kv, hd, get("rope.dimension_count"), 0, &h));
  std::vector<Job> jobs;
  for (const GgufTensorInfo& t : f.tensors()) {
    POSENC_ASSIGN_OR_RETURN(std::optional<Job> job, JobFor(t.name, h, true, name));
    if (!job) continue;
    GgmlTypeTraits tr;
    GetGgmlTypeTraits(t.type, &tr);
    Job& j = *job;
    j.offset = f.data_offset() + t.offset;
    if (t.dims.size() == 1) {  // a bias: one element per row, so a block type would be split
      if (tr.block_size != 1)
        return UnimplementedError(
            fmt::format("{}: tensor '{}' is a 1-D {} tensor; permuting its elements would split its {}-element blocks "
                        "(requantize it to F32/F16/BF16 first)",
                        name, t.name, tr.name, tr.block_size));
      j.rows = t.dims[0];
      j.row_bytes = tr.type_size;
    } else {  // rows of ne0 elements are whole blocks for every type
      j.rows = t.num_rows();
      j.row_bytes = t.row_bytes();
    }
    jobs.push_back(std::move(j));
    r.permuted.push_back(fmt::format("{} ({})", t.name, tr.name));
  }
  if (jobs.empty())
    return NotFoundError(fmt::format("{}: no blk.N.attn_q / attn_k / attn_qkv tensor to permute", name));
  POSENC_RETURN_IF_ERROR(RunJobs(jobs, h, in, out, name, o.to));
  r.format = ModelFormat::kGguf;
  r.num_heads = h.q;
  r.num_kv_heads = h.kv;
  r.from_layout = h.layout;
  r.notes.push_back(fmt::format(
      "metadata unchanged: llama.cpp picks the pairing from general.architecture ('{}'), not from the file, so it "
      "will still rotate with its own layout",
      arch));
  return r;
}

}  // namespace

Result<LayoutConvertReport> ConvertLayoutBytes(std::span<const std::byte> in, const std::string& name,
                                               const LayoutConvertOptions& options, std::vector<std::byte>* out) {
  out->assign(in.begin(), in.end());
  const ModelFormat format = options.format.value_or(DetectFileFormat(in, name));
  switch (format) {
    case ModelFormat::kLlama2c: return ConvertLlama2c(in, name, options, out);
    case ModelFormat::kSafetensors: return ConvertSafetensors(in, name, options, out);
    case ModelFormat::kGguf: return ConvertGguf(in, name, options, out);
    case ModelFormat::kHuggingFaceFolder:
    case ModelFormat::kNpy: break;
  }
  return InvalidArgumentError(fmt::format("convert-layout: {} is {} ({}), which holds no W_q / W_k to permute "
                                          "(llama2c, safetensors or gguf)",
                                          name, format == ModelFormat::kNpy ? "a .npy array" : "a folder",
                                          ToString(format)));
}

Result<LayoutConvertReport> ConvertLayoutFile(const std::string& in_path, const std::string& out_path,
                                              const LayoutConvertOptions& options) {
  // The output may be none of the inputs (the model, the config given, the config.json beside the
  // model that safetensors reads by default), also through links; the input must be a regular file
  // (mapped, not read through a stream: a FIFO or /dev/zero is refused); the output is written whole
  // to a temporary beside it and renamed over, so a failed conversion or write leaves it as it was.
  const std::string inputs[] = {in_path, options.config_path, ConfigJsonFor(in_path)};
  POSENC_RETURN_IF_ERROR(RefuseOutputIsInput(out_path, inputs));
  POSENC_ASSIGN_OR_RETURN(MappedFile in, MappedFile::Open(in_path));
  std::vector<std::byte> out;
  POSENC_ASSIGN_OR_RETURN(LayoutConvertReport r, ConvertLayoutBytes(in.bytes(), in_path, options, &out));
  POSENC_RETURN_IF_ERROR(WriteFileAtomic(out_path, out));
  return r;
}

}  // namespace posenc
