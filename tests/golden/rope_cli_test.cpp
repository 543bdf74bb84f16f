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
      if (scheme == "mrope" && !ggml_params && !config.contains("model_type"))
        config["model_type"] = c["hf_model_type"];
      ++cases;
      CheckCase(entry.path(), c, config, "config");
      ++spellings;
      if (c.contains("other_spelling_checked") && c["other_spelling_checked"].contains("config")) {
        CheckCase(entry.path(), c, c["other_spelling_checked"]["config"], "other spelling");
        ++spellings;
      }
    }
  }
  EXPECT_GT(cases, 0) << "no rope cases found under " << golden;
  std::printf("checked %d rope cases, %d configs\n", cases, spellings);
}

}  // namespace
}  // namespace posenc
