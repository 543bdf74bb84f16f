#include "test_support.hpp"

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <iterator>

namespace posenc::testing {

std::string DataDir() {
  if (const char* env = std::getenv("POSENC_DATA_DIR"); env != nullptr && *env) return env;
  return POSENC_DEFAULT_DATA_DIR;
}

std::string DataPath(const std::string& relative) {
  const std::string p = DataDir() + "/" + relative;
  return std::filesystem::exists(p) ? p : std::string();
}

std::string CliPath() { return POSENC_CLI_PATH; }

int RunCommand(const std::string& command, std::string* output) {
  output->clear();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output->append(buf.data(), n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<float> RandomNormal(std::mt19937_64& rng, size_t n, float stddev) {
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::filesystem::path TempDir(const std::string& prefix, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("posenc_" + prefix + "_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

void WriteFile(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> GoldenCaseDirs(std::initializer_list<const char*> schemes) {
  std::vector<std::string> roots;
  for (const char* family : {"golden/hf", "golden/ggml"}) {
    const std::string root = DataPath(family);
    if (!root.empty()) roots.push_back(root);
  }
  std::vector<std::string> out;
  if (!roots.empty()) {
    Result<std::vector<std::string>> dirs = golden::FindGoldenCases(roots);
    if (dirs.ok()) {
      for (const std::string& d : *dirs) {
        Result<golden::GoldenCase> c = golden::GoldenCase::Load(d);
        if (!c.ok()) continue;
        for (const char* s : schemes)
          if (c->scheme() == s) out.push_back(d);
      }
    }
  }
  if (out.empty()) out.push_back("");
  return out;
}

std::string GoldenCaseName(const ::testing::TestParamInfo<std::string>& info) {
  if (info.param.empty()) return "missing_data";
  const std::filesystem::path p(info.param);
  std::string name = p.parent_path().filename().string() + "_" + p.filename().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

::testing::AssertionResult HasError(const Status& s, StatusCode code, std::string_view needle) {
  if (s.ok())
    return ::testing::AssertionFailure() << "succeeded; expected " << ToString(code) << " with '" << needle << "'";
  if (s.code() != code)
    return ::testing::AssertionFailure() << "code " << ToString(s.code()) << ", expected " << ToString(code) << ": "
                                         << s.message();
  if (s.message().find(needle) == std::string::npos)
    return ::testing::AssertionFailure() << "message lacks '" << needle << "': " << s.message();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult GoldenClose(const std::string& role, std::span<const double> got, const Array& want,
                                       golden::Tolerance tol) {
  const Status s = golden::Compare(role, got, want, tol);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}

::testing::AssertionResult GoldenClose(const std::string& role, std::span<const double> got,
                                       std::span<const double> want, golden::Tolerance tol) {
  const Status s = golden::Compare(role, got, want, tol);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}

}  // namespace posenc::testing
