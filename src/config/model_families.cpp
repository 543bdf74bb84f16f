// The model-family registry (model_families.hpp): one row per family, each read from the file its
// `source` names (docs/MODEL_FAMILIES.md says how the table was built and what is left out).
#include "posenc/config/model_families.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/enum_names.hpp"

namespace posenc {

namespace {

// Rows in model_type order. Defaults (model_families.hpp): RoPE, half pairing (rotate_half), the
// whole head, no llama.cpp architecture, no keys of the family's own.
constexpr ModelFamily kFamilies[] = {
    {.model_type = "RefinedWeb",
     .gguf_architecture = "falcon",
     .own_keys = "n_head_kv, multi_query (fused query_key_value)",
     .remote_code = true,
     .classes = "RWForCausalLM,modelling_RW.RWForCausalLM",
     .source = "huggingface.co tiiuae/falcon-40b (old) modelling_RW.py: rotate_half"},
    {.model_type = "RefinedWebModel",
     .own_keys = "multi_query (fused query_key_value)",
     .remote_code = true,
     .classes = "modelling_RW.RWModel",
     .source = "huggingface.co tiiuae/falcon-7b (old) modelling_RW.py: rotate_half"},
    {.model_type = "albert",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/albert/modeling_albert.py: AlbertEmbeddings.position_embeddings"},
    {.model_type = "apertus",
     .gguf_architecture = "apertus",
     .source = "transformers src/transformers/models/apertus/modeling_apertus.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "arcee",
     .gguf_architecture = "arcee",
     .source = "transformers src/transformers/models/arcee/modeling_arcee.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "aya_vision",
     .own_keys = "text_config (the language model's keys)",
     .source = "transformers src/transformers/models/aya_vision/modeling_aya_vision.py: language model from "
               "text_config (AutoModel.from_config)"},
    {.model_type = "baichuan",
     .gguf_architecture = "baichuan",
     .alibi_hidden_size = 5120,
     .own_keys = "nothing states the scheme: hidden_size 5120 (13B, 40 layers) is ALiBi, 4096 (7B) RoPE base 10000",
     .remote_code = true,
     .classes = "BaichuanForCausalLM,modeling_baichuan.BaichuanForCausalLM",
     .source = "huggingface.co baichuan-inc/Baichuan2-7B-Base modeling_baichuan.py: RotaryEmbedding, rotate_half; "
               "baichuan-inc/Baichuan2-13B-Base modeling_baichuan.py: _get_interleave (ALiBi slopes), no rotary"},
    {.model_type = "bart",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/bart/modeling_bart.py: BartLearnedPositionalEmbedding (offset 2)"},
    {.model_type = "bert",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "bert",
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/bert/modeling_bert.py: BertEmbeddings.position_embeddings"},
    {.model_type = "biogpt",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/biogpt/modeling_biogpt.py: BioGptLearnedPositionalEmbedding (offset 2)"},
    {.model_type = "bitnet",
     .gguf_architecture = "bitnet",
     .source = "transformers src/transformers/models/bitnet/modeling_bitnet.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "blenderbot",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/blenderbot/modeling_blenderbot.py: "
               "BlenderbotLearnedPositionalEmbedding"},
    {.model_type = "blenderbot-small",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/blenderbot_small/modeling_blenderbot_small.py: "
               "BlenderbotSmallLearnedPositionalEmbedding"},
    {.model_type = "bloom",
     .scheme = PositionKind::kAlibi,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "bloom",
     .source = "transformers src/transformers/models/bloom/modeling_bloom.py: build_alibi_tensor"},
    {.model_type = "camembert",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/camembert/modeling_camembert.py: "
               "CamembertEmbeddings.position_embeddings"},
    {.model_type = "chameleon",
     .gguf_architecture = "chameleon",
     .source =
         "transformers src/transformers/models/chameleon/modeling_chameleon.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "chatglm",
     .pairing = RopePairing::kInterleaved,
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .gguf_architecture = "chatglm",
     .base_scale_key = "rope_ratio",
     .head_dim_key = "kv_channels",
     .fixed_base = 10000.0,
     .refused_key = "position_encoding_2d",
     .own_keys = "kv_channels (head dim), rope_ratio (base = 10000 * rope_ratio), seq_length; position_encoding_2d "
                 "(ChatGLM-6B v1) refused",
     .remote_code = true,
     .classes = "ChatGLMModel,ChatGLMForConditionalGeneration,modeling_chatglm.ChatGLMForConditionalGeneration",
     .source = "huggingface.co THUDM/chatglm3-6b modeling_chatglm.py: RotaryEmbedding(rotary_dim // 2), "
               "apply_rotary_pos_emb on (2i, 2i+1) of the first half"},
    {.model_type = "codegen",
     .pairing = RopePairing::kInterleaved,
     .fixed_base = 10000.0,
     .own_keys = "rotary_dim",
     .source = "transformers src/transformers/models/codegen/modeling_codegen.py: rotate_every_two on (2i, 2i+1)"},
    {.model_type = "codeshell",
     .gguf_architecture = "codeshell",
     .remote_code = true,
     .classes = "CodeShellForCausalLM,modeling_codeshell.CodeShellForCausalLM",
     .source = "huggingface.co WisdomShell/CodeShell-7B modeling_codeshell.py: rotate_half"},
    {.model_type = "cohere",
     .pairing = RopePairing::kInterleaved,
     .gguf_architecture = "command-r",
     .source = "transformers src/transformers/models/cohere/modeling_cohere.py: repeat_interleave'd cos/sin, "
               "rotate_half on even/odd lanes"},
    {.model_type = "cohere2",
     .pairing = RopePairing::kInterleaved,
     .gguf_architecture = "cohere2",
     .layer_schedule = "sliding_window_pattern 4 / layer_types: RoPE on sliding layers, NoPE on full ones",
     .layer_rule = LayerRule::kSlidingRopeFullNope,
     .source = "transformers src/transformers/models/cohere2/modeling_cohere2.py: repeat_interleave'd cos/sin, "
               "rotate_half on even/odd lanes"},
    {.model_type = "ctrl",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/ctrl/modeling_ctrl.py: positional_encoding (sines | cosines)"},
    {.model_type = "dbrx",
     .gguf_architecture = "dbrx",
     .base_key = "attn_config.rope_theta",
     .own_keys = "attn_config.rope_theta (base), max_seq_len, d_model, n_heads",
     .source = "transformers src/transformers/models/dbrx/modeling_dbrx.py: DbrxRotaryEmbedding "
               "(config.attn_config.rope_theta), rotate_half, apply_rotary_pos_emb"},
    {.model_type = "deci",
     .gguf_architecture = "deci",
     .remote_code = true,
     .classes = "DeciLMForCausalLM,modeling_decilm.DeciLMForCausalLM",
     .source = "huggingface.co Deci/DeciLM-7B modeling_decilm.py: rotate_half (Llama's)"},
    {.model_type = "deepseek_v2",
     .pairing = RopePairing::kInterleaved,
     .window = RotaryWindow::kBackOfHead,
     .gguf_architecture = "deepseek2",
     .own_keys = "qk_rope_head_dim after qk_nope_head_dim (MLA)",
     .source = "transformers src/transformers/models/deepseek_v2/modeling_deepseek_v2.py: apply_rotary_emb on "
               "view_as_complex (2i, 2i+1) pairs of q_pe / k_pe"},
    {.model_type = "deepseek_v3",
     .pairing = RopePairing::kInterleaved,
     .window = RotaryWindow::kBackOfHead,
     .gguf_architecture = "deepseek2",
     .own_keys = "qk_rope_head_dim after qk_nope_head_dim (MLA), rope_interleave",
     .source = "transformers src/transformers/models/deepseek_v3/modeling_deepseek_v3.py: "
               "apply_rotary_pos_emb_interleave (rope_interleave, default true) on q_pe / k_pe"},
    {.model_type = "diffllama",
     .source =
         "transformers src/transformers/models/diffllama/modeling_diffllama.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "distilbert",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/distilbert/modeling_distilbert.py: Embeddings.position_embeddings"},
    {.model_type = "doge",
     .source = "transformers src/transformers/models/doge/modeling_doge.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "dots1",
     .gguf_architecture = "dots1",
     .source = "transformers src/transformers/models/dots1/modeling_dots1.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "electra",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/electra/modeling_electra.py: ElectraEmbeddings.position_embeddings"},
    {.model_type = "emu3",
     .source = "transformers src/transformers/models/emu3/modeling_emu3.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "ernie4_5",
     .pairing = RopePairing::kInterleaved,
     .gguf_architecture = "ernie4_5",
     .source = "transformers src/transformers/models/ernie4_5/modeling_ernie4_5.py: rotate_half on (2i, 2i+1) with "
               "repeat_interleave'd cos/sin"},
    {.model_type = "ernie4_5_moe",
     .pairing = RopePairing::kInterleaved,
     .gguf_architecture = "ernie4_5-moe",
     .source = "transformers src/transformers/models/ernie4_5_moe/modeling_ernie4_5_moe.py: rotate_half on (2i, 2i+1) "
               "with repeat_interleave'd cos/sin"},
    {.model_type = "exaone",
     .gguf_architecture = "exaone",
     .remote_code = true,
     .classes = "ExaoneForCausalLM,modeling_exaone.ExaoneForCausalLM",
     .source = "huggingface.co LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct modeling_exaone.py: rotate_half"},
    {.model_type = "exaone4",
     .gguf_architecture = "exaone4",
     .layer_schedule = "layer_types: RoPE on sliding layers, NoPE on full ones when sliding_window is set",
     .layer_rule = LayerRule::kSlidingRopeIfWindowed,
     .source = "transformers src/transformers/models/exaone4/modeling_exaone4.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "falcon",
     .gguf_architecture = "falcon",
     .own_keys = "alibi (true: ALiBi instead of RoPE), new_decoder_architecture / multi_query / num_kv_heads (fused "
                 "query_key_value)",
     .source = "transformers src/transformers/models/falcon/modeling_falcon.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "falcon_h1",
     .gguf_architecture = "falcon-h1",
     .source =
         "transformers src/transformers/models/falcon_h1/modeling_falcon_h1.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "falcon_mamba",
     .scheme = PositionKind::kNone,
     .window = RotaryWindow::kNone,
     .source =
         "transformers src/transformers/models/falcon_mamba/modeling_falcon_mamba.py: FalconMambaMixer (no positions)"},
    {.model_type = "flex_olmo",
     .source =
         "transformers src/transformers/models/flex_olmo/modeling_flex_olmo.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "fsmt",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/fsmt/modeling_fsmt.py: SinusoidalPositionalEmbedding"},
    {.model_type = "gemma",
     .gguf_architecture = "gemma",
     .source = "transformers src/transformers/models/gemma/modeling_gemma.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "gemma2",
     .gguf_architecture = "gemma2",
     .source = "transformers src/transformers/models/gemma2/modeling_gemma2.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "gemma3",
     .gguf_architecture = "gemma3",
     .layer_schedule = "layer_types (sliding_window_pattern 6): rope_local_base_freq on sliding layers, rope_theta + "
                       "rope_scaling on full ones",
     .source = "transformers src/transformers/models/gemma3/modeling_gemma3.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "gemma3n",
     .gguf_architecture = "gemma3n",
     .layer_schedule = "layer_types: rope_local_base_freq on sliding layers, rope_theta on full ones",
     .source = "transformers src/transformers/models/gemma3n/modeling_gemma3n.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "glm",
     .pairing = RopePairing::kInterleaved,
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .own_keys = "partial_rotary_factor (GlmConfig default 0.5)",
     .source = "transformers src/transformers/models/glm/modeling_glm.py: first half of cos/sin repeat_interleave'd, "
               "rotate_half on (2i, 2i+1); GlmConfig partial_rotary_factor 0.5"},
    {.model_type = "glm4",
     .pairing = RopePairing::kInterleaved,
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .gguf_architecture = "glm4",
     .own_keys = "partial_rotary_factor (Glm4Config default 0.5)",
     .source = "transformers src/transformers/models/glm4/modeling_glm4.py: first half of cos/sin repeat_interleave'd "
               "over the rotary dims; Glm4Config partial_rotary_factor 0.5"},
    {.model_type = "glm4_moe",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .gguf_architecture = "glm4moe",
     .own_keys = "partial_rotary_factor (Glm4MoeConfig default 0.5)",
     .source = "transformers src/transformers/models/glm4_moe/modular_glm4_moe.py: apply_rotary_pos_emb from gpt_neox "
               "(halves of the rotary part)"},
    {.model_type = "gpt2",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "gpt2",
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/gpt2/modeling_gpt2.py: wpe"},
    {.model_type = "gpt_bigcode",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "starcoder",
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/gpt_bigcode/modeling_gpt_bigcode.py: wpe"},
    {.model_type = "gpt_neo",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/gpt_neo/modeling_gpt_neo.py: wpe"},
    {.model_type = "gpt_neox",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.25,
     .gguf_architecture = "gptneox",
     .base_key = "rotary_emb_base",
     .own_keys = "rotary_pct (GPTNeoXConfig default 0.25), rotary_emb_base",
     .source = "transformers src/transformers/models/gpt_neox/modeling_gpt_neox.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "gpt_neox_japanese",
     .base_key = "rotary_emb_base",
     .own_keys = "rotary_pct (default 1.0), rotary_emb_base",
     .source = "transformers src/transformers/models/gpt_neox_japanese/modeling_gpt_neox_japanese.py: RotaryEmbedding, "
               "rotate_half"},
    {.model_type = "gpt_oss",
     .gguf_architecture = "gpt-oss",
     .layer_schedule = "layer_types sliding_attention / full_attention: the same RoPE (yarn) on both",
     .source = "transformers src/transformers/models/gpt_oss/modeling_gpt_oss.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "gptj",
     .pairing = RopePairing::kInterleaved,
     .gguf_architecture = "gptj",
     .fixed_base = 10000.0,
     .own_keys = "rotary_dim",
     .source = "transformers src/transformers/models/gptj/modeling_gptj.py: rotate_every_two on (2i, 2i+1)"},
    {.model_type = "granite",
     .gguf_architecture = "granite",
     .source = "transformers src/transformers/models/granite/modeling_granite.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "granitemoe",
     .gguf_architecture = "granitemoe",
     .source =
         "transformers src/transformers/models/granitemoe/modeling_granitemoe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "granitemoehybrid",
     .gguf_architecture = "granitehybrid",
     .source = "transformers src/transformers/models/granitemoehybrid/modeling_granitemoehybrid.py: rotate_half, "
               "apply_rotary_pos_emb"},
    {.model_type = "granitemoeshared",
     .source = "transformers src/transformers/models/granitemoeshared/modeling_granitemoeshared.py: rotate_half, "
               "apply_rotary_pos_emb"},
    {.model_type = "helium",
     .source = "transformers src/transformers/models/helium/modeling_helium.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "hunyuan_v1_dense",
     .gguf_architecture = "hunyuan-dense",
     .source = "transformers src/transformers/models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py: rotate_half, "
               "apply_rotary_pos_emb"},
    {.model_type = "hunyuan_v1_moe",
     .gguf_architecture = "hunyuan-moe",
     .source = "transformers src/transformers/models/hunyuan_v1_moe/modeling_hunyuan_v1_moe.py: rotate_half, "
               "apply_rotary_pos_emb"},
    {.model_type = "idefics3",
     .own_keys = "text_config (the language model's keys)",
     .source = "transformers src/transformers/models/idefics3/modeling_idefics3.py: language model from text_config "
               "(AutoModel.from_config)"},
    {.model_type = "internlm2",
     .gguf_architecture = "internlm2",
     .remote_code = true,
     .classes = "InternLM2ForCausalLM,modeling_internlm2.InternLM2ForCausalLM",
     .source = "huggingface.co internlm/internlm2-7b modeling_internlm2.py: InternLM2RotaryEmbedding, rotate_half"},
    {.model_type = "internlm3",
     .remote_code = true,
     .classes = "InternLM3ForCausalLM,modeling_internlm3.InternLM3ForCausalLM",
     .source = "huggingface.co internlm/internlm3-8b-instruct modeling_internlm3.py: rotate_half"},
    {.model_type = "jais",
     .scheme = PositionKind::kAlibi,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "jais",
     .remote_code = true,
     .classes = "JAISLMHeadModel,modeling_jais.JAISLMHeadModel",
     .source = "huggingface.co core42/jais-13b modeling_jais.py: AlibiPositionEmbeddingLayer (when "
               "position_embedding_type alibi)"},
    {.model_type = "jamba",
     .scheme = PositionKind::kNone,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "jamba",
     .source = "transformers src/transformers/models/jamba/modeling_jamba.py: JambaAttention: no positional encoding "
               "in attention layers"},
    {.model_type = "jetmoe",
     .source = "transformers src/transformers/models/jetmoe/modeling_jetmoe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "kimi_k2",
     .pairing = RopePairing::kInterleaved,
     .window = RotaryWindow::kBackOfHead,
     .gguf_architecture = "deepseek2",
     .own_keys = "qk_rope_head_dim after qk_nope_head_dim (MLA)",
     .remote_code = true,
     .source = "huggingface.co moonshotai/Kimi-K2-Instruct modeling_deepseek.py: apply_rotary_pos_emb on view-permuted "
               "(2i, 2i+1) q_pe / k_pe"},
    {.model_type = "led",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/led/modeling_led.py: LEDLearnedPositionalEmbedding"},
    {.model_type = "lfm2",
     .gguf_architecture = "lfm2",
     .layer_schedule = "layer_types (or full_attn_idxs): RoPE on full_attention layers, none on conv (short "
                       "convolution) ones, NoPE in the table",
     .layer_rule = LayerRule::kFullAttentionOnly,
     .source = "transformers src/transformers/models/lfm2/modeling_lfm2.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "lfm2_moe",
     .gguf_architecture = "lfm2moe",
     .layer_schedule = "layer_types (or full_attn_idxs): RoPE on full_attention layers, none on conv (short "
                       "convolution) ones, NoPE in the table",
     .layer_rule = LayerRule::kFullAttentionOnly,
     .source = "transformers src/transformers/models/lfm2_moe/modeling_lfm2_moe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "llama",
     .gguf_architecture = "llama",
     .source = "transformers src/transformers/models/llama/modeling_llama.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "llama4",
     .pairing = RopePairing::kInterleaved,
     .gguf_architecture = "llama4",
     .layer_schedule = "no_rope_layers (1 = RoPE), default NoPE every no_rope_layer_interval = 4th layer",
     .layer_rule = LayerRule::kLlama4NoRope,
     .position_scaling =
         "attn_temperature_tuning: query scale log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1 on NoPE layers",
     .query_temperature = QueryTemperatureForm::kLlama4Tuning,
     .source = "transformers src/transformers/models/llama4/modeling_llama4.py: apply_rotary_emb, complex freqs_cis on "
               "(2i, 2i+1)"},
    {.model_type = "llava",
     .own_keys = "text_config (the language model's keys)",
     .source = "transformers src/transformers/models/llava/modeling_llava.py: language model from text_config "
               "(AutoModel.from_config)"},
    {.model_type = "llava_next",
     .own_keys = "text_config (the language model's keys)",
     .source = "transformers src/transformers/models/llava_next/modeling_llava_next.py: language model from "
               "text_config (AutoModel.from_config)"},
    {.model_type = "llava_onevision",
     .own_keys = "text_config (the language model's keys)",
     .source = "transformers src/transformers/models/llava_onevision/modeling_llava_onevision.py: language model from "
               "text_config (AutoModel.from_config)"},
    {.model_type = "longt5",
     .scheme = PositionKind::kT5Bucket,
     .window = RotaryWindow::kNone,
     .own_keys = "relative_attention_num_buckets, relative_attention_max_distance",
     .source =
         "transformers src/transformers/models/longt5/modeling_longt5.py: _relative_position_bucket, compute_bias"},
    {.model_type = "m2m_100",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/m2m_100/modeling_m2m_100.py: M2M100SinusoidalPositionalEmbedding"},
    {.model_type = "mamba",
     .scheme = PositionKind::kNone,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "mamba",
     .source = "transformers src/transformers/models/mamba/modeling_mamba.py: MambaMixer (no positions)"},
    {.model_type = "mamba2",
     .scheme = PositionKind::kNone,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "mamba2",
     .source = "transformers src/transformers/models/mamba2/modeling_mamba2.py: Mamba2Mixer (no positions)"},
    {.model_type = "marian",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/marian/modeling_marian.py: MarianSinusoidalPositionalEmbedding"},
    {.model_type = "mbart",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/mbart/modeling_mbart.py: MBartLearnedPositionalEmbedding (offset 2)"},
    {.model_type = "megatron-bert",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/megatron_bert/modeling_megatron_bert.py: "
               "MegatronBertEmbeddings.position_embeddings"},
    {.model_type = "minicpm",
     .gguf_architecture = "minicpm",
     .remote_code = true,
     .classes = "MiniCPMForCausalLM,modeling_minicpm.MiniCPMForCausalLM",
     .source = "huggingface.co openbmb/MiniCPM-2B-sft-bf16 modeling_minicpm.py: rotate_half"},
    {.model_type = "minicpm3",
     .window = RotaryWindow::kBackOfHead,
     .gguf_architecture = "minicpm3",
     .own_keys = "qk_rope_head_dim after qk_nope_head_dim (MLA, halves)",
     .remote_code = true,
     .classes = "MiniCPM3ForCausalLM,modeling_minicpm.MiniCPM3ForCausalLM",
     .source = "huggingface.co openbmb/MiniCPM3-4B modeling_minicpm.py: MLA q_pe / k_pe, rotate_half"},
    {.model_type = "minimax",
     .own_keys = "rotary_dim (MiniMax-Text-01: 64 of head_dim 128)",
     .source = "transformers src/transformers/models/minimax/modeling_minimax.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "ministral",
     .source =
         "transformers src/transformers/models/ministral/modeling_ministral.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "ministral3",
     .gguf_architecture = "mistral3",
     .position_scaling = "rope_parameters.llama_4_scaling_beta: query scale 1 + beta * log(1 + floor(pos / "
                         "original_max_position_embeddings)) on every layer",
     .query_temperature = QueryTemperatureForm::kScalingBeta,
     .source = "transformers src/transformers/models/ministral3/modeling_ministral3.py: rotate_half, "
               "apply_rotary_pos_emb, get_llama_4_attn_scale"},
    {.model_type = "mistral",
     .gguf_architecture = "llama",
     .source = "transformers src/transformers/models/mistral/modeling_mistral.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "mistral3",
     .gguf_architecture = "mistral3",
     .own_keys = "text_config",
     .source = "transformers src/transformers/models/mistral3/modeling_mistral3.py: language model from text_config "
               "(mistral)"},
    {.model_type = "mixtral",
     .gguf_architecture = "llama",
     .source = "transformers src/transformers/models/mixtral/modeling_mixtral.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "mllama",
     .own_keys = "text_config (model_type mllama_text_model)",
     .layer_schedule = "cross_attention_layers: those layers (MllamaCrossAttentionDecoderLayer) have no RoPE, NoPE "
                       "in the table",
     .layer_rule = LayerRule::kCrossAttentionNoRope,
     .source = "transformers src/transformers/models/mllama/modeling_mllama.py: rotate_half, apply_rotary_pos_emb; "
               "MllamaTextModel (cross_attention_layers)"},
    {.model_type = "mpt",
     .scheme = PositionKind::kAlibi,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "mpt",
     .own_keys = "attn_config.alibi (default true), attn_config.alibi_bias_max (default 8)",
     .source = "transformers src/transformers/models/mpt/modeling_mpt.py: build_alibi_tensor (attn_config.alibi, "
               "alibi_bias_max)"},
    {.model_type = "mt5",
     .scheme = PositionKind::kT5Bucket,
     .window = RotaryWindow::kNone,
     .own_keys = "relative_attention_num_buckets, relative_attention_max_distance",
     .source = "transformers src/transformers/models/mt5/modeling_mt5.py: _relative_position_bucket, compute_bias"},
    {.model_type = "mvp",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/mvp/modeling_mvp.py: MvpLearnedPositionalEmbedding (offset 2)"},
    {.model_type = "nemotron",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .gguf_architecture = "nemotron",
     .own_keys = "partial_rotary_factor (NemotronConfig default 0.5)",
     .source = "transformers src/transformers/models/nemotron/modeling_nemotron.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "nllb-moe",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/nllb_moe/modeling_nllb_moe.py: NllbMoeSinusoidalPositionalEmbedding"},
    {.model_type = "olmo",
     .gguf_architecture = "olmo",
     .source = "transformers src/transformers/models/olmo/modeling_olmo.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "olmo2",
     .gguf_architecture = "olmo2",
     .source = "transformers src/transformers/models/olmo2/modeling_olmo2.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "olmo3",
     .layer_schedule = "layer_types: rope_scaling (yarn) on full_attention layers only, plain RoPE on sliding ones",
     .layer_rule = LayerRule::kScalingOnFullLayersOnly,
     .source = "transformers src/transformers/models/olmo3/modeling_olmo3.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "olmoe",
     .gguf_architecture = "olmoe",
     .source = "transformers src/transformers/models/olmoe/modeling_olmoe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "openai-gpt",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/openai_gpt/modeling_openai_gpt.py: positions_embed"},
    {.model_type = "openelm",
     .gguf_architecture = "openelm",
     .remote_code = true,
     .classes = "OpenELMForCausalLM,modeling_openelm.OpenELMForCausalLM",
     .source = "huggingface.co apple/OpenELM-270M modeling_openelm.py: _rotate_half"},
    {.model_type = "opt",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/opt/modeling_opt.py: OPTLearnedPositionalEmbedding (offset 2)"},
    {.model_type = "orion",
     .gguf_architecture = "orion",
     .remote_code = true,
     .classes = "OrionForCausalLM,modeling_orion.OrionForCausalLM",
     .source = "huggingface.co OrionStarAI/Orion-14B-Base modeling_orion.py: rotate_half"},
    {.model_type = "paligemma",
     .own_keys = "text_config (the language model's keys)",
     .source = "transformers src/transformers/models/paligemma/modeling_paligemma.py: language model from text_config "
               "(AutoModel.from_config)"},
    {.model_type = "pegasus",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/pegasus/modeling_pegasus.py: PegasusSinusoidalPositionalEmbedding"},
    {.model_type = "persimmon",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .own_keys = "partial_rotary_factor (PersimmonConfig default 0.5)",
     .source =
         "transformers src/transformers/models/persimmon/modeling_persimmon.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "phi",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .gguf_architecture = "phi2",
     .own_keys = "partial_rotary_factor (PhiConfig default 0.5)",
     .source = "transformers src/transformers/models/phi/modeling_phi.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "phi3",
     .gguf_architecture = "phi3",
     .position_scaling = "longrope: short_factor / long_factor switched past original_max_position_embeddings",
     .source = "transformers src/transformers/models/phi3/modeling_phi3.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "phi3_v",
     .position_scaling = "longrope (rope_scaling type su / longrope): short_factor / long_factor switched past "
                         "original_max_position_embeddings",
     .remote_code = true,
     .classes = "Phi3VForCausalLM,modeling_phi3_v.Phi3VForCausalLM",
     .source = "huggingface.co microsoft/Phi-3.5-vision-instruct modeling_phi3_v.py: rotate_half, "
               "Phi3SuScaledRotaryEmbedding"},
    {.model_type = "phi3small",
     .base_key = "rope_embedding_base",
     .position_scale_key = "rope_position_scale",
     .own_keys = "rope_embedding_base (base), rope_position_scale (positions times it: linear scaling by 1 / scale)",
     .remote_code = true,
     .classes = "Phi3SmallForCausalLM,modeling_phi3_small.Phi3SmallForCausalLM",
     .source = "huggingface.co microsoft/Phi-3-small-8k-instruct modeling_phi3_small.py / positional_embedding.py: "
               "RotaryEmbedding.from_config (rope_embedding_base, rope_position_scale)"},
    {.model_type = "phimoe",
     .gguf_architecture = "phimoe",
     .source = "transformers src/transformers/models/phimoe/modeling_phimoe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "pixtral",
     .own_keys = "vision encoder 2-D RoPE (multi_axis_config: vision2d)",
     .source = "transformers src/transformers/models/pixtral/modeling_pixtral.py: PixtralRotaryEmbedding, 2-D (h, w) "
               "rope of patches"},
    {.model_type = "plamo",
     .gguf_architecture = "plamo",
     .remote_code = true,
     .classes = "PlamoForCausalLM,modeling_plamo.PlamoForCausalLM",
     .source = "huggingface.co pfnet/plamo-13b modeling_plamo.py: _rotate_half"},
    {.model_type = "plbart",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/plbart/modeling_plbart.py: PLBartLearnedPositionalEmbedding (offset 2)"},
    {.model_type = "pop2piano",
     .scheme = PositionKind::kT5Bucket,
     .window = RotaryWindow::kNone,
     .own_keys = "relative_attention_num_buckets, relative_attention_max_distance",
     .source = "transformers src/transformers/models/pop2piano/modeling_pop2piano.py: _relative_position_bucket, "
               "compute_bias"},
    {.model_type = "qwen",
     .gguf_architecture = "qwen",
     .base_key = "rotary_emb_base",
     .head_dim_key = "kv_channels",
     .dynamic_ntk_key = "use_dynamic_ntk",
     .own_keys = "rotary_emb_base, rotary_pct, kv_channels, seq_length, use_dynamic_ntk, use_logn_attn",
     .position_scaling = "use_dynamic_ntk: base * alpha^(R/(R-2)), alpha = max(2^ceil(log2(L / seq_length) + 1) - 1, "
                         "1) (rope scaling qwen_dynamic_ntk)",
     .remote_code = true,
     .classes = "QWenLMHeadModel,modeling_qwen.QWenLMHeadModel",
     .source = "huggingface.co Qwen/Qwen-7B modeling_qwen.py: RotaryEmbedding, _rotate_half, QWenModel.get_ntk_alpha"},
    {.model_type = "qwen2",
     .gguf_architecture = "qwen2",
     .source = "transformers src/transformers/models/qwen2/modeling_qwen2.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "qwen2_5_vl",
     .gguf_architecture = "qwen2vl",
     .own_keys = "rope_scaling.mrope_section",
     .sections = FamilySections::kChunked,
     .source = "transformers src/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py: "
               "apply_multimodal_rotary_pos_emb (chunked mrope_section)"},
    {.model_type = "qwen2_moe",
     .gguf_architecture = "qwen2moe",
     .source =
         "transformers src/transformers/models/qwen2_moe/modeling_qwen2_moe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "qwen2_vl",
     .gguf_architecture = "qwen2vl",
     .own_keys = "rope_scaling.mrope_section",
     .sections = FamilySections::kChunked,
     .source = "transformers src/transformers/models/qwen2_vl/modeling_qwen2_vl.py: apply_multimodal_rotary_pos_emb "
               "(chunked mrope_section)"},
    {.model_type = "qwen3",
     .gguf_architecture = "qwen3",
     .source = "transformers src/transformers/models/qwen3/modeling_qwen3.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "qwen3_5",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.25,
     .own_keys = "partial_rotary_factor (default 0.25), rope_parameters.mrope_section",
     .layer_schedule = "layer_types (default: full_attention every full_attention_interval = 4th layer): RoPE on "
                       "full_attention layers, none on linear_attention (Gated DeltaNet) ones, NoPE in the table",
     .layer_rule = LayerRule::kFullAttentionOnly,
     .sections = FamilySections::kInterleaved,
     .source = "transformers src/transformers/models/qwen3_5/modeling_qwen3_5.py: apply_interleaved_mrope; "
               "Qwen3_5TextConfig partial_rotary_factor 0.25"},
    {.model_type = "qwen3_5_moe",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.25,
     .own_keys = "partial_rotary_factor (default 0.25), rope_parameters.mrope_section",
     .layer_schedule = "layer_types (default: full_attention every full_attention_interval = 4th layer): RoPE on "
                       "full_attention layers, none on linear_attention (Gated DeltaNet) ones, NoPE in the table",
     .layer_rule = LayerRule::kFullAttentionOnly,
     .sections = FamilySections::kInterleaved,
     .source = "transformers src/transformers/models/qwen3_5_moe/modeling_qwen3_5_moe.py: apply_interleaved_mrope; "
               "partial_rotary_factor 0.25"},
    {.model_type = "qwen3_moe",
     .gguf_architecture = "qwen3moe",
     .source =
         "transformers src/transformers/models/qwen3_moe/modeling_qwen3_moe.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "qwen3_next",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.25,
     .gguf_architecture = "qwen3next",
     .own_keys = "partial_rotary_factor (Qwen3NextConfig default 0.25)",
     .layer_schedule = "layer_types (default: full_attention every full_attention_interval = 4th layer): RoPE on "
                       "full_attention layers, none on linear_attention (Gated DeltaNet) ones, NoPE in the table",
     .layer_rule = LayerRule::kFullAttentionOnly,
     .source =
         "transformers src/transformers/models/qwen3_next/modeling_qwen3_next.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "qwen3_vl",
     .gguf_architecture = "qwen3vl",
     .own_keys = "rope_scaling.mrope_section (interleaved)",
     .sections = FamilySections::kInterleaved,
     .source = "transformers src/transformers/models/qwen3_vl/modeling_qwen3_vl.py: "
               "Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope"},
    {.model_type = "qwen3_vl_moe",
     .gguf_architecture = "qwen3vlmoe",
     .own_keys = "rope_scaling.mrope_section (interleaved)",
     .sections = FamilySections::kInterleaved,
     .source = "transformers src/transformers/models/qwen3_vl_moe/modeling_qwen3_vl_moe.py: "
               "Qwen3VLMoeTextRotaryEmbedding.apply_interleaved_mrope"},
    {.model_type = "recurrent_gemma",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.5,
     .own_keys = "partial_rotary_factor (RecurrentGemmaConfig default 0.5)",
     .source = "transformers src/transformers/models/recurrent_gemma/modeling_recurrent_gemma.py: rotate_half, "
               "apply_rotary_pos_emb"},
    {.model_type = "roberta",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source =
         "transformers src/transformers/models/roberta/modeling_roberta.py: RobertaEmbeddings.position_embeddings"},
    {.model_type = "rwkv",
     .scheme = PositionKind::kNone,
     .window = RotaryWindow::kNone,
     .source =
         "transformers src/transformers/models/rwkv/modeling_rwkv.py: RwkvSelfAttention (time mixing, no positions)"},
    {.model_type = "seed_oss",
     .gguf_architecture = "seed_oss",
     .source = "transformers src/transformers/models/seed_oss/modeling_seed_oss.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "smollm3",
     .gguf_architecture = "smollm3",
     .layer_schedule = "no_rope_layers (1 = RoPE), default every no_rope_layer_interval = 4th layer NoPE",
     .layer_rule = LayerRule::kLlama4NoRope,
     .source = "transformers src/transformers/models/smollm3/modeling_smollm3.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "speech_to_text",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/speech_to_text/modeling_speech_to_text.py: "
               "Speech2TextSinusoidalPositionalEmbedding"},
    {.model_type = "stablelm_epoch",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.25,
     .own_keys = "rope_pct (partial rotary, StableLMEpochConfig default 0.25)",
     .remote_code = true,
     .classes = "StableLMEpochForCausalLM,modeling_stablelm_epoch.StableLMEpochForCausalLM",
     .source = "huggingface.co stabilityai/stablelm-3b-4e1t modeling_stablelm_epoch.py: "
               "_init_rope(rotary_ndims = head_dim * rope_pct), rotate_half"},
    {.model_type = "stablelm",
     .window = RotaryWindow::kFrontPartial,
     .default_partial_rotary_factor = 0.25,
     .gguf_architecture = "stablelm",
     .own_keys = "partial_rotary_factor (StableLmConfig default 0.25)",
     .source = "transformers src/transformers/models/stablelm/modeling_stablelm.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "starcoder2",
     .gguf_architecture = "starcoder2",
     .source =
         "transformers src/transformers/models/starcoder2/modeling_starcoder2.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "switch_transformers",
     .scheme = PositionKind::kT5Bucket,
     .window = RotaryWindow::kNone,
     .own_keys = "relative_attention_num_buckets, relative_attention_max_distance",
     .source = "transformers src/transformers/models/switch_transformers/modeling_switch_transformers.py: "
               "_relative_position_bucket, compute_bias"},
    {.model_type = "t5",
     .scheme = PositionKind::kT5Bucket,
     .window = RotaryWindow::kNone,
     .gguf_architecture = "t5",
     .own_keys = "relative_attention_num_buckets, relative_attention_max_distance",
     .source = "transformers src/transformers/models/t5/modeling_t5.py: _relative_position_bucket, compute_bias"},
    {.model_type = "umt5",
     .scheme = PositionKind::kT5Bucket,
     .window = RotaryWindow::kNone,
     .own_keys = "relative_attention_num_buckets, relative_attention_max_distance",
     .source = "transformers src/transformers/models/umt5/modeling_umt5.py: _relative_position_bucket, compute_bias"},
    {.model_type = "vaultgemma",
     .source =
         "transformers src/transformers/models/vaultgemma/modeling_vaultgemma.py: rotate_half, apply_rotary_pos_emb"},
    {.model_type = "xglm",
     .scheme = PositionKind::kSinusoidal,
     .window = RotaryWindow::kNone,
     .own_keys = "max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/xglm/modeling_xglm.py: XGLMSinusoidalPositionalEmbedding"},
    {.model_type = "xlm",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/xlm/modeling_xlm.py: position_embeddings (sinusoidal_embeddings: "
               "sinusoidal)"},
    {.model_type = "xlm-roberta",
     .scheme = PositionKind::kLearned,
     .window = RotaryWindow::kNone,
     .own_keys = "n_positions / max_position_embeddings (table length)",
     .source = "transformers src/transformers/models/xlm_roberta/modeling_xlm_roberta.py: "
               "XLMRobertaEmbeddings.position_embeddings"},
    {.model_type = "xverse",
     .gguf_architecture = "xverse",
     .remote_code = true,
     .classes = "XverseForCausalLM,modeling_xverse.XverseForCausalLM",
     .source = "huggingface.co xverse/XVERSE-13B modeling_xverse.py: rotate_half"},
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

const ModelFamily* FindExact(std::string_view model_type) {
  for (const ModelFamily& f : kFamilies)
    if (f.model_type == model_type) return &f;
  return nullptr;
}

}  // namespace

constexpr detail::EnumName<RotaryWindow> kRotaryWindowNames[] = {{RotaryWindow::kWholeHead, "whole"},
                                                                 {RotaryWindow::kFrontPartial, "front"},
                                                                 {RotaryWindow::kBackOfHead, "back"},
                                                                 {RotaryWindow::kNone, "none"}};
std::string_view ToString(RotaryWindow v) { return detail::NameOf(v, kRotaryWindowNames); }

constexpr detail::EnumName<FamilySections> kFamilySectionsNames[] = {{FamilySections::kNone, "none"},
                                                                     {FamilySections::kChunked, "chunked"},
                                                                     {FamilySections::kInterleaved, "interleaved"}};
std::string_view ToString(FamilySections v) { return detail::NameOf(v, kFamilySectionsNames); }

std::span<const ModelFamily> ModelFamilies() { return kFamilies; }

const ModelFamily* FindModelFamily(std::string_view model_type) {
  if (model_type.empty()) return nullptr;
  if (const ModelFamily* f = FindExact(model_type); f != nullptr) return f;
  // Multimodal text_configs: qwen3_vl_text, llama4_text, gemma3_text, ...
  if (EndsWith(model_type, "_text")) return FindExact(model_type.substr(0, model_type.size() - 5));
  // Mllama's text_config: mllama_text_model.
  if (EndsWith(model_type, "_text_model")) return FindExact(model_type.substr(0, model_type.size() - 11));
  return nullptr;
}

namespace {

// Lower case without '_' and '-': "gpt_neox" and "GPTNeoX" both read "gptneox".
std::string Folded(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

// transformers names a family's classes <Family><Head>: the family part of an in-library class name
// ("" when the name has none of the heads).
std::string_view ClassFamilyPart(std::string_view name) {
  static constexpr std::string_view kHeads[] = {
      "ForConditionalGeneration",  "ForCausalLM",          "LMHeadModel", "ForMaskedLM",
      "ForSequenceClassification", "ForQuestionAnswering", "Model"};
  if (const size_t dot = name.rfind('.'); dot != std::string_view::npos) return {};  // remote code: module.Class
  for (std::string_view h : kHeads)
    if (name.size() > h.size() && EndsWith(name, h)) return name.substr(0, name.size() - h.size());
  return {};
}

}  // namespace

const ModelFamily* FindModelFamilyByClass(std::string_view class_name) {
  if (class_name.empty()) return nullptr;
  for (const ModelFamily& f : kFamilies) {
    std::string_view list = f.classes;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      if (item == class_name) return &f;
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
  }
  // An in-library class: its family part equals a row's model_type, folded.
  const std::string part = Folded(ClassFamilyPart(class_name));
  if (part.empty()) return nullptr;
  for (const ModelFamily& f : kFamilies)
    if (!f.remote_code && Folded(f.model_type) == part) return &f;
  return nullptr;
}

// llama_model_rope_type (llama.cpp src/llama-model.cpp), case by case: LLAMA_ROPE_TYPE_NORM, _NEOX,
// _MROPE (qwen2vl: Qwen2-VL and Qwen2.5-VL text models), _IMROPE (qwen3vl, qwen3vlmoe), _NONE.
constexpr GgufArchitecture kGgufArchitectures[] = {
    {"llama", GgmlRopeType::kNorm},
    {"llada", GgmlRopeType::kNorm},
    {"llama4", GgmlRopeType::kNorm},
    {"deci", GgmlRopeType::kNorm},
    {"baichuan", GgmlRopeType::kNorm},
    {"starcoder", GgmlRopeType::kNorm},
    {"internlm2", GgmlRopeType::kNorm},
    {"minicpm", GgmlRopeType::kNorm},
    {"xverse", GgmlRopeType::kNorm},
    {"command-r", GgmlRopeType::kNorm},
    {"cohere2", GgmlRopeType::kNorm},
    {"olmo", GgmlRopeType::kNorm},
    {"arctic", GgmlRopeType::kNorm},
    {"deepseek", GgmlRopeType::kNorm},
    {"deepseek2", GgmlRopeType::kNorm},
    {"plm", GgmlRopeType::kNorm},
    {"chatglm", GgmlRopeType::kNorm},
    {"glm4", GgmlRopeType::kNorm},
    {"granite", GgmlRopeType::kNorm},
    {"granitemoe", GgmlRopeType::kNorm},
    {"granitehybrid", GgmlRopeType::kNorm},
    {"chameleon", GgmlRopeType::kNorm},
    {"bailingmoe", GgmlRopeType::kNorm},
    {"neo-bert", GgmlRopeType::kNorm},
    {"smollm3", GgmlRopeType::kNorm},
    {"arcee", GgmlRopeType::kNorm},
    {"ernie4_5", GgmlRopeType::kNorm},
    {"ernie4_5-moe", GgmlRopeType::kNorm},
    {"mistral3", GgmlRopeType::kNorm},
    {"llama-embed", GgmlRopeType::kNorm},
    {"falcon", GgmlRopeType::kNeox},
    {"falcon-h1", GgmlRopeType::kNeox},
    {"grok", GgmlRopeType::kNeox},
    {"dbrx", GgmlRopeType::kNeox},
    {"bert", GgmlRopeType::kNeox},
    {"jina-bert-v3", GgmlRopeType::kNeox},
    {"modern-bert", GgmlRopeType::kNeox},
    {"nomic-bert", GgmlRopeType::kNeox},
    {"nomic-bert-moe", GgmlRopeType::kNeox},
    {"eurobert", GgmlRopeType::kNeox},
    {"stablelm", GgmlRopeType::kNeox},
    {"bitnet", GgmlRopeType::kNeox},
    {"qwen", GgmlRopeType::kNeox},
    {"qwen2", GgmlRopeType::kNeox},
    {"dream", GgmlRopeType::kNeox},
    {"qwen2moe", GgmlRopeType::kNeox},
    {"qwen3", GgmlRopeType::kNeox},
    {"qwen3moe", GgmlRopeType::kNeox},
    {"llada-moe", GgmlRopeType::kNeox},
    {"olmo2", GgmlRopeType::kNeox},
    {"olmoe", GgmlRopeType::kNeox},
    {"phi2", GgmlRopeType::kNeox},
    {"phi3", GgmlRopeType::kNeox},
    {"phimoe", GgmlRopeType::kNeox},
    {"plamo", GgmlRopeType::kNeox},
    {"plamo2", GgmlRopeType::kNeox},
    {"gemma", GgmlRopeType::kNeox},
    {"gemma2", GgmlRopeType::kNeox},
    {"gemma3", GgmlRopeType::kNeox},
    {"gemma3n", GgmlRopeType::kNeox},
    {"gemma-embedding", GgmlRopeType::kNeox},
    {"starcoder2", GgmlRopeType::kNeox},
    {"openelm", GgmlRopeType::kNeox},
    {"gptneox", GgmlRopeType::kNeox},
    {"codeshell", GgmlRopeType::kNeox},
    {"orion", GgmlRopeType::kNeox},
    {"nemotron", GgmlRopeType::kNeox},
    {"exaone", GgmlRopeType::kNeox},
    {"exaone4", GgmlRopeType::kNeox},
    {"minicpm3", GgmlRopeType::kNeox},
    {"bailingmoe2", GgmlRopeType::kNeox},
    {"dots1", GgmlRopeType::kNeox},
    {"hunyuan-moe", GgmlRopeType::kNeox},
    {"gpt-oss", GgmlRopeType::kNeox},
    {"hunyuan-dense", GgmlRopeType::kNeox},
    {"lfm2", GgmlRopeType::kNeox},
    {"lfm2moe", GgmlRopeType::kNeox},
    {"smallthinker", GgmlRopeType::kNeox},
    {"seed_oss", GgmlRopeType::kNeox},
    {"grovemoe", GgmlRopeType::kNeox},
    {"apertus", GgmlRopeType::kNeox},
    {"minimax-m2", GgmlRopeType::kNeox},
    {"cogvlm", GgmlRopeType::kNeox},
    {"pangu-embedded", GgmlRopeType::kNeox},
    {"afmoe", GgmlRopeType::kNeox},
    {"qwen3next", GgmlRopeType::kNeox},
    {"glm4moe", GgmlRopeType::kNeox},
    {"qwen2vl", GgmlRopeType::kMrope},
    {"qwen3vl", GgmlRopeType::kImrope},
    {"qwen3vlmoe", GgmlRopeType::kImrope},
    {"clip", GgmlRopeType::kNone},
    {"gpt2", GgmlRopeType::kNone},
    {"gptj", GgmlRopeType::kNone},
    {"mpt", GgmlRopeType::kNone},
    {"refact", GgmlRopeType::kNone},
    {"bloom", GgmlRopeType::kNone},
    {"mamba", GgmlRopeType::kNone},
    {"mamba2", GgmlRopeType::kNone},
    {"jamba", GgmlRopeType::kNone},
    {"jina-bert-v2", GgmlRopeType::kNone},
    {"t5", GgmlRopeType::kNone},
    {"t5encoder", GgmlRopeType::kNone},
    {"jais", GgmlRopeType::kNone},
    {"rwkv6", GgmlRopeType::kNone},
    {"rwkv6qwen2", GgmlRopeType::kNone},
    {"rwkv7", GgmlRopeType::kNone},
    {"arwkv7", GgmlRopeType::kNone},
    {"wavtokenizer-dec", GgmlRopeType::kNone},
};

std::span<const GgufArchitecture> GgufArchitectures() { return kGgufArchitectures; }

const GgufArchitecture* FindGgufArchitecture(std::string_view name) {
  for (const GgufArchitecture& a : kGgufArchitectures)
    if (a.name == name) return &a;
  return nullptr;
}

constexpr detail::EnumName<GgmlRopeType> kGgmlRopeTypeNames[] = {{GgmlRopeType::kNorm, "norm"},
                                                                 {GgmlRopeType::kNeox, "neox"},
                                                                 {GgmlRopeType::kMrope, "mrope"},
                                                                 {GgmlRopeType::kImrope, "imrope"},
                                                                 {GgmlRopeType::kNone, "none"}};
std::string_view ToString(GgmlRopeType v) { return detail::NameOf(v, kGgmlRopeTypeNames); }

const ModelFamily* FindModelFamilyByGguf(std::string_view arch) {
  if (arch.empty()) return nullptr;
  for (const ModelFamily& f : kFamilies)
    if (f.gguf_architecture == arch) return &f;
  return nullptr;
}

}  // namespace posenc
