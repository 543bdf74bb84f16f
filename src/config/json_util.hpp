// The config readers' typed reader: every config value is read through these getters, which give a
// key's value of the expected type, or an error naming the source, the key, the value (bounded by
// JsonForMessage) and what was expected. A key of the wrong JSON type is never taken as absent:
// the Find* getters give "absent" (nullopt / nullptr) only for a missing key or a JSON null.
//
// Numbers are checked to the precision the computation that uses them has:
//   integers: within [lo, hi] (default: int64's range; a JSON unsigned past 2^63-1 is refused, never
//             wrapped to a negative number); a float with an integral value below 2^53 is accepted;
//   floats:   finite; with Precision::kFloat32 (keys a float32 computation uses) also of a magnitude
//             float32 holds (at most FLT_MAX, and 0 or at least FLT_MIN: no overflow to inf and no
//             flush to a denormal or 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/message.hpp"
#include "posenc/core/status.hpp"
#include "posenc/io/json_guard.hpp"

namespace posenc::json_util {

using nlohmann::json;

enum class Precision { kFloat64, kFloat32 };

inline Status KeyError(const std::string& source, std::string_view key, const std::string& why) {
  return InvalidArgumentError(fmt::format("config {}: key {} {}", source, QuoteForMessage(key, 120), why));
}

// "config S: key 'k' is <value>, expected <what>" (KeyShownMessage, the one message builder's shape).
inline Status TypeError(const std::string& source, std::string_view key, const json& v, std::string_view what) {
  return InvalidArgumentError(
      KeyShownMessage(fmt::format("config {}", source), key, JsonForMessage(v), fmt::format("expected {}", what)));
}

// The readers check each value's type before they take it, so nlohmann never throws inside them; were
// one to (a check missed), the caller gets a one-line error instead of a terminated process. It is
// kInternal, a defect of posenc's (the fuzzers stop on it), not a verdict on the file.
template <class F>
auto NoJsonThrow(const std::string& what, const F& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    return InternalError(fmt::format("{}: a value's JSON type was not checked before use ({}): a posenc bug", what,
                                     e.what()));
  }
}

inline Status Missing(const std::string& source, std::string_view key) {
  return NotFoundError(fmt::format("config {}: key {} is missing", source, QuoteForMessage(key, 120)));
}

inline bool Has(const json& j, std::string_view key) {
  if (!j.is_object()) return false;
  const auto it = j.find(std::string(key));
  return it != j.end() && !it->is_null();
}

// The value of `key`, or nullptr when `j` is not an object, lacks the key or holds null there.
inline const json* Find(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(std::string(key));
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// A number as a double, checked to `precision`.
inline Result<double> NumberValue(const json& v, std::string_view key, const std::string& source,
                                  Precision precision = Precision::kFloat64) {
  if (!v.is_number()) return TypeError(source, key, v, "a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) return TypeError(source, key, v, "a finite number");
  if (precision == Precision::kFloat32 && d != 0.0 &&
      !(std::abs(d) <= std::numeric_limits<float>::max() && std::abs(d) >= std::numeric_limits<float>::min()))
    return KeyError(source, key,
                    fmt::format("is {}, outside float32, the type it is used in (magnitude {} to {}, or 0)",
                                JsonForMessage(v), std::numeric_limits<float>::min(),
                                std::numeric_limits<float>::max()));
  return d;
}

// An integer in [lo, hi]: JSON integers (signed or unsigned, never wrapped) and integral floats below 2^53.
inline Result<int64_t> IntValue(const json& v, std::string_view key, const std::string& source,
                                int64_t lo = std::numeric_limits<int64_t>::min(),
                                int64_t hi = std::numeric_limits<int64_t>::max()) {
  auto range = [&] {
    if (lo == std::numeric_limits<int64_t>::min() && hi == std::numeric_limits<int64_t>::max())
      return std::string("an integer in [-2^63, 2^63-1]");
    if (hi == std::numeric_limits<int64_t>::max()) return fmt::format("an integer >= {}", lo);
    return fmt::format("an integer in [{}, {}]", lo, hi);
  };
  int64_t out = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return TypeError(source, key, v, range());
    out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(std::isfinite(d) && std::floor(d) == d && std::abs(d) < 9007199254740992.0))
      return TypeError(source, key, v, range());
    out = static_cast<int64_t>(d);
  } else {
    return TypeError(source, key, v, range());
  }
  if (out < lo || out > hi) return TypeError(source, key, v, range());
  return out;
}

inline Result<double> GetNumber(const json& j, std::string_view key, const std::string& source,
                                Precision precision = Precision::kFloat64) {
  const json* v = Find(j, key);
  if (v == nullptr) return Missing(source, key);
  return NumberValue(*v, key, source, precision);
}

inline Result<int64_t> GetInt(const json& j, std::string_view key, const std::string& source,
                              int64_t lo = std::numeric_limits<int64_t>::min(),
                              int64_t hi = std::numeric_limits<int64_t>::max()) {
  const json* v = Find(j, key);
  if (v == nullptr) return Missing(source, key);
  return IntValue(*v, key, source, lo, hi);
}

inline Result<bool> GetBool(const json& j, std::string_view key, const std::string& source) {
  const json* v = Find(j, key);
  if (v == nullptr) return Missing(source, key);
  if (!v->is_boolean()) return TypeError(source, key, *v, "true or false");
  return v->get<bool>();
}

// A flag that Python code reads by truthiness where posenc accepts only the unambiguous forms: true /
// false, or a number (nonzero = true). A string ("true", "false"), list or object is refused: Python
// takes any non-empty one as true, "false" included, which is not what such a config means to say.
inline Result<bool> GetFlag(const json& j, std::string_view key, const std::string& source) {
  const json* v = Find(j, key);
  if (v == nullptr) return Missing(source, key);
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) {
    POSENC_ASSIGN_OR_RETURN(double d, NumberValue(*v, key, source));
    return d != 0.0;
  }
  return TypeError(source, key, *v, "true, false or a number (a string or list is not read as a flag)");
}

inline Result<std::string> GetString(const json& j, std::string_view key, const std::string& source) {
  const json* v = Find(j, key);
  if (v == nullptr) return Missing(source, key);
  if (!v->is_string()) return TypeError(source, key, *v, "a string");
  return v->get<std::string>();
}

// Whether a JSON null is "absent" (the default: configs write null for unset optional keys) or a value
// of the wrong type (a key every real config gives as a string, such as model_type).
enum class NullIs { kAbsent, kWrongType };

// The optional forms: nullopt / nullptr when the key is absent or null, an error when it has another type.
inline Result<std::optional<std::string>> FindString(const json& j, std::string_view key, const std::string& source,
                                                     NullIs null_is = NullIs::kAbsent) {
  if (null_is == NullIs::kWrongType && j.is_object())
    if (const auto it = j.find(std::string(key)); it != j.end() && it->is_null())
      return TypeError(source, key, *it, "a string");
  if (Find(j, key) == nullptr) return std::optional<std::string>();
  POSENC_ASSIGN_OR_RETURN(std::string s, GetString(j, key, source));
  return std::optional<std::string>(std::move(s));
}

inline Result<const json*> FindObject(const json& j, std::string_view key, const std::string& source) {
  const json* v = Find(j, key);
  if (v == nullptr) return static_cast<const json*>(nullptr);
  if (!v->is_object()) return TypeError(source, key, *v, "an object");
  return v;
}

// The list under `key` (refused when missing or not a list: "expected <what>"), each element read by
// read_one(element, "key[i]").
template <typename T, typename ReadOne>
Result<std::vector<T>> GetList(const json& j, std::string_view key, const std::string& source, std::string_view what,
                               ReadOne read_one) {
  const json* v = Find(j, key);
  if (v == nullptr) return Missing(source, key);
  if (!v->is_array()) return TypeError(source, key, *v, what);
  std::vector<T> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    POSENC_ASSIGN_OR_RETURN(T x, read_one((*v)[i], fmt::format("{}[{}]", key, i)));
    out.push_back(x);
  }
  return out;
}

inline Result<std::vector<double>> GetNumberList(const json& j, std::string_view key, const std::string& source,
                                                 Precision precision = Precision::kFloat64) {
  return GetList<double>(j, key, source, "a list of numbers", [&](const json& v, const std::string& at) {
    return NumberValue(v, at, source, precision);
  });
}

inline Result<std::vector<int64_t>> GetIntList(const json& j, std::string_view key, const std::string& source,
                                               int64_t lo = std::numeric_limits<int64_t>::min(),
                                               int64_t hi = std::numeric_limits<int64_t>::max()) {
  return GetList<int64_t>(j, key, source, "a list of integers",
                          [&](const json& v, const std::string& at) { return IntValue(v, at, source, lo, hi); });
}

}  // namespace posenc::json_util
