// Scalar reference RoPE and the argument validation shared by every RoPE entry point.
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/rope.hpp"

namespace posenc {

Status ValidateRope(const RopeArgs& args, const HeadsView& x, const char* what) {
  POSENC_RETURN_IF_ERROR(args.layout.Validate());
  POSENC_RETURN_IF_ERROR(x.Validate(what));
  if (args.table == nullptr) return InvalidArgumentError("rope: no RopeTable given");
  if (args.table->num_pairs() != args.layout.num_pairs())
    return InvalidArgumentError(fmt::format("rope: table has {} frequency pairs, layout rotary_dim {} needs {}",
                                            args.table->num_pairs(), args.layout.rotary_dim, args.layout.num_pairs()));
  if (x.head_dim != args.layout.head_dim)
    return InvalidArgumentError(
        fmt::format("rope: {} has head_dim {}, layout says {}", what, x.head_dim, args.layout.head_dim));
  if (static_cast<int64_t>(args.positions.size()) != x.tokens)
    return InvalidArgumentError(
        fmt::format("rope: {} positions for {} tokens of {}", args.positions.size(), x.tokens, what));
  for (size_t i = 0; i < args.positions.size(); ++i) {
    const int64_t p = args.positions[i];
    if (p < 0 || p >= kMaxRopePosition)
      return OutOfRangeError(fmt::format("rope: position {} at index {} is outside [0, 2^31)", p, i));
  }
  return OkStatus();
}

namespace detail {

Status ValidateRopeOutput(const HeadsView& in, const HeadsView& out) {
  if (in.tokens != out.tokens || in.heads != out.heads || in.head_dim != out.head_dim || in.dtype != out.dtype)
    return InvalidArgumentError(fmt::format("rope: output [{}, {}, {}] {} differs from input [{}, {}, {}] {}",
                                            out.tokens, out.heads, out.head_dim, ToString(out.dtype), in.tokens,
                                            in.heads, in.head_dim, ToString(in.dtype)));
  if (PartlyOverlaps(in, out))
    return InvalidArgumentError("rope: output partly overlaps the input (it must be the input exactly or disjoint)");
  return OkStatus();
}

}  // namespace detail

Status ApplyRopeReference(const RopeArgs& args, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateRope(args, in, "input"));
  return detail::ApplyReference(args.layout, args.direction, in, out, "rope", [&](int64_t t, float* c, float* s) {
    args.table->CosSin(args.positions[static_cast<size_t>(t)], c, s);
  });
}

}  // namespace posenc
