// RMSNorm of attention heads with a learned weight: the QK-norm that Qwen3, Gemma 3, OLMo 2, GLM-4.5
// and others apply to q and k right before RoPE. The fast path (rms_norm.cpp, per-target
// rms_norm-inl.hpp) and the scalar reference (rms_norm_ref.cpp) beside it.
//
// One definition, the same float32 operations in the same order on every SIMD target and in the
// reference, so every target gives the same bytes:
//   * sum of squares of a head's n values (each widened exactly to float32): 16 float32 partial sums,
//     partial j adding x[i] * x[i] for i = j, j + 16, j + 32, ... in increasing i; then folded as a
//     tree, p[j] += p[j + 8] (j < 8), p[j] += p[j + 4] (j < 4), p[j] += p[j + 2], p[0] += p[1].
//     Whole-row scope (OLMo 2: one norm over all heads of a token): the heads' sums added in head
//     order, s = ((s_0 + s_1) + s_2) + ...;
//   * mean = sum / n (n = head_dim, or heads * head_dim for the whole row), r = 1 / sqrt(mean + eps),
//     each a float32 operation (torch.rsqrt on CPU is 1 / sqrt);
//   * per value, with y = x * r in float32, and w the weight as float32 (a 16-bit weight widens
//     exactly), the style:
//       kCastThenScale: round_T(w * round_T(y))       Llama/Qwen3/GLM `weight * x.to(input_dtype)`
//       kScaleThenCast: round_T(w * y)                OLMo 2 `(weight * x).to(input_dtype)`
//       kOnePlusWeight: round_T(y * (1 + w))          Gemma `(x * (1.0 + weight.float())).type_as(x)`
//     round_T rounds to the activation dtype (nearest even; a no-op for float32).
// PyTorch sums the squares in its own vectorised order, so posenc and PyTorch can differ in the last
// bit of r; posenc's order is fixed so that fused and unfused calls agree bit for bit.
//
// Example (Qwen3-8B, per head, q_norm.weight as float32):
//   HeadRmsNorm qn{q_norm_weight, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead};
//   Status s = ApplyHeadRmsNorm(qn, q_view, q_view);  // in place
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

class ParallelRunner;  // posenc/core/parallel.hpp

enum class RmsNormStyle : uint8_t { kCastThenScale, kScaleThenCast, kOnePlusWeight };
// "cast_then_scale", "scale_then_cast", "one_plus_weight"
std::string_view ToString(RmsNormStyle style);

enum class RmsNormScope : uint8_t { kPerHead, kWholeRow };
// "per_head", "whole_row"
std::string_view ToString(RmsNormScope scope);

struct HeadRmsNorm {
  std::span<const float> weight;  // head_dim values (per head) or heads * head_dim (whole row); empty: no norm
  float eps = 1e-6f;              // finite and > 0
  RmsNormStyle style = RmsNormStyle::kCastThenScale;
  RmsNormScope scope = RmsNormScope::kPerHead;
  bool enabled() const { return !weight.empty(); }
};

// The weight's length against x's heads and head_dim, eps finite and > 0, the weight finite, x a
// float32/float16/bfloat16 view; the error is one line naming `what` and the value.
Status ValidateHeadRmsNorm(const HeadRmsNorm& norm, const HeadsView& x, const char* what);

// out = RMSNorm(in) as defined above; `out` may be `in` exactly and must not partly overlap it (same
// shape and dtype). Nothing is written on error. Split over tokens (nullptr: the internal pool);
// results do not depend on the runner.
Status ApplyHeadRmsNorm(const HeadRmsNorm& norm, HeadsView in, HeadsView out, ParallelRunner* parallel = nullptr);
// The scalar reference: plain loops, the same float32 operations in the same order.
Status ApplyHeadRmsNormReference(const HeadRmsNorm& norm, HeadsView in, HeadsView out);

}  // namespace posenc
