// Multi-axis RoPE apply (posenc/math/multi_axis.hpp): positions of shape [C, T], pair j rotated by
// positions[pair_component[j], t] * inv_freq[j]. The fast path builds a per-token RopeTable
// (RopeTable::BuildPerToken) and runs posenc's SIMD RoPE kernels (ApplyRope) at row indices 0 .. T-1;
// the scalar reference beside it is the formula in plain loops.
//
// Example (Qwen2.5-VL text, positions [3, T] from the model's get_rope_index):
//   auto scheme = LoadHfConfig("config.json").value();             // rope.multi_axis is set
//   auto plan = ComputeMultiAxisRope(scheme.rope, seq_len).value();
//   MultiAxisRopeArgs args{scheme.rope.layout, &plan.freqs, plan.pair_component, plan.num_components, positions};
//   Status s = ApplyMultiAxisRopeQK(args, q_view, k_view);
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

class ParallelRunner;  // posenc/core/parallel.hpp

struct MultiAxisRopeArgs {
  RotaryLayout layout;
  const RopeFrequencies* freqs = nullptr;   // one per rotary pair
  std::span<const int64_t> pair_component;  // one per rotary pair, in [0, num_components)
  int64_t num_components = 1;
  std::span<const int64_t> positions;  // [num_components, tokens], component-major, each in [0, kMaxRopePosition)
  RopePrecision precision = RopePrecision::kReference;
  RopeDirection direction = RopeDirection::kForward;
  ParallelRunner* parallel = nullptr;  // fast path only; results are bit-identical for any runner
};

// Checks args against a view: layout valid, freqs given with one frequency and one component per pair,
// components in range, positions.size() == num_components * tokens, every position in range. Errors
// name the pair / component / position and its value.
Status ValidateMultiAxisRopeArgs(const MultiAxisRopeArgs& args, const HeadsView& x, const char* what);

// Out of place (`out` may be `in` exactly) and in place; queries and keys at once (k may have fewer
// heads; an empty k is allowed). Nothing is written on error.
Status ApplyMultiAxisRope(const MultiAxisRopeArgs& args, HeadsView in, HeadsView out);
Status ApplyMultiAxisRope(const MultiAxisRopeArgs& args, HeadsView x);
Status ApplyMultiAxisRopeQK(const MultiAxisRopeArgs& args, HeadsView q, HeadsView k);

// The scalar reference: for each token and pair, cos/sin as ComputeCosSin gives them for that pair at
// its component's position in args.precision, the rotation in float64, one rounding to the storage
// type. The oracle the fast path is tested against (same float32 cos/sin, so within the SIMD kernels'
// 2-ulp bound of it).
Status ApplyMultiAxisRopeReference(const MultiAxisRopeArgs& args, HeadsView in, HeadsView out);

}  // namespace posenc
