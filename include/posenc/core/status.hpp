// Status and Result<T>: how every posenc function at a boundary reports failure.
//
// Codes follow abseil's canonical ones (absl/status/status.h says how to pick):
//   kInvalidArgument  a shape, an argument or a config value is wrong
//   kOutOfRange       a token id or position lies past the end of a table
//   kNotFound         a file, key or tensor is missing
//   kDataLoss         a file is corrupt or truncated
//   kUnimplemented    a valid but unsupported feature (an unknown rope_type, a tensor type)
//   kInternal         a bug in posenc
// Messages have one shape: the action that failed, the object (file, key, tensor, index), the
// value, and the rule it broke, on one line.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace posenc {

enum class StatusCode { kOk = 0, kInvalidArgument, kOutOfRange, kNotFound, kDataLoss, kUnimplemented, kInternal };

// "ok", "invalid argument", ...
std::string_view ToString(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  // The message is kept as OneLineMessage (posenc/core/message.hpp) makes it: one line, control
  // characters escaped, at most 1 KB.
  Status(StatusCode code, std::string message);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"
  std::string ToString() const;
  // Prepends context ("reading x.npy: ") to the message; a no-op on ok.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

namespace detail {
// Prints "posenc: Result::value() called on an error: <status>" on one line to stderr, then aborts.
[[noreturn]] void DieOnErrorValue(const Status& status);
}  // namespace detail

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T> holds a T or a non-ok Status (abseil's StatusOr).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  // Precondition: ok(). Calling these on an error prints the error to stderr and aborts (a bug in
  // the caller).
  T& value() & {
    Check();
    return std::get<T>(v_);
  }
  const T& value() const& {
    Check();
    return std::get<T>(v_);
  }
  T&& value() && {
    Check();
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Check() const {
    if (!ok()) detail::DieOnErrorValue(std::get<Status>(v_));
  }
  std::variant<T, Status> v_;
};

}  // namespace posenc

#define POSENC_CONCAT_INNER_(a, b) a##b
#define POSENC_CONCAT_(a, b) POSENC_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` (a Status) is not ok.
#define POSENC_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::posenc::Status posenc_status_ = (expr);        \
    if (!posenc_status_.ok()) return posenc_status_; \
  } while (0)

// `POSENC_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its error.
#define POSENC_ASSIGN_OR_RETURN(lhs, expr) \
  POSENC_ASSIGN_OR_RETURN_IMPL_(POSENC_CONCAT_(posenc_result_, __LINE__), lhs, expr)
#define POSENC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
