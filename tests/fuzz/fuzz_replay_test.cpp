// Replays the seed corpus (tests/fuzz/corpus/<reader>/) and seeded random mutations of it through
// each reader's fuzz entry point (fuzz_parsers.hpp), so builds without libFuzzer (g++) still run
// every parser on hostile bytes; CI runs this under ASan/UBSan (POSENC_SANITIZE=ON), where a read
// outside the file is a crash. Every seed must parse; every rejection must be a clean error naming
// the file; a reader contradicting itself (kInternal) fails the test.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_parsers.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;

using Parser = std::function<Status(std::span<const std::byte>)>;

struct Reader {
  const char* name;
  const char* file_name;  // what the entry point calls the bytes in messages
  Parser parse;
};

const Reader kReaders[] = {
    {"npy", "fuzz.npy", fuzz::FuzzNpy},
    {"gguf", "fuzz.gguf", fuzz::FuzzGguf},
    {"safetensors", "fuzz.safetensors", fuzz::FuzzSafetensors},
    {"llama2c", "fuzz.bin", fuzz::FuzzLlama2c},
    {"config", "fuzz.json", fuzz::FuzzConfig},
    {"convert", "fuzz.model", fuzz::FuzzConvert},
};

// The files of tests/fuzz/<folder>/<reader>/, sorted (none when the folder does not exist).
std::vector<fs::path> InputFiles(const std::string& folder, const std::string& reader) {
  const fs::path dir = fs::path(POSENC_SOURCE_DIR) / "tests" / "fuzz" / folder / reader;
  std::vector<fs::path> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadBytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<std::string> LoadCorpus(const std::string& reader) {
  std::vector<std::string> out;
  for (const fs::path& p : InputFiles("corpus", reader)) out.push_back(ReadBytes(p));
  return out;
}

// One random edit of the kinds that break readers: bit flips, boundary bytes, 8-byte fields set to
// huge or small values (counts, lengths, offsets), truncation, insertion, deletion, splicing.
std::string Mutate(const std::string& in, const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  std::string s = in;
  const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int e = 0; e < edits; ++e) {
    auto pos = [&] { return s.empty() ? size_t{0} : std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng); };
    switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
      case 0:
        if (!s.empty()) s[pos()] ^= static_cast<char>(1 << std::uniform_int_distribution<int>(0, 7)(rng));
        break;
      case 1: {
        static const char kBytes[] = {0, 1, 0x7f, static_cast<char>(0x80), static_cast<char>(0xff), '{', '"', ','};
        if (!s.empty()) s[pos()] = kBytes[std::uniform_int_distribution<int>(0, 7)(rng)];
        break;
      }
      case 2: {
        static const uint64_t kValues[] = {
            0, 1, 0xffffffffffffffffull, 0x7fffffffffffffffull, 1ull << 32, 1ull << 62, 0x80000000ull, 31, 33};
        if (s.size() >= 8) {
          const size_t p = std::uniform_int_distribution<size_t>(0, s.size() - 8)(rng);
          const uint64_t v = kValues[std::uniform_int_distribution<int>(0, 8)(rng)];
          std::memcpy(s.data() + p, &v, std::uniform_int_distribution<int>(0, 1)(rng) ? 8 : 4);
        }
        break;
      }
      case 3: s.resize(pos()); break;
      case 4: s.insert(pos(), std::string(std::uniform_int_distribution<size_t>(1, 16)(rng), '\0')); break;
      case 5:
        if (!s.empty()) {
          const size_t p = pos();
          s.erase(p, std::uniform_int_distribution<size_t>(1, 16)(rng));
        }
        break;
      case 6: {
        const std::string& other = corpus[std::uniform_int_distribution<size_t>(0, corpus.size() - 1)(rng)];
        const size_t cut = pos(),
                     from = other.empty() ? 0 : std::uniform_int_distribution<size_t>(0, other.size() - 1)(rng);
        s = s.substr(0, cut) + other.substr(from);
        break;
      }
      default:
        if (!s.empty()) s[pos()] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
        break;
    }
  }
  return s;
}

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

class FuzzReplay : public ::testing::TestWithParam<Reader> {};

TEST_P(FuzzReplay, CorpusParsesAndMutationsFailCleanly) {
  const Reader& r = GetParam();
  const std::vector<std::string> corpus = LoadCorpus(r.name);
  ASSERT_GE(corpus.size(), 2u) << "seed corpus for " << r.name << " is missing";
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Status s = r.parse(Bytes(corpus[i]));
    EXPECT_TRUE(s.ok()) << r.name << " seed " << i << ": " << s.ToString();
  }
  const uint64_t seed = 20240601;
  auto rng = ::posenc::testing::MakeRng(seed);
  SCOPED_TRACE(::testing::Message() << r.name << " mutation seed " << seed);
  const int kMutationsPerSeed = 5000;
  int accepted = 0, rejected = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    for (int m = 0; m < kMutationsPerSeed; ++m) {
      const std::string bytes = Mutate(corpus[i], corpus, rng);
      const Status s = r.parse(Bytes(bytes));
      ASSERT_NE(s.code(), StatusCode::kInternal) << "seed " << i << " mutation " << m << ": " << s.message();
      if (s.ok()) {
        ++accepted;
        continue;
      }
      ++rejected;
      ASSERT_FALSE(s.message().empty());
      ASSERT_NE(s.message().find(r.file_name), std::string::npos)
          << "seed " << i << " mutation " << m << ": error does not name the file: " << s.message();
    }
  }
  std::printf("%s: %d mutations accepted, %d rejected\n", r.name, accepted, rejected);
  EXPECT_GT(rejected, 0);  // the mutator does break files (else this test proves nothing)
}

// Inputs a fuzzer once found to crash a reader or make it contradict itself
// (tests/fuzz/regressions/<reader>/, named after the fault): each must now fail cleanly or parse.
// One test over every reader's folder, so a reader with no regressions yet is not a skipped case.
TEST(FuzzReplayRegressions, FailCleanly) {
  const fs::path root = fs::path(POSENC_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  ASSERT_TRUE(fs::is_directory(root)) << root << " is missing";
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string folder = e.path().filename().string();
    const bool known =
        std::any_of(std::begin(kReaders), std::end(kReaders), [&](const Reader& r) { return folder == r.name; });
    EXPECT_TRUE(known) << e.path() << " names no reader";
  }
  size_t replayed = 0;
  for (const Reader& r : kReaders) {
    for (const fs::path& p : InputFiles("regressions", r.name)) {
      const Status s = r.parse(Bytes(ReadBytes(p)));
      EXPECT_NE(s.code(), StatusCode::kInternal) << r.name << "/" << p.filename() << ": " << s.message();
      if (!s.ok()) {
        EXPECT_NE(s.message().find(r.file_name), std::string::npos) << p.filename() << ": " << s.message();
      }
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u) << "no regression inputs under " << root;
}

// Where the number literals of a JSON text are (offset, length): a run of -digits.digits e+-digits not
// glued to a word (the 2 of "Qwen2" is not a number).
std::vector<std::pair<size_t, size_t>> NumberLiterals(const std::string& t) {
  auto digit = [&](size_t i) { return i < t.size() && t[i] >= '0' && t[i] <= '9'; };
  auto digits = [&](size_t i) {
    while (digit(i)) ++i;
    return i;
  };
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < t.size(); ++i) {
    const bool starts = digit(i) || (t[i] == '-' && digit(i + 1));
    const bool glued = i > 0 && (std::isalnum(static_cast<unsigned char>(t[i - 1])) || t[i - 1] == '_' ||
                                 t[i - 1] == '.' || t[i - 1] == '-');
    if (!starts || glued) continue;
    size_t e = digits(t[i] == '-' ? i + 1 : i);
    if (e < t.size() && t[e] == '.' && digit(e + 1)) e = digits(e + 1);
    if (e < t.size() && (t[e] == 'e' || t[e] == 'E')) {
      size_t x = e + 1;
      if (x < t.size() && (t[x] == '+' || t[x] == '-')) ++x;
      if (digit(x)) e = digits(x);
    }
    out.emplace_back(i, e - i);
    i = e;
  }
  return out;
}

// Every number in the config corpus, one at a time, set to each edge a JSON text can spell: zero,
// negatives, just past int32, products that overflow int64 (a context of 2^62 overflowed the
// frequency check's 4x context once), int64's ends, past float64, subnormal. Byte mutations rarely
// write a whole decimal literal, so this class gets its own sweep (run under UBSan in .ci/run).
TEST(FuzzReplayConfigNumbers, EdgeValuesFailCleanly) {
  static const char* const kEdges[] = {"0",          "-1",   "-0",     "2147483648",          "4294967296",
                                       "4611686018427387904", "9223372036854775807", "-9223372036854775808",
                                       "18446744073709551616", "1e308", "-1e308", "1e-320", "0.5"};
  size_t replaced = 0;
  for (const std::string& text : LoadCorpus("config")) {
    for (const auto& [at, len] : NumberLiterals(text)) {
      for (const char* edge : kEdges) {
        const std::string edited = text.substr(0, at) + edge + text.substr(at + len);
        const Status s = fuzz::FuzzConfig(Bytes(edited));
        ASSERT_NE(s.code(), StatusCode::kInternal) << edited << "\n" << s.message();
        if (!s.ok()) {
          ASSERT_NE(s.message().find("fuzz.json"), std::string::npos) << s.message();
        }
        ++replaced;
      }
    }
  }
  EXPECT_GT(replaced, 1000u);  // the corpus has numbers to edit (else this sweep proves nothing)
}

INSTANTIATE_TEST_SUITE_P(Readers, FuzzReplay, ::testing::ValuesIn(kReaders),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

}  // namespace
}  // namespace posenc
