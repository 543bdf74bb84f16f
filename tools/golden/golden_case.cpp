// Golden-case reading and the tolerance check (see golden_case.hpp).
#include "golden_case.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

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

Result<GoldenCase> GoldenCase::Load(const std::string& dir) {
  GoldenCase c;
  c.dir_ = dir;
  const std::string path = (fs::path(dir) / "case.json").string();
  POSENC_ASSIGN_OR_RETURN(c.j_, ReadJsonFile(path, path));
  if (!c.j_.is_object()) return DataLossError(fmt::format("{}: not a JSON object", path));
  if (!c.j_.contains("files") || !c.j_["files"].is_object())
    return DataLossError(fmt::format("{}/case.json: no 'files' object", dir));
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
  if (j_.contains("seq_len") && j_["seq_len"].is_number_integer()) return j_["seq_len"].get<int64_t>();
  int64_t n = 0;
  for (int64_t p : positions) n = std::max(n, p + 1);
  return n;
}

Tolerance GoldenCase::Tol(const std::string& role, Tolerance fallback) const {
  if (j_.contains("tolerance") && j_["tolerance"].contains(role)) {
    const json& t = j_["tolerance"][role];
    return {t.value("atol", 0.0), t.value("rtol", 0.0)};
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
  double worst_excess = 0;
  size_t worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(got[i] - want[i]);
    const double allowed = tol.atol + tol.rtol * std::fabs(want[i]);
    if (!(diff <= allowed) && !(std::isnan(got[i]) && std::isnan(want[i]))) {
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
