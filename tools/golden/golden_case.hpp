// One reader of golden cases (../shared/golden, format: golden/FORMAT.md) and the one tolerance check,
// shared by `posenc golden` (tools/posenc/golden_runner.cpp) and the golden tests (tests/golden).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc::golden {

struct Tolerance {
  double atol = 0, rtol = 0;
};

// FORMAT.md: a float role with no tolerance entry is compared with rtol 2^-22 (about two float32 ulps).
inline constexpr double kTwoUlpRtol = 1.0 / (1 << 22);

// The layer and site a case holds (FORMAT.md: layer_index, layer_type, rotary_site) as the options that
// ask a config reader for that rotation; everything the rotation is made of still comes from the config.
HfConfigOptions CaseConfigOptions(const nlohmann::json& case_json);

// Every folder at or under each path that holds a case.json, sorted; kNotFound for a missing path.
Result<std::vector<std::string>> FindGoldenCases(const std::vector<std::string>& paths);

// One case folder: its case.json and its role files.
class GoldenCase {
 public:
  // kNotFound: no case.json; kDataLoss: not a JSON object, or no "files" object.
  static Result<GoldenCase> Load(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& j() const { return j_; }
  std::string scheme() const { return j_.value("scheme", std::string()); }
  bool Has(const std::string& role) const { return j_["files"].contains(role); }
  // The role's .npy file; kNotFound when the case lists no such role.
  Result<Array> Read(const std::string& role) const;
  Result<std::vector<int64_t>> ReadInts(const std::string& role) const;
  Result<std::vector<double>> ReadDoubles(const std::string& role) const;
  // The storage type the reference ran in (`dtype`: float32, the default, float16 or bfloat16).
  DType Storage() const;
  // The sequence length the reference saw: `seq_len` if the case gives it, else max(positions) + 1.
  int64_t SeqLen(std::span<const int64_t> positions) const;
  // The tolerance for `role`: case.json's entry, else `fallback`.
  Tolerance Tol(const std::string& role, Tolerance fallback = {0.0, kTwoUlpRtol}) const;
  // Roles a runner must compare: everything in `files` except the inputs (positions, input,
  // relative_positions, freq_factors).
  std::vector<std::string> OutputRoles() const;

 private:
  std::string dir_;
  nlohmann::json j_;
};

// got (float64 values) against want elementwise: |got - want| <= atol + rtol * |want| (NaN matches
// NaN). kInvalidArgument naming the role, the count outside, the tolerance and the worst element.
Status Compare(const std::string& role, std::span<const double> got, const Array& want, Tolerance tol);
Status Compare(const std::string& role, std::span<const double> got, std::span<const double> want, Tolerance tol);
// Integer roles (buckets, pair_component, layer_schedule): exactly equal.
Status CompareInts(const std::string& role, std::span<const int64_t> got, const Array& want);

// a's values as float64 (empty for a non-numeric array).
std::vector<double> ToDoubles(const Array& a);

}  // namespace posenc::golden
