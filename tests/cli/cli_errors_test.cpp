// Bad input through the CLI: each gives one line naming the fault and exit status 2.
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <sstream>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "posenc/io/npy.hpp"
#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;

class CliErrors : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    Write("config.json", R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "rope_theta": 10000.0})");
    Array pos = Array::Zeros(DType::kI64, {3}).value();
    for (int i = 0; i < 3; ++i) pos.data<int64_t>()[i] = i;
    ASSERT_TRUE(WriteNpy(P("pos.npy"), pos).ok());
    Array x = Array::Zeros(DType::kF32, {3, 2, 8}).value();
    ASSERT_TRUE(WriteNpy(P("x.npy"), x).ok());
  }
  // Runs `posenc rope` with the given overrides; returns the exit status, fills `out`.
  int Rope(const std::string& config, const std::string& pos, const std::string& input, std::string* out,
           const std::string& extra = "") const {
    return testing::RunCommand(testing::CliPath() + " rope --config " + config + " --positions " + pos + " --input " +
                                   input + " --output " + P("y.npy") + " " + extra,
                               out);
  }
  // Asserts one line of error output with exit 2 that contains every needle.
  static void ExpectError(int rc, const std::string& out, std::initializer_list<std::string> needles) {
    EXPECT_EQ(rc, 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "expected one line: " << out;
    EXPECT_NE(out.find("error"), std::string::npos) << out;
    for (const std::string& n : needles)
      EXPECT_NE(out.find(n), std::string::npos) << "missing '" << n << "' in: " << out;
  }
};

TEST_F(CliErrors, GoodInputWorks) {
  std::string out;
  EXPECT_EQ(Rope(P("config.json"), P("pos.npy"), P("x.npy"), &out), 0) << out;
  EXPECT_TRUE(fs::exists(P("y.npy")));
}

// --order heads-first reads [heads, tokens, head_dim] and rotates exactly as the tokens-first copy.
TEST_F(CliErrors, HeadsFirstOrderMatchesTokensFirst) {
  const int64_t T = 3, H = 2, D = 8;
  Array x = Array::Zeros(DType::kF32, {T, H, D}).value(), xt = Array::Zeros(DType::kF32, {H, T, D}).value();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        x.data<float>()[(t * H + h) * D + d] = xt.data<float>()[(h * T + t) * D + d] =
            0.1f * static_cast<float>(t * 31 + h * 7 + d) - 1.0f;
  ASSERT_TRUE(WriteNpy(P("x.npy"), x).ok());
  ASSERT_TRUE(WriteNpy(P("xt.npy"), xt).ok());
  Array pos = Array::Zeros(DType::kI64, {T}).value();
  for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[t] = 5 + 4 * t;
  ASSERT_TRUE(WriteNpy(P("pos.npy"), pos).ok());
  std::string out;
  ASSERT_EQ(Rope(P("config.json"), P("pos.npy"), P("x.npy"), &out), 0) << out;
  Array y = ReadNpy(P("y.npy")).value();
  ASSERT_EQ(Rope(P("config.json"), P("pos.npy"), P("xt.npy"), &out, "--order heads-first"), 0) << out;
  Array yt = ReadNpy(P("y.npy")).value();
  ASSERT_EQ(yt.shape(), xt.shape());
  int64_t changed = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const float a = y.data<float>()[(t * H + h) * D + d], b = yt.data<float>()[(h * T + t) * D + d];
        EXPECT_EQ(a, b) << "token " << t << " head " << h << " dim " << d;
        changed += a != x.data<float>()[(t * H + h) * D + d];
      }
  EXPECT_GT(changed, T * H * D / 2) << "the rotation did nothing";
  // 3 heads-first "heads" of 2 tokens: 2 tokens against 3 positions, named.
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("x.npy"), &out, "--order heads-first"), out,
              {"has 2 tokens", "has 3"});
  EXPECT_EQ(
      testing::RunCommand(testing::CliPath() + " rope --config " + P("config.json") + " --positions " + P("pos.npy") +
                              " --input " + P("x.npy") + " --output " + P("y.npy") + " --order sideways",
                          &out),
      2);
  EXPECT_NE(out.find("sideways"), std::string::npos) << out;
}

TEST_F(CliErrors, MalformedNpy) {
  Write("bad.npy", "this is not numpy");
  std::string out;
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("bad.npy"), &out), out, {"bad.npy", "magic"});
}

TEST_F(CliErrors, TruncatedNpy) {
  std::ifstream f(P("x.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Write("cut.npy", bytes.substr(0, bytes.size() - 5));
  std::string out;
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("cut.npy"), &out), out, {"cut.npy", "truncated"});
}

TEST_F(CliErrors, WrongDtype) {
  Array x = Array::Zeros(DType::kI32, {3, 2, 8}).value();
  ASSERT_TRUE(WriteNpy(P("xi.npy"), x).ok());
  std::string out;
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("xi.npy"), &out), out, {"xi.npy", "int32"});
  Array p = Array::Zeros(DType::kF32, {3}).value();
  ASSERT_TRUE(WriteNpy(P("pf.npy"), p).ok());
  ExpectError(Rope(P("config.json"), P("pf.npy"), P("x.npy"), &out), out, {"pf.npy", "float32"});
}

TEST_F(CliErrors, WrongShape) {
  Array x = Array::Zeros(DType::kF32, {3, 16}).value();
  ASSERT_TRUE(WriteNpy(P("x2.npy"), x).ok());
  std::string out;
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("x2.npy"), &out), out, {"x2.npy", "[3, 16]"});
  Array y = Array::Zeros(DType::kF32, {3, 2, 6}).value();
  ASSERT_TRUE(WriteNpy(P("x6.npy"), y).ok());
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("x6.npy"), &out), out, {"head_dim 6", "8"});
  Array z = Array::Zeros(DType::kF32, {4, 2, 8}).value();
  ASSERT_TRUE(WriteNpy(P("x4.npy"), z).ok());
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("x4.npy"), &out), out, {"4 tokens", "has 3"});
}

TEST_F(CliErrors, OutOfRangePosition) {
  Array pos = Array::Zeros(DType::kI64, {3}).value();
  pos.data<int64_t>()[2] = -7;
  ASSERT_TRUE(WriteNpy(P("neg.npy"), pos).ok());
  std::string out;
  ExpectError(Rope(P("config.json"), P("neg.npy"), P("x.npy"), &out), out, {"position -7 at index 2"});
}

TEST_F(CliErrors, OddRotaryDimension) {
  Write("odd.json", R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "partial_rotary_factor": 0.375})");
  std::string out;
  ExpectError(Rope(P("odd.json"), P("pos.npy"), P("x.npy"), &out), out, {"odd.json", "3"});
}

TEST_F(CliErrors, NonPositiveBase) {
  for (const char* base : {"0", "-10000"}) {
    Write("base.json", std::string(R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "rope_theta": )") + base + "}");
    std::string out;
    ExpectError(Rope(P("base.json"), P("pos.npy"), P("x.npy"), &out), out, {"base.json", "rope_theta", base});
  }
}

TEST_F(CliErrors, HeadsNotDividingEvenly) {
  Write("heads.json", R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 3})");
  std::string out;
  ExpectError(Rope(P("heads.json"), P("pos.npy"), P("x.npy"), &out), out, {"heads.json", "num_attention_heads", "16"});
}

TEST_F(CliErrors, UnreadableConfig) {
  std::string out;
  ExpectError(Rope(P("missing.json"), P("pos.npy"), P("x.npy"), &out), out, {"missing.json", "cannot open"});
  Write("broken.json", "{\"hidden_size\": 16,");
  ExpectError(Rope(P("broken.json"), P("pos.npy"), P("x.npy"), &out), out, {"broken.json", "JSON"});
  Write("array.json", "[1, 2]");
  ExpectError(Rope(P("array.json"), P("pos.npy"), P("x.npy"), &out), out, {"array.json", "object"});
}

TEST_F(CliErrors, BadOptionValues) {
  std::string out;
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("x.npy"), &out, "--precision sloppy"), out, {"sloppy"});
  ExpectError(Rope(P("config.json"), P("pos.npy"), P("x.npy"), &out, "--layout diagonal"), out, {"diagonal"});
  // Option checks (commands.hpp IntegerIn), one line each: a sequence length is a whole number >= 0,
  // said in those words rather than as a range up to the largest double.
  for (const std::string& cmd : {" inspect " + P("config.json") + " --seq-len -5",
                                 " rope --config " + P("config.json") + " --positions " + P("pos.npy") + " --input " +
                                     P("x.npy") + " --output " + P("y.npy") + " --seq-len -5"}) {
    ExpectError(testing::RunCommand(testing::CliPath() + cmd, &out), out, {"--seq-len: '-5' is negative"});
    EXPECT_EQ(out.find("179769"), std::string::npos) << out;
  }
  ExpectError(testing::RunCommand(testing::CliPath() + " inspect " + P("config.json") + " --seq-len 1.5", &out), out,
              {"--seq-len: '1.5' is not a whole number"});
  // Converting a model to the layout it already has is a mistake, not a copy.
  int rc = testing::RunCommand(
      testing::CliPath() + " convert-layout --from half --to half " + P("x.npy") + " " + P("out.bin"), &out);
  ExpectError(rc, out, {"--from and --to are both 'half'"});
  EXPECT_FALSE(fs::exists(P("out.bin")));
}

// Integer flags are parsed strictly (IntegerIn): no sign tricks, no saturation, no trailing junk, no
// hex or octal; the refusal names the flag and the value. Before: --heads -3 was taken (and ignored),
// 99999999999999999999 saturated, "010" was read as octal 8.
TEST_F(CliErrors, IntegerFlagsAreParsedStrictly) {
  std::string out;
  const std::string convert =
      testing::CliPath() + " convert-layout --from interleaved --to half " + P("x.npy") + " " + P("out.bin");
  ExpectError(testing::RunCommand(convert + " --heads -3", &out), out, {"--heads: '-3' is negative"});
  ExpectError(testing::RunCommand(convert + " --kv-heads 99999999999999999999", &out), out,
              {"--kv-heads: '99999999999999999999' is past the largest accepted value 1048576"});
  ExpectError(testing::RunCommand(convert + " --head-dim 64x", &out), out, {"--head-dim: '64x' is not a whole number"});
  ExpectError(testing::RunCommand(convert + " --head-dim 0x40", &out), out, {"--head-dim: '0x40'"});
  ExpectError(testing::RunCommand(convert + " --rotary-start -2", &out), out,
              {"--rotary-start: '-2' is below the least accepted value -1"});
  ExpectError(testing::RunCommand(testing::CliPath() + " inspect " + P("config.json") + " --seq-len ' 5'", &out), out,
              {"--seq-len: ' 5' is not a whole number"});
  ExpectError(testing::RunCommand(testing::CliPath() + " inspect " + P("config.json") + " --seq-len +5", &out), out,
              {"--seq-len: '+5'"});
  // "010" is ten, not octal eight: inspect reports the sequence length it was given.
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " inspect " + P("config.json") + " --seq-len 010 --json", &out), 0)
      << out;
  EXPECT_NE(out.find("10"), std::string::npos) << out;
  ExpectError(testing::RunCommand(testing::CliPath() + " demo --seed -1", &out), out, {"--seed: '-1' is negative"});
  ExpectError(testing::RunCommand(testing::CliPath() + " bench rerotate --tokens 1099511627776", &out), out,
              {"--tokens: '1099511627776' is past the largest accepted value 2147483646"});
  ExpectError(testing::RunCommand(testing::CliPath() + " bench --reps -1 --filter rope_decode", &out), out,
              {"--reps: '-1' is negative"});
  ExpectError(testing::RunCommand(testing::CliPath() + " bench rerotate --threads 2x", &out), out,
              {"--threads '2x': '2x' is not a thread count"});
}

// Sizes from flags are bounded before anything is allocated (bench rerotate --tokens 2^40 aborted
// with bad_alloc), and a regular expression cannot recurse the process off its stack.
TEST_F(CliErrors, FlagSizesAndPatternsAreBoundedBeforeUse) {
  std::string out;
  ExpectError(testing::RunCommand(testing::CliPath() + " bench rerotate --tokens 1000000 --heads 1000", &out), out,
              {"--tokens 1000000 x --heads 1000 x --head-dim 128 is more than 268435456 elements"});
  const std::string deep = std::string(5000, '(') + std::string(5000, ')');
  ExpectError(testing::RunCommand(testing::CliPath() + " bench --filter '" + deep + "'", &out), out,
              {"--filter", "10000 bytes", "more than the 256 accepted"});
  const std::string nested = std::string(40, '(') + "a" + std::string(40, ')');
  ExpectError(testing::RunCommand(testing::CliPath() + " bench --filter '" + nested + "'", &out), out,
              {"groups nested 40 deep"});
  ExpectError(testing::RunCommand(testing::CliPath() + " bench --filter '(a'", &out), out,
              {"--filter '(a' is not a valid regular expression"});
}

// Every command runs under one catch (main.cpp): an exception that escapes a command is one line and
// exit 2, never an abort. Here: an allocation the flags allow that this process cannot make.
TEST_F(CliErrors, AnEscapedExceptionIsOneLineAndExit2) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of address space: an address-space cap cannot be set under it";
#else
  std::string out;
  // 2^21 x 1 x 128 = 2^28 elements is within the bound: three 1 GiB buffers, more than 1 GiB of space.
  const int rc =
      testing::RunCommand("ulimit -v 1048576; " + testing::CliPath() +
                              " bench rerotate --reps 1 --threads 1 --tokens 2097152 --heads 1 --head-dim 128",
                          &out);
  ExpectError(rc, out, {"posenc bench rerotate: error: out of memory", "std::bad_alloc"});
#endif
  // nlohmann's type_error from a path that is not UTF-8 in `inspect --json` aborted the process.
  std::string out2;
  const std::string odd = P("c\xff.json");
  Write("c\xff.json", R"({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "rope_theta": 10000.0})");
  const int rc2 = testing::RunCommand(testing::CliPath() + " inspect '" + odd + "' --json", &out2);
  EXPECT_TRUE(rc2 == 0 || rc2 == 2) << rc2 << ": " << out2;
  if (rc2 == 2) ExpectError(rc2, out2, {"inspect"});
}

// convert-layout refuses to write over any of its inputs (the model, also through a symlink or a hard
// link, or the config.json beside it), and writes atomically: a failed write keeps the old OUT.
TEST_F(CliErrors, ConvertLayoutNeverWritesOverAnInputOrHalfAFile) {
  POSENC_REQUIRE_DATA(model, "models/stories260K/stories260K.bin");
  fs::copy_file(model, P("m.bin"));
  fs::create_symlink(P("m.bin"), P("link.bin"));
  fs::create_hard_link(P("m.bin"), P("hard.bin"));
  Write("config.json", "{}");
  std::ifstream f(model, std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::string out;
  const std::string convert = testing::CliPath() + " convert-layout --from interleaved --to half ";
  for (const std::string& target : {P("link.bin"), P("hard.bin"), P("m.bin"), P("config.json")}) {
    ExpectError(testing::RunCommand(convert + P("m.bin") + " " + target, &out), out, {"is the input", target});
  }
  EXPECT_EQ(slurp(P("m.bin")), original);
  EXPECT_EQ(slurp(P("config.json")), "{}");
  fs::remove(P("config.json"));
  // A good conversion, then the same one under a 64-block file-size limit (a full disk): exit 2 with
  // errno's text, and the first output byte for byte.
  ASSERT_EQ(testing::RunCommand(convert + P("m.bin") + " " + P("out.bin"), &out), 0) << out;
  const std::string first = slurp(P("out.bin"));
  ASSERT_EQ(first.size(), original.size());
  const int rc = testing::RunCommand("trap '' XFSZ; ulimit -f 64; " + convert + P("m.bin") + " " + P("out.bin"), &out);
  ExpectError(rc, out, {"out.bin", "File too large", "unchanged"});
  EXPECT_EQ(slurp(P("out.bin")), first);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().rfind(".posenc-tmp", 0), std::string::npos) << e.path();
}

TEST_F(CliErrors, GoldenOnMissingPathAndFailingCase) {
  std::string out;
  int rc = testing::RunCommand(testing::CliPath() + " golden " + P("nowhere"), &out);
  ExpectError(rc, out, {"nowhere", "does not exist"});
  // A case whose expected output is wrong must fail with exit 1 and say which role.
  fs::create_directories(dir_ / "case");
  Write("case/case.json", R"({"scheme": "sinusoidal", "layout": "concat", "d_model": 4,
      "files": {"positions": "positions.npy", "table": "table.npy"}})");
  Array pos = Array::Zeros(DType::kI64, {2}).value();
  pos.data<int64_t>()[1] = 1;
  ASSERT_TRUE(WriteNpy(P("case/positions.npy"), pos).ok());
  ASSERT_TRUE(WriteNpy(P("case/table.npy"), Array::Zeros(DType::kF32, {2, 4}).value()).ok());
  rc = testing::RunCommand(testing::CliPath() + " golden " + P("case"), &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("table"), std::string::npos) << out;
  EXPECT_NE(out.find("0 passed, 1 failed"), std::string::npos) << out;
  // An unknown scheme is a failure, not a skip.
  Write("case/case.json", R"({"scheme": "fourier", "files": {}})");
  rc = testing::RunCommand(testing::CliPath() + " golden " + P("case"), &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("fourier"), std::string::npos) << out;
}

TEST_F(CliErrors, EveryCommandHasHelp) {
  std::string out;
  ASSERT_EQ(testing::RunCommand(testing::CliPath() + " --help", &out), 0);
  // Subcommand names from the top-level help listing: every one answers --help with exit 0.
  const size_t at = out.find("Subcommands:");
  ASSERT_NE(at, std::string::npos) << out;
  std::istringstream lines(out.substr(at));
  std::string line;
  std::getline(lines, line);
  int count = 0;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) continue;
    std::string help;
    EXPECT_EQ(testing::RunCommand(testing::CliPath() + " " + name + " --help", &help), 0) << name;
    EXPECT_NE(help.find("Usage"), std::string::npos) << name << ": " << help;
    ++count;
  }
  EXPECT_GE(count, 3);
}

}  // namespace
}  // namespace posenc
