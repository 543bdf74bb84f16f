// ScalingParamsOf, FrequenciesDependOnSeqLen and AllScalingKeyNames: read from the scaling table.
#include "posenc/math/rope_scaling_facts.hpp"

#include <algorithm>
#include <limits>

#include "math/rope_scaling_table.hpp"

namespace posenc {

std::vector<ScalingParam> ScalingParamsOf(const RopeConfig& config) {
  std::vector<ScalingParam> out;
  for (const RopeScalingKey& k : RopeScalingOf(config.scaling.type).keys) {
    ScalingParam p;
    p.name = k.name;
    p.kind = k.kind();
    switch (p.kind) {
      case ScalingKeyKind::kNumber: p.number = *k.In<double>(config); break;
      case ScalingKeyKind::kInteger: p.integer = *k.In<int64_t>(config); break;
      case ScalingKeyKind::kBoolean: p.boolean = *k.In<bool>(config); break;
      case ScalingKeyKind::kOptionalNumber: {
        const std::optional<double>& v = *k.In<std::optional<double>>(config);
        if (!v.has_value()) continue;
        p.number = *v;
        break;
      }
      case ScalingKeyKind::kNumberList: {
        const std::vector<double>& v = *k.In<std::vector<double>>(config);
        if (k.rule == ScalingKeyRule::kPairListIfGiven && v.empty()) continue;
        p.list = v;
        break;
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

bool FrequenciesDependOnSeqLen(const RopeConfig& config) {
  const RopeScalingSpec& row = RopeScalingOf(config.scaling.type);
  const int64_t orig = std::max<int64_t>(config.scaling.original_max_position_embeddings, 0);
  const int64_t max = std::max<int64_t>(config.max_position_embeddings, 0);
  constexpr int64_t kLast = std::numeric_limits<int32_t>::max();  // (positions stay below 2^31)
  const int64_t first = row.regime_of(config, 1);
  for (const int64_t len : {orig, orig + 1, max, max + 1, kLast}) {
    if (len >= 1 && len <= kLast && row.regime_of(config, len) != first) return true;
  }
  return false;
}

std::vector<ScalingKeyNames> AllScalingKeyNames() {
  std::vector<ScalingKeyNames> out;
  for (const RopeScalingSpec& row : RopeScalings()) {
    ScalingKeyNames names;
    names.scaling = row.name;
    for (const RopeScalingKey& k : row.keys) names.keys.push_back(k.name);
    out.push_back(std::move(names));
  }
  return out;
}

}  // namespace posenc
