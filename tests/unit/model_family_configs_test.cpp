// The model-family registry (config/model_families.hpp) on configs: the unknown-model_type refusal and its
// options (library, CLI), redundant keys that agree, and the remote-code and rule families on configs
// shaped like the published ones (each test cites its repo). The table itself: model_families_test.cpp.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "parse_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/math/rope_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

PositionScheme Parse(const std::string& text, const HfConfigOptions& o = {}) {
  return testing::ParseConfigOrFail(text, o);
}

std::vector<double> InvFreq(const PositionScheme& s, int64_t seq_len) {
  Result<RopeFrequencies> f = ComputeRopeFrequencies(s.rope, seq_len);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? f->inv_freq : std::vector<double>{};
}

bool HasNote(const PositionScheme& s, const std::string& needle) {
  for (const std::string& n : s.notes)
    if (n.find(needle) != std::string::npos) return true;
  return false;
}

// ---------- unknown model_type ----------

TEST(ModelFamilies, UnknownModelTypeIsAnErrorNamingItAndTheOption) {
  const std::string text = R"({"model_type": "my_new_lm", "hidden_size": 512, "num_attention_heads": 8})";
  Result<PositionScheme> s = ParseHfConfig(text, "new.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  for (const char* needle : {"new.json", "'my_new_lm'", "--assume-layout half|interleaved", "assume_layout"})
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << needle << " in: " << s.status().message();
  // Stated: read with that layout, noted.
  const PositionScheme i = Parse(text, HfConfigOptions{.layer_type = "", .assume_layout = RopePairing::kInterleaved});
  EXPECT_EQ(i.rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_TRUE(HasNote(i, "as stated (assume_layout)"));
  // A known family ignores the option.
  EXPECT_EQ(Parse(R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8})",
                  HfConfigOptions{.layer_type = "", .assume_layout = RopePairing::kInterleaved})
                .rope.layout.pairing,
            RopePairing::kHalf);
  // No model_type at all: refused like an unknown one (NoModelTypeIsRefusedUnlessStated below).
  EXPECT_FALSE(ParseHfConfig(R"({"hidden_size": 512, "num_attention_heads": 8})", "x.json", HfConfigOptions{}).ok());
  // A model_type the registry lacks, with an architectures class it has: that family, noted (InternLM2
  // 1.8B ships model_type 'internlm' with InternLM2ForCausalLM; old GPT-2 configs have no model_type).
  const PositionScheme internlm = Parse(R"({"model_type": "internlm", "architectures": ["InternLM2ForCausalLM"],
      "hidden_size": 2048, "num_attention_heads": 16, "rope_theta": 1000000})");
  EXPECT_EQ(internlm.model_type, "internlm2");
  EXPECT_TRUE(HasNote(internlm, "model_type 'internlm' is not in the family registry")) << internlm.notes.size();
  const PositionScheme gpt2 = Parse(R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 1024, "n_head": 16,
      "n_positions": 1024})");
  EXPECT_EQ(gpt2.kind, PositionKind::kLearned);
  // DBRX keeps its base in attn_config.rope_theta (the registry's dotted base_key) and its length in
  // max_seq_len; StableLM's first remote-code revision (stablelm_epoch) names its partial factor rope_pct.
  const PositionScheme dbrx = Parse(R"({"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "max_seq_len": 32768,
      "attn_config": {"kv_n_heads": 8, "rope_theta": 500000}})");
  EXPECT_EQ(dbrx.rope.base, 500000.0);
  EXPECT_EQ(dbrx.max_position_embeddings, 32768);
  const PositionScheme epoch = Parse(R"({"model_type": "stablelm_epoch", "hidden_size": 2560, "num_attention_heads": 32,
      "rope_pct": 0.25, "rope_theta": 10000})");
  EXPECT_EQ(epoch.rope.layout.rotary_dim, 20);
  // transformers 5 saves Qwen3-VL with hidden_size at the top level too: the language model is still
  // text_config (the outer config has no heads or RoPE keys of its own).
  const PositionScheme vl = Parse(R"({"model_type": "qwen3_vl", "hidden_size": 5120, "text_config": {
      "model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 5120, "num_attention_heads": 64,
      "rope_parameters": {"mrope_interleaved": true, "mrope_section": [24, 20, 20], "rope_theta": 5000000,
      "rope_type": "default"}}})");
  EXPECT_EQ(vl.num_heads, 64);
  EXPECT_EQ(vl.rope.base, 5000000.0);
  // The families whose code picks ALiBi or a learned table by a key: JAIS's position_embedding_type,
  // MPT's attn_config.alibi false (MosaicML's learned wpe; transformers' MptModel would apply ALiBi anyway).
  EXPECT_EQ(Parse(R"({"model_type": "jais", "n_embd": 1024, "n_head": 16, "n_positions": 2048,
      "position_embedding_type": "learned"})")
                .kind,
            PositionKind::kLearned);
  EXPECT_EQ(Parse(R"({"model_type": "jais", "n_embd": 1024, "n_head": 16, "position_embedding_type": "alibi"})").kind,
            PositionKind::kAlibi);
  const PositionScheme mpt_learned = Parse(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32,
      "max_seq_len": 2048, "attn_config": {"alibi": false}})");
  EXPECT_EQ(mpt_learned.kind, PositionKind::kLearned);
  EXPECT_EQ(mpt_learned.max_position_embeddings, 2048);
  EXPECT_TRUE(HasNote(mpt_learned, "would apply ALiBi regardless"));
  EXPECT_EQ(Parse(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32, "max_seq_len": 2048,
      "learned_pos_emb": false, "attn_config": {"alibi": false}})")
                .kind,
            PositionKind::kNone);
  for (const char* bad : {R"({"model_type": "jais", "n_head": 16, "position_embedding_type": "rotary"})",
                          R"({"model_type": "mpt", "n_heads": 32, "attn_config": {"alibi": false, "rope": true}})"}) {
    Result<PositionScheme> r = ParseHfConfig(bad, "bad.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string(bad).find("jais") != std::string::npos ? "position_embedding_type"
                                                                                           : "attn_config.rope"),
              std::string::npos)
        << r.status().message();
  }
  // Hunyuan's dynamic rope_scaling with an alpha is NTK-alpha: base * alpha^(R/(R-2)) (static NTK, factor alpha).
  const PositionScheme hy = Parse(R"({"model_type": "hunyuan_v1_dense", "hidden_size": 4096, "head_dim": 128,
      "num_attention_heads": 32, "max_position_embeddings": 32768, "rope_theta": 10000.0,
      "rope_scaling": {"alpha": 1000.0, "factor": 1.0, "type": "dynamic"}})");
  EXPECT_EQ(hy.rope.scaling.type, RopeScalingType::kNtk);
  EXPECT_EQ(hy.rope.scaling.factor, 1000.0);
  const RopeFrequencies hf = ComputeRopeFrequencies(hy.rope, 32768).value();
  EXPECT_NEAR(hf.inv_freq.back() / std::pow(10000.0 * std::pow(1000.0, 128.0 / 126.0), -126.0 / 128.0), 1.0, 1e-12);
  // A scheme the keys name (T5 buckets) needs no layout.
  EXPECT_EQ(Parse(R"({"model_type": "my_t5", "relative_attention_num_buckets": 32})").kind, PositionKind::kT5Bucket);
}

TEST(ModelFamilies, CliFlagAndFamiliesCommand) {
  const auto dir = testing::TempDir("model_families", "cli");
  const std::string path = (dir / "config.json").string();
  testing::WriteFile(path, R"({"model_type": "my_new_lm", "hidden_size": 512, "num_attention_heads": 8})");
  std::string out;
  EXPECT_EQ(testing::RunCommand(testing::CliPath() + " inspect " + path, &out), 2) << out;
  EXPECT_NE(out.find("'my_new_lm'"), std::string::npos) << out;
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " inspect " + path + " --assume-layout interleaved --json", &out),
            0)
      << out;
  EXPECT_EQ(nlohmann::json::parse(out.substr(out.find('{')))["layout"], "interleaved") << out;
  EXPECT_NE(testing::RunCommand(testing::CliPath() + " inspect " + path + " --assume-layout diagonal", &out), 0);
  // posenc families --json: one object per row, sources and model types as the table.
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " families --json 2>/dev/null", &out), 0) << out;
  const nlohmann::json rows = nlohmann::json::parse(out);
  ASSERT_EQ(rows.size(), ModelFamilies().size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["model_type"], ModelFamilies()[i].model_type);
    EXPECT_FALSE(rows[i]["source"].get<std::string>().empty());
  }
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " families", &out), 0) << out;
  EXPECT_NE(out.find(std::to_string(ModelFamilies().size()) + " families"), std::string::npos);
}

// posenc rope --config: an unknown model_type is refused; --assume-layout reads it with that layout,
// giving the bytes of a known family with the same layout and keys (cohere: interleaved, llama: half).
TEST(ModelFamilies, RopeCommandAssumeLayout) {
  const auto dir = testing::TempDir("model_families", "rope");
  const auto path = [&](const std::string& n) { return (dir / n).string(); };
  const auto config = [&](const std::string& mt) {
    testing::WriteFile(path(mt + ".json"), R"({"model_type": ")" + mt +
                                               R"(", "hidden_size": 32, "num_attention_heads": 2, "rope_theta": 100})");
    return path(mt + ".json");
  };
  constexpr int64_t T = 3, H = 2, D = 16;
  std::mt19937_64 rng = testing::MakeRng(11);
  const std::vector<float> values = testing::RandomNormal(rng, T * H * D);
  Array x = Array::Zeros(DType::kF32, {T, H, D}).value();
  std::copy(values.begin(), values.end(), x.data<float>());
  Array pos = Array::Zeros(DType::kI64, {T}).value();
  for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[t] = 3 * t + 1;
  ASSERT_TRUE(WriteNpy(path("x.npy"), x).ok());
  ASSERT_TRUE(WriteNpy(path("pos.npy"), pos).ok());
  const auto rope = [&](const std::string& cfg, const std::string& flags, const std::string& out_name, int want) {
    std::string out;
    EXPECT_EQ(testing::RunCommand(testing::CliPath() + " rope --config " + cfg + " --positions " + path("pos.npy") +
                                      " --input " + path("x.npy") + " --output " + path(out_name) + flags,
                                  &out),
              want)
        << out;
    return out;
  };
  const std::string unknown = config("my_new_lm");
  EXPECT_NE(rope(unknown, "", "refused.npy", 2).find("--assume-layout"), std::string::npos);
  rope(unknown, " --assume-layout interleaved", "unknown_interleaved.npy", 0);
  rope(unknown, " --assume-layout half", "unknown_half.npy", 0);
  rope(config("cohere"), "", "cohere.npy", 0);
  rope(config("llama"), "", "llama.npy", 0);
  EXPECT_EQ(testing::ReadFile(path("unknown_interleaved.npy")), testing::ReadFile(path("cohere.npy")));
  EXPECT_EQ(testing::ReadFile(path("unknown_half.npy")), testing::ReadFile(path("llama.npy")));
  EXPECT_NE(testing::ReadFile(path("cohere.npy")), testing::ReadFile(path("llama.npy")));
}

// ---------- item 5: redundant keys that agree ----------

TEST(ModelFamilies, Phi1RedundantRotaryKeysThatAgree) {
  // microsoft/phi-1 config.json: head 64 (2048 / 32), partial_rotary_factor 0.5 and rotary_dim 32 (older
  // exports); both say 32 rotary dims.
  const PositionScheme s = Parse(R"({"model_type": "phi", "hidden_size": 2048, "num_attention_heads": 32,
      "partial_rotary_factor": 0.5, "rotary_dim": 32, "rope_theta": 10000.0})");
  EXPECT_EQ(s.rope.layout.rotary_dim, 32);
  EXPECT_TRUE(HasNote(s, "they agree"));
  Result<PositionScheme> bad = ParseHfConfig(R"({"model_type": "phi", "hidden_size": 2048, "num_attention_heads": 32,
      "partial_rotary_factor": 0.5, "rotary_dim": 48})",
                                             "phi.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'rotary_dim'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("disagrees"), std::string::npos) << bad.status().message();
}

// ---------- remote-code families ----------

// huggingface.co/microsoft/Phi-3-small-8k-instruct config.json (model_type phi3small).
TEST(ModelFamilies, Phi3SmallBaseFromRopeEmbeddingBase) {
  const std::string text = R"({"model_type": "phi3small", "architectures": ["Phi3SmallForCausalLM"],
      "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
      "max_position_embeddings": 8192, "rope_embedding_base": 1000000, "rope_position_scale": 1.0,
      "rope_scaling": null})";
  const PositionScheme s = Parse(text);
  EXPECT_EQ(s.rope.base, 1000000.0);
  EXPECT_EQ(s.rope.layout.pairing, RopePairing::kHalf);
  EXPECT_EQ(s.rope.layout.rotary_dim, 128);
  EXPECT_EQ(s.rope.scaling.type, RopeScalingType::kNone);
  const std::vector<double> f = InvFreq(s, 1);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_NEAR(f[63], std::pow(1e6, -126.0 / 128.0), 1e-18);
  // rope_position_scale != 1: positions times the scale, i.e. linear scaling by 1 / scale.
  std::string scaled = text;
  scaled.replace(scaled.find("\"rope_position_scale\": 1.0"), 26, "\"rope_position_scale\": 0.5");
  const PositionScheme h = Parse(scaled);
  EXPECT_EQ(h.rope.scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(h.rope.scaling.factor, 2.0);
  EXPECT_NEAR(InvFreq(h, 1)[1], 0.5 * f[1], 1e-15);
  // Without model_type, the architectures class finds the family.
  std::string no_type = text;
  no_type.erase(no_type.find("\"model_type\": \"phi3small\", "), 27);
  const PositionScheme c = Parse(no_type);
  EXPECT_EQ(c.model_type, "phi3small");
  EXPECT_EQ(c.rope.base, 1000000.0);
}

// huggingface.co/baichuan-inc/Baichuan2-13B-Base and Baichuan2-7B-Base config.json: the same
// model_type and class; the 13B's modeling_baichuan.py is ALiBi, the 7B's RoPE.
TEST(ModelFamilies, Baichuan2ThirteenBIsAlibiSevenBIsRope) {
  const PositionScheme b13 = Parse(R"({"model_type": "baichuan", "architectures": ["BaichuanForCausalLM"],
      "auto_map": {"AutoConfig": "configuration_baichuan.BaichuanConfig",
                   "AutoModelForCausalLM": "modeling_baichuan.BaichuanForCausalLM"},
      "hidden_size": 5120, "num_attention_heads": 40, "num_hidden_layers": 40, "intermediate_size": 13696,
      "model_max_length": 4096, "vocab_size": 125696})");
  EXPECT_EQ(b13.kind, PositionKind::kAlibi);
  EXPECT_EQ(b13.num_heads, 40);
  EXPECT_EQ(b13.alibi_variant, "bloom");
  EXPECT_TRUE(HasNote(b13, "hidden_size 5120 is the ALiBi model"));
  const PositionScheme b7 = Parse(R"({"model_type": "baichuan", "architectures": ["BaichuanForCausalLM"],
      "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "max_position_embeddings": 4096})");
  EXPECT_EQ(b7.kind, PositionKind::kRope);
  EXPECT_EQ(b7.rope.base, 10000.0);
  EXPECT_EQ(b7.rope.layout.pairing, RopePairing::kHalf);
  EXPECT_EQ(b7.rope.layout.rotary_dim, 128);
}

// huggingface.co/Qwen/Qwen-7B config.json (model_type qwen, modeling_qwen.py).
TEST(ModelFamilies, QwenOwnKeysAndDynamicNtk) {
  const std::string text = R"({"model_type": "qwen", "architectures": ["QWenLMHeadModel"],
      "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "kv_channels": 128,
      "rotary_emb_base": 10000, "rotary_pct": 1.0, "seq_length": 8192, "max_position_embeddings": 32768,
      "use_dynamic_ntk": true, "use_logn_attn": true})";
  const PositionScheme s = Parse(text);
  EXPECT_EQ(s.rope.layout.head_dim, 128);
  EXPECT_EQ(s.rope.layout.rotary_dim, 128);
  EXPECT_EQ(s.rope.layout.pairing, RopePairing::kHalf);
  EXPECT_EQ(s.rope.scaling.type, RopeScalingType::kQwenDynamicNtk);
  EXPECT_EQ(s.rope.scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(HasNote(s, "use_logn_attn"));
  const double r = 128.0;
  auto expected = [&](double alpha, int i) { return std::pow(10000.0 * std::pow(alpha, r / (r - 2.0)), -2.0 * i / r); };
  // Up to seq_length: the plain frequencies. Past it: alpha = 2^ceil(log2(L / 8192) + 1) - 1.
  for (auto [len, alpha] : {std::pair{1, 1.0}, std::pair{8192, 1.0}, std::pair{8193, 3.0}, std::pair{16384, 3.0},
                            std::pair{16385, 7.0}, std::pair{32768, 7.0}}) {
    SCOPED_TRACE(len);
    const std::vector<double> f = InvFreq(s, len);
    ASSERT_EQ(f.size(), 64u);
    for (int i : {1, 31, 63}) EXPECT_NEAR(f[i] / expected(alpha, i), 1.0, 1e-12) << i;
  }
  // use_dynamic_ntk false: the plain frequencies at any length.
  std::string off = text;
  off.replace(off.find("\"use_dynamic_ntk\": true"), 23, "\"use_dynamic_ntk\": false");
  EXPECT_EQ(Parse(off).rope.scaling.type, RopeScalingType::kNone);
  // rotary_pct 0.5 of kv_channels 128.
  std::string half = text;
  half.replace(half.find("\"rotary_pct\": 1.0"), 17, "\"rotary_pct\": 0.5");
  EXPECT_EQ(Parse(half).rope.layout.rotary_dim, 64);
}

// huggingface.co/THUDM/chatglm3-6b and chatglm3-6b-32k config.json (model_type chatglm,
// modeling_chatglm.py).
TEST(ModelFamilies, ChatGlmFirstHalfAdjacentPairsAndRopeRatio) {
  const std::string text = R"({"model_type": "chatglm", "architectures": ["ChatGLMModel"],
      "hidden_size": 4096, "num_attention_heads": 32, "num_layers": 28, "kv_channels": 128,
      "multi_query_attention": true, "multi_query_group_num": 2, "seq_length": 8192, "original_rope": true,
      "padded_vocab_size": 65024})";
  const PositionScheme s = Parse(text);
  EXPECT_EQ(s.rope.layout.head_dim, 128);
  EXPECT_EQ(s.rope.layout.rotary_dim, 64);
  EXPECT_EQ(s.rope.layout.rotary_start, 0);
  EXPECT_EQ(s.rope.layout.pairing, RopePairing::kInterleaved);
  EXPECT_EQ(s.rope.base, 10000.0);
  std::vector<double> f = InvFreq(s, 1);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_NEAR(f[1], std::pow(10000.0, -2.0 / 64.0), 1e-15);
  // The 32k model: rope_ratio 50 multiplies the base.
  std::string long_ctx = text;
  long_ctx.replace(long_ctx.find("\"seq_length\": 8192"), 18, "\"seq_length\": 32768, \"rope_ratio\": 50");
  const PositionScheme l = Parse(long_ctx);
  EXPECT_EQ(l.rope.base, 500000.0);
  EXPECT_TRUE(HasNote(l, "rope_ratio 50"));
  // ChatGLM-6B (v1) 2-D positions: refused naming the key.
  std::string v1 = text;
  v1.replace(v1.find("\"original_rope\": true"), 21, "\"position_encoding_2d\": true");
  Result<PositionScheme> r = ParseHfConfig(v1, "chatglm.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("'position_encoding_2d'"), std::string::npos) << r.status().message();
}

// The 2026 structure rows on minimal configs: what the family's rule makes of them.
TEST(ModelFamilies, RuleRowsOnMinimalConfigs) {
  // Gemma 4 without rope_parameters: full layers proportional over global_head_dim 512 (64 of 256 pairs
  // turn), sliding layers default RoPE over head_dim 256 at 1e4.
  const std::string gemma4 = R"({"model_type": "gemma4_text", "num_hidden_layers": 12})";
  PositionScheme full = Parse(gemma4);
  EXPECT_EQ(full.rope.scaling.type, RopeScalingType::kProportional);
  EXPECT_EQ(full.rope.layout.head_dim, 512);
  EXPECT_EQ(full.rope.base, 1e6);
  PositionScheme sliding = Parse(gemma4, HfConfigOptions{.layer_type = "sliding_attention"});
  EXPECT_EQ(sliding.rope.scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(sliding.rope.layout.head_dim, 256);
  EXPECT_EQ(sliding.rope.base, 1e4);
  // Layer 11, the last, is full whatever the pattern; layer 4 sliding.
  EXPECT_EQ(Parse(gemma4, HfConfigOptions{.layer = 11}).rope.layout.head_dim, 512);
  EXPECT_EQ(Parse(gemma4, HfConfigOptions{.layer = 4}).rope.layout.head_dim, 256);
  // DeepSeek-V4: the attention site of a compressed layer takes the compress set, the back 64 of 512.
  const std::string v4 = R"({"model_type": "deepseek_v4", "num_hidden_layers": 3, "compress_ratios": [0, 4, 128, 0],
    "rope_theta": 10000, "compress_rope_theta": 160000, "index_head_dim": 128,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536}})";
  PositionScheme main = Parse(v4, HfConfigOptions{.layer = 0});
  EXPECT_EQ(main.rope_key, "main");
  EXPECT_EQ(main.rope.base, 10000.0);
  EXPECT_EQ(main.rope.layout.rotary_start, 448);
  PositionScheme compress = Parse(v4, HfConfigOptions{.layer = 1});
  EXPECT_EQ(compress.rope_key, "compress");
  EXPECT_EQ(compress.rope.base, 160000.0);
  EXPECT_EQ(compress.rope.scaling.type, RopeScalingType::kYarn);
  PositionScheme out = Parse(v4, HfConfigOptions{.layer = 2, .site = "attention_output"});
  EXPECT_EQ(out.rotation_sign, -1);
  PositionScheme index = Parse(v4, HfConfigOptions{.layer = 0, .site = "indexer"});
  EXPECT_EQ(index.rope_key, "compress");  // the indexer always takes compress
  EXPECT_EQ(index.rope.layout.head_dim, 128);
  EXPECT_EQ(index.rope.layout.rotary_start, 64);
  // A site the family does not have is refused naming the ones it has.
  const Result<PositionScheme> bad = ParseHfConfig(v4, "v4.json", HfConfigOptions{.site = "mla"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("attention_output"), std::string::npos) << bad.status().message();
  // Granite 4.0-H: positions only with position_embedding_type "rope"; its mamba layers never.
  const std::string granite = R"({"model_type": "granitemoehybrid", "hidden_size": 768, "num_attention_heads": 12,
    "num_hidden_layers": 4, "layer_types": ["mamba", "attention", "mamba", "attention"], "rope_theta": 10000)";
  EXPECT_EQ(Parse(granite + "}").kind, PositionKind::kNone);
  EXPECT_EQ(Parse(granite + R"(, "position_embedding_type": "nope"})").kind, PositionKind::kNone);
  const std::string rope = granite + R"(, "position_embedding_type": "rope"})";
  EXPECT_EQ(Parse(rope).kind, PositionKind::kRope);
  EXPECT_EQ(Parse(rope, HfConfigOptions{.layer = 0}).kind, PositionKind::kNone);  // a mamba layer
  EXPECT_EQ(Parse(rope, HfConfigOptions{.layer = 1}).kind, PositionKind::kRope);
  const Result<PositionScheme> odd =
      ParseHfConfig(granite + R"(, "position_embedding_type": "alibi"})", "g.json", HfConfigOptions{});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.status().message().find("position_embedding_type"), std::string::npos);
  // Nemotron-H never rotates, whatever rope_theta says; its pattern gives the attention layers.
  const PositionScheme nemo = Parse(R"({"model_type": "nemotron_h", "num_hidden_layers": 4,
    "hybrid_override_pattern": "M*E-", "rope_theta": 10000, "hidden_size": 64, "num_attention_heads": 4})");
  EXPECT_EQ(nemo.kind, PositionKind::kNone);
  const LayerSchedule schedule = LayerRopeSchedule(nemo).value();
  EXPECT_EQ(schedule.attention, (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(schedule.rope, (std::vector<bool>{false, false, false, false}));
}

// GLM-5.2's IndexShare (GlmMoeDsaConfig.indexer_types): a "shared" layer reuses the previous layer's
// top-k and has no indexer, so no indexer site; the MLA site stays. The three spellings agree.
TEST(ModelFamilies, GlmDsaSharedIndexerLayersHaveNoIndexerSite) {
  const std::string base = R"({"model_type": "glm_moe_dsa", "hidden_size": 6144, "num_attention_heads": 64,
    "num_hidden_layers": 6, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
    "index_head_dim": 128, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000})";
  for (const std::string& spelling :
       {std::string(R"(, "indexer_types": ["full", "full", "shared", "full", "shared", "shared"]})"),
        std::string(R"(, "index_topk_pattern": "FFSFSS"})")}) {
    const std::string text = base + spelling;
    PositionScheme own = Parse(text, HfConfigOptions{.layer = 3, .site = "indexer"});
    EXPECT_EQ(own.site, RotarySite::kIndexer) << spelling;
    EXPECT_EQ(own.rope.layout.head_dim, 128) << spelling;
    PositionScheme shared = Parse(text, HfConfigOptions{.layer = 2});
    EXPECT_EQ(shared.sites, std::vector<RotarySite>{RotarySite::kMla}) << spelling;
    EXPECT_EQ(shared.rope.layout.rotary_start, 192) << spelling;  // the MLA site is still there
    const Result<PositionScheme> asked = ParseHfConfig(text, "glm.json", HfConfigOptions{.layer = 4, .site = "indexer"});
    ASSERT_FALSE(asked.ok()) << spelling;
    EXPECT_NE(asked.status().message().find("layer 4 has no indexer site"), std::string::npos)
        << asked.status().message();
    // Without a layer: both sites, and a note of how many layers have an indexer.
    PositionScheme all = Parse(text);
    EXPECT_EQ(all.sites.size(), 2u);
    bool noted = false;
    for (const std::string& n : all.notes) noted = noted || n.find("indexer on 3 of 6 layers") != std::string::npos;
    EXPECT_TRUE(noted) << spelling;
  }
  // index_topk_freq 2, offset 2 (GlmMoeDsaConfig's rule): layers 0, 1 full, then every other one.
  PositionScheme freq = Parse(base + R"(, "index_topk_freq": 2})", HfConfigOptions{.layer = 2});
  EXPECT_EQ(freq.sites, std::vector<RotarySite>{RotarySite::kMla});
  EXPECT_EQ(Parse(base + R"(, "index_topk_freq": 2})", HfConfigOptions{.layer = 3}).sites.size(), 2u);
  // A list too short for the layers, or an entry that is neither, is refused by name.
  const Result<PositionScheme> short_list = ParseHfConfig(base + R"(, "indexer_types": ["full"]})", "glm.json");
  ASSERT_FALSE(short_list.ok());
  EXPECT_NE(short_list.status().message().find("indexer_types"), std::string::npos);
  const Result<PositionScheme> bad = ParseHfConfig(base + R"(, "index_topk_pattern": "FFXFSS"})", "glm.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("index_topk_pattern"), std::string::npos);
  // DeepSeek-V3.2's code reads no indexer_types (DeepseekV32Attention builds its indexer on every layer).
  const std::string v32 = R"({"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128,
    "num_hidden_layers": 4, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "index_head_dim": 128,
    "indexer_types": ["full", "shared", "shared", "full"]})";
  EXPECT_EQ(Parse(v32, HfConfigOptions{.layer = 2, .site = "indexer"}).site, RotarySite::kIndexer);
}

// A config with no model_type (and no class naming a family) is refused, not read as half pairing.
TEST(ModelFamilies, NoModelTypeIsRefusedUnlessStated) {
  const std::string text = R"({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000})";
  const Result<PositionScheme> s = ParseHfConfig(text, "x.json", HfConfigOptions{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("model_type"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("assume-layout"), std::string::npos) << s.status().message();
  const PositionScheme stated = Parse(text, HfConfigOptions{.assume_layout = RopePairing::kInterleaved});
  EXPECT_EQ(stated.rope.layout.pairing, RopePairing::kInterleaved);
}

}  // namespace
}  // namespace posenc
