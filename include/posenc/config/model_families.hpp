// The model-family registry: one row per model family, the facts of its positional scheme that its
// modeling code fixes and no config key states (docs/MODEL_FAMILIES.md).
//
// Keyed by Hugging Face model_type (a "_text" suffix, as multimodal text_configs spell it, falls back
// to the family without it), by architectures / auto_map class names for remote-code families, and by
// llama.cpp's GGUF general.architecture where llama.cpp has the family. ParseHfConfig reads the
// pairing, the rotary window and its default factor, the family's own key spellings and fixed values
// from here; every other reader of family facts (model_scheme, multi_axis_config) does too.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/config/position_scheme.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

// Where the rotary dims sit in each query/key head.
enum class RotaryWindow {
  kWholeHead,     // every dim rotates (unless the config says partial_rotary_factor / rotary_dim)
  kFrontPartial,  // the first int(head_dim * factor) dims; the family's config class defaults factor
  kBackOfHead,    // DeepSeek MLA: qk_rope_head_dim dims after qk_nope_head_dim
  kNone,          // not RoPE
};
std::string_view ToString(RotaryWindow w);

// M-RoPE section layout a family's modeling code applies to mrope_section (none: 1-D only);
// kHwAlternating: ERNIE-4.5-VL, mrope_section [s_h, s_w, s_t], pairs below s_h + s_w alternate h / w.
enum class FamilySections { kNone, kChunked, kInterleaved, kHwAlternating };

// What switches a family's positions on or off (the config keys the modeling code reads for it).
enum class PositionSwitch {
  kAlways,                     // the family's scheme on every attention layer the layer rule names
  kPositionEmbeddingTypeRope,  // RoPE iff position_embedding_type is exactly "rope"; null / "nope": none
                               // (Granite 4.0-H, GraniteMoeHybridAttention)
  kMlaUseNope,                 // RoPE unless mla_use_nope is true (Kimi Linear's MLA layers)
  kNever,                      // the attention never rotates, whatever rope_theta says (Nemotron-H)
};
std::string_view ToString(PositionSwitch p);

// How a family derives every decoder layer's type where the config's layer_types does not list them.
enum class LayerTypesRule {
  kConfigOnly,          // layer_types if given (or the LayerRule's own keys)
  kGemma4Pattern,       // full_attention where (i + 1) % 6 == 0, else sliding; the last layer always full
  kCompressRatios,      // DeepSeek-V4: compress_ratios 0 / 4 / 128 -> sliding / compressed_sparse /
                        // heavily_compressed_attention, cut to num_hidden_layers
  kHybridOverride,      // Nemotron-H: hybrid_override_pattern (or layers_block_type), M mamba, E moe,
                        // - mlp, * attention
  kMambaUnlessListed,   // Granite 4.0-H: layer_types with "mamba" / "attention"; absent: every layer Mamba
  kHybridLayerPattern,  // MiMo-V2 (remote code): hybrid_layer_pattern 1 sliding, 0 full attention
  kKdaLayers,           // Kimi Linear: linear_attn_config.kda_layers (1-based) linear_attention, else full
  kSlidingWindowPattern,  // Gemma 3: full_attention where (i + 1) % sliding_window_pattern == 0, else sliding;
                          // the key absent: the row's full_layer_period (the config class's default)
  kEveryNthFull,          // Gemma 3n: full_attention where (i + 1) % full_layer_period == 0 (no key read)
};

// The RoPE sites of a family's attention layers and how each is shaped (hf_config.cpp applies them).
enum class SiteRule {
  kAttention,   // one site: q / k of self-attention (MLA families: its rope slice, named mla)
  kDsa,         // mla + indexer: the index head (index_head_dim) rotates its FRONT qk_rope_head_dim dims,
                // paired as indexer_pairing, with the MLA site's frequencies
  kDeepseekV4,  // attention, attention_output (inverse), indexer, compressor: the back R dims of each head,
                // parameter set per layer: main / compress
};

std::string_view ToString(LayerTypesRule r);
std::string_view ToString(SiteRule r);

// How keyed rope_parameters map onto layers.
enum class RopeKeying {
  kNone,          // one set (or the nested per-layer-type form, read by layer type)
  kMainCompress,  // DeepSeek-V4: "main" for sliding_attention layers, "compress" for the compressed ones
                  // and for the indexer and compressor sites
};

// The per-layer rule of a family's modeling code (LayerRopeSchedule and ParseHfConfig apply it).
enum class LayerRule {
  kEveryLayer,               // the same RoPE on every layer
  kLlama4NoRope,             // no_rope_layers (1 = RoPE), else NoPE on every no_rope_layer_interval-th layer
  kSlidingRopeFullNope,      // Cohere2: RoPE on sliding_attention layers, NoPE on full_attention ones
  kSlidingRopeIfWindowed,    // EXAONE 4: as Cohere2 when sliding_window is set, else RoPE on every layer
  kScalingOnFullLayersOnly,  // OLMo 3: rope_scaling on full_attention layers, plain RoPE on sliding ones
  kFullAttentionOnly,        // Qwen3-Next / Qwen3.5 / LFM2: RoPE on full_attention layers; linear_attention
                             // (Gated DeltaNet) and conv layers have no positions
  kCrossAttentionNoRope      // Mllama: no RoPE on the cross_attention_layers (they attend to the image)
};
std::string_view ToString(FamilySections s);

// A position-dependent query scale of the family's modeling code (posenc/kernels/attn_temperature.hpp).
enum class QueryTemperatureForm {
  kNone,
  kLlama4Tuning,  // attn_temperature_tuning, floor_scale, attn_scale: offset 1, NoPE layers only
  kScalingBeta    // rope_parameters.llama_4_scaling_beta over original_max_position_embeddings: offset 0, every layer
};

struct ModelFamily {
  std::string_view model_type{};  // Hugging Face model_type
  PositionKind scheme = PositionKind::kRope;
  RopePairing pairing = RopePairing::kHalf;  // RoPE only: how the modeling code pairs dims
  RotaryWindow window = RotaryWindow::kWholeHead;
  double default_partial_rotary_factor = 1.0;  // kFrontPartial: the config class's default
  std::string_view gguf_architecture{};        // llama.cpp general.architecture; "" where llama.cpp has none
  // Keys the family spells its own way (read by ParseHfConfig where it lists them below).
  std::string_view base_key{};            // the RoPE base, tried before rope_theta ("" none)
  std::string_view base_scale_key{};      // multiplies the base (ChatGLM's rope_ratio; "" none)
  std::string_view head_dim_key{};        // the head size, before head_dim ("" none)
  double fixed_base = 0.0;                // the modeling code's base where no key gives one (0: Hugging Face's default)
  int64_t alibi_hidden_size = 0;          // a hidden_size at which the family's code is ALiBi, not RoPE (0: none)
  std::string_view position_scale_key{};  // positions multiplied by it (Phi-3-small's rope_position_scale; "" none)
  std::string_view dynamic_ntk_key{};     // a boolean turning on the family's dynamic NTK past seq_length (Qwen)
  std::string_view refused_key{};         // a truthy value selects code posenc does not implement ("" none)
  std::string_view own_keys{};            // what the family's own keys mean, for the table ("" none)
  std::string_view layer_schedule{};      // the per-layer rule ("" the same scheme on every layer)
  LayerRule layer_rule = LayerRule::kEveryLayer;
  std::string_view position_scaling{};  // position-dependent scaling of the family's own ("" none)
  FamilySections sections = FamilySections::kNone;
  QueryTemperatureForm query_temperature = QueryTemperatureForm::kNone;
  // 2026 structure: what switches positions off, how layer types are derived, the sites and keyed sets.
  std::string_view derives_from{};  // the row whose facts this one extends ("" none)
  PositionSwitch positions = PositionSwitch::kAlways;
  LayerTypesRule layer_types_rule = LayerTypesRule::kConfigOnly;
  int64_t full_layer_period = 0;
  // Gemma 3 / 3n: the config class gives sliding and full layers their own parameter set, with these bases
  // where rope_local_base_freq / rope_theta are absent (0: not such a family).
  double sliding_base = 0.0, full_base = 0.0;  // kSlidingWindowPattern / kEveryNthFull: every how many layers one is full
  SiteRule site_rule = SiteRule::kAttention;
  RopePairing indexer_pairing = RopePairing::kHalf;  // SiteRule::kDsa: the indexer's pairing
  // SiteRule::kDsa: the config says which layers run their own indexer ("full") and which reuse the previous
  // one's top-k ("shared": no indexer, so no indexer site): indexer_types, else index_topk_pattern ("F" /
  // "S"), else index_topk_freq with index_skip_topk_offset (GLM-5.2's IndexShare). false: every layer's.
  bool indexer_types = false;
  RopeKeying keying = RopeKeying::kNone;
  std::string_view full_head_dim_key{};  // the head size of full_attention layers (Gemma 4: global_head_dim)
  // The config class's rope_parameters where the config gives none (JSON; keyed by layer type where the
  // class keys them): Gemma 4, LFM3, Laguna, ... ("" none: the reader's plain defaults apply)
  std::string_view default_rope_parameters{};
  std::string_view ignored_keys{};       // positional keys the family's code does not read, and why
  bool remote_code = false;    // no class in transformers: the model's repo ships the code
  std::string_view classes{};  // remote code: architectures / auto_map class names, ',' separated
  std::string_view source{};   // the file (and function) each fact was read from
  // QK-norm before RoPE, as the attention class's __init__/forward and its norm class read it.
  QkNorm qk_norm = QkNorm::kNone;
  std::string_view qk_norm_key{};  // a config boolean that switches it on (class default false); "" always on
};

// Every row; no model_type repeats.
std::span<const ModelFamily> ModelFamilies();
// The row of a model_type (exact, else without a "_text" or "_text_model" suffix); nullptr for an
// unknown one.
const ModelFamily* FindModelFamily(std::string_view model_type);
// The row of a class name: the remote-code row listing it (an architectures entry, or an auto_map
// value such as "modeling_qwen.QWenLMHeadModel"), else the in-library row whose model_type is the
// class's family part, compared in lower case without '_' and '-' (GPT2LMHeadModel -> gpt2,
// InternLM2ForCausalLM -> internlm2, GPTNeoXForCausalLM -> gpt_neox); nullptr if none.
const ModelFamily* FindModelFamilyByClass(std::string_view class_name);
// The first row whose gguf_architecture is `arch`; nullptr if none.
const ModelFamily* FindModelFamilyByGguf(std::string_view arch);

// llama.cpp's rope type of a GGUF architecture (llama_model_rope_type in src/llama-model.cpp): how
// ggml pairs the dims of the tensors llama.cpp's converter wrote. It is a fact of the file, not of the
// Hugging Face family: a Llama GGUF is NORM (adjacent pairs) because convert_hf_to_gguf.py permuted
// q and k out of rotate_half's order. kNone: llama.cpp applies no RoPE to the architecture.
enum class GgmlRopeType { kNorm, kNeox, kMrope, kImrope, kNone };
std::string_view ToString(GgmlRopeType t);
struct GgufArchitecture {
  std::string_view name;  // general.architecture
  GgmlRopeType rope = GgmlRopeType::kNorm;
};
// Every GGUF architecture posenc reads; a family row's gguf_architecture is one of these.
std::span<const GgufArchitecture> GgufArchitectures();
// The row of `name`; nullptr for an architecture not listed.
const GgufArchitecture* FindGgufArchitecture(std::string_view name);

}  // namespace posenc
