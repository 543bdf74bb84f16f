// Status formatting.
#include "posenc/core/status.hpp"

#include <cstdio>
#include <cstdlib>

#include "posenc/core/message.hpp"

namespace posenc {

Status::Status(StatusCode code, std::string message) : code_(code), message_(OneLineMessage(std::move(message))) {}

std::string_view ToString(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(posenc::ToString(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

namespace detail {

void DieOnErrorValue(const Status& status) {
  const std::string line = "posenc: Result::value() called on an error: " + status.ToString() + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail

}  // namespace posenc
