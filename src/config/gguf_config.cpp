// GGUF metadata -> PositionScheme: the numbers llama.cpp passes to ggml_rope_ext for a model.
//
// What llama.cpp does with the keys (src/llama-model.cpp load_hparams, src/llama-context.cpp):
//   freq_base   <arch>.rope.freq_base (llama.cpp: 10000 when absent; posenc: an error unless allowed)
//   n_rot       <arch>.rope.dimension_count, else the head size (key_length, else embedding / heads)
//   freq_scale  1 / <arch>.rope.scaling.factor (old key <arch>.rope.scale_linear), 1 when absent or 0,
//               and 1 when the scaling type is "none"
//   ext_factor  1 for scaling type "yarn", else 0
//   attn_factor with YaRN: mscale(factor) / (1 + 0.1 ln factor), i.e. the kernel's own YaRN factor is
//               cancelled and Hugging Face's 0.1 ln(s) + 1 (or DeepSeek's mscale ratio from
//               <arch>.rope.scaling.yarn_log_multiplier) put in its place; then times
//               <arch>.rope.scaling.attn_factor (default 1)
//   n_ctx_orig  <arch>.rope.scaling.original_context_length, else <arch>.context_length
//   pairing     fixed per architecture (llama_model_rope_type): NORM = interleaved, NEOX = half
//   rope_freqs  tensor "rope_freqs.weight": per-pair divisors (Llama 3.1's scaling, baked in)
//   LongRoPE    tensors "rope_factors_long.weight" / "rope_factors_short.weight"
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "posenc/config/hf_config.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/config/gguf_config.hpp"

namespace posenc {
namespace {

// llama_model_rope_type, for the architecture names GGUF files carry (general.architecture).
enum class ArchRope { kNorm, kNeox, kNone, kMulti, kUnknown };

ArchRope RopeTypeOf(std::string_view arch) {
  static constexpr std::string_view kNorm[] = {
      "llama", "llada", "llama4", "deci", "baichuan", "starcoder", "internlm2", "minicpm", "xverse", "command-r",
      "cohere2", "olmo", "arctic", "deepseek", "deepseek2", "plm", "chatglm", "granite", "granitemoe",
      "granitehybrid", "chameleon", "bailingmoe", "neo-bert", "smollm3", "arcee", "ernie4_5", "ernie4_5-moe",
      "mistral3", "llama-embed"};
  static constexpr std::string_view kNeox[] = {
      "falcon", "falcon-h1", "grok", "dbrx", "bert", "jina-bert-v3", "modern-bert", "nomic-bert",
      "nomic-bert-moe", "eurobert", "stablelm", "bitnet", "qwen", "qwen2", "dream", "qwen2moe", "qwen3",
      "qwen3moe", "llada-moe", "olmo2", "olmoe", "phi2", "phi3", "phimoe", "plamo", "plamo2", "gemma", "gemma2",
      "gemma3", "gemma3n", "gemma-embedding", "starcoder2", "openelm", "gptneox", "codeshell", "orion",
      "nemotron", "exaone", "exaone4", "minicpm3", "bailingmoe2", "dots1", "hunyuan-moe", "gpt-oss",
      "hunyuan-dense", "lfm2", "lfm2moe", "smallthinker", "seed_oss", "grovemoe", "apertus", "minimax-m2",
      "cogvlm", "pangu-embedded", "afmoe", "qwen3next"};
  static constexpr std::string_view kNone[] = {"clip", "gpt2", "gptj", "mpt", "refact", "bloom", "mamba", "mamba2",
                                               "jamba", "jina-bert-v2", "t5", "t5encoder", "jais", "rwkv6",
                                               "rwkv6qwen2", "rwkv7", "arwkv7", "wavtokenizer-dec"};
  static constexpr std::string_view kMulti[] = {"qwen2vl", "qwen3vl", "qwen3vlmoe"};
  for (auto a : kNorm) if (a == arch) return ArchRope::kNorm;
  for (auto a : kNeox) if (a == arch) return ArchRope::kNeox;
  for (auto a : kNone) if (a == arch) return ArchRope::kNone;
  for (auto a : kMulti) if (a == arch) return ArchRope::kMulti;
  return ArchRope::kUnknown;
}

Result<std::vector<double>> F32Tensor(const GgufFile& f, const GgufTensorInfo& t, int64_t want, const char* role) {
  if (t.ggml_type() != GgmlType::kF32)
    return UnimplementedError(fmt::format("gguf {}: tensor '{}' ({}) has type {}, expected F32", f.name(), t.name, role,
                                          GgmlTypeName(t.type)));
  if (t.num_elements != want)
    return InvalidArgumentError(fmt::format("gguf {}: tensor '{}' has {} values, must have n_rot/2 = {}", f.name(), t.name,
                                            t.num_elements, want));
  POSENC_ASSIGN_OR_RETURN(auto bytes, f.TensorData(t));
  std::vector<double> out(static_cast<size_t>(want));
  for (size_t i = 0; i < out.size(); ++i) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    out[i] = v;
  }
  return out;
}

}  // namespace

Result<PositionScheme> LoadGgufConfig(const std::string& path, const GgufConfigOptions& options) {
  POSENC_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  return GgufConfigFromFile(f, options);
}

Result<PositionScheme> GgufConfigFromFile(const GgufFile& f, const GgufConfigOptions& options) {
  const std::string& path = f.name();
  POSENC_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  auto key = [&](std::string_view k) { return fmt::format("{}.{}", arch, k); };
  PositionScheme s;
  s.model_type = arch;
  s.rope_spelling = "gguf";
  auto opt_int = [&](std::string_view k, int64_t* dst) -> Status {
    if (f.Find(key(k)) == nullptr) return OkStatus();
    POSENC_ASSIGN_OR_RETURN(*dst, f.GetInt(key(k)));
    return OkStatus();
  };
  POSENC_RETURN_IF_ERROR(opt_int("attention.head_count", &s.num_heads));
  POSENC_RETURN_IF_ERROR(opt_int("attention.head_count_kv", &s.num_kv_heads));
  POSENC_RETURN_IF_ERROR(opt_int("embedding_length", &s.hidden_size));
  POSENC_RETURN_IF_ERROR(opt_int("context_length", &s.max_position_embeddings));
  const ArchRope rope_type = RopeTypeOf(arch);
  if (rope_type == ArchRope::kNone) {
    if (arch == "gpt2") s.kind = PositionKind::kLearned;
    else if (arch == "bloom") { s.kind = PositionKind::kAlibi; s.alibi_variant = "bloom"; }
    else if (arch == "mpt") { s.kind = PositionKind::kAlibi; s.alibi_variant = "mpt"; }
    else
      return UnimplementedError(fmt::format("gguf {}: architecture '{}' uses no RoPE and posenc does not read its scheme from GGUF",
                                            path, arch));
    return s;
  }
  if (rope_type == ArchRope::kMulti)
    return UnimplementedError(fmt::format("gguf {}: architecture '{}' uses M-RoPE (multi-axis positions), not supported", path, arch));
  if (rope_type == ArchRope::kUnknown)
    return UnimplementedError(fmt::format(
        "gguf {}: general.architecture = '{}' is not in posenc's copy of llama.cpp's rope type table, so its pairing is unknown",
        path, arch));
  s.kind = PositionKind::kRope;
  RopeConfig& rc = s.rope;
  rc.source = path;
  rc.scaling.type = RopeScalingType::kGgml;
  rc.layout.pairing = rope_type == ArchRope::kNorm ? RopePairing::kInterleaved : RopePairing::kHalf;
  rc.notes.push_back(fmt::format("pairing {} is fixed by llama.cpp for architecture '{}' (not stored in the file)",
                                 ToString(rc.layout.pairing), arch));

  // Head size and rotary dims.
  int64_t head_dim = 0;
  POSENC_RETURN_IF_ERROR(opt_int("attention.key_length", &head_dim));
  if (head_dim == 0) {
    if (s.num_heads <= 0) return NotFoundError(fmt::format("gguf {}: key '{}' is missing or 0", path, key("attention.head_count")));
    if (s.hidden_size <= 0 || s.hidden_size % s.num_heads != 0)
      return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} is not a positive multiple of head_count {}", path,
                                              key("embedding_length"), s.hidden_size, s.num_heads));
    head_dim = s.hidden_size / s.num_heads;
  }
  int64_t n_rot = head_dim;
  POSENC_RETURN_IF_ERROR(opt_int("rope.dimension_count", &n_rot));
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be even, positive and at most the head size {}", path,
                                            key("rope.dimension_count"), n_rot, head_dim));
  rc.layout.head_dim = head_dim;
  rc.layout.rotary_dim = n_rot;

  // Base.
  if (f.Find(key("rope.freq_base")) != nullptr) {
    POSENC_ASSIGN_OR_RETURN(rc.base, f.GetFloat(key("rope.freq_base")));
  } else if (options.allow_default_freq_base) {
    rc.base = 10000.0;
    rc.notes.push_back(fmt::format("no {}: base 10000 assumed (llama.cpp's default)", key("rope.freq_base")));
  } else {
    return NotFoundError(fmt::format("gguf {}: key '{}' is missing (llama.cpp would silently use 10000; posenc refuses)", path,
                                     key("rope.freq_base")));
  }
  if (!(rc.base > 0) || !std::isfinite(rc.base))
    return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be finite and > 0", path, key("rope.freq_base"), rc.base));
  rc.base = static_cast<float>(rc.base);  // llama.cpp holds it as float
  rc.max_position_embeddings = s.max_position_embeddings;

  // Scaling.
  std::string type = "linear";
  if (f.Find(key("rope.scaling.type")) != nullptr) {
    POSENC_ASSIGN_OR_RETURN(type, f.GetString(key("rope.scaling.type")));
  }
  if (type != "none" && type != "linear" && type != "yarn" && type != "longrope")
    return UnimplementedError(fmt::format("gguf {}: key '{}' = '{}' is not a scaling posenc knows (none, linear, yarn, longrope)",
                                          path, key("rope.scaling.type"), type));
  float factor = 0.0f;
  for (const char* k : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (f.Find(key(k)) == nullptr) continue;
    POSENC_ASSIGN_OR_RETURN(double v, f.GetFloat(key(k)));
    if (!(v >= 0) || !std::isfinite(v))
      return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be finite and >= 0", path, key(k), v));
    factor = static_cast<float>(v);
    break;
  }
  RopeScaling& sc = rc.scaling;
  sc.freq_scale = factor == 0.0f || type == "none" ? 1.0 : static_cast<double>(1.0f / factor);
  sc.factor = 1.0 / sc.freq_scale;
  int64_t n_ctx_orig = s.max_position_embeddings;
  POSENC_RETURN_IF_ERROR(opt_int("rope.scaling.original_context_length", &n_ctx_orig));
  sc.original_max_position_embeddings = n_ctx_orig;
  sc.ext_factor = type == "yarn" ? 1.0 : 0.0;
  sc.beta_fast = 32.0;
  sc.beta_slow = 1.0;
  for (const auto& [k, dst] : {std::pair{"rope.scaling.yarn_ext_factor", &sc.ext_factor},
                               std::pair{"rope.scaling.yarn_beta_fast", &sc.beta_fast},
                               std::pair{"rope.scaling.yarn_beta_slow", &sc.beta_slow}}) {
    if (f.Find(key(k)) == nullptr) continue;
    POSENC_ASSIGN_OR_RETURN(*dst, f.GetFloat(key(k)));
  }
  double rope_attn_factor = 1.0;
  if (f.Find(key("rope.scaling.attn_factor")) != nullptr) {
    POSENC_ASSIGN_OR_RETURN(rope_attn_factor, f.GetFloat(key("rope.scaling.attn_factor")));
  }
  double log_mul = 0.0;
  if (f.Find(key("rope.scaling.yarn_log_multiplier")) != nullptr) {
    POSENC_ASSIGN_OR_RETURN(log_mul, f.GetFloat(key("rope.scaling.yarn_log_multiplier")));
  }
  // llama-context.cpp, in float32.
  float attn = 1.0f;
  if (sc.ext_factor != 0.0) {
    const float fct = 1.0f / static_cast<float>(sc.freq_scale);
    auto mscale = [](float scale, float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
    if (log_mul != 0.0) {
      float m = 1.0f;
      const float all = static_cast<float>(log_mul);
      if (arch == "deepseek2" && all != 1.0f) m = all;
      attn = mscale(fct, m) / mscale(fct, all);
    } else {
      attn = mscale(fct, 1.0f);
    }
    attn *= 1.0f / (1.0f + 0.1f * std::log(fct));
  }
  attn *= static_cast<float>(rope_attn_factor);
  sc.attn_factor = attn;

  // Per-pair divisors.
  const int64_t pairs = n_rot / 2;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name == "rope_freqs.weight") {
      POSENC_ASSIGN_OR_RETURN(sc.freq_factors, F32Tensor(f, t, pairs, "rope_freqs"));
    } else if (t.name == "rope_factors_long.weight") {
      POSENC_ASSIGN_OR_RETURN(sc.long_factor, F32Tensor(f, t, pairs, "LongRoPE long factors"));
    } else if (t.name == "rope_factors_short.weight") {
      POSENC_ASSIGN_OR_RETURN(sc.short_factor, F32Tensor(f, t, pairs, "LongRoPE short factors"));
    }
  }
  if (sc.long_factor.empty() != sc.short_factor.empty())
    return NotFoundError(fmt::format("gguf {}: only one of rope_factors_long / rope_factors_short is present", path));
  if (!sc.long_factor.empty())
    rc.notes.push_back("LongRoPE factors: posenc switches to the long list when seq_len > n_ctx_orig; llama.cpp decides by "
                       "the context size it was started with");
  for (auto& n : rc.notes) s.notes.push_back(n);
  POSENC_RETURN_IF_ERROR(ValidateRopeConfig(rc));
  return s;
}

}  // namespace posenc
