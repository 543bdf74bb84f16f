// The model-family registry (config/model_families.hpp): its invariants, and its rows against what
// ParseHfConfig does for a config of the family (model_family_configs_test.cpp has the unknown-model_type
// refusal and its options, and the remote-code and rule families on configs shaped like the published ones).
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"
#include "parse_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/math/rope_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

PositionScheme Parse(const std::string& text, const HfConfigOptions& o = {}) {
  return testing::ParseConfigOrFail(text, o);
}

// ---------- the table ----------

TEST(ModelFamilies, RowsHaveSourcesAndUniqueModelTypes) {
  EXPECT_GE(ModelFamilies().size(), 100u);
  std::set<std::string_view> seen;
  for (const ModelFamily& f : ModelFamilies()) {
    EXPECT_FALSE(f.model_type.empty());
    EXPECT_TRUE(seen.insert(f.model_type).second) << "repeated model_type " << f.model_type;
    EXPECT_FALSE(f.source.empty()) << f.model_type;
    // Every source names the file it was read from.
    EXPECT_NE(f.source.find(".py"), std::string_view::npos) << f.model_type << ": " << f.source;
    EXPECT_EQ(f.remote_code, f.source.starts_with("huggingface.co ")) << f.model_type;
    if (!f.remote_code) { EXPECT_TRUE(f.source.starts_with("transformers src/transformers/models/")) << f.model_type; }
    EXPECT_EQ(f.scheme == PositionKind::kRope, f.window != RotaryWindow::kNone) << f.model_type;
    if (f.window == RotaryWindow::kFrontPartial)
      EXPECT_TRUE(f.default_partial_rotary_factor > 0 && f.default_partial_rotary_factor < 1) << f.model_type;
    else
      EXPECT_EQ(f.default_partial_rotary_factor, 1.0) << f.model_type;
  }
}

TEST(ModelFamilies, Lookups) {
  ASSERT_NE(FindModelFamily("qwen3_vl_text"), nullptr);
  EXPECT_EQ(FindModelFamily("qwen3_vl_text")->model_type, "qwen3_vl");
  EXPECT_EQ(FindModelFamily("_text"), nullptr);
  EXPECT_EQ(FindModelFamily("nonexistent_text"), nullptr);
  ASSERT_NE(FindModelFamilyByClass("modeling_qwen.QWenLMHeadModel"), nullptr);
  EXPECT_EQ(FindModelFamilyByClass("modeling_qwen.QWenLMHeadModel")->model_type, "qwen");
  // In-library classes by their family part (configs without model_type, or with a spelling the
  // registry lacks): GPT2LMHeadModel, InternLM2ForCausalLM (model_type 'internlm'), Olmo2ForCausalLM
  // ('olmo_1124'), GPTNeoXForCausalLM, Qwen2MoEForCausalLM (an early spelling).
  for (auto [cls, mt] : {std::pair{"LlamaForCausalLM", "llama"}, std::pair{"GPT2LMHeadModel", "gpt2"},
                         std::pair{"InternLM2ForCausalLM", "internlm2"}, std::pair{"Olmo2ForCausalLM", "olmo2"},
                         std::pair{"GPTNeoXForCausalLM", "gpt_neox"}, std::pair{"Qwen2MoEForCausalLM", "qwen2_moe"},
                         std::pair{"T5ForConditionalGeneration", "t5"}}) {
    const ModelFamily* f = FindModelFamilyByClass(cls);
    ASSERT_NE(f, nullptr) << cls;
    EXPECT_EQ(f->model_type, mt) << cls;
  }
  for (const char* none : {"ForCausalLM", "Model", "NoSuchFamilyForCausalLM", "modeling_x.LlamaForCausalLM", "llama"})
    EXPECT_EQ(FindModelFamilyByClass(none), nullptr) << none;
  ASSERT_NE(FindModelFamilyByGguf("command-r"), nullptr);
  EXPECT_EQ(FindModelFamilyByGguf("command-r")->model_type, "cohere");
  EXPECT_EQ(FindModelFamilyByGguf(""), nullptr);
}

// A row whose schedule text says some layers go without RoPE has a rule that gives NoPE layers (SmolLM3's
// row once described no_rope_layers and applied RoPE everywhere).
TEST(ModelFamilies, ScheduleTextAndRuleAgree) {
  for (const ModelFamily& f : ModelFamilies()) {
    const bool says_nope = f.layer_schedule.find("NoPE") != std::string_view::npos;
    const bool rule_nope =
        f.layer_rule == LayerRule::kLlama4NoRope || f.layer_rule == LayerRule::kSlidingRopeFullNope ||
        f.layer_rule == LayerRule::kSlidingRopeIfWindowed || f.layer_rule == LayerRule::kFullAttentionOnly ||
        f.layer_rule == LayerRule::kCrossAttentionNoRope;
    EXPECT_EQ(says_nope, rule_nope) << f.model_type << ": " << f.layer_schedule;
    if (f.layer_rule != LayerRule::kEveryLayer) {
      EXPECT_FALSE(f.layer_schedule.empty()) << f.model_type;
    }
  }
}

// One answer for GGUF: every family row's gguf_architecture is a row of the GGUF table (which the GGUF
// reader uses), no architecture is listed twice, and every RoPE family but GPT-J is rotated by llama.cpp
// (the converse does not hold: llama.cpp gives bert NEOX and starcoder NORM, which never reach a rope op).
TEST(ModelFamilies, GgufColumnNamesTheGgufTable) {
  std::set<std::string_view> names;
  for (const GgufArchitecture& a : GgufArchitectures()) EXPECT_TRUE(names.insert(a.name).second) << a.name;
  EXPECT_GE(names.size(), 100u);
  std::vector<std::string> rope_rows_llama_cpp_does_not_rotate;
  for (const ModelFamily& f : ModelFamilies()) {
    if (f.gguf_architecture.empty()) continue;
    const GgufArchitecture* a = FindGgufArchitecture(f.gguf_architecture);
    if (a == nullptr) {
      ADD_FAILURE() << f.model_type << ": gguf_architecture " << f.gguf_architecture << " not in the GGUF table";
      continue;
    }
    // (Families whose code has no positions in the form llama.cpp builds, Nemotron-H and Kimi Linear,
    // say so in their positions switch.)
    if (f.scheme == PositionKind::kRope && a->rope == GgmlRopeType::kNone && f.positions == PositionSwitch::kAlways)
      rope_rows_llama_cpp_does_not_rotate.push_back(std::string(f.model_type));
    if (f.sections != FamilySections::kNone) {
      EXPECT_EQ(a->rope, f.sections == FamilySections::kChunked ? GgmlRopeType::kMrope : GgmlRopeType::kImrope)
          << f.model_type;
    }
  }
  // GPT-J: llama.cpp lists LLM_ARCH_GPTJ under LLAMA_ROPE_TYPE_NONE (its graph is not built).
  EXPECT_EQ(rope_rows_llama_cpp_does_not_rotate, std::vector<std::string>{"gptj"});
  EXPECT_EQ(FindGgufArchitecture("llama")->rope, GgmlRopeType::kNorm);
  EXPECT_EQ(FindGgufArchitecture("qwen2")->rope, GgmlRopeType::kNeox);
  EXPECT_EQ(FindGgufArchitecture("no-such-arch"), nullptr);
}

// Spot checks: a config of the family read by ParseHfConfig has the row's scheme, pairing and window.
TEST(ModelFamilies, RowsAgreeWithTheParser) {
  struct Case {
    const char* model_type;
    const char* extra;  // keys beyond the head
    int64_t rotary_dim;
  };
  const Case cases[] = {
      {"llama", "", 128},   {"mistral", "", 128},   {"qwen2", "", 128},
      {"gemma2", "", 128},  {"cohere", "", 128},    {"gptj", "", 128},
      {"llama4", "", 128},  {"ernie4_5", "", 128},  {"glm", "", 64},
      {"glm4", "", 64},     {"glm4_moe", "", 64},   {"phi", "", 64},
      {"stablelm", "", 32}, {"persimmon", "", 64},  {"nemotron", "", 64},
      {"gpt_neox", "", 32}, {"qwen3_next", "", 32}, {"recurrent_gemma", "", 64},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model_type);
    const ModelFamily* f = FindModelFamily(c.model_type);
    ASSERT_NE(f, nullptr);
    const PositionScheme s = Parse(std::string(R"({"model_type": ")") + c.model_type +
                                   R"(", "hidden_size": 4096, "num_attention_heads": 32)" + c.extra + "}");
    EXPECT_EQ(s.kind, f->scheme);
    EXPECT_EQ(s.rope.layout.pairing, f->pairing);
    EXPECT_EQ(s.rope.layout.head_dim, 128);
    EXPECT_EQ(s.rope.layout.rotary_dim, c.rotary_dim);
    EXPECT_EQ(s.rope.layout.rotary_start, 0);
  }
  // DeepSeek MLA: the back of the head, the row's pairing.
  const PositionScheme ds = Parse(R"({"model_type": "deepseek_v2", "num_attention_heads": 16, "hidden_size": 2048,
      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64})");
  EXPECT_EQ(FindModelFamily("deepseek_v2")->window, RotaryWindow::kBackOfHead);
  EXPECT_EQ(ds.rope.layout.rotary_start, 128);
  EXPECT_EQ(ds.rope.layout.pairing, FindModelFamily("deepseek_v2")->pairing);
  // Non-RoPE rows.
  for (const char* mt : {"bloom", "t5", "gpt2", "marian", "mamba", "jamba", "umt5", "openai-gpt", "ctrl"}) {
    SCOPED_TRACE(mt);
    const PositionScheme s =
        Parse(std::string(R"({"model_type": ")") + mt + R"(", "n_head": 16, "n_embd": 1024, "n_positions": 1024})");
    EXPECT_EQ(s.kind, FindModelFamily(mt)->scheme);
  }
}

// Every row: a minimal config of the family (hidden 4096 over 32 heads, n_positions for the absolute
// tables) read by ParseHfConfig has the row's scheme; RoPE rows its pairing, window and base.
TEST(ModelFamilies, EveryRowAgreesWithTheParser) {
  int rope_rows = 0;
  for (const ModelFamily& f : ModelFamilies()) {
    SCOPED_TRACE(std::string(f.model_type));
    const std::string mla =
        f.window == RotaryWindow::kBackOfHead ? R"(, "qk_nope_head_dim": 64, "qk_rope_head_dim": 64)" : "";
    const PositionScheme s =
        Parse(std::string(R"({"model_type": ")") + std::string(f.model_type) +
              R"(", "hidden_size": 4096, "num_attention_heads": 32, "n_positions": 2048)" + mla + "}");
    // Baichuan's 4096 is its RoPE size. A row whose positions a key switches on (Granite 4.0-H) or that
    // never rotates (Nemotron-H) is "none" without the key.
    const bool switched_off = f.positions == PositionSwitch::kPositionEmbeddingTypeRope ||
                              f.positions == PositionSwitch::kNever;
    EXPECT_EQ(s.kind, switched_off ? PositionKind::kNone : f.scheme);
    if (f.scheme != PositionKind::kRope || switched_off) continue;
    // Rows whose heads a family rule sizes (Gemma 4's full layers: global_head_dim 512 by default;
    // DeepSeek-V4: head_dim 512, the last R = 512 * 64/512 dims rotating) are checked below and by the
    // golden cases.
    if (f.layer_types_rule == LayerTypesRule::kGemma4Pattern || f.site_rule == SiteRule::kDeepseekV4 ||
        !f.default_rope_parameters.empty()) {
      ++rope_rows;
      continue;
    }
    ++rope_rows;
    EXPECT_EQ(s.rope.layout.pairing, f.pairing);
    EXPECT_EQ(s.rope.layout.head_dim, 128);
    const int64_t want_dim = f.window == RotaryWindow::kBackOfHead ? 64
                             : f.window == RotaryWindow::kFrontPartial
                                 ? static_cast<int64_t>(128 * f.default_partial_rotary_factor)
                                 : 128;
    EXPECT_EQ(s.rope.layout.rotary_dim, want_dim);
    EXPECT_EQ(s.rope.layout.rotary_start, f.window == RotaryWindow::kBackOfHead ? 64 : 0);
    // A family with a base per layer type (Gemma 3: full layers by default, its global base) or a fixed one.
    EXPECT_EQ(s.rope.base, f.full_base > 0 ? f.full_base : f.fixed_base > 0 ? f.fixed_base : 10000.0);
  }
  EXPECT_GE(rope_rows, 80);
}

}  // namespace
}  // namespace posenc

// QK-norm rows as each family's modeling code (transformers 5.25.0) has them: the norm class's
// formula and what it spans (head_dim or the whole projection), and the config switch where there is one.
namespace posenc {
namespace {
TEST(ModelFamilies, QkNormRowsSayWhatTheModelingCodeDoes) {
  struct Want {
    const char* model_type;
    QkNorm qk_norm;
    const char* key;
  };
  const Want want[] = {
      {"llama", QkNorm::kNone, ""},
      {"qwen3", QkNorm::kPerHead, ""},                  // Qwen3RMSNorm(head_dim): weight * x.to(input_dtype)
      {"qwen3_moe", QkNorm::kPerHead, ""},
      {"gemma3", QkNorm::kPerHeadOnePlus, ""},          // Gemma3RMSNorm: x * (1.0 + weight.float())
      {"gemma4", QkNorm::kPerHeadFloat32, ""},          // Gemma4RMSNorm: (x * weight.float()).type_as(x)
      {"olmo2", QkNorm::kWholeProjection, ""},          // Olmo2RMSNorm(num_attention_heads * head_dim)
      {"olmo3", QkNorm::kWholeProjection, ""},
      {"glm4_moe", QkNorm::kPerHead, "use_qk_norm"},    // if config.use_qk_norm
      {"cohere", QkNorm::kPerHeadLayerNorm, "use_qk_norm"},  // CohereLayerNorm((heads, head_dim)): mean subtracted
      {"cohere2", QkNorm::kNone, ""},                   // no q_norm in modeling_cohere2.py
      {"chameleon", QkNorm::kPerHeadLayerNorm, ""},     // ChameleonLayerNorm over head_dim, per-head weight and bias
      {"deepseek_v3", QkNorm::kNone, ""},               // kv_a_layernorm is the MLA latent's norm, not QK-norm
  };
  for (const Want& w : want) {
    const ModelFamily* f = FindModelFamily(w.model_type);
    ASSERT_NE(f, nullptr) << w.model_type;
    EXPECT_EQ(f->qk_norm, w.qk_norm) << w.model_type << ": " << ToString(f->qk_norm);
    EXPECT_EQ(f->qk_norm_key, std::string_view(w.key)) << w.model_type;
  }
  // Every row with a switch key has a QK-norm to switch.
  for (const ModelFamily& f : ModelFamilies())
    if (!f.qk_norm_key.empty()) {
      EXPECT_NE(f.qk_norm, QkNorm::kNone) << f.model_type;
    }
}
}  // namespace
}  // namespace posenc
