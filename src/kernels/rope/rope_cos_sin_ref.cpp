// The scalar reference of RoPE from the caller's cos/sin rows (torch's arithmetic, one element at a
// time), and the validation the reference and the SIMD path share.
#include <cstring>

#include <fmt/format.h>

#include "kernels/rope/rope_cos_sin_internal.hpp"
#include "posenc/kernels/rope_cos_sin.hpp"

namespace posenc {

Status ValidateRopeCosSin(const RopeCosSinArgs& args, const HeadsView& in, const HeadsView& out) {
  const RotaryLayout& L = args.layout;
  POSENC_RETURN_IF_ERROR(L.Validate());
  POSENC_RETURN_IF_ERROR(in.Validate("input"));
  POSENC_RETURN_IF_ERROR(out.Validate("output"));
  if (in.head_dim != L.head_dim)
    return InvalidArgumentError(
        fmt::format("rope_cos_sin: input head_dim {} differs from the layout's {}", in.head_dim, L.head_dim));
  if (in.tokens != out.tokens || in.heads != out.heads || in.head_dim != out.head_dim || in.dtype != out.dtype)
    return InvalidArgumentError(fmt::format("rope_cos_sin: output [{}, {}, {}] {} differs from input [{}, {}, {}] {}",
                                            out.tokens, out.heads, out.head_dim, ToString(out.dtype), in.tokens,
                                            in.heads, in.head_dim, ToString(in.dtype)));
  const CosSinRows& r = args.rows;
  if (r.dtype != in.dtype)
    return InvalidArgumentError(
        fmt::format("cos: dtype {} differs from the input's {} (torch would promote; cast cos/sin)", ToString(r.dtype),
                    ToString(in.dtype)));
  if (r.width != L.rotary_dim)
    return InvalidArgumentError(fmt::format("cos: width {} is not the rotary_dim {}", r.width, L.rotary_dim));
  if (r.tokens != in.tokens)
    return InvalidArgumentError(fmt::format("cos: {} rows for {} tokens", r.tokens, in.tokens));
  if (r.cos_token_stride < 0 || r.sin_token_stride < 0)
    return InvalidArgumentError(
        fmt::format("cos/sin: negative token stride ({}, {})", r.cos_token_stride, r.sin_token_stride));
  if (in.tokens > 0 && r.width > 0 && (r.cos == nullptr || r.sin == nullptr))
    return InvalidArgumentError("cos/sin: null data");
  if (PartlyOverlaps(in, out))
    return InvalidArgumentError(
        "rope_cos_sin: output partly overlaps the input (it must be the input exactly or disjoint)");
  return OkStatus();
}

namespace {

template <typename T>
void Reference(const RopeCosSinArgs& args, const HeadsView& in, const HeadsView& out) {
  const RotaryLayout& L = args.layout;
  const CosSinRows& r = args.rows;
  for (int64_t t = 0; t < in.tokens; ++t) {
    const T* c = static_cast<const T*>(r.cos) + t * r.cos_token_stride;
    const T* s = static_cast<const T*>(r.sin) + t * r.sin_token_stride;
    for (int64_t h = 0; h < in.heads; ++h) {
      const T* x = in.at<T>(t, h);
      T* y = out.at<T>(t, h);
      for (int64_t i = 0; i < L.num_pairs(); ++i) {
        const int64_t j1 = L.first(i), j2 = L.second(i);
        const float a = LoadAsF32(x + j1), b = LoadAsF32(x + j2);
        const float c1 = LoadAsF32(c + (j1 - L.rotary_start)), s1 = LoadAsF32(s + (j1 - L.rotary_start));
        const float c2 = LoadAsF32(c + (j2 - L.rotary_start)), s2 = LoadAsF32(s + (j2 - L.rotary_start));
        // rotate_half / rotate_every_two: r[first] = -x[second], r[second] = x[first].
        const float ya = detail::RoundTo<T>(detail::RoundTo<T>(a * c1) + detail::RoundTo<T>(-b * s1));
        const float yb = detail::RoundTo<T>(detail::RoundTo<T>(b * c2) + detail::RoundTo<T>(a * s2));
        StoreFromF32(ya, y + j1);
        StoreFromF32(yb, y + j2);
      }
      if (y != x) {
        for (int64_t j = 0; j < L.rotary_start; ++j) y[j] = x[j];
        for (int64_t j = L.rotary_start + L.rotary_dim; j < L.head_dim; ++j) y[j] = x[j];
      }
    }
  }
}

}  // namespace

Status ApplyRopeCosSinReference(const RopeCosSinArgs& args, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateRopeCosSin(args, in, out));
  switch (in.dtype) {
    case DType::kF32: Reference<float>(args, in, out); break;
    case DType::kF16: Reference<f16_t>(args, in, out); break;
    case DType::kBF16: Reference<bf16_t>(args, in, out); break;
    default:
      return InvalidArgumentError(
          fmt::format("rope_cos_sin: dtype {} is not a float storage type", ToString(in.dtype)));
  }
  return OkStatus();
}

}  // namespace posenc
