// Public RoPE entry points: validate once, then run the SIMD kernel of the best target for this CPU
// (Highway run-time dispatch; per-target code in rope-inl.hpp), split over tokens with the caller's
// ParallelRunner or the internal pool. The scalar reference (rope_ref.cpp) stays the oracle.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rope/rope.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/rope/rope-inl.hpp"

#if HWY_ONCE
#include <fmt/format.h>

#include <hwy/cache_control.h>

#include "kernels/rope/rope_internal.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc {
HWY_EXPORT(RopeTokensTarget);

namespace detail {

void RopeTokens(const RopeJob& job, int64_t begin, int64_t end) {
  HWY_DYNAMIC_DISPATCH(RopeTokensTarget)(job, begin, end);
}

}  // namespace detail

namespace {

detail::RopeTensor TensorOf(const HeadsView& in, const HeadsView& out) {
  return {in.data, out.data, in.heads, in.token_stride, in.head_stride, out.token_stride, out.head_stride};
}

void Run(const RopeArgs& args, const detail::RopeJob& job, int64_t tokens) {
  int64_t bytes = 0;
  bool stream = false;
  for (int k = 0; k < job.num_tensors; ++k) {
    bytes += 2 * tokens * job.tensors[k].heads * job.layout.head_dim * static_cast<int64_t>(SizeOf(job.dtype));
    stream = stream || job.tensors[k].stream;
  }
  ParallelFor(args.parallel, tokens, bytes, [&](int64_t b, int64_t e) {
    detail::RopeTokens(job, b, e);
    if (stream) hwy::FlushStream();
  });
}

detail::RopeJob MakeJob(const RopeArgs& args, DType dtype) {
  detail::RopeJob job;
  job.dtype = dtype;
  job.layout = args.layout;
  job.table = args.table;
  job.positions = args.positions.data();
  job.backward = args.direction == RopeDirection::kBackward;
  job.prefetch_out = StorePrefetchPolicy().rope_out_of_place;
  return job;
}

// `in` validated; `out` validated against it, or `in` itself.
void RunOne(const RopeArgs& args, const HeadsView& in, const HeadsView& out) {
  if (in.tokens == 0 || in.heads == 0) return;
  detail::RopeJob job = MakeJob(args, in.dtype);
  job.num_tensors = 1;
  job.tensors[0] = TensorOf(in, out);
  job.tensors[0].stream =
      detail::StreamsHeads(in, out, static_cast<double>(out.tokens * out.heads * out.head_dim) * SizeOf(out.dtype));
  Run(args, job, in.tokens);
}

}  // namespace

Status ApplyRope(const RopeArgs& args, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateRope(args, in, "input"));
  POSENC_RETURN_IF_ERROR(out.Validate("output"));
  POSENC_RETURN_IF_ERROR(detail::ValidateRopeOutput(in, out));
  RunOne(args, in, out);
  return OkStatus();
}

// In place: the output is the input, so only the input is validated (a decode step of one token is
// a call of a few hundred nanoseconds, and each check counts there).
Status ApplyRope(const RopeArgs& args, HeadsView x) {
  POSENC_RETURN_IF_ERROR(ValidateRope(args, x, "input"));
  RunOne(args, x, x);
  return OkStatus();
}

Status ApplyRopeQK(const RopeArgs& args, HeadsView q, HeadsView k) {
  POSENC_RETURN_IF_ERROR(ValidateRope(args, q, "queries"));
  const bool has_k = k.tokens != 0 && k.heads != 0;
  if (has_k) {
    POSENC_RETURN_IF_ERROR(ValidateRope(args, k, "keys"));
    if (k.heads > q.heads || (k.heads > 0 && q.heads % k.heads != 0))
      return InvalidArgumentError(
          fmt::format("rope: {} query heads are not a multiple of {} key heads", q.heads, k.heads));
    if (k.dtype != q.dtype)
      return InvalidArgumentError(fmt::format("rope: keys are {}, queries {}; both must share one dtype",
                                              ToString(k.dtype), ToString(q.dtype)));
  }
  if (q.tokens == 0) return OkStatus();
  detail::RopeJob job = MakeJob(args, q.dtype);
  if (q.heads > 0) job.tensors[job.num_tensors++] = TensorOf(q, q);
  if (has_k) job.tensors[job.num_tensors++] = TensorOf(k, k);
  if (job.num_tensors > 0) Run(args, job, q.tokens);
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
