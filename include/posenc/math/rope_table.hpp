// RopeTable: float32 cos/sin rows of every position below a bound, built once and shared.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/core/status.hpp"
#include "posenc/core/table_alloc.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

// cos/sin for positions [0, num_positions), built once and shared by every layer and head
// (immutable after Build: safe to read from many threads). Positions at or past num_positions are
// computed on the fly from the same frequencies and precision, so a table of size 0 is valid.
class ParallelRunner;  // posenc/core/parallel.hpp

class RopeTable {
 public:
  // Rows are filled over `parallel` (nullptr: posenc's internal pool); the table is bit-identical for
  // every runner and thread count.
  static Result<RopeTable> Build(RopeFrequencies freqs, int64_t num_positions, RopePrecision precision,
                                 ParallelRunner* parallel = nullptr);
  // Multi-axis rows (posenc/math/multi_axis.hpp): row t holds token t's cos/sin with pair j at
  // positions[pair_component[j] * T + t], for positions of shape [num_components, T] (component-major,
  // T = positions.size() / num_components); each entry is what ComputeCosSin gives for that pair at that
  // position in `precision`. Rotate with ApplyRope at positions 0 .. T-1 (row indices). Errors
  // (kInvalidArgument / kOutOfRange) name the pair, component or position: pair_component not one per
  // frequency or a component outside [0, num_components), positions not a multiple of num_components,
  // a position outside [0, kMaxRopePosition). Positions at or past num_positions() are not rows of this
  // table (CosSin would give 1-D rows of the frequencies there).
  static Result<RopeTable> BuildPerToken(RopeFrequencies freqs, std::span<const int64_t> pair_component,
                                         int64_t num_components, std::span<const int64_t> positions,
                                         RopePrecision precision, ParallelRunner* parallel = nullptr);

  int64_t num_pairs() const { return static_cast<int64_t>(freqs_.inv_freq.size()); }
  int64_t num_positions() const { return num_positions_; }
  RopePrecision precision() const { return precision_; }
  const RopeFrequencies& frequencies() const { return freqs_; }
  // Precondition: 0 <= pos < num_positions().
  const float* cos_row(int64_t pos) const { return cos_.data() + pos * num_pairs(); }
  const float* sin_row(int64_t pos) const { return sin_.data() + pos * num_pairs(); }
  // Any position in [0, kMaxRopePosition): from the table or computed.
  void CosSin(int64_t pos, float* cos_out, float* sin_out) const;

 private:
  RopeFrequencies freqs_;
  int64_t num_positions_ = 0;
  RopePrecision precision_ = RopePrecision::kReference;
  std::vector<float, detail::TableAllocator<float>> cos_, sin_;
};

}  // namespace posenc
