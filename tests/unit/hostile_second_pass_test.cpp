// Issue 32 (hostile input, second pass), the C++ mechanisms: the typed config reader (wrong JSON types,
// unsigned wrap, float32 bounds), the one message builder (every Status one line, at most 1 KB), the
// thread pool when the OS refuses threads and POSENC_NUM_THREADS, golden comparisons with NaN, and
// overflow on lengths of 2^63-1.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/json_util.hpp"
#include "golden_case.hpp"
#include "temp_folder.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/config/multi_axis_config.hpp"
#include "posenc/core/message.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/attn_temperature.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc {
namespace {

using nlohmann::json;
using namespace json_util;  // NOLINT

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---------- the typed reader ----------

TEST(TypedReader, WrongTypeIsAnErrorNamingKeyAndExpectation) {
  const json j = json::parse(R"({"s": ["gptj"], "o": "text", "n": "1.5", "b": "true", "i": 2.5})");
  const auto s = FindString(j, "s", "c.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.status().message(), "config c.json: key 's' is [\"gptj\"], expected a string"))
      << s.status().message();
  const auto o = FindObject(j, "o", "c.json");
  ASSERT_FALSE(o.ok());
  EXPECT_TRUE(Contains(o.status().message(), "key 'o' is \"text\", expected an object")) << o.status().message();
  EXPECT_FALSE(GetNumber(j, "n", "c.json").ok());
  const auto b = GetFlag(j, "b", "c.json");
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(Contains(b.status().message(), "expected true, false or a number")) << b.status().message();
  EXPECT_FALSE(GetInt(j, "i", "c.json").ok());
}

TEST(TypedReader, AbsentAndNullAreAbsentUnlessNullIsWrong) {
  const json j = json::parse(R"({"a": null})");
  ASSERT_TRUE(FindString(j, "a", "c").ok());
  EXPECT_FALSE(FindString(j, "a", "c")->has_value());
  EXPECT_FALSE(FindString(j, "zz", "c")->has_value());
  EXPECT_EQ(*FindObject(j, "a", "c"), nullptr);
  const auto strict = FindString(j, "a", "c", NullIs::kWrongType);
  ASSERT_FALSE(strict.ok());
  EXPECT_TRUE(Contains(strict.status().message(), "key 'a' is null, expected a string"));
  EXPECT_FALSE(FindString(j, "zz", "c", NullIs::kWrongType)->has_value());  // missing: still absent
  EXPECT_EQ(GetInt(j, "zz", "c").status().code(), StatusCode::kNotFound);
}

TEST(TypedReader, IntegersAreBoundedNeverWrapped) {
  const json j = json::parse(R"({"max": 18446744073709551615, "big": 9223372036854775808, "ok": 9223372036854775807,
                                 "neg": -5, "f": 4096.0, "huge_f": 1e19})");
  for (const char* key : {"max", "big", "huge_f"}) {
    const auto r = GetInt(j, key, "c");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_FALSE(Contains(r.status().message(), "is -")) << r.status().message();
  }
  EXPECT_TRUE(Contains(GetInt(j, "max", "c").status().message(), "is 18446744073709551615"));
  EXPECT_EQ(*GetInt(j, "ok", "c"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*GetInt(j, "f", "c"), 4096);
  const auto neg = GetInt(j, "neg", "c", 0);
  ASSERT_FALSE(neg.ok());
  EXPECT_TRUE(Contains(neg.status().message(), "key 'neg' is -5, expected an integer >= 0"));
  EXPECT_FALSE(GetInt(j, "ok", "c", 0, 100).ok());
  const auto list = GetIntList(json::parse(R"({"l": [1, 18446744073709551615]})"), "l", "c");
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(Contains(list.status().message(), "key 'l[1]' is 18446744073709551615"));
}

TEST(TypedReader, Float32KeysRefuseWhatFloat32CannotHold) {
  const json j = json::parse(R"({"big": 1e39, "tiny": 1e-46, "zero": 0, "ok": 3e38, "neg": -1e300, "d": 1e300})");
  for (const char* key : {"big", "tiny", "neg"}) {
    const auto r = GetNumber(j, key, "c", Precision::kFloat32);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_TRUE(Contains(r.status().message(), "outside float32")) << r.status().message();
  }
  EXPECT_EQ(*GetNumber(j, "zero", "c", Precision::kFloat32), 0.0);
  EXPECT_EQ(*GetNumber(j, "ok", "c", Precision::kFloat32), 3e38);
  EXPECT_EQ(*GetNumber(j, "d", "c"), 1e300);  // float64 keys keep their range
  EXPECT_FALSE(GetNumberList(json::parse(R"({"l": [1, 1e39]})"), "l", "c", Precision::kFloat32).ok());
}

// ---------- the typed reader through the readers ----------

constexpr const char* kHead = R"("hidden_size": 16, "num_attention_heads": 2, "rope_theta": 10000.0)";

TEST(TypedReader, NonStringModelTypeIsRefusedNotHalfPairing) {
  for (const char* v : {R"(["gptj"])", "5", "null", R"({"gptj": 1})", "true"}) {
    const auto s = ParseHfConfig(fmt::format(R"({{"model_type": {}, {}}})", v, kHead), "m.json");
    ASSERT_FALSE(s.ok()) << v;
    EXPECT_TRUE(Contains(s.status().message(), "key 'model_type' is")) << s.status().message();
    EXPECT_TRUE(Contains(s.status().message(), "expected a string")) << s.status().message();
  }
  EXPECT_TRUE(ParseHfConfig(fmt::format(R"({{"model_type": "llama", {}}})", kHead), "m.json").ok());
}

TEST(TypedReader, ChatGlmFlagAndDbrxAttnConfigOfTheWrongTypeAreRefused) {
  for (const char* v : {R"("true")", R"("false")", "[1]", R"({"a": 1})"}) {
    const auto s = ParseHfConfig(
        fmt::format(R"({{"model_type": "chatglm", "hidden_size": 16, "num_attention_heads": 2, "kv_channels": 8,
                        "seq_length": 64, "position_encoding_2d": {}}})",
                    v),
        "glm.json");
    ASSERT_FALSE(s.ok()) << v;
    EXPECT_TRUE(Contains(s.status().message(), "key 'position_encoding_2d' is")) << s.status().message();
  }
  for (const char* v : {R"("{\"rope_theta\": 500000}")", "[1]", "7"}) {
    const auto s = ParseHfConfig(
        fmt::format(R"({{"model_type": "dbrx", "d_model": 16, "n_heads": 2, "max_seq_len": 64, "attn_config": {}}})", v),
        "dbrx.json");
    ASSERT_FALSE(s.ok()) << v;
    EXPECT_TRUE(Contains(s.status().message(), "key 'attn_config' is")) << s.status().message();
    EXPECT_TRUE(Contains(s.status().message(), "expected an object")) << s.status().message();
  }
}

TEST(TypedReader, VisionConfigOfTheWrongTypeIsRefused) {
  for (const char* v : {"[1, 2]", R"("vision")", "3"}) {
    const auto r = ParseHfVision2dConfig(fmt::format(R"({{"vision_config": {}, "hidden_size": 16, "num_heads": 2}})", v),
                                         Vision2dVariant::kPixtral, "v.json");
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_TRUE(Contains(r.status().message(), "key 'vision_config' is")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), "expected an object")) << r.status().message();
  }
  EXPECT_TRUE(ParseHfVision2dConfig(R"({"vision_config": {"hidden_size": 16, "num_heads": 2}})",
                                    Vision2dVariant::kPixtral, "v.json")
                  .ok());
}

TEST(TypedReader, GgmlKeysAreFloat32AndExtFactorMustNotCancel) {
  const std::string base = R"({"n_dims": 8, "mode": 0, "freq_base": 10000.0, "n_ctx_orig": 4096, )";
  for (const char* v : {"1e20", "1e37", "3.4e38", "5000"}) {
    const auto r = RopeConfigFromGgmlParams(base + R"("ext_factor": )" + v + "}", 8, "g.json");
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_TRUE(Contains(r.status().message(), "ext_factor")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), "cancels pair")) << r.status().message();
  }
  for (const char* v : {"1e39", "1e100", "1e308"}) {
    const auto r = RopeConfigFromGgmlParams(base + R"("ext_factor": )" + v + "}", 8, "g.json");
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_TRUE(Contains(r.status().message(), "outside float32")) << r.status().message();
  }
  for (const char* v : {"0", "0.5", "1", "2"})
    EXPECT_TRUE(RopeConfigFromGgmlParams(base + R"("ext_factor": )" + v + "}", 8, "g.json").ok()) << v;
  // Every float key of ggml_rope_ext, not only the attention ones.
  for (const char* kv : {R"("freq_scale": 1e-46)", R"("beta_fast": 1e39)", R"("attn_factor": -1e300)"}) {
    const auto r = RopeConfigFromGgmlParams(base + kv + "}", 8, "g.json");
    ASSERT_FALSE(r.ok()) << kv;
    EXPECT_TRUE(Contains(r.status().message(), "float32")) << r.status().message();
  }
  const auto fb = RopeConfigFromGgmlParams(R"({"n_dims": 8, "mode": 0, "freq_base": 1e39})", 8, "g.json");
  ASSERT_FALSE(fb.ok());
  EXPECT_TRUE(Contains(fb.status().message(), "'freq_base'"));
  // A programmatic ggml config is held to the same bound.
  RopeConfig rc;
  rc.layout = RotaryLayout{RopePairing::kInterleaved, 8, 0, 8};
  rc.base = 10000;
  rc.scaling.type = RopeScalingType::kGgml;
  rc.scaling.beta_slow = 1e39;
  EXPECT_FALSE(ValidateRopeConfig(rc).ok());
}

TEST(TypedReader, QueryTemperatureKeysOutsideFloat32AreRefused) {
  for (auto [floor, scale] : {std::pair{1e39, 0.1}, std::pair{1e-40, 0.1}, std::pair{8192.0, 1e39},
                              std::pair{8192.0, 1e37}, std::pair{8192.0, -1e300}}) {
    const Status st = ValidateAttnTemperature(AttnTemperature{true, floor, scale});
    ASSERT_FALSE(st.ok()) << floor << " " << scale;
    EXPECT_TRUE(Contains(st.message(), "float32")) << st.message();
  }
  EXPECT_TRUE(ValidateAttnTemperature(AttnTemperature{true, 8192.0, 0.1}).ok());
  // What passes gives finite scales at the largest position.
  const AttnTemperature edge{true, 1e-20, 1e36};
  ASSERT_TRUE(ValidateAttnTemperature(edge).ok());
  const std::vector<int64_t> positions = {0, (int64_t{1} << 31) - 1};
  const auto scales = AttnTemperatureScales(edge, positions);
  ASSERT_TRUE(scales.ok());
  for (float v : *scales) EXPECT_TRUE(std::isfinite(v));
  const auto cfg = ParseHfConfig(R"({"model_type": "llama4_text", "hidden_size": 16, "num_attention_heads": 2,
      "num_hidden_layers": 4, "rope_theta": 500000.0, "attn_scale": 1e39})",
                                 "l4.json");
  ASSERT_FALSE(cfg.ok());
  EXPECT_TRUE(Contains(cfg.status().message(), "l4.json")) << cfg.status().message();
  EXPECT_TRUE(Contains(cfg.status().message(), "attn_scale")) << cfg.status().message();
}

TEST(TypedReader, LengthsOf2To63Minus1DoNotOverflow) {
  RopeConfig rc;
  rc.layout = RotaryLayout{RopePairing::kHalf, 8, 0, 8};
  rc.base = 10000;
  rc.max_position_embeddings = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(ValidateRopeConfig(rc).ok());
  rc.scaling.type = RopeScalingType::kLinear;
  rc.scaling.factor = 2;
  rc.scaling.original_max_position_embeddings = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(ComputeRopeFrequencies(rc, std::numeric_limits<int64_t>::max()).ok());
  // Qwen's seq_length (dynamic NTK past it) and max_position_embeddings at 2^63-1: no overflow; the
  // frequencies at the longest length are computed or refused, never from a wrapped length.
  const auto qwen = ParseHfConfig(R"({"model_type": "qwen", "hidden_size": 16, "num_attention_heads": 2,
      "kv_channels": 8, "rotary_emb_base": 10000, "use_dynamic_ntk": true, "seq_length": 9223372036854775807,
      "max_position_embeddings": 9223372036854775807})",
                                  "qwen.json");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_EQ(qwen->rope.scaling.original_max_position_embeddings, std::numeric_limits<int64_t>::max());
  const auto f = ComputeRopeFrequencies(qwen->rope, std::numeric_limits<int64_t>::max());
  if (f.ok()) {
    for (double w : f->inv_freq) EXPECT_TRUE(std::isfinite(w) && w > 0);
  }
  const auto short_qwen = ParseHfConfig(R"({"model_type": "qwen", "hidden_size": 16, "num_attention_heads": 2,
      "kv_channels": 8, "rotary_emb_base": 10000, "use_dynamic_ntk": true, "seq_length": 2048,
      "max_position_embeddings": 9223372036854775807})",
                                        "qwen.json");
  ASSERT_TRUE(short_qwen.ok()) << short_qwen.status().message();
  const auto g = ComputeRopeFrequencies(short_qwen->rope, std::numeric_limits<int64_t>::max());
  if (g.ok()) {
    for (double w : g->inv_freq) EXPECT_TRUE(std::isfinite(w) && w >= 0);
  }
}

class GoldenCaseFile : public testing::TempFolderTest {};

// A golden case's sequence length from positions: max + 1 saturates; a field of the wrong type is
// refused at load naming it.
TEST_F(GoldenCaseFile, SeqLenSaturatesAndLoadNamesBadFields) {
  Write("case.json", R"({"scheme": "rope", "files": {}})");
  auto c = golden::GoldenCase::Load(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::vector<int64_t> positions = {0, std::numeric_limits<int64_t>::max(), 5};
  EXPECT_EQ(c->SeqLen(positions), std::numeric_limits<int64_t>::max());
  const std::vector<int64_t> small = {0, 4, 2};
  EXPECT_EQ(c->SeqLen(small), 5);
  Write("case.json", R"({"scheme": "rope", "seq_len": "long", "files": {}})");
  const auto bad = golden::GoldenCase::Load(dir_.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "field 'seq_len' is \"long\", expected an integer"))
      << bad.status().message();
  Write("case.json", R"({"scheme": "rope", "files": {}, "tolerance": {"expected": {"atol": 1e-6, "nan_at": [3]}}})");
  const auto tol = golden::GoldenCase::Load(dir_.string());
  ASSERT_TRUE(tol.ok());
  EXPECT_EQ(tol->Tol("expected").nan_at, std::vector<int64_t>{3});
  EXPECT_EQ(tol->Tol("expected").atol, 1e-6);
}

// ---------- the one message builder ----------

TEST(MessageBuilder, EveryStatusIsOneLineOfAtMost1KB) {
  const std::string raw = "config x: key 'k' is '" + std::string(5000, 'v') + "\n\x1b[2J" + "' must be positive";
  const Status st = InvalidArgumentError(raw);
  EXPECT_LE(st.message().size(), kMaxMessageBytes);
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  for (char c : st.message()) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f);
  EXPECT_EQ(st.message().rfind("config x: key 'k' is", 0), 0u);  // the head kept
  EXPECT_TRUE(Contains(st.message(), "must be positive"));      // and the rule at the tail
  EXPECT_TRUE(Contains(st.message(), "bytes in all"));
  EXPECT_TRUE(Contains(st.message(), "\\n\\x1b[2J"));
  // Context added to a capped message is capped again.
  const Status ctx = st.WithContext(std::string(2000, 'c'));
  EXPECT_LE(ctx.message().size(), kMaxMessageBytes);
  EXPECT_TRUE(Contains(ctx.message(), "must be positive"));
}

TEST(MessageBuilder, CleanTextIsKeptAndEscapesAreNotDoubled) {
  EXPECT_EQ(OneLineMessage("plain text, 'quoted\\n' already"), "plain text, 'quoted\\n' already");
  EXPECT_EQ(OneLineMessage("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(OneLineMessage("a\nb\xff"), "a\\nb\\xff");
  EXPECT_EQ(OneLineMessage("\xe2\x80\xae"
                           "rtl"),
            "\\u{202e}rtl");
  // A cut never splits a UTF-8 sequence.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "\xe4\xb8\xad";
  const std::string cut = OneLineMessage(many);
  EXPECT_LE(cut.size(), kMaxMessageBytes);
  EXPECT_TRUE(IsValidUtf8(cut));
}

TEST(MessageBuilder, KeyValueMessageQuotesAndCapsTheValue) {
  const std::string m = KeyValueMessage("config c.json", "model_type", std::string(100000, 'm') + "\n", "expected a family");
  EXPECT_EQ(m.rfind("config c.json: key 'model_type' is 'mmm", 0), 0u) << m;
  EXPECT_TRUE(Contains(m, "(100001 bytes in all)")) << m;
  EXPECT_TRUE(Contains(m, ", expected a family")) << m;
  EXPECT_LT(m.size(), 400u);
  EXPECT_EQ(KeyShownMessage("", "n", "5", "must be even"), "key 'n' is 5, must be even");
}

// ---------- threads ----------

TEST(Threads, ThreadCountTextIsStrict) {
  EXPECT_EQ(*ParseThreadCount("4", "POSENC_NUM_THREADS"), 4);
  EXPECT_EQ(*ParseThreadCount("1024", "POSENC_NUM_THREADS"), kMaxThreads);
  for (const char* bad : {"", "0", "1025", "1000000", "-1", "+4", " 4", "4 ", "4x", "0x10", "1e3", "99999999999999999999",
                          "\n"}) {
    const auto r = ParseThreadCount(bad, "environment variable POSENC_NUM_THREADS");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(Contains(r.status().message(), "environment variable POSENC_NUM_THREADS is '")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), "[1, 1024]")) << r.status().message();
  }
}

TEST(Threads, BadEnvironmentValueWarnsOnceAndUsesTheCpuCount) {
  const int hardware = static_cast<int>(std::max(1u, std::min(std::thread::hardware_concurrency(), 1024u)));
  const char* old = std::getenv("POSENC_NUM_THREADS");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("POSENC_NUM_THREADS", "3", 1);
  EXPECT_EQ(DefaultThreadCount(), 3);
  ::setenv("POSENC_NUM_THREADS", "1000x", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(DefaultThreadCount(), hardware);
  EXPECT_EQ(DefaultThreadCount(), hardware);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(Contains(err, "posenc: warning: environment variable POSENC_NUM_THREADS is '1000x'")) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  ::setenv("POSENC_NUM_THREADS", "2000", 1);
  EXPECT_EQ(DefaultThreadCount(), hardware);
  if (old != nullptr)
    ::setenv("POSENC_NUM_THREADS", saved.c_str(), 1);
  else
    ::unsetenv("POSENC_NUM_THREADS");
  EXPECT_FALSE(ThreadPool::Create(0).ok());
  EXPECT_FALSE(ThreadPool::Create(kMaxThreads + 1).ok());
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The process's address space now (bytes), from /proc/self/statm.
uint64_t AddressSpaceBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t pages = 0;
  f >> pages;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// A pool asked for 300 threads where the address space has room for a few thread stacks: it runs
// with what started (no deadlock: the child is killed by alarm() if it hangs), computes correctly,
// shuts down; Create refuses, leaving no thread running.
TEST(Threads, PoolStartsWhatItCanWhenTheOsRefusesThreads) {
  if (kSanitized) GTEST_SKIP() << "an address-space cap does not apply under a sanitizer's shadow memory";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(30);
    const uint64_t cap = AddressSpaceBytes() + (uint64_t{48} << 20);
    struct rlimit as {
      cap, cap
    };
    if (::setrlimit(RLIMIT_AS, &as) != 0) ::_exit(10);
    int code = 0;
    {
      ThreadPool pool(300);
      if (!(pool.num_threads() >= 1 && pool.num_threads() < 300)) code = 11;
      if (pool.start_error().find("thread pool: started ") != 0) code = 12;
      std::atomic<int64_t> sum{0};
      for (int rep = 0; rep < 20 && code == 0; ++rep) {
        sum = 0;
        pool.For(1000, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sum += i;
        });
        if (sum != 999 * 1000 / 2) code = 13;
      }
    }
    auto refused = ThreadPool::Create(300);
    if (refused.ok()) code = 14;
    if (!refused.ok() && refused.status().message().find("refused") == std::string::npos) code = 15;
    // Nothing held: a pool that fits starts in full afterwards.
    auto small = ThreadPool::Create(2);
    if (!small.ok() || (*small)->num_threads() != 2) code = 16;
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << " (14 = SIGALRM: a hang)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// ---------- golden comparisons ----------

TEST(GoldenCompare, NanFailsUnlessTheCaseExpectsIt) {
  const double nan = std::nan("");
  const std::vector<double> want = {1.0, nan, 3.0};
  const std::vector<double> same_nan = {1.0, nan, 3.0};
  const Status plain = golden::Compare("expected", same_nan, want, golden::Tolerance{0, 1e-6, {}});
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(Contains(plain.message(), "NaN where the case does not expect it")) << plain.message();
  EXPECT_TRUE(Contains(plain.message(), "flat index 1")) << plain.message();
  EXPECT_TRUE(golden::Compare("expected", same_nan, want, golden::Tolerance{0, 1e-6, {1}}).ok());
  const std::vector<double> got_finite = {1.0, 2.0, 3.0};
  EXPECT_FALSE(golden::Compare("expected", got_finite, want, golden::Tolerance{0, 1e-6, {1}}).ok());
  const std::vector<double> want_finite = {1.0, 2.0, 3.0};
  const std::vector<double> got_nan = {1.0, nan, 3.0};
  EXPECT_FALSE(golden::Compare("expected", got_nan, want_finite, golden::Tolerance{0, 1e-6, {}}).ok());
  EXPECT_FALSE(golden::Compare("expected", want_finite, want_finite, golden::Tolerance{0, 0, {1}}).ok());
  EXPECT_FALSE(golden::Compare("expected", want_finite, want_finite, golden::Tolerance{0, 0, {7}}).ok());
  EXPECT_TRUE(golden::Compare("expected", want_finite, want_finite, golden::Tolerance{0, 0, {}}).ok());
}

TEST(GoldenCompare, FieldsOfTheWrongTypeAreNamed) {
  const auto check = [](const char* text) {
    return golden::CheckFieldTypes(json::parse(text), "c/case.json");
  };
  EXPECT_TRUE(check(R"({"files": {"expected": "e.npy"}, "seq_len": 5, "scheme": "rope"})").ok());
  for (auto [text, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"files": {}, "seq_len": "5"})", "'seq_len'"},
           {R"({"files": {}, "seq_len": -1})", "'seq_len'"},
           {R"({"files": {}, "seq_len": 18446744073709551615})", "'seq_len'"},
           {R"({"files": {}, "scheme": 3})", "'scheme'"},
           {R"({"files": {"expected": 1}})", "'files.expected'"},
           {R"({"files": {}, "tolerance": {"expected": {"atol": "0.1"}}})", "'tolerance.expected.atol'"},
           {R"({"files": {}, "tolerance": {"expected": {"nan_at": [1, -2]}}})", "'tolerance.expected.nan_at'"},
           {R"({"files": {}, "config": {"attn_config": "x"}})", "'config.attn_config'"},
           {R"({"files": {}, "sections": [1, "2"]})", "'sections'"}}) {
    const Status st = check(text);
    ASSERT_FALSE(st.ok()) << text;
    EXPECT_TRUE(Contains(st.message(), "c/case.json: field " + std::string(field))) << st.message();
  }
}

}  // namespace
}  // namespace posenc
