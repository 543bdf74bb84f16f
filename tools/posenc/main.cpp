// posenc: the command-line tool. Each subcommand lives in its own file and registers here.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"posenc: token embeddings and positional encodings of decoder-only transformers"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  posenc::cli::RegisterAll(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors exit 2, like every other bad input
  }
  return posenc::cli::ExitCode();
}
