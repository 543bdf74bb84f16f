// Strided tensors over caller memory, as another framework hands them over (numpy's
// __array_interface__, DLPack, torch's data_ptr/shape/stride): whether two of them share an element,
// and how a [tokens, heads, head_dim] or [batch, heads, seq, head_dim] one becomes the HeadsViews the
// kernels take. One answer for every binding and the CLI (python/src reads the descriptors, this
// decides what they mean).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/core/array.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// Any rank; strides in elements, any sign; data is the element at index 0 of every axis.
struct StridedTensor {
  std::byte* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape, stride;
};

// Whether two tensors share no element: their byte spans are apart, or both are slices of the same
// rows (views of one fused projection output, as a QKV split cuts it) whose offsets within a row do
// not meet. Exact for any row length; computed in 128 bits, so hostile strides cannot wrap it. Tensors
// without elements share nothing.
bool StridedApart(const StridedTensor& a, const StridedTensor& b);
// The same data, dtype, shape and strides.
bool SameStrided(const StridedTensor& a, const StridedTensor& b);
// A HeadsView as a rank-3 StridedTensor [tokens, heads, head_dim] (head_dim stride 1).
StridedTensor StridedOf(const HeadsView& v);

// The axis order of a tensor of heads: "thd" [tokens, heads, head_dim] (the default for rank 3),
// "htd" [heads, tokens, head_dim], "bhsd" [batch, heads, seq, head_dim] (the default for rank 4:
// Hugging Face's q and k, possibly a transposed view of [B, S, H, D]) and "bshd".
struct HeadsPlan {
  std::vector<HeadsView> views;  // one per batch element, or one for the whole batch (folded)
  int64_t batch = 1;             // 1 for rank 3
  int64_t tokens = 0;            // per batch element
  int64_t head_dim = 0;
};
// The views of `x` (named `what` in errors): order "" is the rank's default. With `fold`, a batch whose
// elements line up as more tokens of one view (one token each, as in decode, or token-major elements
// back to back) is one view of batch * seq tokens: one kernel call instead of batch. kInvalidArgument
// naming `what` for a rank other than 3 or 4, an order that does not fit, a head_dim axis that is not
// contiguous, negative strides, a batch stride inside one element, or an axis of extent > 1 and
// stride 0. The views are not Validate()d (the kernel's check does that, naming the argument).
Result<HeadsPlan> PlanHeads(const StridedTensor& x, std::string_view order, const char* what, bool fold = true);

}  // namespace posenc
