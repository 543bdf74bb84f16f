// Subcommand registry and exit-code plumbing.
#include "commands.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <ios>
#include <new>
#include <regex>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/message.hpp"

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

namespace {
// The last line of defence for a message built from file bytes that were not quoted, and for text
// that is not a Status (CLI11's, an exception's): the library's one message builder, OneLineMessage
// (control bytes and invalid UTF-8 escaped, backslashes left alone, at most 1 KB keeping head and tail).
std::string OneLine(const std::string& text) { return OneLineMessage(text); }
}  // namespace

void ReportError(const std::string& command, const Status& status) {
  std::fflush(stdout);
  std::fprintf(stderr, "posenc %s: error: %s\n", command.c_str(), OneLine(status.ToString()).c_str());
  SetExitCode(2);
}

CLI::Validator IntegerIn(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const std::string shown = QuoteForMessage(text, 60);
        const char* b = text.data();
        const char* e = b + text.size();
        const bool negative = !text.empty() && text[0] == '-';
        const bool digits = text.size() > (negative ? 1u : 0u) &&
                            std::all_of(b + (negative ? 1 : 0), e, [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) return shown + " is not a whole number (decimal digits, optionally after '-')";
        int64_t value = 0;
        const auto [ptr, ec] = std::from_chars(b, e, value);
        if (ec == std::errc::result_out_of_range || ptr != e) {
          return negative ? (min == 0 ? shown + " is negative"
                                      : fmt::format("{} is below the least accepted value {}", shown, min))
                          : fmt::format("{} is past the largest accepted value {}", shown, max);
        }
        if (value < 0 && min == 0) return shown + " is negative";
        if (value < min) return fmt::format("{} is below the least accepted value {}", shown, min);
        if (value > max) return fmt::format("{} is past the largest accepted value {}", shown, max);
        text = std::to_string(value);  // canonical: CLI11 converts with base 0 ("010" would be octal)
        return "";
      },
      fmt::format("INT in [{}, {}]", min, max));
}

const CLI::Validator& NameToken() {
  static const CLI::Validator v(
      [](std::string& text) -> std::string {
        if (text.empty()) return "'' is empty";
        if (text.size() > 128) return QuoteForMessage(text, 60) + " is longer than 128 characters";
        const bool ok = std::all_of(text.begin(), text.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                 c == '-';
        });
        if (!ok) return QuoteForMessage(text, 60) + " has characters other than letters, digits, '_', '.' and '-'";
        return "";
      },
      "NAME");
  return v;
}

void AddLayerSelection(CLI::App* cmd, LayerSelection& s, bool accept_keys) {
  AddIntOption(cmd, "--layer", s.layer,
               "Decoder layer index: that layer's scheme (its type's parameters; none for a NoPE or mamba layer)", 0,
               kMaxLayers - 1);
  cmd->add_option("--layer-type", s.layer_type,
                  "Layer type whose parameters to use (keyed rope_parameters: Gemma 3/4 sliding_attention, "
                  "DeepSeek-V4 compressed_sparse_attention; a GGUF's sliding_attention)")
      ->check(NameToken());
  cmd->add_option("--site", s.site,
                  "RoPE site of the layer: attention, mla, indexer, attention_output (rotates backwards), compressor "
                  "(posenc inspect lists a model's sites)")
      ->check(NameToken());
  if (accept_keys) {
    cmd->add_option("--accept-key", s.accept_keys,
                    "A config key naming positions that posenc does not read, stated as not changing them (repeat "
                    "for more keys; noted)")
        ->check(NameToken());
  }
}

CLI::Validator RealIn(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        const std::string shown = QuoteForMessage(text, 60);
        // The decimal grammar, checked by hand: from_chars alone would take "inf", "nan" and hex.
        size_t i = 0, mantissa_digits = 0;
        auto digits = [&](size_t* count) {
          while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i, ++*count;
        };
        if (i < text.size() && text[i] == '-') ++i;
        digits(&mantissa_digits);
        if (i < text.size() && text[i] == '.') ++i, digits(&mantissa_digits);
        bool grammar = mantissa_digits > 0;
        if (grammar && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
          ++i;
          if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
          size_t exponent_digits = 0;
          digits(&exponent_digits);
          grammar = exponent_digits > 0;
        }
        if (!grammar || i != text.size())
          return shown + " is not a decimal number (digits, optional '-', '.' and exponent)";
        double value = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range) return shown + " is out of range (it overflows or underflows)";
        if (ec != std::errc() || ptr != text.data() + text.size()) return shown + " is not a decimal number";
        if (value < min) return fmt::format("{} is below the least accepted value {}", shown, min);
        if (value > max) return fmt::format("{} is past the largest accepted value {}", shown, max);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", min, max));
}

Result<std::vector<int64_t>> ParseIntegerList(std::string_view flag, const std::string& text, int64_t min,
                                              int64_t max) {
  if (text.empty()) return InvalidArgumentError(fmt::format("{} is empty", flag));
  const CLI::Validator check = IntegerIn(min, max);
  std::vector<int64_t> out;
  size_t begin = 0;
  for (size_t index = 0; begin <= text.size(); ++index) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    std::string item = text.substr(begin, comma - begin);
    const std::string why = check(item);  // rewrites item to its canonical decimal when it passes
    if (!why.empty()) return InvalidArgumentError(fmt::format("{} item {} {}", flag, index, why));
    out.push_back(std::stoll(item));
    begin = comma + 1;
  }
  return out;
}

const CLI::Validator& NonNegativeInteger() {
  static const CLI::Validator v = IntegerIn(0, std::numeric_limits<int64_t>::max());
  return v;
}

std::string OneLineFailureMessage(const CLI::App* /*app*/, const CLI::Error& e) {
  return fmt::format("posenc: error: {} (see posenc --help)\n", EscapeForMessage(e.what(), 400));
}

namespace {
const CLI::App* g_app = nullptr;
}  // namespace

void InstallTerminateHandler(const CLI::App& app) {
  g_app = &app;
  std::set_terminate([] {
    if (std::current_exception() != nullptr && g_app != nullptr) {
      try {
        std::rethrow_exception(std::current_exception());
      } catch (...) { ReportCurrentException(*g_app); }
    } else {
      std::fflush(stdout);
      std::fprintf(stderr, "posenc: error: internal: std::terminate without an exception\n");
    }
    std::_Exit(2);
  });
}

void ReportCurrentException(const CLI::App& app) {
  std::string command;
  const CLI::App* a = &app;
  while (a != nullptr) {
    const auto parsed = a->get_subcommands();
    if (parsed.empty()) break;
    a = parsed.front();
    command += (command.empty() ? "" : " ") + a->get_name();
  }
  if (command.empty()) command = "(no command)";
  std::string what;
  try {
    throw;
  } catch (const std::bad_alloc&) {
    what = "out of memory: an allocation failed (std::bad_alloc); an input asks for more memory than this machine has";
  } catch (const std::filesystem::filesystem_error& e) {
    what = "file system: " + EscapeForMessage(e.what(), 400);
  } catch (const std::ios_base::failure& e) {
    what = "I/O: " + EscapeForMessage(e.what(), 400);
  } catch (const std::regex_error& e) {
    what = "regular expression: " + EscapeForMessage(e.what(), 400);
  } catch (const std::exception& e) { what = "unexpected exception: " + EscapeForMessage(e.what(), 400); } catch (...) {
    what = "unexpected exception of unknown type";
  }
  std::fflush(stdout);
  std::fprintf(stderr, "posenc %s: error: %s\n", command.c_str(), what.c_str());
  SetExitCode(2);
}

}  // namespace posenc::cli
