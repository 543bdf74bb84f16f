// `posenc rope --config` accepts the config of every golden rope case, in both spellings where the
// case carries the other one, and ggml-parameter configs, and reproduces `expected` (reference
// precision) and `expected_exact` (exact precision) within the case's tolerances.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/io/npy.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json ReadJson(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

// Runs the CLI on one config and compares with one expected role; returns the number of cases run.
void CheckCase(const fs::path& dir, const json& c, const json& config, const std::string& spelling) {
  const fs::path tmp = fs::temp_directory_path() / ("posenc_rope_cli_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string cfg = (tmp / "config.json").string();
  std::ofstream(cfg) << config.dump();
  for (const auto& [role, precision] : {std::pair{"expected", "reference"}, std::pair{"expected_exact", "exact"}}) {
    if (!c["files"].contains(role)) continue;
    SCOPED_TRACE(dir.filename().string() + " " + spelling + " " + role);
    std::string layout;
    if (c.contains("layout") && !(config.contains("n_dims"))) layout = " --layout " + c["layout"].get<std::string>();
    std::string seq;
    if (c.contains("seq_len")) seq = " --seq-len " + std::to_string(c["seq_len"].get<int64_t>());
    // The layer and site the case holds (keyed parameter sets, a second RoPE site).
    if (!config.contains("n_dims")) {
      if (c.contains("layer_index")) seq += " --layer " + std::to_string(c["layer_index"].get<int64_t>());
      if (c.contains("layer_type")) seq += " --layer-type " + c["layer_type"].get<std::string>();
      if (c.contains("rotary_site")) seq += " --site " + c["rotary_site"].get<std::string>();
    }
    std::string input = (dir / c["files"]["input"].get<std::string>()).string();
    if (c.value("dtype", std::string("float32")) == "float16") {
      // Run in float16 storage, as the reference did.
      Array x = ReadNpy(input).value().AsType(DType::kF16).value();
      input = (tmp / "input16.npy").string();
      ASSERT_TRUE(WriteNpy(input, x).ok());
    }
    const std::string out = (tmp / "out.npy").string();
    std::string log;
    const int rc = testing::RunCommand(testing::CliPath() + " rope --config " + cfg + " --positions " +
                                           (dir / c["files"]["positions"].get<std::string>()).string() + " --input " +
                                           input + " --output " + out + " --precision " + precision + layout + seq,
                                       &log);
    ASSERT_EQ(rc, 0) << log;
    Result<Array> got = ReadNpy(out);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    Result<Array> want = ReadNpy((dir / c["files"][role].get<std::string>()).string());
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const golden::Tolerance tol{c["tolerance"][role].value("atol", 0.0), c["tolerance"][role].value("rtol", 0.0)};
    EXPECT_TRUE(testing::GoldenClose(std::string(role) + " (" + spelling + ")", golden::ToDoubles(*got), *want, tol));
  }
  fs::remove_all(tmp);
}

TEST(RopeCli, EveryGoldenRopeConfigInEverySpelling) {
  POSENC_REQUIRE_DATA(golden, "golden");
  int cases = 0, spellings = 0;
  for (const auto& family : {"hf", "ggml"}) {
    if (!fs::exists(fs::path(golden) / family)) continue;
    for (const auto& entry : fs::directory_iterator(fs::path(golden) / family)) {
      if (!fs::exists(entry.path() / "case.json")) continue;
      const json c = ReadJson(entry.path() / "case.json");
      // Multi-axis cases too, where `posenc rope --config` reads the config: M-RoPE (positions
      // [components, tokens]; a Hugging Face case names its model type in hf_model_type) and ggml's
      // vision mode. Hugging Face vision encoders' configs are not rope --config input.
      const std::string scheme = c.value("scheme", "");
      const bool ggml_params = c["config"].contains("n_dims");
      if (scheme != "rope" && scheme != "mrope" && !(scheme == "rope_vision_2d" && ggml_params)) continue;
      json config = c["config"];
      if (!ggml_params && !config.contains("model_type") && c.contains("hf_model_type"))
        config["model_type"] = c["hf_model_type"];
      ++cases;
      CheckCase(entry.path(), c, config, "config");
      ++spellings;
      if (c.contains("other_spelling_checked") && c["other_spelling_checked"].contains("config")) {
        json other = c["other_spelling_checked"]["config"];
        if (!ggml_params && !other.contains("model_type") && c.contains("hf_model_type"))
          other["model_type"] = c["hf_model_type"];
        CheckCase(entry.path(), c, other, "other spelling");
        ++spellings;
      }
    }
  }
  EXPECT_GT(cases, 0) << "no rope cases found under " << golden;
  std::printf("checked %d rope cases, %d configs\n", cases, spellings);
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// DeepSeek MLA (issue 18): Hugging Face rotates q_pe, the qk_rope_head_dim slice, on its own. `posenc
// rope` takes that slice as input and gives bit for bit the back 64 dims of the whole 192-dim head
// rotated (whose front 128 dims pass through); a width that is neither is refused naming all three.
TEST(RopeCli, DeepSeekRopeSliceAloneEqualsTheWholeHeadsWindow) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("posenc_rope_slice_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cfg = (dir / "config.json").string();
  std::ofstream(cfg) << R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840,
    "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
    "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}})";
  constexpr int64_t T = 5, H = 2, D = 192, R = 64;
  std::mt19937_64 rng = testing::MakeRng(7);
  const std::vector<float> values = testing::RandomNormal(rng, T * H * D);
  Array full = Array::Zeros(DType::kF32, {T, H, D}).value(), pe = Array::Zeros(DType::kF32, {T, H, R}).value();
  for (int64_t i = 0; i < T * H; ++i)
    for (int64_t k = 0; k < D; ++k) {
      full.data<float>()[i * D + k] = values[i * D + k];
      if (k >= D - R) pe.data<float>()[i * R + k - (D - R)] = values[i * D + k];
    }
  Array pos = Array::Zeros(DType::kI64, {T}).value();
  const int64_t p[T] = {0, 1, 7, 100, 5000};
  for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[t] = p[t];
  const auto path = [&](const char* n) { return (dir / n).string(); };
  ASSERT_TRUE(WriteNpy(path("full.npy"), full).ok());
  ASSERT_TRUE(WriteNpy(path("pe.npy"), pe).ok());
  ASSERT_TRUE(WriteNpy(path("pos.npy"), pos).ok());
  const std::string base = testing::CliPath() + " rope --config " + cfg + " --positions " + path("pos.npy");
  std::string out;
  ASSERT_EQ(testing::RunCommand(base + " --input " + path("full.npy") + " --output " + path("full_out.npy"), &out), 0)
      << out;
  ASSERT_EQ(testing::RunCommand(base + " --input " + path("pe.npy") + " --output " + path("pe_out.npy"), &out), 0)
      << out;
  const Array a = ReadNpy(path("full_out.npy")).value(), b = ReadNpy(path("pe_out.npy")).value();
  for (int64_t i = 0; i < T * H; ++i)
    for (int64_t k = 0; k < R; ++k)
      ASSERT_EQ(a.data<float>()[i * D + D - R + k], b.data<float>()[i * R + k]) << "row " << i << " dim " << k;
  const int64_t token1 = (1 * H) * D + (D - R);        // token 1 (position 1), head 0, first rotated dim
  ASSERT_NE(a.data<float>()[token1], values[token1]);  // it did rotate

  ASSERT_TRUE(WriteNpy(path("bad.npy"), Array::Zeros(DType::kF32, {T, H, 48}).value()).ok());
  EXPECT_EQ(testing::RunCommand(base + " --input " + path("bad.npy") + " --output " + path("bad_out.npy"), &out), 2);
  EXPECT_NE(out.find("head_dim 48 is neither the config's head_dim 192 nor its rotary slice of 64 dims (dims [128, "
                     "192))"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(path("bad_out.npy")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc
