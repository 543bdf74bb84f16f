// Small model files the scheme tests (library and CLI) build: a Hugging Face folder and a qwen2 GGUF
// whose head size is stated by attention.key_length.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model_builders.hpp"
#include "test_support.hpp"

namespace posenc::testing {

// dir/model.safetensors holding model.embed_tokens.weight, F32 [3, 64], every value `fill`, and
// dir/config.json holding `config`.
inline void WriteHfFolder(const std::filesystem::path& dir, float fill, const std::string& config) {
  SafetensorsBuilder b;
  b.Tensor("model.embed_tokens.weight", "F32", {3, 64}, FloatBytes(std::vector<float>(3 * 64, fill))).Finish();
  WriteFile(dir / "model.safetensors", b.Build());
  WriteFile(dir / "config.json", config);
}

// The metadata of a qwen2 GGUF (llama.cpp pairs its halves, NEOX) whose head size,
// attention.key_length = 48, is not embedding_length / head_count = 64 / 2, with the given rope base
// and context length. Callers add the keys and tensors their test is about.
inline GgufBuilder Qwen2Gguf(float freq_base, uint32_t context_length) {
  GgufBuilder b;
  b.KvString("general.architecture", "qwen2")
      .KvU32("qwen2.embedding_length", 64)
      .KvU32("qwen2.attention.head_count", 2)
      .KvU32("qwen2.attention.key_length", 48)
      .KvF32("qwen2.rope.freq_base", freq_base)
      .KvU32("qwen2.context_length", context_length);
  return b;
}

}  // namespace posenc::testing
