// A model's positional scheme as one value: which kind, its RoPE config, head counts and the
// parameters of the absolute and relative schemes. The readers beside it fill it in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/attn_temperature.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc {

enum class PositionKind { kRope, kLearned, kSinusoidal, kAlibi, kT5Bucket, kNone };
std::string_view ToString(PositionKind k);

// Where in an attention layer a rotation applies (golden FORMAT.md, "rotary_site"). Most models have
// one site, q and k of self-attention; DeepSeek-style MLA rotates the rope slice of q and k; a DSA
// "lightning indexer" (DeepSeek-V3.2, GLM-5) is a second site in the same layer with its own head
// size and window; DeepSeek-V4 also rotates the attention output backwards and its compressed KV
// entries.
enum class RotarySite { kAttention, kMla, kIndexer, kAttentionOutput, kCompressor };
std::string_view ToString(RotarySite s);
bool ParseRotarySite(std::string_view name, RotarySite* out);

// Whether a decoder layer type has self-attention: "mamba", "linear_attention" (Gated DeltaNet,
// Mamba-2 as transformers 5 spells hybrid layers), "conv", "short_conv", "moe" and "mlp" layers have
// none, so no positions; every other type ("full_attention", "sliding_attention", "attention",
// "chunked_attention", "compressed_sparse_attention", ...) is an attention layer.
bool LayerTypeHasAttention(std::string_view layer_type);

// The norm a family's attention applies to q and k right before RoPE (its modeling code; the
// kernel is posenc/kernels/rms_norm.hpp, fused with RoPE and the cache write in fused_rope.hpp):
enum class QkNorm {
  kNone,
  kPerHead,             // RMSNorm over head_dim, `weight * x.to(input_dtype)` (RmsNormStyle::kCastThenScale)
  kPerHeadFloat32,      // RMSNorm over head_dim, `(x * weight).to(input_dtype)` in float32 (kScaleThenCast;
                        // Gemma 3n / 4 take x * pow(mean + eps, -0.5), posenc 1 / sqrt: last-bit differences)
  kPerHeadOnePlus,      // RMSNorm over head_dim, `x * (1 + weight)` in float32 (kOnePlusWeight)
  kWholeProjection,     // RMSNorm over the whole q (k) projection, num_heads * head_dim (kScaleThenCast, kWholeRow):
                        // OLMo 2 / 3
  kWholeProjectionCast, // the same with `weight * x.to(input_dtype)` (kCastThenScale, kWholeRow): MiniMax-M2, OLMoE
  kPerHeadLayerNorm     // LayerNorm (mean subtracted) over head_dim: no RMSNorm kernel in posenc
};
// "none", "per_head", "per_head_float32", "per_head_one_plus_weight", "whole_projection",
// "whole_projection_cast", "per_head_layernorm". A family row's kNone means no q/k norm was found in
// its modeling code, or that the row was not audited (docs/MODEL_FAMILIES.md, "QK-norm").
std::string_view ToString(QkNorm q);
bool ParseQkNorm(std::string_view name, QkNorm* out);
// The RMSNorm that runs a QK-norm convention (kernels/rms_norm.hpp: style and scope, for the fused
// ApplyRopeKvCache's q_norm / k_norm); false where there is none to run (kNone, and
// kPerHeadLayerNorm, which subtracts the mean).
bool QkNormAsRmsNorm(QkNorm q, RmsNormStyle* style, RmsNormScope* scope);
// The names of the conventions QkNormAsRmsNorm runs, in table order, joined by ", " (for messages).
std::string QkNormRmsNormNames();

// How a fused query_key_value projection (one [rows, hidden] weight for q, k and v) orders its rows,
// as the model's Hugging Face modeling code splits it. Head counts are the config's.
enum class FusedQkvLayout {
  kNone,        // the model type has no such tensor (or posenc does not know how it is split)
  kPerHead,     // per query head [q, k, v]: gpt_neox, persimmon, falcon without multi-query
  kPerKvGroup,  // per key/value head [num_heads / num_kv_heads q heads, k, v]: falcon new_decoder_architecture
  kQThenKThenV  // all q heads, then the k heads, then the v heads: falcon multi-query (one k and one v head)
};
std::string_view ToString(FusedQkvLayout l);

// The most layers a config or GGUF file may declare: the per-layer table (and EXAONE 4's pattern,
// LFM2's full_attn_idxs) is sized by the count, so a 150-byte config saying 3e8 layers took 11 GB. Real
// models have at most a few hundred.
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;

struct PositionScheme {
  PositionKind kind = PositionKind::kRope;
  std::string model_type;  // config's model_type, if any
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t hidden_size = 0;
  // The row order of the model's fused query_key_value weight, if it has one (layout converter).
  FusedQkvLayout fused_qkv = FusedQkvLayout::kNone;
  RopeConfig rope;  // kind == kRope
  // absolute schemes
  int64_t max_position_embeddings = 0;
  // alibi
  std::string alibi_variant;  // "bloom" or "mpt"
  double alibi_bias_max = 8.0;
  // t5
  int64_t t5_num_buckets = 0;
  int64_t t5_max_distance = 0;
  bool t5_bidirectional = true;
  // sinusoidal: "interleaved" (sin at even dims: Vaswani, XLM) or "concat" ([sin | cos]: fairseq, Marian)
  std::string sinusoidal_layout;
  // rope: the config's spelling ("rope_parameters", "rope_scaling", "plain", "gguf", "ggml params")
  std::string rope_spelling;
  // rope_parameters in the nested per-layer-type form ({"full_attention": {...}, ...}): the types
  // found, and the one `rope` describes; both empty for a single RoPE.
  std::vector<std::string> rope_layer_types;
  std::string rope_layer_type;
  // The keys that decide, per decoder layer, whether RoPE is applied, as the config gives them
  // (LayerRopeSchedule in posenc/config/layer_schedule.hpp applies the family's rule to them).
  int64_t num_layers = 0;                       // num_hidden_layers (n_layer, num_layers); 0 = not given
  std::vector<std::string> layer_types;         // layer_types ("sliding_attention", "full_attention", ...)
  std::vector<int64_t> no_rope_layers;          // Llama 4: per layer 1 = applies RoPE (despite the name), 0 = NoPE
  std::vector<int64_t> cross_attention_layers;  // Mllama: indices of the cross-attention layers (no RoPE)
  int64_t no_rope_layer_interval = 0;           // Llama 4; 0 = not given (Llama4TextConfig's default 4 applies)
  int64_t sliding_window_pattern = 0;           // Cohere2; 0 = not given (Cohere2Config's default 4 applies)
  int64_t full_attention_interval = 0;          // Qwen3-Next / Qwen3.5; 0 = not given (the config classes' default 4)
  bool has_sliding_window = false;              // a non-null sliding_window key (EXAONE 4: hybrid attention)
  // Llama 4's query temperature on NoPE layers: tuning is false for every other family.
  AttnTemperature attn_temperature;
  // QK-norm before RoPE, from the family's row (and its switch key, GLM-4.5's use_qk_norm).
  QkNorm qk_norm = QkNorm::kNone;
  // Layers and sites (2026 structure, docs/MODEL_FAMILIES.md). `layer_types` above holds the type of
  // every decoder layer once the family's rule has derived it (layer kinds included: "mamba", "moe",
  // ...). The RoPE sites of each attention layer (empty for a scheme that is not RoPE), the one `rope`
  // describes, and its direction (-1: the inverse rotation, DeepSeek-V4's attention output).
  std::vector<RotarySite> sites;
  RotarySite site = RotarySite::kAttention;
  int rotation_sign = 1;
  // Keyed parameter sets (Gemma 4 / MiMo: one per layer type; DeepSeek-V4: "main" / "compress"), in
  // the family's order, and the one `rope` describes; empty where the model has one set.
  std::vector<std::string> rope_keys;
  std::string rope_key;
  // q/k head size of the default layers and of full_attention layers (Gemma 4's global_head_dim);
  // 0 = not known / the same.
  int64_t layer_head_dim = 0;
  int64_t full_attention_head_dim = 0;
  // The layer asked for (HfConfigOptions::layer), -1 none; the scheme then describes that layer.
  int64_t layer = -1;
  // Notes on values taken from a family default or inferred (for every kind; RoPE ones are also in
  // rope.notes).
  std::vector<std::string> notes;
};

}  // namespace posenc
