// posenc: the command-line tool. Each subcommand lives in its own file and registers here.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "commands.hpp"

#ifndef POSENC_VERSION  // (CMakeLists.txt defines it: the project's version)
#define POSENC_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{"posenc: token embeddings and positional encodings of decoder-only transformers"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", "posenc " POSENC_VERSION);  // (the project's version, from CMake)
  app.failure_message(posenc::cli::OneLineFailureMessage);
  posenc::cli::InstallTerminateHandler(app);
  try {
    posenc::cli::RegisterAll(app);
    // The commands run inside parse (as callbacks): this is the one boundary every command passes.
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, like every other bad input
  } catch (...) {
    // Anything a command let escape (bad_alloc, filesystem_error, ios_base::failure, nlohmann's
    // exceptions, regex_error, ...) is one line and exit 2, never an abort.
    posenc::cli::ReportCurrentException(app);
    return 2;
  }
  return posenc::cli::ExitCode();
}
