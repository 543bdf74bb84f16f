// Internal to RopeConfig (rope_config.cpp): the scaling rows' range rules, one key at a time
// (CheckRopeScalingKey, declared in rope_scaling_table.hpp), key against key (ScalingOrderRule) and
// each row's rules across keys (RopeScalingSpec::cross_rules).
#pragma once

#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"
#include "math/rope_scaling_table.hpp"

namespace posenc::rope_scaling {

// The greater key at least the lesser.
Status CheckOrder(const RopeConfig& c, const ScalingOrderRule& o);

// NTK's exponent R/(R-2) needs R > 2.
Status NtkRules(const RopeConfig& c);
// LongRoPE's attention factor divides by log(original_max_position_embeddings).
Status LongRopeRules(const RopeConfig& c);
// Proportional RoPE spans the whole head and rotates at least one pair.
Status ProportionalRules(const RopeConfig& c);
// ggml: the two LongRoPE lists come together with n_ctx_orig; the YaRN ramp (ext_factor != 0) needs
// n_ctx_orig and ordered betas.
Status GgmlRules(const RopeConfig& c);

}  // namespace posenc::rope_scaling
