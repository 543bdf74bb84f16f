// llama2.c checkpoints (Karpathy's run.c "legacy" format, e.g. stories260K.bin), read-only and mapped.
//
// Layout: seven little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len), then float32 arrays in this order: token_embedding_table [vocab, dim], rms_att_weight
// [n_layers, dim], wq [n_layers, dim, dim], wk [n_layers, kv_dim, dim], wv [n_layers, kv_dim, dim],
// wo [n_layers, dim, dim], rms_ffn_weight [n_layers, dim], w1 [n_layers, hidden, dim], w2 [n_layers,
// dim, hidden], w3 [n_layers, hidden, dim], rms_final_weight [dim], freq_cis_real and freq_cis_imag
// [seq_len, head_size/2] (legacy, unused), then wcls [vocab, dim] only when vocab_size is negative
// (a separate classifier; |vocab_size| is the vocabulary). kv_dim = n_kv_heads * dim / n_heads.
// Matrices are [out, in]: out[i] = sum_j W[i*in + j] * x[j].
//
// Checks: every header field positive (vocab non-zero), dim divisible by n_heads, n_heads by
// n_kv_heads, head_size even, the sizes computed without overflow, and the file exactly as long as
// the header says (kDataLoss naming the file, the field and the expected size). The newer "ak42"
// export versions are kUnimplemented.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "posenc/io/mapped_file.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

struct Llama2cConfig {
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;  // vocab_size was positive in the file (vocab_size here is |value|)
  int32_t head_size() const { return dim / n_heads; }
  int32_t kv_dim() const { return n_kv_heads * head_size(); }
};

struct Llama2cWeights {
  std::span<const float> token_embedding_table, rms_att_weight, wq, wk, wv, wo, rms_ffn_weight, w1, w2, w3,
      rms_final_weight, freq_cis_real, freq_cis_imag;
  std::span<const float> wcls;  // == token_embedding_table when shared
};

// Open(path) and FromBytes(bytes, name) (MappedFileReader) map or copy the file and call Parse.
class Llama2cFile : public MappedFileReader<Llama2cFile> {
 public:
  Llama2cFile() = default;
  static Result<Llama2cFile> Parse(MappedFile file);

  const Llama2cConfig& config() const { return config_; }
  // Views into the mapping (valid while this object or a copy lives).
  const Llama2cWeights& weights() const { return weights_; }
  // Byte offset of the token embedding table (28).
  static constexpr uint64_t kHeaderBytes = 28;

 private:
  Llama2cConfig config_;
  Llama2cWeights weights_;
};

}  // namespace posenc
