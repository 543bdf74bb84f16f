// `posenc demo`: placeholder until the demo lands.
#include "commands.hpp"
namespace posenc::cli {
namespace {
void RegisterDemo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Tell the seed's story with real numbers (no files needed)");
  cmd->callback([] { std::printf("demo\n"); });
}
}  // namespace
POSENC_CLI_COMMAND(10, RegisterDemo);
}  // namespace posenc::cli
