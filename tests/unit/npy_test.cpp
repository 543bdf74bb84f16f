// .npy read/write: round trips for every dtype and version, and one test per malformed-file kind.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "posenc/io/npy.hpp"

namespace posenc {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::string Header(int major, const std::string& dict) {
  std::string h("\x93NUMPY", 6);
  h += static_cast<char>(major);
  h += '\0';
  const size_t n = dict.size();
  h += static_cast<char>(n & 0xff);
  h += static_cast<char>((n >> 8) & 0xff);
  if (major >= 2) {
    h += static_cast<char>((n >> 16) & 0xff);
    h += static_cast<char>((n >> 24) & 0xff);
  }
  return h + dict;
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kI8}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {0}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4}}) {
      Array a = Array::Zeros(t, shape).value();
      for (size_t i = 0; i < a.nbytes(); ++i) a.bytes()[i] = static_cast<std::byte>(i * 7 + 3);
      const std::string s = SerializeNpy(a).value();
      EXPECT_EQ((s.size() - a.nbytes()) % 64, 0u) << "header must pad to 64 bytes";
      Result<Array> b = ParseNpy(Bytes(s), "mem");
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(b->dtype(), t);
      EXPECT_EQ(b->shape(), shape);
      ASSERT_EQ(b->nbytes(), a.nbytes());
      EXPECT_EQ(std::memcmp(a.bytes(), b->bytes(), a.nbytes()), 0);
    }
  }
}

TEST(Npy, ReadsVersions2And3) {
  for (int major : {1, 2, 3}) {
    std::string s = Header(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n");
    const float v[2] = {1.5f, -2.0f};
    s.append(reinterpret_cast<const char*>(v), sizeof(v));
    Result<Array> a = ParseNpy(Bytes(s), "v");
    ASSERT_TRUE(a.ok()) << major << ": " << a.status().ToString();
    EXPECT_EQ(a->data<float>()[1], -2.0f);
  }
}

TEST(Npy, BFloat16IsRefusedOnWrite) {
  Array a = Array::Zeros(DType::kBF16, {2}).value();
  Result<std::string> s = SerializeNpy(a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("bfloat16"), std::string::npos);
}

struct BadCase {
  const char* name;
  std::string bytes;
  StatusCode code;
  const char* needle;  // must appear in the message
};

TEST(Npy, RejectsEachMalformedKind) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n";
  const std::string data16(16, '\0');
  const std::vector<BadCase> cases = {
      {"empty", "", StatusCode::kDataLoss, "magic"},
      {"bad magic", "\x93NUMPX\x01\x00\x00\x00", StatusCode::kDataLoss, "magic"},
      {"version 4", Header(4, ok_dict) + data16, StatusCode::kUnimplemented, "version 4.0"},
      {"header past end", std::string("\x93NUMPY\x01\x00\xff\x00{", 11), StatusCode::kDataLoss, "past the end"},
      {"truncated data", Header(1, ok_dict) + std::string(15, '\0'), StatusCode::kDataLoss, "truncated"},
      {"trailing data", Header(1, ok_dict) + std::string(17, '\0'), StatusCode::kDataLoss, "trailing"},
      {"big endian", Header(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }\n") + data16,
       StatusCode::kUnimplemented, "big-endian"},
      {"fortran order", Header(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n") + data16,
       StatusCode::kUnimplemented, "Fortran"},
      {"complex dtype", Header(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n") + data16,
       StatusCode::kUnimplemented, "<c8"},
      {"object dtype", Header(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n") + data16,
       StatusCode::kUnimplemented, "|O"},
      {"structured dtype", Header(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n") + data16,
       StatusCode::kUnimplemented, "structured"},
      {"missing shape", Header(1, "{'descr': '<f4', 'fortran_order': False, }\n") + data16, StatusCode::kDataLoss,
       "lacks"},
      {"not a dict", Header(1, "['descr']\n") + data16, StatusCode::kDataLoss, "not a dict"},
      {"unknown key", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'x': 1}\n") + data16,
       StatusCode::kDataLoss, "'x'"},
      {"negative dim", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 2), }\n") + data16,
       StatusCode::kDataLoss, "'-2' is not an integer"},
      {"overflowing shape",
       Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }\n") +
           data16,
       StatusCode::kDataLoss, "overflow"},
      {"huge shape",
       Header(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }\n") + data16,
       StatusCode::kDataLoss, "truncated"},
      {"unclosed shape", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2\n") + data16,
       StatusCode::kDataLoss, "shape"},
  };
  for (const BadCase& c : cases) {
    Result<Array> a = ParseNpy(Bytes(c.bytes), "bad.npy");
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_EQ(a.status().code(), c.code) << c.name << ": " << a.status().ToString();
    EXPECT_NE(a.status().message().find("bad.npy"), std::string::npos) << c.name << ": " << a.status().message();
    EXPECT_NE(a.status().message().find(c.needle), std::string::npos) << c.name << ": " << a.status().message();
  }
}

// A key given twice was read as the two values joined ('shape': (2,), 'shape': (2,) gave shape (2, 2)).
TEST(Npy, KeyGivenTwiceIsRefused) {
  const std::string data16(16, '\0');
  for (const char* dict : {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,), }\n",
                           "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n",
                           "{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (4,), }\n"}) {
    Result<Array> a = ParseNpy(Bytes(Header(1, dict) + data16), "twice.npy");
    ASSERT_FALSE(a.ok()) << dict;
    EXPECT_EQ(a.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(a.status().message().find("is given twice"), std::string::npos) << a.status().message();
  }
}

TEST(Npy, ControlBytesInHeaderStringsAreEscaped) {
  const std::string dict = std::string("{'descr': '<f4\x1b[31m\nX', 'fortran_order': False, 'shape': (2,), }\n");
  Result<Array> a = ParseNpy(Bytes(Header(1, dict) + std::string(8, '\0')), "esc.npy");
  ASSERT_FALSE(a.ok());
  const std::string m = a.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_NE(m.find("<f4\\x1b[31m\\nX"), std::string::npos) << m;
}

namespace fs = std::filesystem;

struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("posenc_npy_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string P(const std::string& n) const { return (dir / n).string(); }
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Npy, DirectoryAndFifoAreRefusedAsNotARegularFile) {
  TempDir t;
  fs::create_directories(t.P("d.npy"));
  ASSERT_EQ(::mkfifo(t.P("f.npy").c_str(), 0600), 0);
  for (const std::string& p : {t.P("d.npy"), t.P("f.npy")}) {
    Result<Array> a = ReadNpy(p);  // a FIFO must not block waiting for a writer
    ASSERT_FALSE(a.ok()) << p;
    EXPECT_NE(a.status().message().find("not a regular file"), std::string::npos) << a.status().message();
    EXPECT_NE(a.status().message().find(p), std::string::npos) << a.status().message();
  }
  // Writing over a directory is refused too, and leaves it a directory.
  Status w = WriteNpy(t.P("d.npy"), Array::Zeros(DType::kF32, {2}).value());
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.message().find("not a regular file"), std::string::npos) << w.message();
  EXPECT_TRUE(fs::is_directory(t.P("d.npy")));
}

// A write that fails half way (here: the file-size limit, as a full disk would) leaves the old file
// byte for byte, leaves no temporary behind, and the message carries errno's text.
TEST(Npy, FailedWriteLeavesTheOldFileByteForByte) {
  TempDir t;
  Array small = Array::Zeros(DType::kF32, {4}).value();
  for (int i = 0; i < 4; ++i) small.data<float>()[i] = static_cast<float>(i) + 0.5f;
  ASSERT_TRUE(WriteNpy(t.P("out.npy"), small).ok());
  const std::string before = Slurp(t.P("out.npy"));
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {
      4096, 4096
    };
    ::setrlimit(RLIMIT_FSIZE, &rl);
    Array big = Array::Zeros(DType::kF32, {1 << 16}).value();  // 256 KiB: past the 4 KiB limit
    const Status s = WriteNpy(t.P("out.npy"), big);
    const std::string m = s.message();
    (void)!::write(pipefd[1], m.data(), m.size());
    ::_exit(s.ok() ? 0 : 3);
  }
  ::close(pipefd[1]);
  std::string message;
  char buf[512];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) message.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the write should have failed";
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_NE(message.find("out.npy"), std::string::npos) << message;
  EXPECT_EQ(Slurp(t.P("out.npy")), before);
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(t.dir)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1u) << "a temporary file was left behind";
}

TEST(Npy, WriteKeepsPermissionsAndReplacesThroughASymlink) {
  TempDir t;
  ASSERT_TRUE(WriteNpy(t.P("real.npy"), Array::Zeros(DType::kF32, {1}).value()).ok());
  fs::permissions(t.P("real.npy"), fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink(t.P("real.npy"), t.P("link.npy"));
  ASSERT_TRUE(WriteNpy(t.P("link.npy"), Array::Zeros(DType::kF32, {3}).value()).ok());
  EXPECT_TRUE(fs::is_symlink(t.P("link.npy")));
  EXPECT_EQ(ReadNpy(t.P("real.npy"))->dim(0), 3);
  EXPECT_EQ(fs::status(t.P("real.npy")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(Npy, MissingFileIsNotFound) {
  Result<Array> a = ReadNpy("/nonexistent/x.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kNotFound);
  EXPECT_NE(a.status().message().find("/nonexistent/x.npy"), std::string::npos);
}

TEST(Npy, EveryTruncationOfAValidFileIsRejected) {
  Array a = Array::Zeros(DType::kF32, {3, 4}).value();
  const std::string s = SerializeNpy(a).value();
  for (size_t n = 0; n < s.size(); ++n) {
    Result<Array> b = ParseNpy(Bytes(s.substr(0, n)), "cut.npy");
    EXPECT_FALSE(b.ok()) << "prefix of " << n << " bytes was accepted";
  }
}

}  // namespace
}  // namespace posenc
