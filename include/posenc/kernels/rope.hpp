// RoPE kernels: rotate query and key heads in place or out of place, the fast SIMD path and the
// scalar reference beside it (rope.cpp, rope_ref.cpp).
//
// Example:
//   RotaryLayout layout{RopePairing::kHalf, /*head_dim=*/128, /*rotary_start=*/0, /*rotary_dim=*/128};
//   auto freqs = DefaultRopeFrequencies(128, 500000.0).value();      // theta_i = base^(-2i/R)
//   auto table = RopeTable::Build(freqs, 8192, RopePrecision::kReference).value();
//   Status s = ApplyRopeQK({layout, &table, positions}, q_view, k_view);  // in place
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_table.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

class ParallelRunner;  // posenc/core/parallel.hpp

struct RopeArgs {
  RotaryLayout layout;
  const RopeTable* table = nullptr;
  std::span<const int64_t> positions;  // one per token, in [0, kMaxRopePosition)
  RopeDirection direction = RopeDirection::kForward;
  // Threads for the fast path (ApplyRope, ApplyRopeQK): nullptr uses posenc's internal pool. Results
  // are bit-identical for every runner and thread count. The reference ignores it.
  ParallelRunner* parallel = nullptr;
};

// Validates args against a view: layout valid, table pairs == layout pairs, head_dim matches,
// positions.size() == tokens, every position in range (the error names the index and value).
Status ValidateRope(const RopeArgs& args, const HeadsView& x, const char* what);

// Rotates `x` in place. Errors as ValidateRope; nothing is written on error.
Status ApplyRope(const RopeArgs& args, HeadsView x);
// Out of place: out = RoPE(in); `out` may be `in` exactly, and must not partly overlap it.
Status ApplyRope(const RopeArgs& args, HeadsView in, HeadsView out);
// Queries and keys at once (grouped-query attention: k may have fewer heads), both in place.
// An empty k (tokens == 0 or heads == 0) is allowed. Values are never passed here.
Status ApplyRopeQK(const RopeArgs& args, HeadsView q, HeadsView k);

// The scalar reference: plain loops, float64 arithmetic on the table's float32 cos/sin, one rounding
// to the storage type. Same contract as ApplyRope; the oracle every fast kernel is tested against.
Status ApplyRopeReference(const RopeArgs& args, HeadsView in, HeadsView out);

}  // namespace posenc
