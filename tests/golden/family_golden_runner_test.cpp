// The golden runner on the 1-D family cases (Llama 4, Cohere2, GLM-4) and Llama 4's temperature case,
// copied and doctored: the untouched copies pass; a case whose layout, rotary_dim, pair_component,
// layer_schedule, layer_index or temperature parameters disagree with what posenc derives from the
// config fails naming the field (the runner derives them, it does not take them from the case).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/io/npy.hpp"
#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class FamilyGoldenRunner : public testing::TempFolderTest {
 protected:
  // Copies golden/hf/<name> into a fresh folder under the temp folder; "" when the shared data is absent.
  std::string Copy(const std::string& name) {
    const std::string src = testing::DataPath("golden/hf/" + name);
    if (src.empty()) return "";
    const fs::path dst = dir_ / (name + "_" + std::to_string(copies_++));  // each copy its own folder
    fs::copy(src, dst, fs::copy_options::recursive);
    return dst.string();
  }
  static json ReadCase(const std::string& dir) {
    std::ifstream f(fs::path(dir) / "case.json");
    return json::parse(f);
  }
  static void WriteCase(const std::string& dir, const json& j) {
    std::ofstream(fs::path(dir) / "case.json") << j.dump(1);
  }
  // Runs `posenc golden dir`; returns the exit status.
  static int Golden(const std::string& dir, std::string* out) {
    return testing::RunCommand(testing::CliPath() + " golden " + dir, out);
  }
  // Flips element `index` (0 <-> 1) of an int64 role file.
  static void FlipInt(const std::string& dir, const std::string& file, int64_t index) {
    const std::string path = (fs::path(dir) / file).string();
    Array a = ReadNpy(path).value().AsType(DType::kI64).value();
    int64_t& v = a.data<int64_t>()[index];
    v = v == 0 ? 1 : 0;
    ASSERT_TRUE(WriteNpy(path, a).ok());
  }
  void ExpectFail(const std::string& dir, std::initializer_list<std::string> needles) {
    std::string out;
    const int rc = Golden(dir, &out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("0 passed, 1 failed"), std::string::npos) << out;
    for (const std::string& n : needles) EXPECT_NE(out.find(n), std::string::npos) << n << " in: " << out;
  }

  int copies_ = 0;
};

#define COPY_OR_SKIP(var, name)       \
  const std::string var = Copy(name); \
  if (var.empty()) { POSENC_REQUIRE_DATA(golden_hf_, "golden/hf/" name); }

TEST_F(FamilyGoldenRunner, UntouchedCasesPass) {
  for (const char* name : {"rope_llama4_scout_llama3", "rope_cohere2_r7b_schedule", "rope_cohere_commandr_interleaved",
                           "rope_glm4_9b_partial_interleaved", "attn_temp_llama4_scout"}) {
    const std::string dir = Copy(name);
    if (dir.empty()) { POSENC_REQUIRE_DATA(golden, std::string("golden/hf/") + name); }
    std::string out;
    EXPECT_EQ(Golden(dir, &out), 0) << out;
    EXPECT_NE(out.find("1 passed, 0 failed"), std::string::npos) << out;
  }
}

TEST_F(FamilyGoldenRunner, LayoutAndRotaryDimAreCheckedNotTaken) {
  COPY_OR_SKIP(dir, "rope_llama4_scout_llama3");
  json c = ReadCase(dir);
  c["layout"] = "half";
  WriteCase(dir, c);
  ExpectFail(dir, {"config gives layout interleaved, case says half"});
  // Without hf_model_type (and none in the config) the family is unknown: refused, never guessed.
  c["layout"] = "interleaved";
  c.erase("hf_model_type");
  WriteCase(dir, c);
  ExpectFail(dir, {"no model_type"});

  COPY_OR_SKIP(glm, "rope_glm4_9b_partial_interleaved");
  c = ReadCase(glm);
  c["config"].erase("partial_rotary_factor");  // glm4's default 0.5 still gives 64
  WriteCase(glm, c);
  std::string out;
  EXPECT_EQ(Golden(glm, &out), 0) << out;
  c["rotary_dim"] = 128;
  WriteCase(glm, c);
  ExpectFail(glm, {"rotary_dim 64, case says 128"});
}

// The rotary slice alone (issue 18: DeepSeek's q_pe, which Hugging Face rotates on its own; here
// Phi-2's q_rot, the same rule): the case with input and outputs cut to the rotary window [0, 32)
// passes through the config's head_dim 80, its frequencies unchanged; a width that is neither 80 nor
// the window fails naming all three.
TEST_F(FamilyGoldenRunner, TheRotarySliceAloneIsRotatedAsHuggingFaceDoes) {
  COPY_OR_SKIP(dir, "rope_partial_phi2");
  auto cut = [&](const std::string& file, int64_t width) {
    const std::string path = (fs::path(dir) / file).string();
    const Array stored = ReadNpy(path).value();
    const Array a = stored.AsType(DType::kF64).value();
    const int64_t t = a.dim(0), h = a.dim(1), d = a.dim(2);
    Array b = Array::Zeros(DType::kF64, {t, h, width}).value();
    for (int64_t i = 0; i < t * h; ++i)
      for (int64_t k = 0; k < width; ++k) b.data<double>()[i * width + k] = a.data<double>()[i * d + k];
    ASSERT_TRUE(WriteNpy(path, b.AsType(stored.dtype()).value()).ok());
  };
  for (const char* f : {"input.npy", "expected.npy", "expected_exact.npy"}) cut(f, 32);
  std::string out;
  EXPECT_EQ(Golden(dir, &out), 0) << out;
  EXPECT_NE(out.find("1 passed, 0 failed"), std::string::npos) << out;
  for (const char* f : {"input.npy", "expected.npy", "expected_exact.npy"}) cut(f, 16);
  ExpectFail(dir, {"head_dim 16 is neither the config's head_dim 80 nor its rotary slice of 32 dims"});
}

TEST_F(FamilyGoldenRunner, PairComponentAndScheduleComparedExactly) {
  COPY_OR_SKIP(dir, "rope_cohere2_r7b_schedule");
  FlipInt(dir, "pair_component.npy", 5);
  ExpectFail(dir, {"pair_component", "index 5"});
  COPY_OR_SKIP(sched, "rope_llama4_scout_llama3");
  FlipInt(sched, "layer_schedule.npy", 7);
  ExpectFail(sched, {"layer_schedule", "index 7"});
  // The schedule follows the config: Cohere2 with every 2nd layer full attention.
  COPY_OR_SKIP(pattern, "rope_cohere2_r7b_schedule");
  json c = ReadCase(pattern);
  c["config"]["sliding_window_pattern"] = 2;
  WriteCase(pattern, c);
  ExpectFail(pattern, {"layer_schedule (cohere2 sliding_window_pattern 2)", "index 1"});
}

TEST_F(FamilyGoldenRunner, TemperatureParametersComeFromTheConfig) {
  COPY_OR_SKIP(dir, "attn_temp_llama4_scout");
  json c = ReadCase(dir);
  c["config"]["floor_scale"] = 4096;
  WriteCase(dir, c);
  ExpectFail(dir, {"floor_scale 4096, case says 8192"});
  c["floor_scale"] = 4096.0;  // both agree now: the scales themselves differ from HF's
  WriteCase(dir, c);
  ExpectFail(dir, {"attn_scales"});
  c = ReadCase(dir);
  c["config"]["floor_scale"] = 8192;
  c["floor_scale"] = 8192.0;
  c["layer_index"] = 0;  // a RoPE layer: no temperature there
  WriteCase(dir, c);
  ExpectFail(dir, {"layer_index 0"});
  c["layer_index"] = 3;
  c["config"]["attn_temperature_tuning"] = false;
  WriteCase(dir, c);
  ExpectFail(dir, {"tuning is off"});
}

TEST_F(FamilyGoldenRunner, TemperatureToleranceFromFormatWhenTheCaseHasNone) {
  COPY_OR_SKIP(dir, "attn_temp_llama4_scout");
  json c = ReadCase(dir);
  c.erase("tolerance");
  WriteCase(dir, c);
  std::string out;
  EXPECT_EQ(Golden(dir, &out), 0) << out;
  // 2^-30 * max scale (about 1.2e-9 here) for the float64 scales: 1e-8 off is a failure.
  const std::string path = (fs::path(dir) / "attn_scales_exact.npy").string();
  Array a = ReadNpy(path).value();
  a.data<double>()[0] += 1e-8;
  ASSERT_TRUE(WriteNpy(path, a).ok());
  ExpectFail(dir, {"attn_scales_exact", "atol 1.195"});  // the case's own: 1.195186e-09
}

}  // namespace
}  // namespace posenc
