// `posenc embed` on a quantized table goes through the one lookup: --multiplier scales the dequantized
// rows exactly as for a float table, and a non-finite multiplier is refused (exit 2, naming the value)
// instead of writing NaN rows with exit 0.
#include <cmath>
#include <cstring>
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

// A llama GGUF whose token_embd.weight is Q8_0 [d_model 32, vocab 3]: row r, element j is
// d_r * q_j with d_r = 0.25 * (r + 1) (exact in float16) and q_j = j - 16.
std::string Q8Gguf() {
  std::string data;
  for (int r = 0; r < 3; ++r) {
    const uint16_t d = F32ToF16(0.25f * static_cast<float>(r + 1)).bits;
    data.append(reinterpret_cast<const char*>(&d), 2);
    for (int j = 0; j < 32; ++j) data.push_back(static_cast<char>(static_cast<int8_t>(j - 16)));
  }
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  b.Tensor("token_embd.weight", {32, 3}, static_cast<uint32_t>(GgmlType::kQ8_0), data);
  return b.Build();
}

TEST(EmbedQuantCli, MultiplierScalesQ8_0RowsAndNonFiniteIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("posenc_embed_quant_cli_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = (dir / "q8.gguf").string(), out = (dir / "x.npy").string();
  const std::string bytes = Q8Gguf();
  std::ofstream(model, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  std::string output;
  ASSERT_EQ(RunCommand(CliPath() + " embed " + model + " --ids 2,0,2 --multiplier 3 --output " + out, &output), 0)
      << output;
  auto x = ReadNpy(out);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_EQ(x->shape(), (std::vector<int64_t>{3, 32}));
  const int rows[3] = {2, 0, 2};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 32; ++j)
      ASSERT_EQ(x->data<float>()[i * 32 + j],
                0.25f * static_cast<float>(rows[i] + 1) * static_cast<float>(j - 16) * 3.0f)
          << "row " << i << " element " << j;

  // Refused where the flag is parsed (decimal, within float32), before the model is opened; the
  // library's own refusal of a non-finite multiplier is embedding_lookup_test's.
  for (const std::string bad : {"nan", "inf", "1e39", "0x10"}) {
    fs::remove(out);
    const int rc =
        RunCommand(CliPath() + " embed " + model + " --ids 1 --multiplier " + bad + " --output " + out, &output);
    EXPECT_EQ(rc, 2) << output;
    EXPECT_NE(output.find("--multiplier: '" + bad + "'"), std::string::npos) << output;
    EXPECT_FALSE(fs::exists(out));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
