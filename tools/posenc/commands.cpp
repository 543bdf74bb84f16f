// Subcommand registry and exit-code plumbing.
#include "commands.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace posenc::cli {
namespace {
int g_exit_code = 0;
std::vector<std::pair<int, RegisterFn>>& Registry() {
  static std::vector<std::pair<int, RegisterFn>> r;
  return r;
}
}  // namespace

bool AddCommand(int order, RegisterFn fn) {
  Registry().emplace_back(order, fn);
  return true;
}

void RegisterAll(CLI::App& app) {
  auto& r = Registry();
  std::stable_sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, fn] : r) fn(app);
}

void SetExitCode(int code) { g_exit_code = code; }
int ExitCode() { return g_exit_code; }

void ReportError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "posenc %s: error: %s\n", command.c_str(), status.ToString().c_str());
  SetExitCode(2);
}

const CLI::Validator& NonNegativeInteger() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        long long value = 0;
        size_t used = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          return text + " is not a whole number";
        }
        if (used != text.size()) return text + " is not a whole number";
        if (value < 0) return text + " is negative";
        return "";
      },
      "INT>=0");
  return v;
}

}  // namespace posenc::cli
