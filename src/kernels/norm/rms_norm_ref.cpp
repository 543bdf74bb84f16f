// RMSNorm of attention heads: names, the validation every norm call shares, and the scalar reference
// (plain loops over rms_norm.hpp's float32 definition, the partial sums in their stated order).
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/norm/rms_norm_internal.hpp"
#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/rms_norm.hpp"

namespace posenc {

std::string_view ToString(RmsNormStyle style) {
  switch (style) {
    case RmsNormStyle::kCastThenScale: return "cast_then_scale";
    case RmsNormStyle::kScaleThenCast: return "scale_then_cast";
    case RmsNormStyle::kOnePlusWeight: return "one_plus_weight";
  }
  return "unknown";
}

std::string_view ToString(RmsNormScope scope) {
  switch (scope) {
    case RmsNormScope::kPerHead: return "per_head";
    case RmsNormScope::kWholeRow: return "whole_row";
  }
  return "unknown";
}

Status ValidateHeadRmsNorm(const HeadRmsNorm& norm, const HeadsView& x, const char* what) {
  POSENC_RETURN_IF_ERROR(x.Validate(what));
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kBF16)
    return InvalidArgumentError(fmt::format("rms norm: {} are {}, not float32, float16 or bfloat16", what,
                                            ToString(x.dtype)));
  if (norm.style != RmsNormStyle::kCastThenScale && norm.style != RmsNormStyle::kScaleThenCast &&
      norm.style != RmsNormStyle::kOnePlusWeight)
    return InvalidArgumentError(fmt::format("rms norm of {}: unknown style {}", what, static_cast<int>(norm.style)));
  if (norm.scope != RmsNormScope::kPerHead && norm.scope != RmsNormScope::kWholeRow)
    return InvalidArgumentError(fmt::format("rms norm of {}: unknown scope {}", what, static_cast<int>(norm.scope)));
  if (!(norm.eps > 0.0f) || !std::isfinite(norm.eps))
    return InvalidArgumentError(fmt::format("rms norm of {}: eps = {} must be finite and > 0", what, norm.eps));
  const int64_t want = norm.scope == RmsNormScope::kPerHead ? x.head_dim : x.heads * x.head_dim;
  if (static_cast<int64_t>(norm.weight.size()) != want)
    return InvalidArgumentError(fmt::format("rms norm of {}: weight has {} values, {} norm of [{}, {}] heads needs {}",
                                            what, norm.weight.size(), ToString(norm.scope), x.heads, x.head_dim,
                                            want));
  for (size_t i = 0; i < norm.weight.size(); ++i)
    if (!std::isfinite(norm.weight[i]))
      return InvalidArgumentError(fmt::format("rms norm of {}: weight[{}] = {} is not finite", what, i, norm.weight[i]));
  return OkStatus();
}

namespace {

template <typename T>
float SumSquaresReference(const T* x, int64_t n) {
  float p[detail::kRmsPartials] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float v = LoadAsF32(x + i);
    p[i % detail::kRmsPartials] += v * v;
  }
  return detail::FoldRmsPartials(p);
}

template <typename T>
void NormReference(const HeadRmsNorm& norm, const HeadsView& in, const HeadsView& out) {
  const int64_t D = in.head_dim;
  std::vector<T> row(static_cast<size_t>(in.heads * D));  // the token's input, so out == in is safe
  for (int64_t t = 0; t < in.tokens; ++t) {
    for (int64_t h = 0; h < in.heads; ++h) std::memcpy(&row[h * D], in.at<T>(t, h), sizeof(T) * static_cast<size_t>(D));
    std::vector<float> r(static_cast<size_t>(in.heads));
    if (norm.scope == RmsNormScope::kPerHead) {
      for (int64_t h = 0; h < in.heads; ++h) r[h] = detail::RmsScale(SumSquaresReference(&row[h * D], D), D, norm.eps);
    } else {
      float sum = 0.0f;
      for (int64_t h = 0; h < in.heads; ++h) sum += SumSquaresReference(&row[h * D], D);
      for (int64_t h = 0; h < in.heads; ++h) r[h] = detail::RmsScale(sum, in.heads * D, norm.eps);
    }
    for (int64_t h = 0; h < in.heads; ++h) {
      const float* w = norm.weight.data() + (norm.scope == RmsNormScope::kPerHead ? 0 : h * D);
      T* o = out.at<T>(t, h);
      for (int64_t i = 0; i < D; ++i) {
        const float y = LoadAsF32(&row[h * D + i]) * r[h];
        switch (norm.style) {
          case RmsNormStyle::kCastThenScale: {
            T yt;
            StoreFromF32(y, &yt);
            StoreFromF32(w[i] * LoadAsF32(&yt), o + i);
            break;
          }
          case RmsNormStyle::kScaleThenCast: StoreFromF32(w[i] * y, o + i); break;
          case RmsNormStyle::kOnePlusWeight: StoreFromF32(y * (1.0f + w[i]), o + i); break;
        }
      }
    }
  }
}

}  // namespace

Status ApplyHeadRmsNormReference(const HeadRmsNorm& norm, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateHeadRmsNorm(norm, in, "rms norm input"));
  POSENC_RETURN_IF_ERROR(out.Validate("rms norm output"));
  POSENC_RETURN_IF_ERROR(detail::ValidateRopeOutput(in, out));
  if (in.tokens == 0 || in.heads == 0) return OkStatus();
  switch (in.dtype) {
    case DType::kF32: NormReference<float>(norm, in, out); break;
    case DType::kF16: NormReference<f16_t>(norm, in, out); break;
    default: NormReference<bf16_t>(norm, in, out); break;
  }
  return OkStatus();
}

}  // namespace posenc
