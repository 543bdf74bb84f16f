// The config readers on a parsed JSON value: `posenc rope --config` and ParseRopeConfigJson parse a
// text once and hand the value to the Hugging Face or ggml reader; the text entry points
// (ParseHfConfig, RopeConfigFromGgmlParams) are thin wrappers over these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/json_util.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/math/rope_config.hpp"
#include "math/rope_scaling_table.hpp"

namespace posenc::config_json {

// The text parsed once by ParseJsonText (nesting bounded, syntax errors with byte offset and hint),
// `what` naming the source ("config x.json"); counted for ConfigJsonParses().
Result<nlohmann::json> ParseText(std::string_view text, std::string_view what);
// For tests: how many JSON texts the config readers (ParseHfConfig, RopeConfigFromGgmlParams,
// ParseRopeConfigJson) have parsed in this process.
int64_t ConfigJsonParses();
// The file read by ReadFileToString (regular files only, bounded) and parsed by ParseText.
Result<nlohmann::json> ReadFileJson(const std::string& path, std::string_view what);

Result<PositionScheme> ParseHfConfigJson(const nlohmann::json& j, const std::string& source,
                                         const HfConfigOptions& options);
Result<RopeConfig> RopeConfigFromGgmlJson(const nlohmann::json& root, int64_t head_dim, const std::string& source);

// One scaling key of `row` from the object `p`, by its kind (no range rule: ValidateRopeConfig's);
// false when `p` does not have it. `precision`: kFloat32 where the computation using the keys is
// float32 (ggml's parameters), so a value float32 cannot hold is refused as it is read.
inline Result<bool> ReadScalingKey(const nlohmann::json& p, const RopeScalingKey& k, const std::string& source,
                                   RopeConfig* rc, json_util::Precision precision = json_util::Precision::kFloat64) {
  using namespace json_util;  // NOLINT
  if (!Has(p, k.name)) return false;
  switch (k.kind()) {
    case ScalingKeyKind::kNumber: {
      POSENC_ASSIGN_OR_RETURN(*k.In<double>(*rc), GetNumber(p, k.name, source, precision));
      break;
    }
    case ScalingKeyKind::kOptionalNumber: {
      POSENC_ASSIGN_OR_RETURN(double v, GetNumber(p, k.name, source, precision));
      *k.In<std::optional<double>>(*rc) = v;
      break;
    }
    case ScalingKeyKind::kInteger: {
      POSENC_ASSIGN_OR_RETURN(*k.In<int64_t>(*rc), GetInt(p, k.name, source));
      break;
    }
    case ScalingKeyKind::kBoolean: {
      POSENC_ASSIGN_OR_RETURN(*k.In<bool>(*rc), GetBool(p, k.name, source));
      break;
    }
    case ScalingKeyKind::kNumberList: {
      POSENC_ASSIGN_OR_RETURN(*k.In<std::vector<double>>(*rc), GetNumberList(p, k.name, source, precision));
      break;
    }
  }
  return true;
}

}  // namespace posenc::config_json
