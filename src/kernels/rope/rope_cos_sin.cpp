// RoPE from the caller's cos/sin rows: validate once, then the SIMD code of the best target for this
// CPU (rope_cos_sin-inl.hpp, Highway run-time dispatch), split over tokens. The scalar reference
// (rope_cos_sin_ref.cpp) is the oracle; the two agree bit for bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rope/rope_cos_sin.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/rope/rope_cos_sin-inl.hpp"

#if HWY_ONCE
#include "kernels/rope/rope_cos_sin_internal.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/rope_cos_sin.hpp"

namespace posenc {
HWY_EXPORT(RopeCosSinTokensTarget);

Status ApplyRopeCosSin(const RopeCosSinArgs& args, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateRopeCosSin(args, in, out));
  if (in.tokens == 0 || in.heads == 0) return OkStatus();
  const detail::RopeCosSinJob job{args, in, out};
  const int64_t bytes = 2 * in.tokens * in.heads * in.head_dim * static_cast<int64_t>(SizeOf(in.dtype));
  ParallelFor(args.parallel, in.tokens, bytes, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(RopeCosSinTokensTarget)(job, b, e);
  });
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
