// The callback of a subcommand that either succeeds or fails with a Status: `run` runs when the
// subcommand is given, and its error is reported under `command` (ReportError: one line, exit 2).
//
//   OnRunReportError(cmd, "convert-layout", [o] { return Run(*o); });
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "posenc/core/status.hpp"

namespace posenc::cli {

inline void OnRunReportError(CLI::App* cmd, std::string command, std::function<Status()> run) {
  cmd->callback([command = std::move(command), run = std::move(run)] {
    Status s = run();
    if (!s.ok()) ReportError(command, s);
  });
}

}  // namespace posenc::cli
