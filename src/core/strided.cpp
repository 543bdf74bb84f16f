#include "posenc/core/strided.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace posenc {
namespace {

// [first byte, one past the last) that a strided tensor touches; empty (lo == hi) without elements.
struct ByteSpan {
  __int128 lo = 0, hi = 0;
};
ByteSpan SpanOf(const StridedTensor& d) {
  const __int128 base = static_cast<__int128>(reinterpret_cast<uintptr_t>(d.data));
  __int128 lo = 0, hi = 0;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] <= 0) return {base, base};
    const __int128 reach = static_cast<__int128>(d.shape[i] - 1) * d.stride[i];
    (reach < 0 ? lo : hi) += reach;
  }
  const __int128 es = static_cast<__int128>(SizeOf(d.dtype));
  return {base + lo * es, base + (hi + 1) * es};
}
bool Meet(const ByteSpan& a, const ByteSpan& b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

// Where a tensor's elements sit inside rows of `row` elements: every axis steps by a multiple of the
// row or stays inside one (with non-negative strides), so each element is at offset [0, width) of a
// row counted from data. false when the tensor does not decompose that way.
bool InRowWidth(const StridedTensor& d, int64_t row, int64_t* width) {
  __int128 w = 1;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] <= 1) continue;
    if (d.stride[i] < 0) return false;
    if (d.stride[i] % row == 0) continue;
    if (d.stride[i] > row) return false;
    w += static_cast<__int128>(d.shape[i] - 1) * d.stride[i];
    if (w > row) return false;
  }
  *width = static_cast<int64_t>(w);
  return true;
}

std::string Ints(const std::vector<int64_t>& v) { return ShapeToString(v); }

}  // namespace

// Sound for any row length R: a's element at a0 + mR + u (u < wa) and b's at b0 + m'R + u' (u' < wb)
// coincide only if u - u' is r or r - R, r = (b0 - a0) mod R, which r >= wa and r + wb <= R exclude.
// The strides of both tensors are the row lengths tried.
bool StridedApart(const StridedTensor& a, const StridedTensor& b) {
  if (!Meet(SpanOf(a), SpanOf(b))) return true;
  if (SizeOf(b.dtype) != SizeOf(a.dtype)) return false;
  const int64_t es = static_cast<int64_t>(SizeOf(a.dtype));
  const __int128 gap = static_cast<__int128>(reinterpret_cast<uintptr_t>(b.data)) -
                       static_cast<__int128>(reinterpret_cast<uintptr_t>(a.data));
  if (gap % es != 0) return false;
  for (const StridedTensor* d : {&a, &b})
    for (const int64_t row : d->stride) {
      int64_t wa = 0, wb = 0;
      if (row <= 1 || !InRowWidth(a, row, &wa) || !InRowWidth(b, row, &wb)) continue;
      const int64_t r = static_cast<int64_t>(((gap / es) % row + row) % row);  // where b's rows start in a's
      if (r >= wa && static_cast<__int128>(r) + wb <= row) return true;
    }
  return false;
}

bool SameStrided(const StridedTensor& a, const StridedTensor& b) {
  return a.data == b.data && a.dtype == b.dtype && a.shape == b.shape && a.stride == b.stride;
}

StridedTensor StridedOf(const HeadsView& v) {
  return {
      static_cast<std::byte*>(v.data), v.dtype, {v.tokens, v.heads, v.head_dim}, {v.token_stride, v.head_stride, 1}};
}

Result<HeadsPlan> PlanHeads(const StridedTensor& x, std::string_view order, const char* what, bool fold) {
  const std::string name = what;
  const size_t rank = x.shape.size();
  if (x.stride.size() != rank) return InvalidArgumentError(name + ": shape and strides differ in rank");
  if (rank != 3 && rank != 4)
    return InvalidArgumentError(name + ": shape " + Ints(x.shape) +
                                " is not [tokens, heads, head_dim] or [batch, heads, seq, head_dim]");
  const char* const orders[2][2] = {{"thd", "htd"}, {"bhsd", "bshd"}};
  const auto& fit = orders[rank - 3];
  if (order.empty()) order = fit[0];
  if (order != fit[0] && order != fit[1])
    return InvalidArgumentError(name + ": order '" + std::string(order) + "' does not fit a " + std::to_string(rank) +
                                "-d shape (expected one of " + fit[0] + ", " + fit[1] + ")");
  // Axis of each letter ("s" is the tokens of a batch element).
  int t_ax = -1, h_ax = -1, d_ax = -1, b_ax = -1;
  for (size_t i = 0; i < rank; ++i) {
    const char c = order[i];
    (c == 't' || c == 's' ? t_ax : c == 'h' ? h_ax : c == 'd' ? d_ax : b_ax) = static_cast<int>(i);
  }
  const int64_t tokens = x.shape[t_ax], heads = x.shape[h_ax], head_dim = x.shape[d_ax];
  std::vector<int64_t> st = x.stride;
  bool empty = false;
  for (int64_t n : x.shape) empty |= n == 0;
  if (empty)  // no elements: the strides of an empty tensor mean nothing (numpy gives 0)
    for (size_t i = 0; i < rank; ++i) st[i] = static_cast<int>(i) == d_ax ? 1 : std::max<int64_t>(head_dim, 1);
  if (head_dim > 1 && st[d_ax] != 1)
    return InvalidArgumentError(name + ": head_dim axis has stride " + std::to_string(st[d_ax]) +
                                "; posenc needs it contiguous (stride 1)");
  for (int64_t s : st)
    if (s < 0) return InvalidArgumentError(name + ": negative strides " + Ints(st));
  int64_t batch = 1, b_stride = 0;
  if (b_ax >= 0) {
    batch = x.shape[b_ax];
    b_stride = st[b_ax];
    const __int128 extent =
        static_cast<__int128>(tokens - 1) * st[t_ax] + static_cast<__int128>(heads - 1) * st[h_ax] + head_dim;
    if (batch > 1 && tokens > 0 && heads > 0 && head_dim > 0 && b_stride < extent)
      return InvalidArgumentError(name + ": batch stride " + std::to_string(b_stride) + " overlaps the " +
                                  std::to_string(static_cast<int64_t>(extent)) +
                                  " elements of one batch element (strides " + Ints(st) + ")");
  }
  for (size_t i = 0; i < rank; ++i)
    if (x.shape[i] > 1 && st[i] == 0)
      return InvalidArgumentError(name + ": an axis of extent " + std::to_string(x.shape[i]) +
                                  " has stride 0 (its elements overlap; shape " + Ints(x.shape) + ", strides " +
                                  Ints(st) + ")");
  HeadsPlan plan;
  plan.batch = batch;
  plan.tokens = tokens;
  plan.head_dim = head_dim;
  if (fold && batch > 1 && (tokens == 1 || b_stride == tokens * st[t_ax])) {
    const int64_t t_stride = tokens == 1 ? b_stride : st[t_ax];
    plan.views.push_back({x.data, x.dtype, batch * tokens, heads, head_dim, t_stride, st[h_ax]});
    return plan;
  }
  const int64_t es = static_cast<int64_t>(SizeOf(x.dtype));
  plan.views.reserve(static_cast<size_t>(std::max<int64_t>(batch, 0)));
  for (int64_t b = 0; b < batch; ++b)
    plan.views.push_back({x.data + b * b_stride * es, x.dtype, tokens, heads, head_dim, st[t_ax], st[h_ax]});
  return plan;
}

}  // namespace posenc
