// The CLI's subcommands. Each file in tools/posenc/ defines one subcommand and registers it with
// POSENC_CLI_COMMAND(order, RegisterFn); RegisterFn adds the subcommand to the app, and its callback
// sets the exit code through SetExitCode (0 ok, 1 a check failed, 2 bad input).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "posenc/core/status.hpp"
#include "posenc/io/file_io.hpp"

namespace posenc::cli {

using RegisterFn = void (*)(CLI::App& app);
// Called by POSENC_CLI_COMMAND at static-initialization time; `order` sorts the help listing.
bool AddCommand(int order, RegisterFn fn);
void RegisterAll(CLI::App& app);

void SetExitCode(int code);
int ExitCode();
// Prints "posenc <cmd>: error: <message>" to stderr and sets exit code 2.
void ReportError(const std::string& command, const Status& status);

// Runs inside a catch block at the command boundary (main): turns the exception being handled (any:
// std::bad_alloc, std::filesystem::filesystem_error, std::ios_base::failure, std::regex_error,
// nlohmann's exceptions, ...) into one line "posenc <command>: error: ..." on stderr, its text escaped
// and capped (EscapeForMessage), and exit code 2. `app` is the root: the command named is the deepest
// subcommand that was parsed.
void ReportCurrentException(const CLI::App& app);
// std::set_terminate: an exception that escapes where main's catch cannot see it (a worker thread, a
// noexcept function) is reported as ReportCurrentException does, and the process exits 2 (std::_Exit).
void InstallTerminateHandler(const CLI::App& app);
// CLI11's own usage errors as one line: "posenc: error: --heads: ... (see posenc --help)".
std::string OneLineFailureMessage(const CLI::App* app, const CLI::Error& e);

// RefuseOutputIsInput (posenc/io/file_io.hpp) over a braced list: call it before a command writes
// `out`, with every path the command reads ({o.model, o.config, o.positions, ...}; empty ones skipped).
inline Status RefuseOutputIsAnInput(const std::string& out, std::initializer_list<std::string> inputs) {
  return RefuseOutputIsInput(out, std::span<const std::string>(inputs.begin(), inputs.size()));
}

// An option check for integers, strict: optional '-', decimal digits only (no '+', spaces, hex,
// octal, exponent or trailing junk), within [min, max] without saturating ("--heads: '-3' is below
// the least accepted value 0", "--tokens: '99999999999999999999' is past the largest accepted value
// 1099511627776"). The text is rewritten to its canonical decimal, so CLI11's base-0 conversion that
// follows cannot read "010" as octal.
CLI::Validator IntegerIn(int64_t min, int64_t max);
// IntegerIn(0, INT64_MAX): counts and lengths.
const CLI::Validator& NonNegativeInteger();

// An option check for real numbers, strict: decimal only (optional '-', digits with an optional '.',
// an optional exponent; no hex, 'nan', 'inf', '+', spaces or trailing junk), a value that does not
// overflow or underflow a double, within [min, max] ("--z: 'nan' is not a decimal number", "--z:
// '1e999' is out of range", "--min-margin: '-1' is below the least accepted value 0").
CLI::Validator RealIn(double min, double max);
// Declares a double/float option checked by RealIn(min, max).
template <typename T>
CLI::Option* AddRealOption(CLI::App* cmd, const std::string& name, T& target, const std::string& description,
                           double min, double max) {
  static_assert(std::is_floating_point_v<T>, "AddRealOption is for floating-point values");
  return cmd->add_option(name, target, description)->check(RealIn(min, max));
}

// A comma-separated list of whole numbers ("1,2,3"), each strict as IntegerIn: the error names the
// flag, the item's index and its text ("--ids item 1 '99999999999999999999' is past the largest
// accepted value ..."). An empty list is refused.
Result<std::vector<int64_t>> ParseIntegerList(std::string_view flag, const std::string& text, int64_t min, int64_t max);

// The one checked way to declare an integer option: `target` is set only from a value that passed
// IntegerIn(min, max) (the bounds clamped to T's range). Returns the option for ->required() etc.
template <typename T>
CLI::Option* AddIntOption(CLI::App* cmd, const std::string& name, T& target, const std::string& description,
                          int64_t min, int64_t max) {
  static_assert(std::is_integral_v<T>, "AddIntOption is for integers");
  const int64_t lo =
      std::max<int64_t>(min, std::is_signed_v<T> ? static_cast<int64_t>(std::numeric_limits<T>::min()) : 0);
  const int64_t hi = std::min<int64_t>(max, std::numeric_limits<T>::max() > static_cast<uint64_t>(INT64_MAX)
                                                ? INT64_MAX
                                                : static_cast<int64_t>(std::numeric_limits<T>::max()));
  return cmd->add_option(name, target, description)->check(IntegerIn(lo, hi));
}

// An option check for a name from a model's vocabulary (a layer type, a RoPE site, a config key): not
// empty, at most 128 characters, letters, digits, '_', '.' and '-' only ("--site: '' is empty").
const CLI::Validator& NameToken();

// Which part of a model a command works on: a decoder layer (index), a layer type, a RoPE site, and the
// positional-looking config keys the user states as understood. One declaration for inspect, rope and
// check, so the three read --layer / --layer-type / --site / --accept-key alike.
struct LayerSelection {
  int64_t layer = -1;  // -1: not asked
  std::string layer_type, site;
  std::vector<std::string> accept_keys;
};
// `accept_keys`: whether the command also takes --accept-key.
void AddLayerSelection(CLI::App* cmd, LayerSelection& selection, bool accept_keys);

}  // namespace posenc::cli

#define POSENC_CLI_COMMAND(order, fn) \
  static const bool posenc_cli_registered_##fn = ::posenc::cli::AddCommand(order, fn)
