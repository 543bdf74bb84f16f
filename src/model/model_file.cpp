// OpenModel: format detection and the per-format names of the input-stage tensors.
#include "posenc/model/model_file.hpp"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/io_util.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/safetensors.hpp"

namespace posenc {
namespace {

constexpr const char* kGgufTokenNames[] = {"token_embd.weight"};
constexpr const char* kGgufPositionNames[] = {"position_embd.weight"};
constexpr const char* kHfTokenNames[] = {
    "model.embed_tokens.weight", "embed_tokens.weight", "transformer.wte.weight", "wte.weight",
    "transformer.word_embeddings.weight", "word_embeddings.weight", "gpt_neox.embed_in.weight",
    "model.decoder.embed_tokens.weight", "tok_embeddings.weight", "transformer.embd.wte.weight",
    "model.language_model.embed_tokens.weight", "language_model.model.embed_tokens.weight"};
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
std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

uint32_t SafetensorsGgmlType(const std::string& dtype) {
  if (dtype == "F32") return static_cast<uint32_t>(GgmlType::kF32);
  if (dtype == "F16") return static_cast<uint32_t>(GgmlType::kF16);
  if (dtype == "BF16") return static_cast<uint32_t>(GgmlType::kBF16);
  return kUnreadableType;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFoundError(fmt::format("opening '{}': cannot read", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<nlohmann::json> ReadJson(const std::string& path) {
  POSENC_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return DataLossError(fmt::format("reading '{}': not valid JSON: {}", path, e.what()));
  }
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

QuantizedTable ModelTensor::AsTable() const {
  QuantizedTable t;
  t.data = data;
  t.ggml_type = ggml_type;
  t.row_length = shape.empty() ? 1 : shape.back();
  t.rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) t.rows *= shape[i];
  return t;
}

const ModelTensor* ModelFile::Find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
Result<QuantizedTable> TableOf(const ModelTensor* t, const std::string& path, const char* what, const char* names) {
  if (t == nullptr) {
    return NotFoundError(fmt::format("model '{}': no {} table (looked for {})", path, what, names));
  }
  if (t->ggml_type == kUnreadableType) {
    return UnimplementedError(fmt::format("model '{}': {} table '{}' is stored as {} (posenc reads F32, F16, BF16 and "
                                          "ggml block types)", path, what, t->name, t->type_name));
  }
  if (t->shape.size() != 2) {
    return InvalidArgumentError(fmt::format("model '{}': {} table '{}' has {} dims (2 expected)", path, what, t->name,
                                            t->shape.size()));
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

Result<ModelFile> OpenModel(const std::string& path) {
  ModelFile m;
  m.path_ = path;
  if (!Exists(path)) return NotFoundError(fmt::format("opening model '{}': no such file or folder", path));

  auto find_index = [&m](std::span<const char* const> names) {
    for (const char* n : names) {
      for (size_t i = 0; i < m.tensors_.size(); ++i) {
        if (m.tensors_[i].name == n) return static_cast<int>(i);
      }
    }
    return -1;
  };
  // config.json: architecture and sizes (HF folders, and .safetensors files with one beside them).
  auto read_config = [&m](const std::string& config) -> Status {
    m.config_path_ = config;
    POSENC_ASSIGN_OR_RETURN(nlohmann::json j, ReadJson(config));
    if (!j.is_object()) return DataLossError(fmt::format("reading '{}': not a JSON object", config));
    if (j.contains("model_type") && j["model_type"].is_string()) m.architecture_ = j["model_type"].get<std::string>();
    m.vocab_size_ = JsonInt(j, {"vocab_size"});
    m.d_model_ = JsonInt(j, {"hidden_size", "n_embd", "d_model"});
    m.n_layers_ = JsonInt(j, {"num_hidden_layers", "n_layer", "num_layers"});
    m.n_heads_ = JsonInt(j, {"num_attention_heads", "n_head", "n_heads"});
    m.n_kv_heads_ = JsonInt(j, {"num_key_value_heads", "n_head_kv"});
    if (m.n_kv_heads_ == 0) m.n_kv_heads_ = m.n_heads_;
    m.context_length_ = JsonInt(j, {"max_position_embeddings", "n_positions", "n_ctx"});
    const bool has_theta = j.contains("rope_theta") && j["rope_theta"].is_number();
    const bool has_params = j.contains("rope_parameters") && j["rope_parameters"].is_object();
    if (has_theta || has_params || j.contains("rope_scaling") || j.contains("rotary_emb_base")) {
      m.rope_.present = true;
      if (has_theta) m.rope_.theta = j["rope_theta"].get<double>();
      else if (has_params && j["rope_parameters"].contains("rope_theta") && j["rope_parameters"]["rope_theta"].is_number())
        m.rope_.theta = j["rope_parameters"]["rope_theta"].get<double>();
      m.rope_.note = "from config.json (Hugging Face pairs x[i] with x[i + d/2] unless the family says otherwise)";
    }
    return OkStatus();
  };
  auto add_safetensors = [&m](const SafetensorsFile& st) {
    for (const auto& t : st.tensors()) {
      ModelTensor mt;
      mt.name = t.name;
      mt.shape = t.shape;
      mt.ggml_type = SafetensorsGgmlType(t.dtype);
      mt.type_name = t.dtype;
      mt.data = st.TensorData(t);
      mt.file = st.name();
      m.tensors_.push_back(std::move(mt));
    }
  };

  if (IsDirectory(path)) {
    m.format_ = ModelFormat::kHuggingFaceFolder;
    const std::string config = path + "/config.json";
    if (Exists(config)) POSENC_RETURN_IF_ERROR(read_config(config));
    const std::string single = path + "/model.safetensors";
    const std::string index = path + "/model.safetensors.index.json";
    std::vector<std::string> shards;
    if (Exists(single)) {
      shards.push_back(single);
    } else if (Exists(index)) {
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
        if (seen.insert(shard).second) shards.push_back(path + "/" + shard);
      }
    } else {
      return NotFoundError(fmt::format("opening model folder '{}': neither model.safetensors nor "
                                       "model.safetensors.index.json is there", path));
    }
    std::set<std::string> names;
    for (const std::string& shard : shards) {
      POSENC_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::Open(shard));
      for (const auto& t : st.tensors()) {
        if (!names.insert(t.name).second) {
          return DataLossError(fmt::format("opening model folder '{}': tensor '{}' appears in more than one shard "
                                           "(again in '{}')", path, t.name, shard));
        }
      }
      auto keep = std::make_shared<SafetensorsFile>(std::move(st));
      add_safetensors(*keep);
      m.keep_alive_.push_back(keep);
    }
    m.token_embedding_ = find_index(kHfTokenNames);
    m.position_embedding_ = find_index(kHfPositionNames);
  } else {
    POSENC_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    const auto bytes = file.bytes();
    const bool npy = bytes.size() >= 6 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0;
    const bool gguf = bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
    bool safetensors = false;
    if (bytes.size() >= 9 && !gguf && !npy) {
      const uint64_t n = io::LoadLE<uint64_t>(bytes.data());
      safetensors = n <= bytes.size() - 8 && static_cast<char>(bytes[8]) == '{';
    }
    const bool st_name = path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
    if (gguf) {
      m.format_ = ModelFormat::kGguf;
      POSENC_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Parse(file));
      auto keep = std::make_shared<GgufFile>(std::move(g));
      m.gguf_ = keep;  // also keeps the mapping alive
      for (const auto& t : keep->tensors()) {
        ModelTensor mt;
        mt.name = t.name;
        mt.shape.assign(t.dims.rbegin(), t.dims.rend());
        mt.ggml_type = t.type;
        mt.type_name = GgmlTypeName(t.type);
        POSENC_ASSIGN_OR_RETURN(mt.data, keep->TensorData(t));
        mt.file = path;
        m.tensors_.push_back(std::move(mt));
      }
      m.token_embedding_ = find_index(kGgufTokenNames);
      m.position_embedding_ = find_index(kGgufPositionNames);
      const char* freqs[] = {"rope_freqs.weight"};
      m.rope_freqs_ = find_index(freqs);
      if (auto a = keep->GetString("general.architecture"); a.ok()) m.architecture_ = *a;
      const std::string& arch = m.architecture_;
      auto get = [&](const std::string& key) -> int64_t {
        auto v = keep->GetInt(arch + "." + key);
        return v.ok() ? *v : 0;
      };
      m.d_model_ = get("embedding_length");
      m.n_layers_ = get("block_count");
      m.n_heads_ = get("attention.head_count");
      m.n_kv_heads_ = get("attention.head_count_kv");
      if (m.n_kv_heads_ == 0) m.n_kv_heads_ = m.n_heads_;
      m.context_length_ = get("context_length");
      m.vocab_size_ = get("vocab_size");
      if (m.vocab_size_ == 0) {
        if (auto toks = keep->GetArray("tokenizer.ggml.tokens"); toks.ok()) m.vocab_size_ = static_cast<int64_t>((*toks)->count);
      }
      if (m.vocab_size_ == 0 && m.token_embedding_ >= 0) m.vocab_size_ = m.tensors_[m.token_embedding_].shape[0];
      const bool has_dim = keep->Find(arch + ".rope.dimension_count") != nullptr;
      const GgufValue* base = keep->Find(arch + ".rope.freq_base");
      if (has_dim || base != nullptr) {
        m.rope_.present = true;
        m.rope_.rotary_dim = get("rope.dimension_count");
        if (auto b = keep->GetFloat(arch + ".rope.freq_base"); b.ok()) {
          m.rope_.theta = *b;
          m.rope_.note = "from GGUF metadata";
        } else {
          m.rope_.note = fmt::format("{}.rope.freq_base absent: llama.cpp uses 10000", arch);
        }
        if (arch == "llama") {
          m.rope_.pairing = RopePairing::kInterleaved;
          m.rope_.note += "; llama.cpp rotates adjacent pairs (LLAMA_ROPE_TYPE_NORM) for 'llama'";
        }
      }
    } else if (npy) {
      m.format_ = ModelFormat::kNpy;
      POSENC_ASSIGN_OR_RETURN(Array a, ParseNpy(bytes, path));
      auto keep = std::make_shared<Array>(std::move(a));
      m.keep_alive_.push_back(keep);
      ModelTensor mt;
      mt.name = "array";
      mt.shape = keep->shape();
      mt.ggml_type = keep->dtype() == DType::kF32 ? 0u : keep->dtype() == DType::kF16 ? 1u : kUnreadableType;
      mt.type_name = std::string(ToString(keep->dtype()));
      mt.data = std::span<const std::byte>(keep->bytes(), keep->nbytes());
      mt.file = path;
      m.tensors_.push_back(std::move(mt));
      m.token_embedding_ = 0;
      if (m.tensors_[0].shape.size() == 2) {
        m.vocab_size_ = m.tensors_[0].shape[0];
        m.d_model_ = m.tensors_[0].shape[1];
      }
    } else if (safetensors || st_name) {
      m.format_ = ModelFormat::kSafetensors;
      POSENC_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::Parse(file));
      auto keep = std::make_shared<SafetensorsFile>(std::move(st));
      m.keep_alive_.push_back(keep);
      add_safetensors(*keep);
      m.token_embedding_ = find_index(kHfTokenNames);
      m.position_embedding_ = find_index(kHfPositionNames);
      const std::string config = Dirname(path) + "/config.json";
      if (Exists(config)) POSENC_RETURN_IF_ERROR(read_config(config));
    } else {
      auto l = Llama2cFile::Parse(file);
      if (!l.ok()) {
        if (l.status().code() == StatusCode::kUnimplemented) return l.status();
        return InvalidArgumentError(fmt::format("opening model '{}': not GGUF, safetensors or .npy, and not a "
                                                "llama2.c checkpoint either ({})", path, l.status().message()));
      }
      m.format_ = ModelFormat::kLlama2c;
      auto keep = std::make_shared<Llama2cFile>(std::move(*l));
      m.keep_alive_.push_back(keep);
      const Llama2cConfig& c = keep->config();
      const Llama2cWeights& w = keep->weights();
      auto add = [&](const char* name, std::span<const float> v, std::vector<int64_t> shape) {
        ModelTensor mt;
        mt.name = name;
        mt.shape = std::move(shape);
        mt.ggml_type = 0;
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
      m.d_model_ = D;
      m.n_layers_ = L;
      m.n_heads_ = c.n_heads;
      m.n_kv_heads_ = c.n_kv_heads;
      m.context_length_ = c.seq_len;
      m.rope_.present = true;
      m.rope_.theta = 10000.0;
      m.rope_.rotary_dim = c.head_size();
      m.rope_.pairing = RopePairing::kInterleaved;
      m.rope_.note = "llama2.c run.c: theta 10000 (fixed in the code), adjacent pairs within each head";
    }
  }
  if (m.token_embedding_ >= 0) {
    const ModelTensor& e = m.tensors_[static_cast<size_t>(m.token_embedding_)];
    if (e.shape.size() == 2) {
      if (m.vocab_size_ == 0) m.vocab_size_ = e.shape[0];
      if (m.d_model_ == 0) m.d_model_ = e.shape[1];
    }
  }
  return m;
}

}  // namespace posenc
