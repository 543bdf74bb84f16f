// Detecting a checkpoint's RoPE pair layout from evidence: run the model on a token sequence under each
// layout and compare the next-token loss. A model run with the layout it was trained for predicts
// text; run with the other, its q/k pairs rotate by the wrong angles and the loss jumps.
//
// Supported: Llama-architecture models in llama2.c checkpoints (RoPE base 10000, as run.c), GGUF files
// (general.architecture llama; RoPE and its scaling from the metadata, as llama.cpp reads it; any
// weight type posenc dequantizes) and Hugging Face safetensors files or folders (config.json beside
// them gives heads, RoPE with its scaling, rms_norm_eps), through a small reference forward pass
// (RMSNorm, RoPE, grouped-query causal attention, SwiGLU, classifier or tied embeddings) in
// float32 with float64 dot products. RoPE, its head size (config.json's head_dim, GGUF key_length, so
// heads * head_size may differ from d_model: W_q is [heads * head_size, d_model]) and the declared
// pairing come from ModelScheme (posenc/model/model_scheme.hpp). Weights stay in the file's mapping
// in their stored type and are dequantized 64 rows at a time, so memory is the activations ([tokens, max(d_model, ffn,
// vocab)] floats) plus the mapped file; time is one multiply-add per parameter per token per layout (scalar: meant for
// small models and short texts). Other formats or architectures: kUnimplemented naming the file; a missing tensor:
// kNotFound naming it.
//
// What each format declares (LayoutDetection::declared, the scheme's pairing): llama2.c and GGUF llama
// run adjacent pairs (run.c; llama.cpp's NORM rope type), Hugging Face half pairs (rotate_half).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "posenc/kernels/rope.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

struct LayoutEvidence {
  RopePairing pairing = RopePairing::kHalf;
  double mean_loss = 0;              // nats per predicted token
  std::vector<double> token_losses;  // -log p(token[t+1] | tokens[0..t]), t = 0 .. n-2
};

struct LayoutDetection {
  std::vector<LayoutEvidence> candidates;  // half, interleaved
  // mean over tokens of loss(other) - loss(best), and its standard error over tokens
  double margin = 0, margin_stderr = 0;
  std::optional<RopePairing> verdict;  // set when the margin is clear (see DetectLayout)
  std::string declared;                // the pairing the file's format implies ("interleaved", "half"), or ""
  bool declared_disagrees = false;     // verdict set and != declared
  std::string summary;                 // one line for people
};

struct LayoutDetectOptions {
  // The verdict needs margin >= min_margin nats and margin >= z * stderr.
  double min_margin = 0.1;
  double z = 3.0;
};

// Runs `model_path` on `tokens` (ids in [0, vocab), at least 2) under both layouts. kInvalidArgument for
// too few tokens or an id out of range (naming the index and value); errors of the reader otherwise.
Result<LayoutDetection> DetectLayout(const std::string& model_path, std::span<const int64_t> tokens,
                                     const LayoutDetectOptions& options = {});

// Per-token next-token losses of the model run with `pairing` (the forward pass DetectLayout uses).
Result<std::vector<double>> LlamaTokenLosses(const std::string& model_path, std::span<const int64_t> tokens,
                                             RopePairing pairing);

}  // namespace posenc
