// Per-target code of RoPE from the caller's cos/sin rows (rope_cos_sin.hpp), included once per SIMD
// target by rope_cos_sin.cpp (foreach_target.h). torch's arithmetic: explicit hn::Mul then hn::Add, each
// rounded to the storage type (RoundTo below), never MulAdd; the library is compiled with
// -ffp-contract=off, so g++ does not contract the vector operators behind the intrinsics either.
#if defined(POSENC_KERNELS_ROPE_COS_SIN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_ROPE_COS_SIN_INL_H_
#undef POSENC_KERNELS_ROPE_COS_SIN_INL_H_
#else
#define POSENC_KERNELS_ROPE_COS_SIN_INL_H_
#endif

#include <cstring>
#include <type_traits>

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "kernels/convert-inl.hpp"
#include "kernels/rope_cos_sin_internal.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// v rounded to T (nearest, ties to even, as F32ToBF16 / F32ToF16) and widened back.
template <typename T, class DF>
HWY_INLINE hn::Vec<DF> RoundTo(DF df, hn::Vec<DF> v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    const hn::RebindToUnsigned<DF> du;
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)), hn::Set(du, 0xffff0000u));
    const auto quiet = hn::Or(hn::And(u, hn::Set(du, 0xffff0000u)), hn::Set(du, 0x00400000u));
    return hn::IfThenElse(hn::IsNaN(v), hn::BitCast(df, quiet), hn::BitCast(df, rounded));
  } else {
    HWY_ALIGN T tmp[hn::MaxLanes(df)];
    StoreF(df, v, tmp);
    return LoadF(df, tmp);
  }
}

// y = round(round(x * c) + round(r * s)); the outer rounding is StoreF's.
template <typename T, class DF>
HWY_INLINE hn::Vec<DF> CosSinVec(DF df, hn::Vec<DF> x, hn::Vec<DF> c, hn::Vec<DF> r, hn::Vec<DF> s) {
  return hn::Add(RoundTo<T>(df, hn::Mul(x, c)), RoundTo<T>(df, hn::Mul(r, s)));
}

// One head row: x, y at the rotary window (may be equal), c, s the token's rows.
template <typename T>
HWY_INLINE void CosSinRow(RopePairing pairing, int64_t R, const T* x, T* y, const T* c, const T* s) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  if (pairing == RopePairing::kHalf) {
    const int64_t h = R / 2;
    for (; i + N <= h; i += N) {
      const auto a = LoadF(df, x + i), b = LoadF(df, x + h + i);
      const auto ya = CosSinVec<T>(df, a, LoadF(df, c + i), hn::Neg(b), LoadF(df, s + i));
      const auto yb = CosSinVec<T>(df, b, LoadF(df, c + h + i), a, LoadF(df, s + h + i));
      StoreF(df, ya, y + i);
      StoreF(df, yb, y + h + i);
    }
    detail::CosSinRowScalar<T>(pairing, R, x, y, c, s, i, h);
    return;
  }
#if HWY_TARGET != HWY_SCALAR
  for (; i + N <= R; i += N) {  // N is even: each vector holds whole pairs
    const auto v = LoadF(df, x + i);
    const auto rev = hn::Reverse2(df, v);
    const auto r = hn::OddEven(rev, hn::Neg(rev));  // lane 2k: -x[2k + 1], lane 2k + 1: x[2k]
    StoreF(df, CosSinVec<T>(df, v, LoadF(df, c + i), r, LoadF(df, s + i)), y + i);
  }
#endif
  detail::CosSinRowScalar<T>(pairing, R, x, y, c, s, i, R);
}

// Software prefetch of the input (and, out of place, the output) rows this many bytes ahead of the
// head being rotated, as the RoPE kernel does (rope-inl.hpp's kPrefetchAhead).
constexpr int64_t kCosSinPrefetchAhead = 4096;

template <typename T>
void CosSinTokens(const detail::RopeCosSinJob& job, int64_t begin, int64_t end) {
  const RotaryLayout& L = job.args.layout;
  const CosSinRows& r = job.args.rows;
  const int64_t start = L.rotary_start, R = L.rotary_dim, D = L.head_dim;
  for (int64_t t = begin; t < end; ++t) {
    const T* c = static_cast<const T*>(r.cos) + t * r.cos_token_stride;
    const T* s = static_cast<const T*>(r.sin) + t * r.sin_token_stride;
    for (int64_t hd = 0; hd < job.in.heads; ++hd) {
      const T* x = job.in.at<T>(t, hd);
      T* y = job.out.at<T>(t, hd);
      const int64_t row_bytes = D * static_cast<int64_t>(sizeof(T));
      for (int64_t l = 0; l < row_bytes; l += 64) {
        hwy::Prefetch(reinterpret_cast<const char*>(x) + kCosSinPrefetchAhead + l);
        if (y != x) hwy::Prefetch(reinterpret_cast<const char*>(y) + kCosSinPrefetchAhead + l);
      }
      CosSinRow<T>(L.pairing, R, x + start, y + start, c, s);
      if (y != x) {
        if (start > 0) std::memcpy(y, x, sizeof(T) * static_cast<size_t>(start));
        if (start + R < D) std::memcpy(y + start + R, x + start + R, sizeof(T) * static_cast<size_t>(D - start - R));
      }
    }
  }
}

void RopeCosSinTokensTarget(const detail::RopeCosSinJob& job, int64_t begin, int64_t end) {
  switch (job.in.dtype) {
    case DType::kF32: CosSinTokens<float>(job, begin, end); break;
    case DType::kF16: CosSinTokens<f16_t>(job, begin, end); break;
    case DType::kBF16: CosSinTokens<bf16_t>(job, begin, end); break;
    default: break;  // validated before
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
