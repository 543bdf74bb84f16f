// posenc's one message builder: every error text the library makes (Status, and so the CLI's stderr
// line and Python's exception text) goes through it.
//
// Quoting bytes that came from a file (or a flag) inside a one-line error message.
//
// A string read from a model or config file may hold anything: newlines that would split the message,
// ANSI escapes that would repaint the terminal, a NUL that would cut it, invalid UTF-8, or megabytes.
// EscapeForMessage turns it into printable text that stays on one line:
//   printable ASCII as is, except '\' written "\\";
//   \n \r \t as those two characters, NUL as "\0", other control bytes (ESC included) and DEL as \xNN;
//   well-formed UTF-8 as is, except C1 controls, line/paragraph separators and bidi overrides as \u{XXXX};
//   a byte that is not part of well-formed UTF-8 as \xNN;
//   at most `cap` bytes of output, then "... (N bytes in all)" naming the full input length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace posenc {

// The default cap on a quoted value in a message (bytes of escaped output).
inline constexpr size_t kMessageQuoteCap = 200;

// The escaped text (no quotes around it).
std::string EscapeForMessage(std::string_view s, size_t cap = kMessageQuoteCap);
// The escaped text in single quotes: 'abc\n'.
std::string QuoteForMessage(std::string_view s, size_t cap = kMessageQuoteCap);

// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF): the rule
// EscapeForMessage keeps text by, which the file readers apply to keys, names and headers.
bool IsValidUtf8(std::string_view s);

// The most bytes an error message has (Status keeps every message within it).
inline constexpr size_t kMaxMessageBytes = 1024;

// "<where>: key '<key>' is <value>, <why>": the object and key first, then the value quoted by
// QuoteForMessage (capped at kMessageQuoteCap bytes, with its full length past that), then the rule.
// `where` may be empty. A value already rendered for a message (a number, JsonForMessage's text) goes
// through KeyValueMessage's `shown` overload unquoted.
std::string KeyValueMessage(std::string_view where, std::string_view key, std::string_view value, std::string_view why);
// The same with a value already rendered (a number, or JsonForMessage's bounded text), capped again.
std::string KeyShownMessage(std::string_view where, std::string_view key, std::string_view shown, std::string_view why);

// What every Status message is made into: one line of at most kMaxMessageBytes bytes. Control bytes
// (newline, ESC, NUL, DEL ...), bytes that are not well-formed UTF-8, C1 controls and bidi overrides
// are escaped as EscapeForMessage writes them (a backslash already there is left as it is, so text
// quoted before is not escaped twice); past kMaxMessageBytes the middle is cut, keeping the head (the
// action, object, key and rule) and the tail, and the cut says how many bytes the message had.
std::string OneLineMessage(std::string message);

}  // namespace posenc
