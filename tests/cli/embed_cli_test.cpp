// `posenc embed`: rows from real and built model files, through the CLI.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/npy.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using namespace ::posenc::testing;  // NOLINT

// Joins arguments with spaces (std::string operator+ chains trip a g++ 12 -Wrestrict false positive).
std::string Cmd(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out.push_back(' ');
    out.append(p);
  }
  return out;
}

fs::path TempDir(const std::string& name) { return ::posenc::testing::TempDir("embed_cli_test", name); }

TEST(EmbedCli, TinyLlamaGgufReturnsF16RowsWidenedExactly) {
  POSENC_REQUIRE_DATA(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const fs::path dir = TempDir("gguf");
  const std::string out = (dir / "x.npy").string();
  const std::vector<int64_t> ids = {1, 0, 31999, 15043, 1};
  std::string output;
  const int rc =
      RunCommand(Cmd({CliPath(), "embed", path, "--ids 1,0,31999,15043,1 --output", out, "--rope-check"}), &output);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_NE(output.find("pairing interleaved"), std::string::npos) << output;
  auto x = ReadNpy(out);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_EQ(x->shape(), (std::vector<int64_t>{5, 8}));
  ASSERT_EQ(x->dtype(), DType::kF32);
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok());
  auto bytes = g->TensorData(*g->FindTensor("token_embd.weight").value()).value();
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int j = 0; j < 8; ++j) {
      f16_t h;
      std::memcpy(&h.bits, bytes.data() + (ids[i] * 8 + j) * 2, 2);
      ASSERT_EQ(x->data<float>()[i * 8 + j], F16ToF32(h)) << "id " << ids[i] << " element " << j;
    }
  }
}

TEST(EmbedCli, LearnedPositionsAreAdded) {
  const fs::path dir = TempDir("gpt2");
  SafetensorsBuilder b;
  std::vector<float> wte(6 * 2), wpe(4 * 2);
  for (size_t i = 0; i < wte.size(); ++i) wte[i] = static_cast<float>(i);
  for (size_t i = 0; i < wpe.size(); ++i) wpe[i] = 100.0f * static_cast<float>(i);
  b.Tensor("transformer.wte.weight", "F32", {6, 2}, FloatBytes(wte));
  b.Tensor("transformer.wpe.weight", "F32", {4, 2}, FloatBytes(wpe));
  b.Finish();
  const std::string bytes = b.Build();
  std::ofstream(dir / "model.safetensors", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string out = (dir / "x.npy").string();
  std::string output;
  ASSERT_EQ(
      RunCommand(Cmd({CliPath(), "embed", (dir / "model.safetensors").string(), "--ids 5,0 --output", out}), &output),
      0)
      << output;
  auto x = ReadNpy(out);
  ASSERT_TRUE(x.ok());
  // x_0 = wte[5] + wpe[0] = (10, 111); x_1 = wte[0] + wpe[1] = (200, 301)
  EXPECT_EQ(x->data<float>()[0], 10.0f);
  EXPECT_EQ(x->data<float>()[1], 111.0f);
  EXPECT_EQ(x->data<float>()[2], 200.0f);
  EXPECT_EQ(x->data<float>()[3], 301.0f);

  // A position past the table is an error naming it.
  Array pos = Array::Zeros(DType::kI64, {2}).value();
  pos.data<int64_t>()[1] = 4;
  ASSERT_TRUE(WriteNpy((dir / "p.npy").string(), pos).ok());
  const int rc = RunCommand(Cmd({CliPath(), "embed", (dir / "model.safetensors").string(), "--ids 5,0 --positions",
                                 (dir / "p.npy").string(), "--output", out}),
                            &output);
  EXPECT_EQ(rc, 2) << output;
  EXPECT_NE(output.find("position 4 at index 1"), std::string::npos) << output;
}

TEST(EmbedCli, BadInputsExitTwoNamingTheFault) {
  POSENC_REQUIRE_DATA(path, "models/stories260K/stories260K.bin");
  const fs::path dir = TempDir("bad");
  const std::string out = (dir / "x.npy").string();
  std::string output;
  EXPECT_EQ(RunCommand(Cmd({CliPath(), "embed", path, "--ids 1,512 --output", out}), &output), 2);
  EXPECT_NE(output.find("token id 512 at index 1"), std::string::npos) << output;
  EXPECT_EQ(RunCommand(Cmd({CliPath(), "embed", path, "--ids 1,x --output", out}), &output), 2);
  EXPECT_NE(output.find("'x'"), std::string::npos) << output;
  EXPECT_EQ(RunCommand(Cmd({CliPath(), "embed", (dir / "missing.gguf").string(), "--ids 1 --output", out}), &output),
            2);
  EXPECT_NE(output.find("missing.gguf"), std::string::npos) << output;
  EXPECT_EQ(RunCommand(Cmd({CliPath(), "embed --help"}), &output), 0);
  EXPECT_NE(output.find("--ids-file"), std::string::npos);
}

}  // namespace
}  // namespace posenc
