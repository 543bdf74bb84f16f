// Re-rotating cached keys when a scaling's frequencies change (dynamic NTK as the sequence grows,
// LongRoPE's switch from short_factor to long_factor past original_max_position_embeddings).
//
// A RoPE rotation by angle a2 equals the rotation by a2 - a1 applied after the rotation by a1, and
// the attention scaling s multiplies cos and sin. So a key k_old = s_old * R(p * w_old) k, already in
// the KV cache, becomes k_new = s_new * R(p * w_new) k by one more RoPE with per-pair frequency
// d_i = w_new_i - w_old_i (possibly negative) and scaling s_new / s_old:
//     k_new = (s_new / s_old) * R(p * d) k_old.
// No pre-rotation keys are needed; the cost is one RoPE pass over the cache.
//
// Precision (the same enum as RoPE):
//   kExact:     d_i is formed in float64 from the float64 frequencies, angle = p * d_i in float64,
//               cos/sin in float64, rounded once to float32. Against rotating the original keys with
//               w_new directly in kExact, the result is within about 1e-6 * max|k| (two float32
//               roundings of cos/sin and of the stored key); the unit test checks 2e-6 up to p = 131072.
//   kReference: angle = float32(p) * float32(d_i) in float32 (as PyTorch would form a rotation's
//               angle). The float32 angle error of the original rotation stays in the key; a fresh
//               reference-precision rotation has its own, so the two agree to about p * 2^-24 rad.
//
// Example (cache [T, H_kv, D] rotated at positions 0..T-1 with the short factors, now past the switch):
//   auto f_old = ComputeRopeFrequencies(cfg, 4096).value();
//   auto f_new = ComputeRopeFrequencies(cfg, 4097).value();
//   RerotateArgs a{cfg.layout, positions, &f_old, &f_new, RopePrecision::kExact};
//   Status s = RerotateKeys(a, cache_view);    // in place
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/array.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class ParallelRunner;

struct RerotateArgs {
  RotaryLayout layout;
  std::span<const int64_t> positions;                // one per cached token, in [0, kMaxRopePosition)
  const RopeFrequencies* old_frequencies = nullptr;  // what the cache was rotated with
  const RopeFrequencies* new_frequencies = nullptr;  // what it should be rotated with
  RopePrecision precision = RopePrecision::kExact;
  ParallelRunner* parallel = nullptr;  // nullptr: posenc's internal pool (results do not depend on it)
};

// The rotation that takes keys rotated with `old_f` to keys rotated with `new_f`: inv_freq[i] =
// new.inv_freq[i] - old.inv_freq[i] (float64, may be negative), attention_scaling = new / old.
// kInvalidArgument: pair counts differ, a frequency not finite, old attention_scaling 0 or not finite.
Result<RopeFrequencies> RerotationFrequencies(const RopeFrequencies& old_f, const RopeFrequencies& new_f);

// Re-rotates `keys` ([tokens, heads, head_dim], f32/f16/bf16, strided views allowed: a KV cache
// slot) in place with the SIMD RoPE kernels. cos/sin are computed per token on the fly (no table:
// the positions may be sparse). Errors as RerotationFrequencies and ValidateRope (layout, pair count
// vs layout, positions count and range; the message names the field); nothing is written on error.
// Where old and new frequencies and scalings are equal the keys are left untouched.
Status RerotateKeys(const RerotateArgs& args, HeadsView keys);

// The scalar twin (plain loops, ApplyRopeReference), the oracle RerotateKeys is tested against.
Status RerotateKeysReference(const RerotateArgs& args, HeadsView keys);

}  // namespace posenc
