// OpenModel: format detection and the per-format names of the input-stage tensors.
#include "posenc/model/model_file.hpp"

#include "posenc/io/mapped_file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/io_util.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/json_read.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/safetensors.hpp"

namespace posenc {
namespace {

constexpr const char* kGgufTokenNames[] = {"token_embd.weight"};
constexpr const char* kGgufPositionNames[] = {"position_embd.weight"};
constexpr const char* kHfTokenNames[] = {"model.embed_tokens.weight",
                                         "embed_tokens.weight",
                                         "transformer.wte.weight",
                                         "wte.weight",
                                         "transformer.word_embeddings.weight",
                                         "word_embeddings.weight",
                                         "gpt_neox.embed_in.weight",
                                         "model.decoder.embed_tokens.weight",
                                         "tok_embeddings.weight",
                                         "transformer.embd.wte.weight",
                                         "model.language_model.embed_tokens.weight",
                                         "language_model.model.embed_tokens.weight"};
constexpr const char* kHfPositionNames[] = {"transformer.wpe.weight", "wpe.weight",
                                            "model.decoder.embed_positions.weight",
                                            "transformer.position_embeddings.weight"};

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::optional<DType> SafetensorsRowType(const std::string& dtype) {
  if (dtype == "F32") return DType::kF32;
  if (dtype == "F16") return DType::kF16;
  if (dtype == "BF16") return DType::kBF16;
  return std::nullopt;
}

// A JSON file beside the weights (model.safetensors.index.json), through the one JSON reader.
Result<nlohmann::json> ReadJson(const std::string& path) {
  return ReadJsonFile(path, fmt::format("reading '{}'", path));
}

int64_t JsonInt(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k) && j[k].is_number_integer()) return j[k].get<int64_t>();
  }
  return 0;
}

}  // namespace

std::string_view ToString(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kSafetensors: return "safetensors";
    case ModelFormat::kHuggingFaceFolder: return "hf-folder";
    case ModelFormat::kLlama2c: return "llama2c";
    case ModelFormat::kNpy: return "npy";
  }
  return "unknown";
}

ModelFormat DetectFileFormat(std::span<const std::byte> bytes, std::string_view path) {
  if (bytes.size() >= 6 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0) return ModelFormat::kNpy;
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return ModelFormat::kGguf;
  if (bytes.size() >= 9) {
    const uint64_t n = io::LoadLE<uint64_t>(bytes.data());
    if (n <= bytes.size() - 8 && static_cast<char>(bytes[8]) == '{') return ModelFormat::kSafetensors;
  }
  if (path.ends_with(".safetensors")) return ModelFormat::kSafetensors;
  return ModelFormat::kLlama2c;
}

std::string ConfigJsonFor(const std::string& model_path) {
  if (IsDirectory(model_path)) return model_path + "/config.json";
  return (std::filesystem::path(model_path).parent_path() / "config.json").string();
}

QuantizedTable ModelTensor::AsTable() const {
  QuantizedTable t;
  t.data = data;
  t.dtype = dtype.value_or(DType::kI64);  // no row type: int64, which Validate refuses
  t.row_length = shape.empty() ? 1 : shape.back();
  t.rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) t.rows *= shape[i];
  return t;
}

Result<DType> ModelTensor::RowType() const {
  if (dtype.has_value()) return *dtype;
  return UnimplementedError(fmt::format("tensor '{}' in '{}' is stored as {}, which posenc does not read", name, file,
                                        type_name));
}

const ModelTensor* ModelFile::Find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
Result<QuantizedTable> TableOf(const ModelTensor* t, const std::string& path, const char* what, const char* names) {
  if (t == nullptr) { return NotFoundError(fmt::format("model '{}': no {} table (looked for {})", path, what, names)); }
  if (!t->dtype.has_value()) {
    return UnimplementedError(
        fmt::format("model '{}': {} table '{}' is stored as {} (posenc reads F32, F16, BF16 and "
                    "ggml block types)",
                    path, what, t->name, t->type_name));
  }
  if (t->shape.size() != 2) {
    return InvalidArgumentError(
        fmt::format("model '{}': {} table '{}' has {} dims (2 expected)", path, what, t->name, t->shape.size()));
  }
  QuantizedTable q = t->AsTable();
  Status s = q.Validate();
  if (!s.ok()) return s.WithContext(fmt::format("model '{}' tensor '{}'", path, t->name));
  return q;
}
}  // namespace

Result<QuantizedTable> ModelFile::TokenEmbeddingTable() const {
  return TableOf(token_embedding(), path_, "token embedding",
                 "token_embd.weight, model.embed_tokens.weight, wte.weight, token_embedding_table, ...");
}

Result<QuantizedTable> ModelFile::PositionTable() const {
  return TableOf(position_embedding(), path_, "learned position", "position_embd.weight, wpe.weight, ...");
}

// OpenModel's steps, one per format; each fills in the ModelFile it is given.
struct ModelFileBuilder {
  static int FindIndex(const ModelFile& m, std::span<const char* const> names) {
    for (const char* n : names) {
      for (size_t i = 0; i < m.tensors_.size(); ++i) {
        if (m.tensors_[i].name == n) return static_cast<int>(i);
      }
    }
    return -1;
  }

  // config.json: its text (kept for the scheme reader), architecture, sizes and norm epsilon.
  static Status ReadConfig(ModelFile& m, const std::string& config) {
    m.config_path_ = config;
    POSENC_ASSIGN_OR_RETURN(nlohmann::json j,
                            ReadJsonFile(config, fmt::format("reading '{}'", config), &m.config_text_));
    if (!j.is_object()) return DataLossError(fmt::format("reading '{}': not a JSON object", config));
    if (j.contains("model_type") && j["model_type"].is_string()) m.architecture_ = j["model_type"].get<std::string>();
    m.vocab_size_ = JsonInt(j, {"vocab_size"});
    m.hidden_size_ = JsonInt(j, {"hidden_size", "n_embd", "d_model"});
    m.num_layers_ = JsonInt(j, {"num_hidden_layers", "n_layer", "num_layers"});
    m.num_heads_ = JsonInt(j, {"num_attention_heads", "n_head", "n_heads"});
    m.num_kv_heads_ = JsonInt(j, {"num_key_value_heads", "n_head_kv"});
    if (m.num_kv_heads_ == 0) m.num_kv_heads_ = m.num_heads_;
    m.context_length_ = JsonInt(j, {"max_position_embeddings", "n_positions", "n_ctx"});
    if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) m.rms_norm_eps_ = j["rms_norm_eps"].get<double>();
    return OkStatus();
  }

  static void AddSafetensors(ModelFile& m, const SafetensorsFile& st) {
    for (const auto& t : st.tensors()) {
      ModelTensor mt;
      mt.name = t.name;
      mt.shape = t.shape;
      mt.dtype = SafetensorsRowType(t.dtype);
      mt.type_name = t.dtype;
      mt.data = st.TensorData(t);
      mt.file = st.name();
      m.tensors_.push_back(std::move(mt));
    }
  }

  // The shard files of a Hugging Face folder: model.safetensors, or those model.safetensors.index.json
  // lists; none for a folder with only config.json (weights in another format, or not downloaded: the
  // scheme is config.json's, and a table lookup says there is no table).
  static Result<std::vector<std::string>> FolderShards(const std::string& path) {
    const std::string single = path + "/model.safetensors";
    const std::string index = path + "/model.safetensors.index.json";
    std::vector<std::string> shards;
    if (Exists(single)) {
      shards.push_back(single);
      return shards;
    }
    if (!Exists(index)) {
      if (Exists(ConfigJsonFor(path))) return shards;
      return NotFoundError(
          fmt::format("opening model folder '{}': neither config.json, model.safetensors nor "
                      "model.safetensors.index.json is there",
                      path));
    }
    POSENC_ASSIGN_OR_RETURN(nlohmann::json j, ReadJson(index));
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return DataLossError(fmt::format("reading '{}': no 'weight_map' object", index));
    }
    std::set<std::string> seen;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        return DataLossError(fmt::format("reading '{}': weight_map['{}'] is not a file name", index, it.key()));
      }
      const std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard == "..") {
        return DataLossError(fmt::format("reading '{}': shard name '{}' leaves the folder", index, shard));
      }
      if (seen.insert(shard).second) shards.push_back(fmt::format("{}/{}", path, shard));
    }
    return shards;
  }

  static Status OpenFolder(ModelFile& m) {
    const std::string& path = m.path_;
    m.format_ = ModelFormat::kHuggingFaceFolder;
    const std::string config = ConfigJsonFor(path);
    if (Exists(config)) POSENC_RETURN_IF_ERROR(ReadConfig(m, config));
    POSENC_ASSIGN_OR_RETURN(std::vector<std::string> shards, FolderShards(path));
    std::set<std::string> names;
    for (const std::string& shard : shards) {
      POSENC_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::Open(shard));
      for (const auto& t : st.tensors()) {
        if (!names.insert(t.name).second) {
          return DataLossError(
              fmt::format("opening model folder '{}': tensor '{}' appears in more than one shard "
                          "(again in '{}')",
                          path, t.name, shard));
        }
      }
      auto keep = std::make_shared<SafetensorsFile>(std::move(st));
      AddSafetensors(m, *keep);
      m.keep_alive_.push_back(keep);
    }
    m.token_embedding_ = FindIndex(m, kHfTokenNames);
    m.position_embedding_ = FindIndex(m, kHfPositionNames);
    return OkStatus();
  }

  static Status OpenGguf(ModelFile& m, MappedFile file) {
    m.format_ = ModelFormat::kGguf;
    POSENC_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Parse(std::move(file)));
    auto keep = std::make_shared<GgufFile>(std::move(g));
    m.gguf_ = keep;  // also keeps the mapping alive
    for (const auto& t : keep->tensors()) {
      ModelTensor mt;
      mt.name = t.name;
      mt.shape.assign(t.dims.rbegin(), t.dims.rend());
      if (DType d; DTypeOfGgmlType(t.type, &d)) mt.dtype = d;
      mt.type_name = GgmlTypeName(t.type);
      POSENC_ASSIGN_OR_RETURN(mt.data, keep->TensorData(t));
      mt.file = m.path_;
      m.tensors_.push_back(std::move(mt));
    }
    m.token_embedding_ = FindIndex(m, kGgufTokenNames);
    m.position_embedding_ = FindIndex(m, kGgufPositionNames);
    const char* freqs[] = {"rope_freqs.weight"};
    m.rope_freqs_ = FindIndex(m, freqs);
    if (auto a = keep->GetString("general.architecture"); a.ok()) m.architecture_ = *a;
    const std::string& arch = m.architecture_;
    auto get = [&](const std::string& key) -> int64_t {
      auto v = keep->GetInt(arch + "." + key);
      return v.ok() ? *v : 0;
    };
    m.hidden_size_ = get("embedding_length");
    m.num_layers_ = get("block_count");
    m.num_heads_ = get("attention.head_count");
    m.num_kv_heads_ = get("attention.head_count_kv");
    if (m.num_kv_heads_ == 0) m.num_kv_heads_ = m.num_heads_;
    m.context_length_ = get("context_length");
    m.vocab_size_ = get("vocab_size");
    if (m.vocab_size_ == 0) {
      if (auto toks = keep->GetArray("tokenizer.ggml.tokens"); toks.ok())
        m.vocab_size_ = static_cast<int64_t>((*toks)->count);
    }
    if (m.vocab_size_ == 0 && m.token_embedding_ >= 0) m.vocab_size_ = m.tensors_[m.token_embedding_].shape[0];
    if (auto eps = keep->GetFloat(arch + ".attention.layer_norm_rms_epsilon"); eps.ok()) m.rms_norm_eps_ = *eps;
    return OkStatus();
  }

  static Status OpenNpy(ModelFile& m, std::span<const std::byte> bytes) {
    m.format_ = ModelFormat::kNpy;
    POSENC_ASSIGN_OR_RETURN(Array a, ParseNpy(bytes, m.path_));
    auto keep = std::make_shared<Array>(std::move(a));
    m.keep_alive_.push_back(keep);
    ModelTensor mt;
    mt.name = "array";
    mt.shape = keep->shape();
    if (keep->dtype() == DType::kF32 || keep->dtype() == DType::kF16) mt.dtype = keep->dtype();
    mt.type_name = std::string(ToString(keep->dtype()));
    mt.data = std::span<const std::byte>(keep->bytes(), keep->nbytes());
    mt.file = m.path_;
    m.tensors_.push_back(std::move(mt));
    m.token_embedding_ = 0;
    if (m.tensors_[0].shape.size() == 2) {
      m.vocab_size_ = m.tensors_[0].shape[0];
      m.hidden_size_ = m.tensors_[0].shape[1];
    }
    return OkStatus();
  }

  static Status OpenSafetensors(ModelFile& m, MappedFile file) {
    m.format_ = ModelFormat::kSafetensors;
    POSENC_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::Parse(std::move(file)));
    auto keep = std::make_shared<SafetensorsFile>(std::move(st));
    m.keep_alive_.push_back(keep);
    AddSafetensors(m, *keep);
    m.token_embedding_ = FindIndex(m, kHfTokenNames);
    m.position_embedding_ = FindIndex(m, kHfPositionNames);
    const std::string config = ConfigJsonFor(m.path_);
    if (Exists(config)) POSENC_RETURN_IF_ERROR(ReadConfig(m, config));
    return OkStatus();
  }

  // llama2.c: the checkpoint's arrays under run.c's names, layers stacked.
  static Status OpenLlama2c(ModelFile& m, MappedFile file) {
    const std::string& path = m.path_;
    auto l = Llama2cFile::Parse(std::move(file));
    if (!l.ok()) {
      if (l.status().code() == StatusCode::kUnimplemented) return l.status();
      return InvalidArgumentError(
          fmt::format("opening model '{}': not GGUF, safetensors or .npy, and not a "
                      "llama2.c checkpoint either ({})",
                      path, l.status().message()));
    }
    m.format_ = ModelFormat::kLlama2c;
    auto keep = std::make_shared<Llama2cFile>(std::move(*l));
    m.llama2c_ = keep;
    const Llama2cConfig& c = keep->config();
    const Llama2cWeights& w = keep->weights();
    auto add = [&](const char* name, std::span<const float> v, std::vector<int64_t> shape) {
      ModelTensor mt;
      mt.name = name;
      mt.shape = std::move(shape);
      mt.dtype = DType::kF32;
      mt.type_name = "F32";
      mt.data = std::as_bytes(v);
      mt.file = path;
      m.tensors_.push_back(std::move(mt));
    };
    const int64_t L = c.n_layers, D = c.dim, H = c.hidden_dim, KV = c.kv_dim(), V = c.vocab_size;
    add("token_embedding_table", w.token_embedding_table, {V, D});
    add("rms_att_weight", w.rms_att_weight, {L, D});
    add("wq", w.wq, {L, D, D});
    add("wk", w.wk, {L, KV, D});
    add("wv", w.wv, {L, KV, D});
    add("wo", w.wo, {L, D, D});
    add("rms_ffn_weight", w.rms_ffn_weight, {L, D});
    add("w1", w.w1, {L, H, D});
    add("w2", w.w2, {L, D, H});
    add("w3", w.w3, {L, H, D});
    add("rms_final_weight", w.rms_final_weight, {D});
    add("freq_cis_real", w.freq_cis_real, {c.seq_len, c.head_size() / 2});
    add("freq_cis_imag", w.freq_cis_imag, {c.seq_len, c.head_size() / 2});
    if (!c.shared_classifier) add("wcls", w.wcls, {V, D});
    m.token_embedding_ = 0;
    m.architecture_ = "llama";
    m.vocab_size_ = V;
    m.hidden_size_ = D;
    m.num_layers_ = L;
    m.num_heads_ = c.n_heads;
    m.num_kv_heads_ = c.n_kv_heads;
    m.context_length_ = c.seq_len;
    return OkStatus();
  }

  // Sizes the metadata left out, from the token table's shape.
  static void SizesFromEmbedding(ModelFile& m) {
    if (m.token_embedding_ < 0) return;
    const ModelTensor& e = m.tensors_[static_cast<size_t>(m.token_embedding_)];
    if (e.shape.size() != 2) return;
    if (m.vocab_size_ == 0) m.vocab_size_ = e.shape[0];
    if (m.hidden_size_ == 0) m.hidden_size_ = e.shape[1];
  }

  // A folder without a Hugging Face model's files (config.json, model.safetensors, the index) that
  // holds GGUF files, as a GGUF repository's download does: its one .gguf file; an error listing them
  // when there are several (quantizations, or the shards of a split file). Empty: not such a folder.
  static Result<std::string> FolderGguf(const std::string& path) {
    if (Exists(ConfigJsonFor(path))) return std::string();
    for (const char* f : {"/model.safetensors", "/model.safetensors.index.json"})
      if (Exists(path + f)) return std::string();
    std::vector<std::string> ggufs;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();
      std::error_code ec2;
      if (name.size() > 5 && name.ends_with(".gguf") && entry.is_regular_file(ec2)) ggufs.push_back(name);
    }
    if (ec) return NotFoundError(fmt::format("opening model folder '{}': {}", path, ec.message()));
    if (ggufs.size() == 1) return path + "/" + ggufs[0];
    if (ggufs.empty()) return std::string();
    std::sort(ggufs.begin(), ggufs.end());
    std::string list;
    for (size_t i = 0; i < ggufs.size() && i < 6; ++i) list += (i ? ", " : "") + ggufs[i];
    if (ggufs.size() > 6) list += fmt::format(", ... ({} in all)", ggufs.size());
    return InvalidArgumentError(
        fmt::format("opening model folder '{}': it holds {} GGUF files ({}); pass the one to open", path,
                    ggufs.size(), list));
  }

  static Result<ModelFile> Open(const std::string& path) {
    ModelFile m;
    m.path_ = path;
    if (!Exists(path)) return NotFoundError(fmt::format("opening model '{}': no such file or folder", path));
    if (IsDirectory(path)) {
      POSENC_ASSIGN_OR_RETURN(std::string gguf, FolderGguf(path));
      if (!gguf.empty()) return Open(gguf);
      POSENC_RETURN_IF_ERROR(OpenFolder(m));
    } else {
      POSENC_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
      switch (DetectFileFormat(file.bytes(), path)) {
        case ModelFormat::kGguf: POSENC_RETURN_IF_ERROR(OpenGguf(m, std::move(file))); break;
        case ModelFormat::kNpy: POSENC_RETURN_IF_ERROR(OpenNpy(m, file.bytes())); break;
        case ModelFormat::kSafetensors: POSENC_RETURN_IF_ERROR(OpenSafetensors(m, std::move(file))); break;
        case ModelFormat::kLlama2c:
        case ModelFormat::kHuggingFaceFolder: POSENC_RETURN_IF_ERROR(OpenLlama2c(m, std::move(file))); break;
      }
    }
    SizesFromEmbedding(m);
    return m;
  }
};

Result<ModelFile> OpenModel(const std::string& path) { return ModelFileBuilder::Open(path); }

bool LooksLikeJsonConfig(const std::string& path) {
  if (path.ends_with(".json")) return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  Result<MappedFile> f = MappedFile::Open(path);
  if (!f.ok()) return false;
  int seen = 0;
  for (std::byte b : f->bytes()) {
    const char c = static_cast<char>(b);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (seen++ == 0) {
      if (c != '{') return false;
    } else {
      return c == '"' || c == '}';
    }
  }
  return false;
}

}  // namespace posenc
