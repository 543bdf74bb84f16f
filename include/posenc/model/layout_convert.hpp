// Converting a model between RoPE pair layouts by permuting the rows of W_q and W_k.
//
// RoPE rotates pairs of query/key dims. A model trained with `interleaved` pairs (x[2i], x[2i+1]:
// Meta's Llama, GPT-J, llama2.c) runs unchanged under `half` pairs (x[i], x[i+R/2]: Hugging Face
// Llama, GPT-NeoX) once every head's output rows of W_q and W_k (and of their biases) are reordered
// so that the two coordinates of pair i land where the new layout looks for pair i. With P that
// per-head permutation, the new q' = P q, rotating q' in the new layout equals P applied to q rotated
// in the old layout (each pair keeps its frequency), and q'.k' = (Pq).(Pk) = q.k, so every attention
// score, hence every output, is unchanged. Values, W_o and everything else stay as they are. Only the
// rotary window moves: dims outside [rotary_start, rotary_start + rotary_dim) keep their rows.
// Grouped-query attention: key heads are permuted with the same per-head P.
//
// For a full window, interleaved -> half is the permutation of Hugging Face's
// convert_llama_weights_to_hf.py `permute`, and half -> interleaved that of llama.cpp's
// convert_hf_to_gguf.py `LlamaModel.permute` (docs/LAYOUTS.md). Both are pure row moves, so a round
// trip returns the input bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "posenc/kernels/rope.hpp"
#include "posenc/core/status.hpp"
#include "posenc/model/model_file.hpp"

namespace posenc {

// perm[j] = the dim of the old head whose row becomes row j of the new head (head_dim entries).
// kInvalidArgument when `from` is not a valid layout.
Result<std::vector<int64_t>> RotaryRowPermutation(const RotaryLayout& from, RopePairing to);

// Permutes rows inside each of `heads` consecutive blocks of `head_dim` rows, each row `row_bytes`
// bytes (any element type: a row of a quantized GGUF matrix is whole blocks): dst row h*D + j =
// src row h*D + perm[j]. src and dst have exactly heads * head_dim * row_bytes bytes and do not overlap
// (kInvalidArgument otherwise).
Status PermuteHeadRows(std::span<const std::byte> src, std::span<std::byte> dst, int64_t heads, int64_t head_dim,
                       size_t row_bytes, std::span<const int64_t> perm);

struct LayoutConvertOptions {
  RopePairing from = RopePairing::kInterleaved;
  RopePairing to = RopePairing::kHalf;
  // llama2.c, safetensors or GGUF; unset: DetectFileFormat's (model_file.hpp).
  std::optional<ModelFormat> format;
  // Override what the file (GGUF metadata, config.json beside a safetensors file, llama2.c header) says;
  // 0 / -1 = take it from there.
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  int64_t rotary_start = -1;
  // safetensors: the config.json to read heads and rotary dims from ("" = ConfigJsonFor(the file)).
  std::string config_path;
};

struct LayoutConvertReport {
  ModelFormat format = ModelFormat::kLlama2c;
  int64_t num_heads = 0, num_kv_heads = 0;
  RotaryLayout from_layout;           // the window that moved, with the source pairing
  std::vector<std::string> permuted;  // tensor names (llama2.c: "wq", "wk")
  std::vector<std::string> notes;     // e.g. GGUF architectures whose runtime fixes the layout
};

// Converts the file bytes `in` (named `name` in messages) into `out` (same size; the header and every
// other byte are copied unchanged, only q/k rows move). Tensors it permutes:
//   llama2.c     wq (n_heads heads) and wk (n_kv_heads heads) of every layer, window = the whole head;
//   safetensors  *q_proj.weight/.bias, *k_proj.weight/.bias, fused *qkv_proj.weight/.bias
//                (q rows, then k rows, then v rows untouched), and fused *query_key_value.weight/.bias
//                in the row order config.json's model_type implies (FusedQkvLayout: GPT-NeoX,
//                Persimmon, Falcon; refused without a config); F32, F16, BF16 (else kUnimplemented);
//   GGUF         blk.N.attn_q / attn_k (.weight, .bias) and attn_qkv; any type for 2-D weights (rows are
//                whole blocks); a 1-D bias must be F32/F16/BF16 (a quantized bias would split blocks:
//                kUnimplemented naming the tensor and type).
// Heads and the rotary window come from the file (GGUF <arch>.attention.head_count(_kv),
// .rope.dimension_count, .attention.key_length; safetensors config.json) or the options. Errors name
// the file, the tensor and the rule: a row count that is not heads * head_dim, a window past head_dim,
// no q/k tensor found (kNotFound).
Result<LayoutConvertReport> ConvertLayoutBytes(std::span<const std::byte> in, const std::string& name,
                                               const LayoutConvertOptions& options, std::vector<std::byte>* out);

// Maps `in_path` (a regular file: a directory, FIFO or device is refused), converts, and writes
// `out_path` atomically (WriteFileAtomic: a temporary beside it, renamed over; a failed write leaves
// an existing file byte for byte). An output that is one of the inputs (the model, options.config_path,
// the config.json beside the model), also through links, is refused before anything is written.
Result<LayoutConvertReport> ConvertLayoutFile(const std::string& in_path, const std::string& out_path,
                                              const LayoutConvertOptions& options);

}  // namespace posenc
