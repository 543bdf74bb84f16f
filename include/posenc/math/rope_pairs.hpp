// What each RoPE pair of a config does at one sequence length, as `posenc inspect` lists it (and the
// Python package's Scheme.pairs): its dims, frequency, wavelength, divisor against the unscaled
// frequency, regime, and for multi-axis RoPE its position component. One computation for every face.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc {

struct RopePairInfo {
  int64_t pair = 0;
  int64_t first_dim = 0, second_dim = 0;  // the two dims it rotates (RotaryLayout::first/second)
  double frequency = 0;                   // radians per position (0: unrotated)
  std::optional<double> wavelength;       // 2 pi / frequency in positions; none when unrotated
  std::optional<double> divisor;          // unscaled / scaled frequency; none when unrotated
  PairRegime regime = PairRegime::kUnscaled;
  int64_t component = -1;  // multi-axis RoPE: the position component (t, h, w, ...); else -1
};

struct RopePairTable {
  std::vector<RopePairInfo> pairs;
  double attention_scaling = 1.0;
};

// The pairs of `config` at `seq_len` (the frequencies of ComputeRopeFrequencies, or of the multi-axis
// plan for a config with multi_axis). Errors as those functions'.
Result<RopePairTable> DescribeRopePairs(const RopeConfig& config, int64_t seq_len);

}  // namespace posenc
