// RoPE from the caller's own cos and sin rows, with exactly the arithmetic of Hugging Face's
// `q * cos + rotate_half(q) * sin` in PyTorch: for an output element y[j] of the rotary window,
//     y[j] = round(round(x[j] * cos[j]) + round(r[j] * sin[j]))
// with r = rotate_half(x) (half pairing: r[i] = -x[i + R/2], r[i + R/2] = x[i]) or rotate_every_two
// (interleaved: r[2i] = -x[2i + 1], r[2i + 1] = x[2i]); each product and the sum computed in float32 and
// rounded to the storage type (float32, float16, bfloat16: nearest, ties to even) after each operation,
// as torch's CPU elementwise kernels do (verified against torch 1.13: bit for bit, where one rounding
// of the whole expression is not). No fused multiply-add. Dims outside the window are copied.
// Every result is bit-identical between the SIMD kernel and the reference except NaN results, which
// are NaN (their payload and sign follow the CPU's operand order, as torch's own do).
//
// The cos/sin rows are read as given (element j of row t is cos[t, j], not recomputed from a frequency),
// so a caller holding Hugging Face's cos/sin gets Hugging Face's bits.
#pragma once

#include <cstdint>

#include "posenc/core/array.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

// One row of `width` cos and one of sin per token (HF's [batch, seq, rotary_dim] for one batch
// element), in the tensor's dtype; element stride 1, token strides in elements (0 broadcasts a row).
struct CosSinRows {
  const void* cos = nullptr;
  const void* sin = nullptr;
  DType dtype = DType::kF32;
  int64_t tokens = 0;
  int64_t width = 0;
  int64_t cos_token_stride = 0;
  int64_t sin_token_stride = 0;
};

struct RopeCosSinArgs {
  RotaryLayout layout;  // pairing, head_dim, the window [rotary_start, rotary_start + rotary_dim)
  CosSinRows rows;      // width == layout.rotary_dim, tokens == the input's tokens
  ParallelRunner* parallel = nullptr;
};

// kInvalidArgument naming the field: layout, dtypes (input, output and rows alike), shapes, strides,
// an output that partly overlaps the input (in place, out == in, is allowed).
Status ValidateRopeCosSin(const RopeCosSinArgs& args, const HeadsView& in, const HeadsView& out);

// The SIMD kernel (best Highway target, threads over tokens); bit-identical to the reference.
Status ApplyRopeCosSin(const RopeCosSinArgs& args, HeadsView in, HeadsView out);

// The scalar reference: the formula above, one element at a time.
Status ApplyRopeCosSinReference(const RopeCosSinArgs& args, HeadsView in, HeadsView out);

}  // namespace posenc
