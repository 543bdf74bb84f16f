// One reader of golden cases (../shared/golden, format: golden/FORMAT.md) and the one tolerance check,
// shared by `posenc golden` (tools/posenc/golden_runner.cpp) and the golden tests (tests/golden).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc::golden {

struct Tolerance {
  Tolerance(double a = 0, double r = 0, std::vector<int64_t> nan = {}) : atol(a), rtol(r), nan_at(std::move(nan)) {}
  double atol = 0, rtol = 0;
  // Flat indices where the reference's value is NaN on purpose (case.json: tolerance.<role>.nan_at):
  // there, and only there, a NaN is expected, and the computed value must be NaN too.
  std::vector<int64_t> nan_at;
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
  // kNotFound: no case.json; kDataLoss: not a JSON object, no "files" object, or a field the runners
  // read of the wrong type (naming the field, its value and the type expected): after Load, the
  // accessors below and the runners' reads of those fields do not throw.
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

// The type check GoldenCase::Load runs on case.json (`path` names it in the message).
Status CheckFieldTypes(const nlohmann::json& j, const std::string& path);

// got (float64 values) against want elementwise: |got - want| <= atol + rtol * |want|. A NaN (in want
// or got) fails, except at the indices tol.nan_at lists, where both must be NaN. kInvalidArgument
// naming the role, the count outside, the tolerance and the worst element (or the first NaN).
Status Compare(const std::string& role, std::span<const double> got, const Array& want, Tolerance tol);
Status Compare(const std::string& role, std::span<const double> got, std::span<const double> want, Tolerance tol);
// Integer roles (buckets, pair_component, layer_schedule): exactly equal.
Status CompareInts(const std::string& role, std::span<const int64_t> got, const Array& want);

// a's values as float64 (empty for a non-numeric array).
std::vector<double> ToDoubles(const Array& a);

}  // namespace posenc::golden
