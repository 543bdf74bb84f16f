// The hostile corpus (tests/hostile/corpus, written by make_corpus.py; cases.json lists the commands)
// through the posenc CLI, each in a child with a memory cap (1 GiB of address space; under ASan, which
// reserves terabytes, its hard_rss_limit_mb=1024 instead) and a 60 s timeout: every case must end in
// exit 2 with one line on stderr naming the file and the key/value at fault — no crash, no abort, no
// hang, no runaway allocation. Special files (a directory, a FIFO, a link to /dev/zero) and a failed
// write cannot be committed: the cases at the end make them.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

constexpr int kTimeoutSeconds = 60;
constexpr rlim_t kMemoryCap = rlim_t{1} << 30;

struct Outcome {
  bool exited = false;
  int code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string err;
};

// Runs posenc with `args` in a child: stdout to /dev/null, stderr captured, memory and time capped.
// `file_size_cap` > 0 also sets RLIMIT_FSIZE (SIGXFSZ ignored: writes fail with EFBIG, as on a full disk).
Outcome RunCapped(const std::vector<std::string>& args, rlim_t file_size_cap = 0) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    ::dup2(pipefd[1], 2);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    if (kAsan) {
      std::string opts = "hard_rss_limit_mb=1024:detect_leaks=0";
      if (const char* old = std::getenv("ASAN_OPTIONS"); old != nullptr && *old) opts = std::string(old) + ":" + opts;
      ::setenv("ASAN_OPTIONS", opts.c_str(), 1);
    } else {
      struct rlimit as {
        kMemoryCap, kMemoryCap
      };
      ::setrlimit(RLIMIT_AS, &as);
    }
    struct rlimit cpu {
      kTimeoutSeconds, kTimeoutSeconds + 5
    };
    ::setrlimit(RLIMIT_CPU, &cpu);
    if (file_size_cap > 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      struct rlimit fsz {
        file_size_cap, file_size_cap
      };
      ::setrlimit(RLIMIT_FSIZE, &fsz);
    }
    std::vector<char*> argv;
    std::string cli = testing::CliPath();
    argv.push_back(cli.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(cli.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutSeconds);
  char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      o.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    struct pollfd p {
      pipefd[0], POLLIN, 0
    };
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(pipefd[0], buf, sizeof(buf));
    if (n <= 0) break;  // EOF: the child closed stderr (exited)
    if (o.err.size() < (1u << 20)) o.err.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  o.exited = WIFEXITED(status);
  o.code = o.exited ? WEXITSTATUS(status) : -1;
  o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return o;
}

std::string Shown(const std::string& s) { return s.size() > 2000 ? s.substr(0, 2000) + "..." : s; }

// Exit 2, exactly one line on stderr, "error" in it, and every needle.
void ExpectOneLineExit2(const Outcome& o, const std::vector<std::string>& needles, const std::string& label) {
  EXPECT_FALSE(o.timed_out) << label << ": no exit within " << kTimeoutSeconds << " s";
  EXPECT_TRUE(o.exited) << label << ": killed by signal " << o.signal << ": " << Shown(o.err);
  EXPECT_EQ(o.code, 2) << label << ": " << Shown(o.err);
  // The error is one line, the last; a command may print progress lines before it (embed does).
  EXPECT_TRUE(!o.err.empty() && o.err.back() == '\n') << label << ": " << Shown(o.err);
  const size_t start = o.err.size() < 2 ? 0 : o.err.rfind('\n', o.err.size() - 2);
  const std::string last = start == std::string::npos ? o.err : o.err.substr(start + 1);
  EXPECT_NE(last.find(": error: "), std::string::npos) << label << ": the last line is not the error: " << Shown(o.err);
  size_t error_lines = 0;
  std::istringstream lines(o.err);
  for (std::string line; std::getline(lines, line);) error_lines += line.find(": error: ") != std::string::npos;
  EXPECT_EQ(error_lines, 1u) << label << ": " << Shown(o.err);
  EXPECT_LT(o.err.size(), 5000u) << label;
  // One message builder (issue 32): the error line is at most 1 KiB of message after its
  // "posenc <command>: error: " prefix, however long the value it quotes.
  EXPECT_LE(last.size(), 1100u) << label << ": " << Shown(last);
  for (char c : o.err) {
    if (c == '\n') continue;
    ASSERT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << label << ": control byte in " << Shown(o.err);
  }
  for (const std::string& n : needles) {
    EXPECT_NE(last.find(n), std::string::npos) << label << ": missing '" << n << "' in: " << Shown(o.err);
  }
}

std::string HostileDir() { return std::string(POSENC_SOURCE_DIR) + "/tests/hostile"; }

class Hostile : public testing::TempFolderTest {};

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

TEST_F(Hostile, EveryCorpusCaseIsOneLineAndExit2) {
  std::ifstream f(HostileDir() + "/cases.json");
  ASSERT_TRUE(f) << HostileDir() << "/cases.json (run tests/hostile/make_corpus.py)";
  const nlohmann::json cases = nlohmann::json::parse(f);
  ASSERT_GE(cases.size(), 25u);
  // The commands run on a copy of the corpus; after each, every file of it must be as it was (no
  // command writes over its own input, even when a refusal fails).
  const fs::path original = HostileDir() + "/corpus";
  const fs::path corpus = dir_ / "corpus";
  fs::copy(original, corpus);
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    const std::string file = (corpus / c.value("file", name)).string();
    ASSERT_TRUE(fs::exists(file)) << file;
    const fs::path case_dir = dir_ / name;
    fs::create_directories(case_dir);
    std::vector<std::string> args;
    for (const auto& a : c["args"]) {
      std::string s = a.get<std::string>();
      s = Replace(s, "{F}", file);
      s = Replace(s, "{C}", corpus.string());
      s = Replace(s, "{OUT}", (case_dir / "out").string());
      s = Replace(s, "{DIR}", case_dir.string());
      args.push_back(s);
    }
    std::vector<std::string> needles;
    for (const auto& e : c["expect"]) needles.push_back(e.get<std::string>());
    const auto t0 = std::chrono::steady_clock::now();
    const Outcome o = RunCapped(args);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ExpectOneLineExit2(o, needles, name);
    // Nothing was written for a refused command.
    EXPECT_FALSE(fs::exists(case_dir / "out")) << name << " left an output";
    EXPECT_LT(s, kTimeoutSeconds) << name;
    for (const auto& e : fs::directory_iterator(original)) {
      EXPECT_EQ(slurp(corpus / e.path().filename()), slurp(e.path())) << name << " changed " << e.path().filename();
    }
  }
}

// A .npy of `shape` (little-endian, C order) holding `data` as given.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ').push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>(h.size() >> 8));
  return out + h + data;
}

// Issue 32: POSENC_NUM_THREADS=1000 under the 1 GiB address-space cap. The pool cannot start 1000
// threads there (each stack holds 8 MiB of address space): it must neither hang nor leave the work
// without memory, and the answer is the one 2 threads give, bit for bit. A bad value is one warning
// naming the variable, and the answer is the same.
TEST_F(Hostile, ThreadCountPastWhatTheOsGives) {
  constexpr int kTokens = 4096, kHeads = 4, kDim = 64;  // 4 MiB: the kernels take the thread pool
  std::string x(static_cast<size_t>(kTokens) * kHeads * kDim * 4, '\0');
  for (size_t i = 0; i < x.size() / 4; ++i) {
    const float v = static_cast<float>(i % 97) * 0.01f - 0.3f;
    std::memcpy(&x[i * 4], &v, 4);
  }
  std::string pos(static_cast<size_t>(kTokens) * 8, '\0');
  for (int64_t i = 0; i < kTokens; ++i) std::memcpy(&pos[static_cast<size_t>(i) * 8], &i, 8);
  Write("x.npy", Npy("<f4", "4096, 4, 64", x));
  Write("pos.npy", Npy("<i8", "4096,", pos));
  Write("cfg.json", R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0})");
  auto run = [&](const char* threads, const std::string& out) {
    ::setenv("POSENC_NUM_THREADS", threads, 1);  // inherited by RunCapped's child
    const Outcome o = RunCapped({"rope", "--config", P("cfg.json"), "--positions", P("pos.npy"), "--input",
                                 P("x.npy"), "--output", out});
    ::unsetenv("POSENC_NUM_THREADS");
    return o;
  };
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const Outcome two = run("2", P("two.npy"));
  ASSERT_TRUE(two.exited && two.code == 0) << two.err;
  for (const char* threads : {"1000", "1024"}) {
    const Outcome many = run(threads, P("many.npy"));
    EXPECT_FALSE(many.timed_out) << threads;
    ASSERT_TRUE(many.exited && many.code == 0) << threads << ": " << Shown(many.err);
    EXPECT_EQ(slurp(P("many.npy")), slurp(P("two.npy"))) << threads;
  }
  const Outcome bad = run("1000x", P("bad.npy"));
  ASSERT_TRUE(bad.exited && bad.code == 0) << Shown(bad.err);
  EXPECT_NE(bad.err.find("posenc: warning: environment variable POSENC_NUM_THREADS is '1000x'"), std::string::npos)
      << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_EQ(slurp(P("bad.npy")), slurp(P("two.npy")));
}

// Given where a file is read, a directory, a FIFO (which must not block) and a link to /dev/zero
// (read until memory ran out) are refused as not regular files, naming the path.
TEST_F(Hostile, SpecialFilesWhereAFileIsRead) {
  const std::string table = HostileDir() + "/corpus/table.npy";
  fs::create_directories(P("dir.npy"));
  ASSERT_EQ(::mkfifo(P("fifo.npy").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", P("zero.npy"));
  for (const auto& [path, kind] : {std::pair{P("dir.npy"), "a directory"}, std::pair{P("fifo.npy"), "a FIFO"},
                                   std::pair{P("zero.npy"), "a character device"}}) {
    ExpectOneLineExit2(RunCapped({"embed", table, "--ids-file", path, "--output", P("out.npy")}),
                       {path, std::string("not a regular file (") + kind + ")"}, path);
    ExpectOneLineExit2(RunCapped({"embed", path, "--ids", "0", "--output", P("out.npy")}), {path}, path + " as model");
    EXPECT_FALSE(fs::exists(P("out.npy")));
  }
}

// Config JSON read by inspect and rope --config (issue 15 items 1 and 3): a link to /dev/zero and a
// FIFO are refused as not regular files; 100,000-deep nesting in rope_theta and in text_config is
// refused before parsing, naming the file and the key, within the memory and time caps.
TEST_F(Hostile, DeepAndSpecialConfigs) {
  const std::string corpus = HostileDir() + "/corpus/";
  fs::create_symlink("/dev/zero", P("zero.json"));
  ASSERT_EQ(::mkfifo(P("fifo.json").c_str(), 0600), 0);
  const std::string head = R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, )";
  constexpr int kDepth = 100000;
  std::ofstream(P("deep_theta.json")) << head << R"("rope_theta": )" << std::string(kDepth, '[')
                                      << std::string(kDepth, ']') << "}";
  {
    std::ofstream tc(P("deep_text_config.json"));
    for (int i = 0; i < kDepth; ++i) tc << R"({"text_config": )";
    tc << R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})" << std::string(kDepth, '}');
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> configs = {
      {P("zero.json"), {P("zero.json"), "not a regular file (a character device)"}},
      {P("fifo.json"), {P("fifo.json"), "not a regular file (a FIFO)"}},
      {P("deep_theta.json"), {P("deep_theta.json"), "nested deeper than 32 levels", "'rope_theta'"}},
      {P("deep_text_config.json"),
       {P("deep_text_config.json"), "nested deeper than 32 levels", "'text_config.text_config"}},
  };
  for (const auto& [path, needles] : configs) {
    ExpectOneLineExit2(RunCapped({"inspect", path}), needles, "inspect " + path);
    ExpectOneLineExit2(RunCapped({"rope", "--config", path, "--positions", corpus + "rope_pos.npy", "--input",
                                  corpus + "rope_x.npy", "--output", P("out.npy")}),
                       needles, "rope --config " + path);
    EXPECT_FALSE(fs::exists(P("out.npy")));
  }
}

// Outputs: a directory in the way, a name over 255 bytes, a symlink loop — one line naming the path
// with errno's text; and a write that fails half way (the file-size limit, as a full disk) leaves the
// existing output byte for byte and no temporary file.
TEST_F(Hostile, FailedWritesLeaveTheOldOutputByteForByte) {
  const std::string table = HostileDir() + "/corpus/table.npy";
  fs::create_directories(P("outdir.npy"));
  ExpectOneLineExit2(RunCapped({"embed", table, "--ids", "0", "--output", P("outdir.npy")}),
                     {P("outdir.npy"), "not a regular file (a directory)"}, "directory as output");
  ExpectOneLineExit2(RunCapped({"embed", table, "--ids", "0", "--output", P(std::string(300, 'n') + ".npy")}),
                     {"File name too long"}, "long output name");
  fs::create_symlink(P("loop2.npy"), P("loop1.npy"));
  fs::create_symlink(P("loop1.npy"), P("loop2.npy"));
  ExpectOneLineExit2(RunCapped({"embed", table, "--ids", "0", "--output", P("loop1.npy")}),
                     {"loop1.npy", "symbolic links"}, "symlink loop as output");

  const std::string old_bytes = "an existing output file that must survive a failed write";
  std::ofstream(P("out.npy"), std::ios::binary) << old_bytes;
  ExpectOneLineExit2(RunCapped({"embed", table, "--ids", "0,1,0,1", "--output", P("out.npy")}, 64),
                     {"out.npy", "File too large", "unchanged"}, "write past the file-size limit");
  std::ifstream in(P("out.npy"), std::ios::binary);
  const std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(now, old_bytes);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string().rfind(".posenc-tmp", 0), std::string::npos) << e.path();
  }
  // The same command without the limit succeeds and replaces the file (the limit was the fault).
  const Outcome ok = RunCapped({"embed", table, "--ids", "0,1,0,1", "--output", P("out.npy")});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(fs::file_size(P("out.npy")), old_bytes.size());
}

}  // namespace
}  // namespace posenc
