// The CLI's subcommands. Each file in tools/posenc/ defines one subcommand and registers it with
// POSENC_CLI_COMMAND(order, RegisterFn); RegisterFn adds the subcommand to the app, and its callback
// sets the exit code through SetExitCode (0 ok, 1 a check failed, 2 bad input).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "posenc/core/status.hpp"

namespace posenc::cli {

using RegisterFn = void (*)(CLI::App& app);
// Called by POSENC_CLI_COMMAND at static-initialization time; `order` sorts the help listing.
bool AddCommand(int order, RegisterFn fn);
void RegisterAll(CLI::App& app);

void SetExitCode(int code);
int ExitCode();
// Prints "posenc <cmd>: error: <message>" to stderr and sets exit code 2.
void ReportError(const std::string& command, const Status& status);

// An option check for counts and lengths: a whole number >= 0 ("--seq-len: -5 is negative", instead of
// CLI11's NonNegativeNumber, which prints the largest double as the range).
const CLI::Validator& NonNegativeInteger();

}  // namespace posenc::cli

#define POSENC_CLI_COMMAND(order, fn) \
  static const bool posenc_cli_registered_##fn = ::posenc::cli::AddCommand(order, fn)
