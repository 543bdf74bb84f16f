#include "test_support.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

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

}  // namespace posenc::testing
