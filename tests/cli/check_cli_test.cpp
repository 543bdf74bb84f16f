// `posenc diff` and `posenc check` run as a user runs them: exit codes (0 equivalent / pass, 1 not /
// fail, 2 bad input), the report's words and its JSON, one-line refusals.
#include <algorithm>
#include <cmath>
#include <random>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_builders.hpp"
#include "posenc/core/array.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/math/rope_config.hpp"
#include "published_configs.hpp"
#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using nlohmann::json;
using namespace ::posenc::testing;  // NOLINT

class CheckCli : public TempFolderTest {
 protected:
  int Run(const std::string& args, std::string* out) { return RunCommand(CliPath() + " " + args + " 2>&1", out); }
  void SaveF32(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v) {
    Array a = Array::Zeros(DType::kF32, shape).value();
    std::copy(v.begin(), v.end(), a.data<float>());
    ASSERT_TRUE(WriteNpy(P(name), a).ok());
  }
  void SaveI64(const std::string& name, const std::vector<int64_t>& v) {
    Array a = Array::Zeros(DType::kI64, {static_cast<int64_t>(v.size())}).value();
    std::copy(v.begin(), v.end(), a.data<int64_t>());
    ASSERT_TRUE(WriteNpy(P(name), a).ok());
  }
  // q [T, H, D] before and after a float32 rotation with `config`'s frequencies (half pairs, or the
  // other pairing when `flip`), positions 0, 37, 74, ...
  void WriteDump(const RopeConfig& config, bool flip, int64_t T, int64_t H) {
    const int64_t D = config.layout.head_dim, P = config.layout.num_pairs();
    std::vector<int64_t> pos;
    for (int64_t t = 0; t < T; ++t) pos.push_back(t * 37);
    const RopeFrequencies f = ComputeRopeFrequencies(config, pos.back() + 1).value();
    std::mt19937_64 rng = MakeRng(9);
    const std::vector<float> x = RandomNormal(rng, static_cast<size_t>(T * H * D));
    std::vector<float> y = x;
    RotaryLayout l = config.layout;
    if (flip) l.pairing = l.pairing == RopePairing::kHalf ? RopePairing::kInterleaved : RopePairing::kHalf;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < P; ++j) {
        const float a = static_cast<float>(pos[t]) * static_cast<float>(f.inv_freq[j]);
        const float c = std::cos(a), s = std::sin(a);
        for (int64_t h = 0; h < H; ++h) {
          const size_t b = static_cast<size_t>((t * H + h) * D);
          const float x1 = x[b + l.first(j)], x2 = x[b + l.second(j)];
          y[b + l.first(j)] = x1 * c - x2 * s;
          y[b + l.second(j)] = x2 * c + x1 * s;
        }
      }
    SaveF32("q.npy", {T, H, D}, x);
    SaveF32("q_rot.npy", {T, H, D}, y);
    SaveI64("pos.npy", pos);
  }
  // Qwen2.5-7B's RoPE over a head of `head_dim`: half pairs, the whole head, base 1e6.
  static RopeConfig HalfRope(int64_t head_dim) {
    RopeConfig rc;
    rc.layout = RotaryLayout{RopePairing::kHalf, head_dim, 0, head_dim};
    rc.base = 1000000.0;
    return rc;
  }
  // `posenc check` of config.json against the dump WriteDump wrote (its positions from pos.npy, or
  // `positions` given on the command line).
  std::string CheckArgs(const std::string& positions = "") const {
    return "check --model " + P("config.json") + " --before " + P("q.npy") + " --after " + P("q_rot.npy") +
           " --positions " + (positions.empty() ? P("pos.npy") : positions);
  }
};

TEST_F(CheckCli, DiffOfTwoSpellingsIsEquivalentAndOfAChangedBaseIsNot) {
  json v4 = PublishedConfig("qwen2__qwen2.5-7b-instruct");
  json v5 = v4;
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", v4["rope_theta"]}};
  v5.erase("rope_theta");
  WriteFile(P("v4.json"), v4.dump());
  WriteFile(P("v5.json"), v5.dump());
  std::string out;
  EXPECT_EQ(Run("diff " + P("v4.json") + " " + P("v5.json"), &out), 0) << out;
  EXPECT_NE(out.find("equivalent"), std::string::npos) << out;

  json b = v4;
  b["rope_theta"] = 10000.0;
  WriteFile(P("b.json"), b.dump());
  EXPECT_EQ(Run("diff " + P("v4.json") + " " + P("b.json") + " --json", &out), 1) << out;
  const json r = json::parse(out);
  EXPECT_FALSE(r["equivalent"].get<bool>());
  EXPECT_EQ(r["differences"][0]["field"], "base");
  EXPECT_EQ(r["differences"][0]["layers"], json::array({0, 27}));
  EXPECT_GE(r["cost"]["first_position_over_1e-3_rad"].get<int64_t>(), 1);

  // A file that is not a model: exit 2, one line.
  WriteFile(P("junk.bin"), "not a model");
  EXPECT_EQ(Run("diff " + P("v4.json") + " " + P("junk.bin"), &out), 2) << out;
  EXPECT_NE(out.find("posenc diff: error:"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST_F(CheckCli, ACorrectDumpPassesAndAFlippedPairingIsDiagnosed) {
  const json c = PublishedConfig("qwen2__qwen2.5-7b-instruct");
  WriteFile(P("config.json"), c.dump());
  // head_dim 3584 / 28 = 128, half pairs, base 1e6
  RopeConfig rc = HalfRope(128);
  WriteDump(rc, false, 24, 2);
  std::string out;
  const std::string args = CheckArgs();
  EXPECT_EQ(Run(args, &out), 0) << out;
  EXPECT_NE(out.find("pass: layer 0, site rope"), std::string::npos) << out;

  WriteDump(rc, true, 24, 2);
  EXPECT_EQ(Run(args + " --json", &out), 1) << out;
  const json r = json::parse(out);
  EXPECT_EQ(r["verdict"], "fail");
  EXPECT_EQ(r["diagnosis"][0]["cause"], "pairing");
  EXPECT_GE(r["worst"]["position"].get<int64_t>(), 0);
  EXPECT_GE(r["worst"]["pair"].get<int64_t>(), 0);

  // Heads-first input: the same dump transposed passes with --order heads-first.
  WriteDump(rc, false, 24, 2);
  Array q = ReadNpy(P("q.npy")).value(), qr = ReadNpy(P("q_rot.npy")).value();
  auto transpose = [](const Array& a) {
    std::vector<float> heads_first(static_cast<size_t>(a.size()));
    const int64_t T = a.dim(0), H = a.dim(1), D = a.dim(2);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t k = 0; k < D; ++k) heads_first[(h * T + t) * D + k] = a.data<float>()[(t * H + h) * D + k];
    return heads_first;
  };
  SaveF32("qh.npy", {2, 24, 128}, transpose(q));
  SaveF32("qh_rot.npy", {2, 24, 128}, transpose(qr));
  EXPECT_EQ(Run("check --model " + P("config.json") + " --before " + P("qh.npy") + " --after " +
                    P("qh_rot.npy") + " --positions " + P("pos.npy") + " --order heads-first",
                &out),
            0)
      << out;
}

TEST_F(CheckCli, BadInputIsOneLineAndExitTwo) {
  WriteFile(P("config.json"), PublishedConfig("qwen2__qwen2.5-7b-instruct").dump());
  RopeConfig rc = HalfRope(96);  // another layer's head size
  WriteDump(rc, false, 8, 2);
  std::string out;
  const std::string args = CheckArgs();
  EXPECT_EQ(Run(args, &out), 2) << out;
  EXPECT_NE(out.find("head_dim 96"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;

  rc = HalfRope(128);
  WriteDump(rc, false, 8, 2);
  Array y = ReadNpy(P("q_rot.npy")).value();
  y.data<float>()[5] = NAN;
  ASSERT_TRUE(WriteNpy(P("q_rot.npy"), y).ok());
  EXPECT_EQ(Run(args, &out), 2) << out;
  EXPECT_NE(out.find("NaN at element 5"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;

  WriteDump(rc, false, 8, 2);
  EXPECT_EQ(Run(CheckArgs("0,1,2"), &out), 2) << out;  // 3 positions for 8 tokens
  EXPECT_NE(out.find("3 positions for 8 tokens"), std::string::npos) << out;
  EXPECT_EQ(Run(args + " --layer 28", &out), 2) << out;
  EXPECT_NE(out.find("the model has 28 layers"), std::string::npos) << out;
  // A float32 dump that is not bfloat16, said to be.
  EXPECT_EQ(Run(args + " --dtype bf16", &out), 2) << out;
  EXPECT_NE(out.find("not a bfloat16 value"), std::string::npos) << out;
}

TEST_F(CheckCli, FrequenciesAndCachesFromTheCommandLine) {
  WriteFile(P("config.json"), PublishedConfig("qwen2__qwen2.5-7b-instruct").dump());
  auto freqs = [](double base) {
    std::vector<float> w;
    for (int64_t i = 0; i < 64; ++i) w.push_back(static_cast<float>(std::pow(base, -2.0 * i / 128.0)));
    return w;
  };
  std::string out;
  SaveF32("f.npy", {64}, freqs(1000000.0));
  EXPECT_EQ(Run("check --model " + P("config.json") + " --inv-freq " + P("f.npy"), &out), 0) << out;
  SaveF32("f.npy", {64}, freqs(10000.0));
  EXPECT_EQ(Run("check --model " + P("config.json") + " --inv-freq " + P("f.npy") + " --json", &out), 1) << out;
  const json r = json::parse(out);
  EXPECT_EQ(r["diagnosis"][0]["cause"], "base");
  EXPECT_NE(r["diagnosis"][0]["detail"].get<std::string>().find("base 10000 fits"), std::string::npos);

  // A [T, R/2] cache, row i = position i, with sin negated: direction.
  const std::vector<float> w = freqs(1000000.0);
  std::vector<float> c, s;
  for (int64_t t = 0; t < 40; ++t)
    for (int64_t j = 0; j < 64; ++j) {
      const float a = static_cast<float>(t * 50) * w[j];
      c.push_back(std::cos(a));
      s.push_back(-std::sin(a));
    }
  SaveF32("cos.npy", {40, 64}, c);
  SaveF32("sin.npy", {40, 64}, s);
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < 40; ++t) pos.push_back(t * 50);
  SaveI64("pos.npy", pos);
  EXPECT_EQ(Run("check --model " + P("config.json") + " --cos " + P("cos.npy") + " --sin " + P("sin.npy") +
                    " --positions " + P("pos.npy") + " --json",
                &out),
            1)
      << out;
  EXPECT_EQ(json::parse(out)["diagnosis"][0]["cause"], "direction");
  // A cache of the wrong width is refused naming the widths it could be.
  SaveF32("cos.npy", {40, 48}, std::vector<float>(40 * 48, 1.0f));
  SaveF32("sin.npy", {40, 48}, std::vector<float>(40 * 48, 0.0f));
  EXPECT_EQ(Run("check --model " + P("config.json") + " --cos " + P("cos.npy") + " --sin " + P("sin.npy"), &out),
            2)
      << out;
  EXPECT_NE(out.find("[T, 128] or [T, 64]"), std::string::npos) << out;
}

TEST_F(CheckCli, ABfloat16SafetensorsDumpIsReadWithItsDtype) {
  WriteFile(P("config.json"), PublishedConfig("qwen2__qwen2.5-7b-instruct").dump());
  RopeConfig rc = HalfRope(128);
  WriteDump(rc, false, 16, 2);
  // The float32 dump rounded to bfloat16, both tensors and the positions in one file.
  auto bf16 = [&](const std::string& npy) {
    const Array a = ReadNpy(P(npy)).value();
    std::string bytes;
    for (float v : a.span<float>()) {
      const uint16_t bits = F32ToBF16(v).bits;
      bytes.append(reinterpret_cast<const char*>(&bits), 2);
    }
    return bytes;
  };
  const Array pos = ReadNpy(P("pos.npy")).value();
  SafetensorsBuilder b;
  b.Tensor("q", "BF16", {16, 2, 128}, bf16("q.npy"))
      .Tensor("q_rot", "BF16", {16, 2, 128}, bf16("q_rot.npy"))
      .Tensor("pos", "I64", {16}, std::string(reinterpret_cast<const char*>(pos.bytes()), pos.nbytes()))
      .Finish();
  WriteFile(P("dump.safetensors"), b.Build());
  const std::string f = P("dump.safetensors");
  std::string out;
  // The bfloat16 rounding of the output is within the bfloat16 tolerance, not float32's.
  EXPECT_EQ(Run("check --model " + P("config.json") + " --before " + f + ":q --after " + f + ":q_rot --positions " +
                    f + ":pos",
                &out),
            0)
      << out;
  // A file of three tensors without a name is refused naming them.
  EXPECT_EQ(Run("check --model " + P("config.json") + " --before " + f + " --after " + f + ":q_rot --positions " +
                    f + ":pos",
                &out),
            2)
      << out;
  EXPECT_NE(out.find("3 tensors (pos, q, q_rot)"), std::string::npos) << out;
}

}  // namespace
}  // namespace posenc
