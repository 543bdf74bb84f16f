// Public RoPE entry points. They validate once, then run the kernel for the storage type.
// (The SIMD kernels with run-time dispatch plug in here; the reference stays the oracle.)
#include "posenc/rope.hpp"

#include <fmt/format.h>

namespace posenc {

Status ApplyRope(const RopeArgs& args, HeadsView in, HeadsView out) { return ApplyRopeReference(args, in, out); }

Status ApplyRope(const RopeArgs& args, HeadsView x) { return ApplyRope(args, x, x); }

Status ApplyRopeQK(const RopeArgs& args, HeadsView q, HeadsView k) {
  POSENC_RETURN_IF_ERROR(ValidateRope(args, q, "queries"));
  const bool has_k = k.tokens != 0 && k.heads != 0;
  if (has_k) {
    POSENC_RETURN_IF_ERROR(ValidateRope(args, k, "keys"));
    if (k.heads > q.heads || (k.heads > 0 && q.heads % k.heads != 0))
      return InvalidArgumentError(fmt::format("rope: {} query heads are not a multiple of {} key heads", q.heads, k.heads));
  }
  POSENC_RETURN_IF_ERROR(ApplyRope(args, q));
  if (has_k) POSENC_RETURN_IF_ERROR(ApplyRope(args, k));
  return OkStatus();
}

}  // namespace posenc
