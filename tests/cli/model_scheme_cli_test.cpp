// The commands that read a model's scheme through ModelScheme: `embed --rope-check` prints the head
// size the file states (Gemma-style head_dim), the pairing llama.cpp fixes for any GGUF architecture,
// and RoPE for a Llama config that leaves rope_theta at its default; `rope --model` rotates as the
// equivalent config does.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "posenc/io/npy.hpp"
#include "scheme_models.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using namespace ::posenc::testing;  // NOLINT

fs::path TempDir(const std::string& name) { return ::posenc::testing::TempDir("model_scheme_cli_test", name); }
std::string RopeCheck(const fs::path& model, const fs::path& dir, int expect_rc = 0) {
  std::string out;
  // The output goes beside the model folder: a file inside an input folder is refused as an output.
  EXPECT_EQ(RunCommand(CliPath() + " embed " + model.string() + " --ids 0,1 --rope-check --output " +
                           (dir.parent_path() / (dir.filename().string() + "_x.npy")).string(),
                       &out),
            expect_rc)
      << out;
  return out;
}
void HfFolder(const fs::path& dir, const std::string& config) { WriteHfFolder(dir, 0.5f, config); }

TEST(ModelSchemeCli, RopeCheckHeadDimFromTheConfig) {
  const fs::path dir = TempDir("gemma");
  HfFolder(dir, R"({"model_type": "gemma", "hidden_size": 64, "num_attention_heads": 2, "head_dim": 256,
                    "rope_theta": 10000.0, "vocab_size": 3})");
  const std::string out = RopeCheck(dir, dir);
  EXPECT_NE(out.find("layer 0 applies RoPE: theta 10000, rotary_dim whole head of head_dim 256, pairing half, "
                     "scaling default"),
            std::string::npos)
      << out;  // not 64 / 2 = 32
  EXPECT_NE(out.find("pairing from config.json (Hugging Face pairs x[i] with x[i + d/2]"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(ModelSchemeCli, RopeCheckOfALlamaConfigWithoutRopeTheta) {
  const fs::path dir = TempDir("llama");
  HfFolder(dir, R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 3})");
  const std::string out = RopeCheck(dir, dir);
  EXPECT_EQ(out.find("states no RoPE"), std::string::npos) << out;
  EXPECT_NE(out.find("layer 0 applies RoPE: theta 10000, rotary_dim whole head of head_dim 16"), std::string::npos)
      << out;
  EXPECT_NE(out.find("note: no rope_theta in the config"), std::string::npos) << out;
  // A GPT-2 config still has no RoPE.
  HfFolder(dir, R"({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_positions": 8, "vocab_size": 3})");
  const std::string gpt2 = RopeCheck(dir, dir);
  EXPECT_NE(gpt2.find("states no RoPE (architecture 'gpt2')"), std::string::npos) << gpt2;
  fs::remove_all(dir);
}

// A family whose modeling code fixes the pairing: --rope-check names the family and its modeling file.
TEST(ModelSchemeCli, RopeCheckNamesTheFamilysPairing) {
  const fs::path dir = TempDir("cohere");
  HfFolder(dir, R"({"model_type": "cohere", "hidden_size": 64, "num_attention_heads": 4,
                    "rope_theta": 8000000.0, "vocab_size": 3})");
  const std::string out = RopeCheck(dir, dir);
  EXPECT_NE(out.find("of head_dim 16, pairing interleaved"), std::string::npos) << out;
  EXPECT_NE(out.find("'cohere' pairs interleaved: modeling_cohere.py"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(ModelSchemeCli, RopeCheckPairingOfANeoxGgufArchitecture) {
  const fs::path dir = TempDir("gguf");
  GgufBuilder b = Qwen2Gguf(1000000.0f, 128);
  b.Tensor("token_embd.weight", {64, 3}, 0, FloatBytes(std::vector<float>(3 * 64, 0.5f)));
  WriteFile(dir / "q.gguf", b.Build());
  const std::string out = RopeCheck(dir / "q.gguf", dir);
  EXPECT_NE(out.find("theta 1000000, rotary_dim whole head of head_dim 48, pairing half"), std::string::npos) << out;
  EXPECT_NE(out.find("pairing from llama.cpp rotates halves (LLAMA_ROPE_TYPE_NEOX) for 'qwen2'"),
            std::string::npos)
      << out;
  fs::remove_all(dir);
}

TEST(ModelSchemeCli, RopeModelRotatesAsTheEquivalentConfig) {
  POSENC_REQUIRE_DATA(model, "models/stories260K/stories260K.bin");
  const fs::path dir = TempDir("rope");
  Array pos = Array::Zeros(DType::kI64, {3}).value();
  for (int i = 0; i < 3; ++i) pos.data<int64_t>()[i] = 5 * i + 1;
  ASSERT_TRUE(WriteNpy((dir / "pos.npy").string(), pos).ok());
  Array x = Array::Zeros(DType::kF32, {3, 8, 8}).value();
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  ASSERT_TRUE(WriteNpy((dir / "x.npy").string(), x).ok());
  // run.c's scheme spelled as a config: 8 heads of 8 over dim 64, base 10000, adjacent pairs.
  WriteFile(dir / "config.json", R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "rope_theta": 10000.0})");
  const std::string io = " --positions " + (dir / "pos.npy").string() + " --input " + (dir / "x.npy").string();
  std::string out;
  ASSERT_EQ(RunCommand(CliPath() + " rope --model " + model + io + " --output " + (dir / "a.npy").string(), &out), 0)
      << out;
  ASSERT_EQ(RunCommand(CliPath() + " rope --config " + (dir / "config.json").string() + " --layout interleaved" + io +
                           " --output " + (dir / "b.npy").string(),
                       &out),
            0)
      << out;
  const std::string a = ReadFile(dir / "a.npy");
  EXPECT_EQ(a, ReadFile(dir / "b.npy"));
  EXPECT_NE(a, ReadFile(dir / "x.npy"));
  // Exactly one of --config and --model.
  EXPECT_EQ(RunCommand(CliPath() + " rope" + io + " --output " + (dir / "c.npy").string(), &out), 2) << out;
  EXPECT_NE(out.find("give exactly one of --config and --model"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(CliPath() + " rope --model " + model + " --config " + (dir / "config.json").string() + io +
                           " --output " + (dir / "c.npy").string(),
                       &out),
            2)
      << out;
  EXPECT_NE(out.find("excludes"), std::string::npos) << out;
  // A model without RoPE is refused by name.
  fs::create_directories(dir / "gpt2");
  HfFolder(dir / "gpt2", R"({"model_type": "gpt2", "n_embd": 64, "n_head": 8, "n_positions": 8, "vocab_size": 3})");
  EXPECT_EQ(
      RunCommand(CliPath() + " rope --model " + (dir / "gpt2").string() + io + " --output " + (dir / "c.npy").string(),
                 &out),
      2)
      << out;
  EXPECT_NE(out.find("the model's scheme is learned, not rope"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
