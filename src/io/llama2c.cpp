// llama2.c checkpoint reader (the layout of run.c's memory_map_weights).
#include "posenc/io/llama2c.hpp"

#include <cstring>

#include <fmt/format.h>

#include "io/io_util.hpp"

namespace posenc {

Result<Llama2cFile> Llama2cFile::Parse(MappedFile mapped) {
  Llama2cFile f;
  f.file_ = std::move(mapped);
  const std::string& file = f.file_.name();
  const auto bytes = f.file_.bytes();
  auto fail = [&](const std::string& what) {
    return DataLossError(fmt::format("reading llama2.c '{}': {}", file, what));
  };
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "24ka", 4) == 0) {
    return UnimplementedError(
        fmt::format("reading llama2.c '{}': magic 'ak42' marks a newer llama2.c export "
                    "(version 1/2); posenc reads the legacy format (7 int32 then floats)",
                    file));
  }
  if (bytes.size() < kHeaderBytes) {
    return fail(fmt::format("file has {} bytes, too short for the 28-byte header (7 int32)", bytes.size()));
  }
  int32_t h[7];
  std::memcpy(h, bytes.data(), sizeof(h));
  static const char* kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    if (i == 5 ? (h[i] == 0 || h[i] == INT32_MIN) : h[i] <= 0) {
      return fail(fmt::format("header field {} = {} (must be {})", kFields[i], h[i], i == 5 ? "non-zero" : "positive"));
    }
  }
  Llama2cConfig& c = f.config_;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] > 0 ? h[5] : -h[5];
  c.seq_len = h[6];
  if (c.dim % c.n_heads != 0) return fail(fmt::format("dim {} is not divisible by n_heads {}", c.dim, c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0) {
    return fail(fmt::format("n_heads {} is not divisible by n_kv_heads {}", c.n_heads, c.n_kv_heads));
  }
  if (c.head_size() % 2 != 0) return fail(fmt::format("head size {} is odd (RoPE rotates pairs)", c.head_size()));

  // Sizes in floats, in file order, each product checked for overflow (three int32 factors can pass
  // 2^64).
  const uint64_t dim = c.dim, hidden = c.hidden_dim, layers = c.n_layers, vocab = c.vocab_size;
  const uint64_t kv = static_cast<uint64_t>(c.kv_dim()), seq = c.seq_len, half = c.head_size() / 2;
  bool overflow = false;
  auto mul = [&overflow](uint64_t a, uint64_t b, uint64_t c3 = 1) {
    uint64_t r = 0;
    if (io::MulOverflows(a, b, &r) || io::MulOverflows(r, c3, &r)) overflow = true;
    return r;
  };
  const uint64_t sizes[] = {mul(vocab, dim),
                            mul(layers, dim),
                            mul(layers, dim, dim),
                            mul(layers, kv, dim),
                            mul(layers, kv, dim),
                            mul(layers, dim, dim),
                            mul(layers, dim),
                            mul(layers, hidden, dim),
                            mul(layers, dim, hidden),
                            mul(layers, hidden, dim),
                            dim,
                            mul(seq, half),
                            mul(seq, half),
                            c.shared_classifier ? 0 : mul(vocab, dim)};
  if (overflow)
    return fail(fmt::format("header sizes (dim {}, hidden_dim {}, n_layers {}) overflow", h[0], h[1], h[2]));
  uint64_t total = 0;
  for (uint64_t s : sizes) {
    if (io::AddOverflows(total, s, &total)) return fail("weight sizes overflow");
  }
  uint64_t expected = 0;
  if (io::MulOverflows(total, 4, &expected) || io::AddOverflows(expected, kHeaderBytes, &expected)) {
    return fail("weight sizes overflow");
  }
  if (expected != bytes.size()) {
    return fail(
        fmt::format("header (dim {}, hidden_dim {}, n_layers {}, n_heads {}, n_kv_heads {}, vocab_size {}, "
                    "seq_len {}) implies {} bytes but the file has {}{}",
                    h[0], h[1], h[2], h[3], h[4], h[5], h[6], expected, bytes.size(),
                    bytes.size() < expected ? " (truncated)" : " (trailing bytes)"));
  }
  const float* p = reinterpret_cast<const float*>(bytes.data() + kHeaderBytes);
  std::span<const float>* views[] = {&f.weights_.token_embedding_table,
                                     &f.weights_.rms_att_weight,
                                     &f.weights_.wq,
                                     &f.weights_.wk,
                                     &f.weights_.wv,
                                     &f.weights_.wo,
                                     &f.weights_.rms_ffn_weight,
                                     &f.weights_.w1,
                                     &f.weights_.w2,
                                     &f.weights_.w3,
                                     &f.weights_.rms_final_weight,
                                     &f.weights_.freq_cis_real,
                                     &f.weights_.freq_cis_imag,
                                     &f.weights_.wcls};
  for (size_t i = 0; i < std::size(views); ++i) {
    *views[i] = std::span<const float>(p, static_cast<size_t>(sizes[i]));
    p += sizes[i];
  }
  if (c.shared_classifier) f.weights_.wcls = f.weights_.token_embedding_table;
  return f;
}

}  // namespace posenc
