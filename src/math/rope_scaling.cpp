// ComputeRopeFrequencies: each scaling as a pure function of the config and the sequence length.
#include <cmath>

#include <fmt/format.h>

#include "posenc/rope_config.hpp"

namespace posenc {

std::string_view ToString(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "default";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kNtk: return "ntk";
    case RopeScalingType::kDynamicNtk: return "dynamic";
    case RopeScalingType::kYarn: return "yarn";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kLongRope: return "longrope";
    case RopeScalingType::kProportional: return "proportional";
    case RopeScalingType::kGgml: return "ggml";
  }
  return "unknown";
}

Result<RopeFrequencies> ComputeRopeFrequencies(const RopeConfig& config, int64_t seq_len) {
  POSENC_RETURN_IF_ERROR(config.layout.Validate());
  if (seq_len < 0) return InvalidArgumentError(fmt::format("rope frequencies: seq_len {} is negative", seq_len));
  switch (config.scaling.type) {
    case RopeScalingType::kNone:
      return DefaultRopeFrequencies(config.layout.rotary_dim, config.base);
    default:
      return UnimplementedError(fmt::format("rope scaling '{}' is not implemented yet", ToString(config.scaling.type)));
  }
}

}  // namespace posenc
