// One way to get the input-stage tensors of any model file: GGUF, safetensors, a Hugging Face folder
// (config.json beside model.safetensors, or shards listed in model.safetensors.index.json), a llama2.c
// checkpoint, or a .npy table.
//
// Example:
//   auto model = OpenModel("llama-2-tiny-random.gguf");
//   auto table = model->TokenEmbeddingTable();                // QuantizedTable in the stored type
//   Array x = LookupRows(*table, ids).value();                  // [ids.size(), hidden_size] float32
//
// Tensors keep their stored types (F32, F16, BF16, ggml block types); shapes are row-major,
// outermost first (GGUF dims are reversed), so an embedding table is [vocab, hidden_size]. The files stay
// mapped while the ModelFile (or a copy) lives. Immutable after OpenModel: thread-safe to read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/io/quant.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class GgufFile;
class Llama2cFile;
struct ModelFileBuilder;  // model_file.cpp: OpenModel's steps

// The one vocabulary of model formats: what OpenModel opens, ModelScheme reads and convert-layout
// rewrites.
enum class ModelFormat { kGguf, kSafetensors, kHuggingFaceFolder, kLlama2c, kNpy };
std::string_view ToString(ModelFormat f);  // "gguf", "safetensors", "hf-folder", "llama2c", "npy"

// The format of a model file's bytes, the one rule every reader uses: the .npy magic, the "GGUF"
// magic, a safetensors header (a little-endian u64 length that fits the file, then '{'), or a name
// ending in .safetensors (so a damaged header is reported by the safetensors reader); anything else is
// read as a llama2.c checkpoint, whose reader checks its header against the file size.
ModelFormat DetectFileFormat(std::span<const std::byte> bytes, std::string_view path);

// The Hugging Face config.json that goes with a model path: inside it for a folder, beside it for a
// file (whether or not it exists). The one rule OpenModel and convert-layout read it by.
std::string ConfigJsonFor(const std::string& model_path);

struct ModelTensor {
  std::string name;
  std::vector<int64_t> shape;            // outermost first
  // The rows' type (float32/16, bfloat16 or a ggml block type); none for a type posenc lists but
  // does not read (safetensors I64, ggml IQ2_XS, ...).
  std::optional<DType> dtype;
  std::string type_name;  // "F16", "Q4_K", "I64", ...
  std::span<const std::byte> data;
  std::string file;  // the file holding it (a shard, for sharded folders)

  // rows = product of shape[0..n-2] (1 for a vector), row_length = shape.back().
  QuantizedTable AsTable() const;
  // dtype, or Unimplemented naming the tensor, its file and type_name.
  Result<DType> RowType() const;
};

class ModelFile {
 public:
  ModelFormat format() const { return format_; }
  const std::string& path() const { return path_; }
  const std::string& architecture() const { return architecture_; }  // "llama", "gpt2", "" if unknown
  int64_t vocab_size() const { return vocab_size_; }
  // The model's sizes, named as config.json and PositionScheme name them.
  int64_t hidden_size() const { return hidden_size_; }
  int64_t num_layers() const { return num_layers_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t context_length() const { return context_length_; }
  // RMSNorm epsilon as the file states it (config.json rms_norm_eps, GGUF
  // <arch>.attention.layer_norm_rms_epsilon); nullopt when it does not.
  std::optional<double> rms_norm_eps() const { return rms_norm_eps_; }
  const std::vector<ModelTensor>& tensors() const { return tensors_; }
  // The path of config.json (HF folder, or beside a .safetensors file), "" if none, and its text as
  // read once by OpenModel (the positional scheme is parsed from this text: model_scheme.hpp).
  const std::string& config_path() const { return config_path_; }
  const std::string& config_text() const { return config_text_; }
  // The parsed GGUF file (its metadata: RoPE scheme, norm epsilon, ...) when format() is GGUF, else
  // nullptr; valid while this ModelFile (or a copy) lives.
  const GgufFile* gguf() const { return gguf_.get(); }
  // The parsed llama2.c checkpoint (its header) when format() is llama2.c, else nullptr.
  const Llama2cFile* llama2c() const { return llama2c_.get(); }

  // nullptr if absent.
  const ModelTensor* Find(const std::string& name) const;
  // Token embedding table e (GGUF token_embd.weight, HF model.embed_tokens.weight / wte.weight / ...,
  // llama2.c token_embedding_table, the .npy array), learned position table (GGUF position_embd.weight,
  // HF wpe.weight / ...), rope_freqs (GGUF per-pair divisors). nullptr when the file has none.
  const ModelTensor* token_embedding() const { return Get(token_embedding_); }
  const ModelTensor* position_embedding() const { return Get(position_embedding_); }
  const ModelTensor* rope_freqs() const { return Get(rope_freqs_); }
  // The token table as rows; kNotFound naming the file and the names tried; kUnimplemented for a
  // type posenc cannot read.
  Result<QuantizedTable> TokenEmbeddingTable() const;
  Result<QuantizedTable> PositionTable() const;

 private:
  friend struct ModelFileBuilder;
  const ModelTensor* Get(int i) const { return i < 0 ? nullptr : &tensors_[static_cast<size_t>(i)]; }

  ModelFormat format_ = ModelFormat::kGguf;
  std::string path_, architecture_, config_path_, config_text_;
  int64_t vocab_size_ = 0, hidden_size_ = 0, num_layers_ = 0, num_heads_ = 0, num_kv_heads_ = 0, context_length_ = 0;
  std::optional<double> rms_norm_eps_;
  std::vector<ModelTensor> tensors_;
  int token_embedding_ = -1, position_embedding_ = -1, rope_freqs_ = -1;
  // The readers whose mappings the spans point into: gguf_ for a GGUF file, llama2c_ for a llama2.c
  // checkpoint, keep_alive_ for the rest.
  std::vector<std::shared_ptr<const void>> keep_alive_;
  std::shared_ptr<const GgufFile> gguf_;
  std::shared_ptr<const Llama2cFile> llama2c_;
};

// Opens a model file or folder, each file read and parsed once (the positional scheme comes from what
// it holds: ModelScheme, posenc/model/model_scheme.hpp). The format is detected from the bytes (GGUF
// magic, safetensors header, llama2.c header that matches the file size, .npy magic) or a directory:
// a Hugging Face folder (config.json with model.safetensors or its index; config.json alone gives the
// scheme and no tables), or a folder with none of those that holds one .gguf file (a GGUF repository's
// download; several: kInvalidArgument naming them). Errors name the path: kNotFound (missing),
// kInvalidArgument (format not recognised), or the reader's own error.
Result<ModelFile> OpenModel(const std::string& path);

// A Hugging Face config.json by its name or, whatever its name, by its content: a regular file whose
// first non-space bytes are '{' then '"' or '}' (GGUF, .npy, safetensors and llama2.c headers never start so).
bool LooksLikeJsonConfig(const std::string& path);

}  // namespace posenc
