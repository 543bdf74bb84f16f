// ApplyHeadRmsNorm: validate once (rms_norm_ref.cpp), then norm each token's heads with the best SIMD
// target (rms_norm-inl.hpp), split over tokens. Each token's output is its own, so any split gives
// the same bytes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/norm/rms_norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/norm/rms_norm-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {

void RmsNormTokenTarget(const HeadRmsNorm& norm, DType dtype, const void* in, int64_t in_head_stride, void* out,
                        int64_t out_head_stride, int64_t heads, int64_t head_dim) {
  switch (dtype) {
    case DType::kF32:
      RmsNormTokenT(norm, static_cast<const float*>(in), in_head_stride, static_cast<float*>(out), out_head_stride,
                    heads, head_dim);
      return;
    case DType::kF16:
      RmsNormTokenT(norm, static_cast<const f16_t*>(in), in_head_stride, static_cast<f16_t*>(out), out_head_stride,
                    heads, head_dim);
      return;
    case DType::kBF16:
      RmsNormTokenT(norm, static_cast<const bf16_t*>(in), in_head_stride, static_cast<bf16_t*>(out),
                    out_head_stride, heads, head_dim);
      return;
    default: return;  // validated at the boundary
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/rope/rope_internal.hpp"
#include "posenc/core/parallel.hpp"

namespace posenc {
HWY_EXPORT(RmsNormTokenTarget);

namespace detail {
void RmsNormToken(const HeadRmsNorm& norm, DType dtype, const void* in, int64_t in_head_stride, void* out,
                  int64_t out_head_stride, int64_t heads, int64_t head_dim) {
  HWY_DYNAMIC_DISPATCH(RmsNormTokenTarget)(norm, dtype, in, in_head_stride, out, out_head_stride, heads, head_dim);
}
}  // namespace detail

Status ApplyHeadRmsNorm(const HeadRmsNorm& norm, HeadsView in, HeadsView out, ParallelRunner* parallel) {
  POSENC_RETURN_IF_ERROR(ValidateHeadRmsNorm(norm, in, "rms norm input"));
  POSENC_RETURN_IF_ERROR(out.Validate("rms norm output"));
  POSENC_RETURN_IF_ERROR(detail::ValidateRopeOutput(in, out));
  if (in.tokens == 0 || in.heads == 0) return OkStatus();
  const int64_t bytes = in.tokens * in.heads * in.head_dim * static_cast<int64_t>(SizeOf(in.dtype)) * 2;
  const size_t es = SizeOf(in.dtype);
  ParallelFor(parallel, in.tokens, bytes, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      detail::RmsNormToken(norm, in.dtype, static_cast<const std::byte*>(in.data) + t * in.token_stride * es,
                           in.head_stride, static_cast<std::byte*>(out.data) + t * out.token_stride * es,
                           out.head_stride, in.heads, in.head_dim);
  });
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
