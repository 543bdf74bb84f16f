// `posenc golden PATH...`: every golden case at or under the paths, a line per case, then a summary.
#include <cstdio>

#include "commands.hpp"
#include "golden_runner.hpp"

namespace posenc::cli {
namespace {

void RegisterGolden(CLI::App& app) {
  auto* cmd = app.add_subcommand("golden", "Check posenc against reference outputs (../shared/golden format)");
  static std::vector<std::string> paths;
  static bool quiet = false;
  cmd->add_option("paths", paths, "Case folders, or folders above cases")->required();
  cmd->add_flag("-q,--quiet", quiet, "Print only failures and the summary");
  cmd->callback([] {
    Result<std::vector<std::string>> cases = golden::FindGoldenCases(paths);
    if (!cases.ok()) return ReportError("golden", cases.status());
    if (cases->empty()) return ReportError("golden", NotFoundError("no case.json at or under the paths given"));
    int passed = 0, failed = 0;
    for (const std::string& dir : *cases) {
      const golden::GoldenResult r = golden::RunGoldenCase(dir);
      (r.passed ? passed : failed)++;
      if (!r.passed || !quiet) std::printf("%s %s: %s\n", r.passed ? "PASS" : "FAIL", r.name.c_str(), r.detail.c_str());
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    SetExitCode(failed ? 1 : 0);
  });
}

}  // namespace
POSENC_CLI_COMMAND(20, RegisterGolden);
}  // namespace posenc::cli
