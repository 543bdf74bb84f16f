// `posenc inspect` on every config in the golden folders. The hf cases' `config` objects are written
// to temporary config.json files (with the case's model family added where the config itself does
// not name it: GPT-J's, BLOOM's and Marian's configs carry no key that identifies the scheme). The
// ggml cases' configs are ggml_rope_ext parameters, not Hugging Face configs, so inspect does not
// read them; tests/golden/rope_frequencies_test.cpp covers them through RopeConfigFromGgmlParams.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_builders.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/config/ggml_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string TempDir() {
  const fs::path d = fs::temp_directory_path() / ("posenc_inspect_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

// `posenc inspect ARGS`: its exit status, with stdout and stderr in *out.
int RunInspect(const std::string& args, std::string* out) {
  return testing::RunCommand(testing::CliPath() + " inspect " + args, out);
}

// `posenc inspect ARGS` exits 2 with a message naming each of `named`.
void ExpectRefused(const std::string& args, const std::vector<std::string>& named) {
  std::string out;
  EXPECT_EQ(RunInspect(args, &out), 2) << out;
  for (const std::string& n : named) EXPECT_NE(out.find(n), std::string::npos) << out;
}

TEST(Inspect, EveryHfGoldenConfig) {
  POSENC_REQUIRE_DATA(root, "golden/hf");
  const std::string tmp = TempDir();
  int checked = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!fs::exists(e.path() / "case.json")) continue;
    SCOPED_TRACE(e.path().string());
    std::ifstream f(e.path() / "case.json");
    const json c = json::parse(f);
    json config = c["config"];
    const std::string scheme = c["scheme"];
    // A vision encoder's config is not a model config inspect reads (ParseHfVision2dConfig reads it;
    // tests/golden/multi_axis_golden_test.cpp checks those cases).
    if (scheme == "rope_vision_2d") continue;
    if (!config.contains("model_type")) {
      if (c.contains("hf_model_type"))
        config["model_type"] = c["hf_model_type"];
      else if (scheme == "alibi" && c.value("variant", "") == "bloom")
        config["model_type"] = "bloom";
      else if (scheme == "sinusoidal" && c.value("layout", "") == "concat")
        config["model_type"] = "marian";
    }
    const std::string path = tmp + "/" + e.path().filename().string() + ".json";
    std::ofstream(path) << config.dump();

    // The layer and site the case holds (keyed sets, a second RoPE site, a NoPE layer).
    std::string seq_arg;
    const bool selects = scheme == "rope" || scheme == "nope" || scheme == "mrope";
    if (selects && c.contains("layer_index")) seq_arg += " --layer " + std::to_string(c["layer_index"].get<int64_t>());
    if (selects && c.contains("layer_type")) seq_arg += " --layer-type " + c["layer_type"].get<std::string>();
    if (selects && c.contains("rotary_site")) seq_arg += " --site " + c["rotary_site"].get<std::string>();
    int64_t seq_len = 0;
    if (scheme == "rope") {
      if (c.contains("seq_len")) {
        seq_len = c["seq_len"];
      } else {
        Result<Array> pos = ReadNpy((e.path() / c["files"]["positions"].get<std::string>()).string());
        ASSERT_TRUE(pos.ok()) << pos.status().ToString();
        Array p = pos->AsType(DType::kI64).value();
        seq_len = *std::max_element(p.span<int64_t>().begin(), p.span<int64_t>().end()) + 1;
      }
      seq_arg += " --seq-len " + std::to_string(seq_len);
    }
    std::string out;
    ASSERT_EQ(RunInspect(path + seq_arg + " --json", &out), 0) << out;
    const json d = json::parse(out, nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << out;
    if (scheme == "attn_temperature") {
      // Llama 4's temperature case carries the model's RoPE config (llama3 scaling, interleaved pairs).
      EXPECT_EQ(d["scheme"], "rope");
      EXPECT_EQ(d["layout"], "interleaved");
      EXPECT_EQ(d["head_dim"], c["head_dim"]);
      ++checked;
      continue;
    }
    if (scheme == "nope") {
      // No positions at the case's layer; the layer table says which layers have attention.
      EXPECT_EQ(d["scheme"], "none");
      ASSERT_TRUE(d.contains("layers")) << out;
      const Array want = ReadNpy((e.path() / c["files"]["layer_attention"].get<std::string>()).string()).value();
      const Array want64 = want.AsType(DType::kI64).value();
      ASSERT_EQ(d["layers"]["attention"].size(), static_cast<size_t>(want64.size()));
      for (int64_t i = 0; i < want64.size(); ++i) EXPECT_EQ(d["layers"]["attention"][i], want64.data<int64_t>()[i]) << i;
      ++checked;
      continue;
    }
    if (scheme == "mrope") {
      // M-RoPE is RoPE with a multi_axis part: its sections, layout and each pair's component.
      EXPECT_EQ(d["scheme"], "rope");
      EXPECT_EQ(d["head_dim"], c["head_dim"]);
      EXPECT_EQ(d["rotary_dim"], c["rotary_dim"]);
      ASSERT_TRUE(d.contains("multi_axis")) << out;
      EXPECT_EQ(d["multi_axis"]["section_layout"], c["section_layout"]);
      EXPECT_EQ(d["multi_axis"]["sections"], c["sections"]);
      const Array pc = ReadNpy((e.path() / c["files"]["pair_component"].get<std::string>()).string()).value();
      const Array pc64 = pc.AsType(DType::kI64).value();
      ASSERT_EQ(d["pairs"].size(), static_cast<size_t>(pc64.size()));
      for (int64_t i = 0; i < pc64.size(); ++i) EXPECT_EQ(d["pairs"][i]["component"], pc64.data<int64_t>()[i]) << i;
      std::string text;
      ASSERT_EQ(RunInspect(path, &text), 0) << text;
      EXPECT_NE(text.find("multi_axis: " + c["section_layout"].get<std::string>()), std::string::npos) << text;
      ++checked;
      continue;
    }
    EXPECT_EQ(d["scheme"], scheme);
    if (scheme == "rope") {
      EXPECT_EQ(d["head_dim"], c["head_dim"]);
      EXPECT_EQ(d["rotary_dim"], c["rotary_dim"]);
      EXPECT_EQ(d["layout"], c["layout"]);
      EXPECT_EQ(d["rotary_start"], c.value("rotary_offset", int64_t{0}));
      EXPECT_EQ(d["seq_len"], seq_len);
      EXPECT_NEAR(d["attention_scaling"].get<double>(), c["attention_scaling"].get<double>(), 1e-12);
      ASSERT_EQ(d["pairs"].size(), c["rotary_dim"].get<size_t>() / 2);
      // Pair 0 always turns at frequency 1 / its scaling divisor; its wavelength is 2*pi / frequency.
      const json& p0 = d["pairs"][0];
      EXPECT_NEAR(p0["wavelength"].get<double>() * p0["frequency"].get<double>(), 2 * M_PI, 1e-9);
      // Text form: the same scheme and a table row per pair.
      std::string text;
      ASSERT_EQ(RunInspect(path + seq_arg, &text), 0) << text;
      EXPECT_NE(text.find("scheme: rope"), std::string::npos) << text;
      EXPECT_NE(text.find("scaling: " + d["scaling"].get<std::string>()), std::string::npos) << text;
      EXPECT_NE(text.find("wavelength"), std::string::npos) << text;
    } else if (scheme == "alibi") {
      EXPECT_EQ(d["alibi_variant"], c["variant"]);
    } else if (scheme == "t5_bucket") {
      EXPECT_EQ(d["num_buckets"], c["num_buckets"]);
      EXPECT_EQ(d["max_distance"], c["max_distance"]);
      EXPECT_EQ(d["bidirectional"], c["bidirectional"]);
    } else if (scheme == "sinusoidal") {
      EXPECT_EQ(d["layout"], c["layout"]);
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
  fs::remove_all(tmp);
}

TEST(Inspect, RegimesOfYarnAtTheRampEnds) {
  const std::string tmp = TempDir();
  const std::string path = tmp + "/yarn.json";
  std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 65536,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 8.0,
    "original_max_position_embeddings": 8192, "beta_fast": 16.0, "beta_slow": 2.0}})";
  std::string out;
  ASSERT_EQ(RunInspect(path + " --json", &out), 0) << out;
  const json d = json::parse(out);
  // Ramp from pair 20 (floor of the beta_fast correction dim) to 31 (ceil of beta_slow's).
  EXPECT_EQ(d["pairs"][20]["regime"], "extrapolated");
  EXPECT_EQ(d["pairs"][21]["regime"], "blended");
  EXPECT_EQ(d["pairs"][30]["regime"], "blended");
  EXPECT_EQ(d["pairs"][31]["regime"], "interpolated");
  EXPECT_EQ(d["pairs"][63]["regime"], "interpolated");
  EXPECT_EQ(d["seq_len"], 65536);  // default: max_position_embeddings
  fs::remove_all(tmp);
}

TEST(Inspect, GgufTinyLlama) {
  POSENC_REQUIRE_DATA(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  // No rope.freq_base in the file (issue 18): inspected at llama.cpp's 10000 with a note; refused
  // naming the key with --require-freq-base; --allow-default-base (the old opt-in) still accepted.
  std::string out;
  EXPECT_EQ(RunInspect(path + " --require-freq-base", &out), 2) << out;
  EXPECT_NE(out.find("'llama.rope.freq_base' is missing"), std::string::npos) << out;
  ASSERT_EQ(RunInspect(path, &out), 0) << out;
  EXPECT_NE(out.find("no llama.rope.freq_base: base 10000 assumed (llama.cpp's default)"), std::string::npos) << out;
  ASSERT_EQ(RunInspect(path + " --allow-default-base --json", &out), 0) << out;
  const json d = json::parse(out);
  EXPECT_EQ(d["layout"], "interleaved");
  EXPECT_EQ(d["scaling"], "ggml");
  EXPECT_EQ(d["rotary_dim"], 4);
  EXPECT_EQ(d["base"], 10000.0);
}

TEST(Inspect, BadInputExitsTwoNamingTheFault) {
  const std::string tmp = TempDir();
  const std::string path = tmp + "/bad.json";
  std::ofstream(path)
      << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_scaling": {"rope_type": "warp", "factor": 2}})";
  ExpectRefused(path, {"warp", "rope_type"});
  ExpectRefused(tmp + "/missing.json", {"missing.json"});
  fs::remove_all(tmp);
}

// inspect on model files of every type lists the tensors that carry identity and position.
json InspectJson(const std::string& args) {
  std::string out;
  EXPECT_EQ(RunInspect(args + " --json", &out), 0) << out;
  return json::parse(out, nullptr, false);
}

// A path with bytes that are not UTF-8 (a Latin-1 folder name): --json still writes valid JSON, the
// bad bytes as U+FFFD (it ended in nlohmann's type_error 316 before).
TEST(InspectModelFiles, JsonWithANonUtf8PathIsValidJson) {
  const fs::path dir = fs::path(TempDir()) / "caf\xe9";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0})";
  const std::string path = (dir / "config.json").string();
  std::string out;
  ASSERT_EQ(RunInspect("'" + path + "' --json", &out), 0) << out;
  const json d = json::parse(out, nullptr, false);
  ASSERT_FALSE(d.is_discarded()) << out;
  EXPECT_EQ(d["base"], 10000.0);
  fs::remove_all(dir);
}

// A config whose file name lacks .json is recognised by its content (issue 18 item 5): it was opened as
// a model and refused as a bad llama2.c checkpoint.
TEST(InspectModelFiles, AConfigWithoutJsonInItsNameIsReadByContent) {
  const fs::path dir = fs::path(TempDir()) / "noext";
  fs::create_directories(dir);
  const std::string path = (dir / "config").string();
  std::ofstream(path) << "\n  " << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 500000.0})";
  const json d = InspectJson(path);
  EXPECT_EQ(d["base"], 500000.0);
  EXPECT_FALSE(d.contains("file"));  // a config, not a model file
  fs::remove_all(dir);
}

TEST(InspectModelFiles, GgufListsTokenEmbedding) {
  POSENC_REQUIRE_DATA(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const json d = InspectJson(path + " --allow-default-base");
  ASSERT_TRUE(d.contains("tensors")) << d.dump();
  EXPECT_EQ(d["file"]["format"], "gguf");
  EXPECT_EQ(d["tensors"][0]["role"], "token_embedding");
  EXPECT_EQ(d["tensors"][0]["name"], "token_embd.weight");
  EXPECT_EQ(d["tensors"][0]["type"], "F16");
  EXPECT_EQ(d["tensors"][0]["shape"], json::array({32000, 8}));
}

TEST(InspectModelFiles, Llama2cCheckpointSchemeAndTable) {
  POSENC_REQUIRE_DATA(path, "models/stories260K/stories260K.bin");
  const json d = InspectJson(path);
  EXPECT_EQ(d["file"]["format"], "llama2c");
  EXPECT_EQ(d["layout"], "interleaved");
  EXPECT_EQ(d["head_dim"], 8);
  EXPECT_EQ(d["base"], 10000.0);
  EXPECT_EQ(d["tensors"][0]["role"], "token_embedding");
  EXPECT_EQ(d["tensors"][0]["shape"], json::array({512, 64}));
  EXPECT_EQ(d["tensors"][0]["type"], "F32");
}

TEST(InspectModelFiles, HuggingFaceFolderWithLearnedPositions) {
  // A GPT-2-shaped folder: config.json beside model.safetensors with wte and wpe.
  const fs::path dir = fs::path(TempDir()) / "gpt2";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json")
      << R"({"model_type": "gpt2", "n_embd": 4, "n_head": 2, "n_positions": 8, "vocab_size": 3})";
  testing::SafetensorsBuilder b;
  b.Tensor("wte.weight", "F32", {3, 4}, testing::FloatBytes(std::vector<float>(12, 0.5f)))
      .Tensor("wpe.weight", "F16", {8, 4}, std::string(8 * 4 * 2, '\0'))
      .Finish();
  std::ofstream(dir / "model.safetensors", std::ios::binary) << b.Build();
  for (const std::string& target : {dir.string(), (dir / "model.safetensors").string()}) {
    SCOPED_TRACE(target);
    const json d = InspectJson(target);
    EXPECT_EQ(d["scheme"], "learned");
    ASSERT_EQ(d["tensors"].size(), 2u) << d.dump();
    EXPECT_EQ(d["tensors"][0]["name"], "wte.weight");
    EXPECT_EQ(d["tensors"][1]["role"], "position_embedding");
    EXPECT_EQ(d["tensors"][1]["type"], "F16");
    EXPECT_EQ(d["tensors"][1]["shape"], json::array({8, 4}));
  }
  // The text form names the same tensors.
  std::string text;
  ASSERT_EQ(RunInspect(dir.string(), &text), 0) << text;
  EXPECT_NE(text.find("position_embedding"), std::string::npos) << text;
  EXPECT_NE(text.find("wpe.weight"), std::string::npos) << text;
  fs::remove_all(dir);
}

TEST(InspectModelFiles, SafetensorsWithoutConfigSaysWhatIsMissing) {
  const fs::path dir = fs::path(TempDir()) / "bare";
  fs::create_directories(dir);
  testing::SafetensorsBuilder b;
  b.Tensor("model.embed_tokens.weight", "F32", {3, 4}, testing::FloatBytes(std::vector<float>(12, 1.0f))).Finish();
  std::ofstream(dir / "w.safetensors", std::ios::binary) << b.Build();
  ExpectRefused((dir / "w.safetensors").string(), {"no config.json"});
  fs::remove_all(dir);
}

// A config key naming positions that no reader or family row reads is refused naming it; --accept-key
// states it as not changing the positions, and it is noted.
TEST(Inspect, UnreadPositionalKeyIsRefusedUnlessAccepted) {
  const std::string tmp = TempDir();
  const std::string path = tmp + "/odd.json";
  std::ofstream(path) << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "rope_theta": 10000, "rope_magic_shift": 3})";
  ExpectRefused(path, {"'rope_magic_shift'", "--accept-key"});
  std::string out;
  ASSERT_EQ(RunInspect(path + " --accept-key rope_magic_shift", &out), 0) << out;
  EXPECT_NE(out.find("rope_magic_shift"), std::string::npos) << out;
  fs::remove_all(tmp);
}

// `posenc inspect` says whether the model norms q and k before RoPE, and how (text and --json).
TEST(Inspect, PrintsQkNorm) {
  const std::filesystem::path dir = std::filesystem::path(TempDir()) / "qk_norm";
  std::filesystem::create_directories(dir);
  struct Case {
    const char* name;
    const char* config;
    const char* want;
  };
  const Case cases[] = {
      {"qwen3.json", R"({"model_type": "qwen3", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128})",
       "per_head"},
      {"gemma3.json", R"({"model_type": "gemma3_text", "hidden_size": 512, "num_attention_heads": 4, "head_dim": 128})",
       "per_head_one_plus_weight"},
      {"olmo2.json", R"({"model_type": "olmo2", "hidden_size": 512, "num_attention_heads": 4})", "whole_projection"},
      {"llama.json", R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4})", "none"},
  };
  for (const Case& c : cases) {
    const std::string path = (dir / c.name).string();
    std::ofstream(path) << c.config;
    EXPECT_EQ(InspectJson(path)["qk_norm"], c.want) << c.name;
    std::string out;
    EXPECT_EQ(RunInspect(path, &out), 0) << out;
    EXPECT_NE(out.find(std::string("qk_norm: ") + c.want + "\n"), std::string::npos) << out;
  }
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace posenc
