// Golden-case reading and the tolerance check (see golden_case.hpp).
#include "golden_case.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "posenc/io/json_guard.hpp"
#include "posenc/io/json_read.hpp"
#include "posenc/io/npy.hpp"

namespace posenc::golden {

HfConfigOptions CaseConfigOptions(const nlohmann::json& j) {
  HfConfigOptions options;
  if (j.contains("layer_index") && j["layer_index"].is_number_integer()) options.layer = j["layer_index"].get<int64_t>();
  if (j.contains("layer_type") && j["layer_type"].is_string()) options.layer_type = j["layer_type"].get<std::string>();
  if (j.contains("rotary_site") && j["rotary_site"].is_string()) options.site = j["rotary_site"].get<std::string>();
  return options;
}
namespace fs = std::filesystem;
using nlohmann::json;

Result<std::vector<std::string>> FindGoldenCases(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) return NotFoundError(fmt::format("golden path {} does not exist", p));
    if (fs::exists(fs::path(p) / "case.json")) {
      out.push_back(p);
      continue;
    }
    for (auto it = fs::recursive_directory_iterator(p, ec); it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (ec) return NotFoundError(fmt::format("golden path {}: {}", p, ec.message()));
      if (it->is_directory() && fs::exists(it->path() / "case.json")) out.push_back(it->path().string());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

enum class Want { kString, kNumber, kInteger, kObject, kArray, kIntegerList };

std::string_view WantName(Want w) {
  switch (w) {
    case Want::kString: return "a string";
    case Want::kNumber: return "a number";
    case Want::kInteger: return "an integer in [0, 2^63-1]";
    case Want::kObject: return "an object";
    case Want::kArray: return "a list";
    case Want::kIntegerList: return "a list of integers in [0, 2^63-1]";
  }
  return "";
}

bool IsNonNegativeInteger(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

bool Fits(const json& v, Want w) {
  switch (w) {
    case Want::kString: return v.is_string();
    case Want::kNumber: return v.is_number();
    case Want::kInteger:
      return IsNonNegativeInteger(v) && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
    case Want::kObject: return v.is_object();
    case Want::kArray: return v.is_array();
    case Want::kIntegerList:
      if (!v.is_array()) return false;
      for (const json& x : v)
        if (!Fits(x, Want::kInteger)) return false;
      return true;
  }
  return false;
}

Status FieldError(const std::string& path, const std::string& field, const json& v, Want w) {
  return DataLossError(
      fmt::format("{}: field '{}' is {}, expected {}", path, field, JsonForMessage(v), WantName(w)));
}

}  // namespace

// The fields the runners read, each of the type they read it as (an absent or null field is left to the
// runner, which says what it misses).
Status CheckFieldTypes(const json& j, const std::string& path) {
  static const std::pair<const char*, Want> kFields[] = {
      {"scheme", Want::kString},         {"layout", Want::kString},           {"dtype", Want::kString},
      {"variant", Want::kString},        {"vision_2d_variant", Want::kString}, {"section_layout", Want::kString},
      {"hf_model_type", Want::kString},  {"seq_len", Want::kInteger},         {"layer_index", Want::kInteger},
      {"attention_scaling", Want::kNumber}, {"rope_theta", Want::kNumber},    {"config", Want::kObject},
      {"tolerance", Want::kObject},      {"sections", Want::kIntegerList},    {"position_components", Want::kArray},
  };
  for (const auto& [field, want] : kFields) {
    const auto it = j.find(field);
    if (it != j.end() && !it->is_null() && !Fits(*it, want)) return FieldError(path, field, *it, want);
  }
  for (const auto& [role, file] : j["files"].items())
    if (!file.is_string()) return FieldError(path, "files." + role, file, Want::kString);
  if (const auto cfg = j.find("config"); cfg != j.end() && cfg->is_object()) {
    if (const auto attn = cfg->find("attn_config"); attn != cfg->end() && !attn->is_null()) {
      if (!attn->is_object()) return FieldError(path, "config.attn_config", *attn, Want::kObject);
      if (const auto b = attn->find("alibi_bias_max"); b != attn->end() && !b->is_number())
        return FieldError(path, "config.attn_config.alibi_bias_max", *b, Want::kNumber);
    }
  }
  if (const auto tol = j.find("tolerance"); tol != j.end() && tol->is_object()) {
    for (const auto& [role, t] : tol->items()) {
      if (!t.is_object()) return FieldError(path, "tolerance." + role, t, Want::kObject);
      for (const char* k : {"atol", "rtol"})
        if (const auto v = t.find(k); v != t.end() && !v->is_number())
          return FieldError(path, fmt::format("tolerance.{}.{}", role, k), *v, Want::kNumber);
      if (const auto v = t.find("nan_at"); v != t.end() && !Fits(*v, Want::kIntegerList))
        return FieldError(path, fmt::format("tolerance.{}.nan_at", role), *v, Want::kIntegerList);
    }
  }
  return OkStatus();
}

Result<GoldenCase> GoldenCase::Load(const std::string& dir) {
  GoldenCase c;
  c.dir_ = dir;
  const std::string path = (fs::path(dir) / "case.json").string();
  POSENC_ASSIGN_OR_RETURN(c.j_, ReadJsonFile(path, path));
  if (!c.j_.is_object()) return DataLossError(fmt::format("{}: not a JSON object", path));
  if (!c.j_.contains("files") || !c.j_["files"].is_object())
    return DataLossError(fmt::format("{}/case.json: no 'files' object", dir));
  POSENC_RETURN_IF_ERROR(CheckFieldTypes(c.j_, path));
  return c;
}

Result<Array> GoldenCase::Read(const std::string& role) const {
  if (!Has(role)) return NotFoundError(fmt::format("case {} has no '{}' file", dir_, role));
  return ReadNpy((fs::path(dir_) / j_["files"][role].get<std::string>()).string());
}

Result<std::vector<int64_t>> GoldenCase::ReadInts(const std::string& role) const {
  POSENC_ASSIGN_OR_RETURN(Array a, Read(role));
  POSENC_ASSIGN_OR_RETURN(Array b, a.AsType(DType::kI64));
  return std::vector<int64_t>(b.span<int64_t>().begin(), b.span<int64_t>().end());
}

Result<std::vector<double>> GoldenCase::ReadDoubles(const std::string& role) const {
  POSENC_ASSIGN_OR_RETURN(Array a, Read(role));
  POSENC_ASSIGN_OR_RETURN(Array b, a.AsType(DType::kF64));
  return std::vector<double>(b.span<double>().begin(), b.span<double>().end());
}

DType GoldenCase::Storage() const {
  const std::string d = j_.value("dtype", std::string("float32"));
  if (d == "float16") return DType::kF16;
  if (d == "bfloat16") return DType::kBF16;
  return DType::kF32;
}

int64_t GoldenCase::SeqLen(std::span<const int64_t> positions) const {
  if (j_.contains("seq_len") && IsNonNegativeInteger(j_["seq_len"])) return j_["seq_len"].get<int64_t>();
  int64_t n = 0;
  // max(positions) + 1, saturating: a position of 2^63-1 gives 2^63-1, never a wrapped negative length.
  for (int64_t p : positions) n = std::max(n, p == INT64_MAX ? INT64_MAX : p + 1);
  return n;
}

Tolerance GoldenCase::Tol(const std::string& role, Tolerance fallback) const {
  if (j_.contains("tolerance") && j_["tolerance"].contains(role)) {
    const json& t = j_["tolerance"][role];
    Tolerance out{t.value("atol", 0.0), t.value("rtol", 0.0), {}};
    if (t.contains("nan_at") && t["nan_at"].is_array())
      for (const json& i : t["nan_at"]) out.nan_at.push_back(i.get<int64_t>());
    if (t.contains("nan_at") && !t.contains("atol") && !t.contains("rtol")) {
      out.atol = fallback.atol;
      out.rtol = fallback.rtol;
    }
    return out;
  }
  return fallback;
}

std::vector<std::string> GoldenCase::OutputRoles() const {
  std::vector<std::string> roles;
  for (auto& [role, file] : j_["files"].items())
    if (role != "positions" && role != "input" && role != "relative_positions" && role != "freq_factors")
      roles.push_back(role);
  return roles;
}

Status Compare(const std::string& role, std::span<const double> got, std::span<const double> want, Tolerance tol) {
  if (want.size() != got.size())
    return InvalidArgumentError(fmt::format("{}: {} values computed, reference has {}", role, got.size(), want.size()));
  // Where NaN is expected: nan_at's indices (each within the role), sorted for lookup.
  std::vector<int64_t> nan_at = tol.nan_at;
  std::sort(nan_at.begin(), nan_at.end());
  for (int64_t i : nan_at)
    if (i < 0 || static_cast<uint64_t>(i) >= got.size())
      return InvalidArgumentError(
          fmt::format("{}: tolerance nan_at index {} is outside the role's {} elements", role, i, got.size()));
  size_t nan_bad = 0, first_nan = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool expected_nan = std::binary_search(nan_at.begin(), nan_at.end(), static_cast<int64_t>(i));
    const bool nan = std::isnan(got[i]) || std::isnan(want[i]);
    const bool ok = expected_nan ? std::isnan(got[i]) && std::isnan(want[i]) : !nan;
    if (!ok && nan_bad++ == 0) first_nan = i;
  }
  if (nan_bad)
    return InvalidArgumentError(fmt::format(
        "{}: {} of {} elements are NaN where the case does not expect it (or not NaN where its tolerance nan_at "
        "says NaN); first at flat index {}: got {:.9g}, want {:.9g}",
        role, nan_bad, got.size(), first_nan, got[first_nan], want[first_nan]));
  double worst_excess = 0;
  size_t worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;  // listed in nan_at: checked above
    const double diff = std::fabs(got[i] - want[i]);
    const double allowed = tol.atol + tol.rtol * std::fabs(want[i]);
    if (!(diff <= allowed)) {
      ++bad;
      if (!(diff - allowed <= worst_excess)) {
        worst_excess = diff - allowed;
        worst = i;
      }
    }
  }
  if (bad)
    return InvalidArgumentError(fmt::format(
        "{}: {} of {} elements outside atol {:g} rtol {:g}; worst at flat index {}: got {:.9g}, want {:.9g}", role, bad,
        got.size(), tol.atol, tol.rtol, worst, got[worst], want[worst]));
  return OkStatus();
}

Status Compare(const std::string& role, std::span<const double> got, const Array& want_array, Tolerance tol) {
  POSENC_ASSIGN_OR_RETURN(Array want64, want_array.AsType(DType::kF64));
  if (want64.span<double>().size() != got.size())
    return InvalidArgumentError(fmt::format("{}: {} values computed, reference has {} (shape {})", role, got.size(),
                                            want64.span<double>().size(), ShapeToString(want_array.shape())));
  return Compare(role, got, want64.span<double>(), tol);
}

Status CompareInts(const std::string& role, std::span<const int64_t> got, const Array& want_array) {
  POSENC_ASSIGN_OR_RETURN(Array want64, want_array.AsType(DType::kI64));
  std::span<const int64_t> want = want64.span<int64_t>();
  if (want.size() != got.size())
    return InvalidArgumentError(fmt::format("{}: {} values computed, reference has {}", role, got.size(), want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return InvalidArgumentError(fmt::format("{}: index {}: got {}, want {}", role, i, got[i], want[i]));
  return OkStatus();
}

std::vector<double> ToDoubles(const Array& a) {
  Result<Array> d = a.AsType(DType::kF64);
  if (!d.ok()) return {};
  return std::vector<double>(d->span<double>().begin(), d->span<double>().end());
}

}  // namespace posenc::golden
