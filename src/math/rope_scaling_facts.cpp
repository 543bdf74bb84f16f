// ScalingParamsOf and FrequenciesDependOnSeqLen: read from the scaling's row of RopeScalings().
#include "posenc/math/rope_scaling_facts.hpp"

#include <algorithm>
#include <limits>

namespace posenc {

std::vector<ScalingParam> ScalingParamsOf(const RopeConfig& config) {
  std::vector<ScalingParam> out;
  RopeConfig& c = const_cast<RopeConfig&>(config);  // ScalingField points into it; only read here
  for (const RopeScalingKey& k : RopeScalingOf(config.scaling.type).keys) {
    const ScalingField f = k.field(c);
    ScalingParam p{.name = k.name, .kind = k.kind};
    switch (k.kind) {
      case ScalingKeyKind::kNumber: p.number = *f.number; break;
      case ScalingKeyKind::kInteger: p.integer = *f.integer; break;
      case ScalingKeyKind::kBoolean: p.boolean = *f.boolean; break;
      case ScalingKeyKind::kOptionalNumber:
        if (!f.optional->has_value()) continue;
        p.number = **f.optional;
        break;
      case ScalingKeyKind::kNumberList:
        if (k.rule == ScalingKeyRule::kPairListIfGiven && f.list->empty()) continue;
        p.list = *f.list;
        break;
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

}  // namespace posenc
