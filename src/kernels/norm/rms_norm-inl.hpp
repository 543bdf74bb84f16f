// Per-target RMSNorm of attention heads (rms_norm.hpp's definition), included once per SIMD target by
// rms_norm.cpp, by the RoPE kernels (rope/rope-inl.hpp norms the fused kernels' q and k inside the
// rotation, NormValue per vector) and by kv_cache/mla_cache.cpp through foreach_target.h. The sum of
// squares keeps its 16 partials in 16 / N vectors of N lanes (N = 16, 8,
// 4 or 1 on x86), so every target adds the same values in the same order; the fold's tree runs in
// registers (the same pairs added as the reference's scalar tree), the mean and scale are scalar
// float32 as in the reference. A token's heads get their scales first, then are normalised, so the
// heads' independent sum chains overlap.
#if defined(POSENC_KERNELS_RMS_NORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_RMS_NORM_INL_H_
#undef POSENC_KERNELS_RMS_NORM_INL_H_
#else
#define POSENC_KERNELS_RMS_NORM_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <hwy/highway.h>

#include "kernels/norm/rms_norm_internal.hpp"
#include "kernels/simd/convert-inl.hpp"
#include "kernels/simd/memory-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The fold's last steps within one vector of partials (lane j holds partial j): lanes j + N/2 added to
// lanes j, halving until one lane: the same additions as detail::FoldRmsPartials's tail.
template <class D>
HWY_INLINE float FoldLanes(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return hn::GetLane(v);
#else
  if constexpr (hn::MaxLanes(D()) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return FoldLanes(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
}

// The sum of squares of n values in the one order (rms_norm.hpp).
template <typename T>
HWY_INLINE float HeadSumSquares(const T* x, size_t n) {
  const DF df;
  constexpr size_t N = hn::MaxLanes(DF());
  constexpr size_t P = static_cast<size_t>(detail::kRmsPartials);
  HWY_ALIGN float p[P];
  if constexpr (N > P || P % N != 0) {  // no such x86 target: the scalar order
    for (size_t j = 0; j < P; ++j) p[j] = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      const float v = LoadAsF32(x + i);
      p[i % P] += v * v;
    }
  } else {
    constexpr size_t K = P / N;
    hn::Vec<DF> acc[K];
    for (size_t j = 0; j < K; ++j) acc[j] = hn::Zero(df);
    size_t i = 0;
    for (; i + P <= n; i += P) {
      for (size_t j = 0; j < K; ++j) {
        const auto v = LoadF(df, x + i + j * N);
        acc[j] = hn::Add(acc[j], hn::Mul(v, v));
      }
    }
    if (i < n) {  // the tail, zero-padded: adding 0 leaves a partial unchanged
      HWY_ALIGN float tail[P] = {};
      for (size_t m = 0; i + m < n; ++m) tail[m] = LoadAsF32(x + i + m);
      for (size_t j = 0; j < K; ++j) {
        const auto v = hn::Load(df, tail + j * N);
        acc[j] = hn::Add(acc[j], hn::Mul(v, v));
      }
    }
    // The tree in registers: acc[j] holds partials j*N .. j*N + N - 1, so p[i] += p[i + w] for w >= N
    // is acc[j] += acc[j + w / N]; the steps below N run inside the vector.
    for (size_t k = K / 2; k >= 1; k /= 2)
      for (size_t j = 0; j < k; ++j) acc[j] = hn::Add(acc[j], acc[j + k]);
    return FoldLanes(df, acc[0]);
  }
  return detail::FoldRmsPartials(p);
}

// One normalised value of a style before its final rounding to T: v the widened input, vr the head's
// scale, w its weight. kCastThenScale rounds x * r to T first (HF's cast to the input dtype).
template <typename T, RmsNormStyle kStyle>
HWY_INLINE hn::Vec<DF> NormValue(hn::Vec<DF> v, hn::Vec<DF> vr, hn::Vec<DF> w) {
  const DF df;
  if constexpr (kStyle == RmsNormStyle::kCastThenScale) {
    return hn::Mul(w, RoundToStorage<T>(df, hn::Mul(v, vr)));
  } else if constexpr (kStyle == RmsNormStyle::kScaleThenCast) {
    return hn::Mul(w, hn::Mul(v, vr));
  } else {
    return hn::Mul(hn::Mul(v, vr), hn::Add(hn::Set(df, 1.0f), w));
  }
}

// One head: out[i] from x[i], the scale r and the weight w (n values).
template <typename T, RmsNormStyle kStyle>
HWY_INLINE void NormalizeHeadT(const T* x, T* out, size_t n, float r, const float* w) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto vr = hn::Set(df, r);
  size_t i = 0;
  for (; i + N <= n; i += N) StoreF(df, NormValue<T, kStyle>(LoadF(df, x + i), vr, hn::LoadU(df, w + i)), out + i);
  for (; i < n; ++i) {
    const float y = LoadAsF32(x + i) * r;
    if constexpr (kStyle == RmsNormStyle::kCastThenScale) {
      StoreFromF32(y, out + i);
      StoreFromF32(w[i] * LoadAsF32(out + i), out + i);
    } else if constexpr (kStyle == RmsNormStyle::kScaleThenCast) {
      StoreFromF32(w[i] * y, out + i);
    } else {
      StoreFromF32(y * (1.0f + w[i]), out + i);
    }
  }
}

// r[0, m) from the heads' sums to their scales, detail::RmsScale a vector of heads at a time: the same
// correctly rounded divisions and square root, so the same bits, without a scalar divide, square root
// and divide per head (a token's 40 heads: ~500 cycles of a compute-bound bfloat16 QK-norm).
HWY_INLINE void RmsScales(float* r, int64_t m, int64_t n, float eps) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vn = hn::Set(df, static_cast<float>(n)), ve = hn::Set(df, eps), one = hn::Set(df, 1.0f);
  int64_t h = 0;
  for (; h + N <= m; h += N) {
    const auto mean = hn::Div(hn::LoadU(df, r + h), vn);
    hn::StoreU(hn::Div(one, hn::Sqrt(hn::Add(mean, ve))), df, r + h);
  }
  for (; h < m; ++h) r[h] = detail::RmsScale(r[h], n, eps);
}

// Calls f with the style as a compile-time constant.
template <class F>
HWY_INLINE void WithNormStyle(RmsNormStyle style, const F& f) {
  switch (style) {
    case RmsNormStyle::kCastThenScale: f(std::integral_constant<RmsNormStyle, RmsNormStyle::kCastThenScale>()); return;
    case RmsNormStyle::kScaleThenCast: f(std::integral_constant<RmsNormStyle, RmsNormStyle::kScaleThenCast>()); return;
    case RmsNormStyle::kOnePlusWeight: f(std::integral_constant<RmsNormStyle, RmsNormStyle::kOnePlusWeight>()); return;
  }
}

template <typename T>
HWY_INLINE void NormalizeHead(const T* x, T* out, size_t n, float r, const float* w, RmsNormStyle style) {
  WithNormStyle(style, [&](auto st) { NormalizeHeadT<T, decltype(st)::value>(x, out, n, r, w); });
}

// The heads a token's scales are computed for at once (their sums are independent chains the core
// overlaps: one head's sum is a chain of n / 16 dependent adds, then the fold, sqrt and divide).
constexpr int64_t kNormChunk = 64;
constexpr size_t kNormPrefetchAhead = 8192;

// The per-head sums are the first touch of a cold row: each head's sum is preceded by a prefetch of
// the lines kNormPrefetchAhead bytes on, and by touch(h) (the fused kernels' output lines).
struct NoTouch {
  void operator()(int64_t /*h*/) const {}
};

// The scales of heads [h0, h0 + m) of one token into r[0, m), m <= kNormChunk: each head's own
// (kPerHead), or the one scale of the whole row (kWholeRow, its heads' sums added in order).
template <typename T, class Touch = NoTouch>
HWY_INLINE void HeadScales(const HeadRmsNorm& norm, const T* in, int64_t in_head_stride, int64_t heads,
                           int64_t head_dim, int64_t h0, int64_t m, float* r, const Touch& touch = Touch()) {
  const size_t n = static_cast<size_t>(head_dim);
  if (norm.scope == RmsNormScope::kPerHead) {
    for (int64_t h = 0; h < m; ++h) {
      PrefetchLines(reinterpret_cast<const char*>(in + (h0 + h) * in_head_stride) + kNormPrefetchAhead,
                            n * sizeof(T));
      touch(h0 + h);
      r[h] = HeadSumSquares(in + (h0 + h) * in_head_stride, n);
    }
    RmsScales(r, m, head_dim, norm.eps);
    return;
  }
  float sum = 0.0f;
  for (int64_t h = 0; h < heads; ++h) sum += HeadSumSquares(in + h * in_head_stride, n);
  const float s = detail::RmsScale(sum, heads * head_dim, norm.eps);
  for (int64_t h = 0; h < m; ++h) r[h] = s;
}

// Head h's weight: the per-head weight, or head h's slice of the whole row's.
inline const float* HeadWeight(const HeadRmsNorm& norm, int64_t h, int64_t head_dim) {
  return norm.weight.data() + (norm.scope == RmsNormScope::kPerHead ? 0 : h * head_dim);
}

// One token's heads (see detail::RmsNormToken): every head's scale of a chunk first, then its heads.
template <typename T>
HWY_INLINE void RmsNormTokenT(const HeadRmsNorm& norm, const T* in, int64_t in_head_stride, T* out,
                              int64_t out_head_stride, int64_t heads, int64_t head_dim) {
  float r[kNormChunk];
  for (int64_t h0 = 0; h0 < heads; h0 += kNormChunk) {
    const int64_t m = std::min(kNormChunk, heads - h0);
    if (h0 == 0 || norm.scope == RmsNormScope::kPerHead)
      HeadScales(norm, in, in_head_stride, heads, head_dim, h0, m, r);
    for (int64_t h = 0; h < m; ++h)
      NormalizeHead(in + (h0 + h) * in_head_stride, out + (h0 + h) * out_head_stride, static_cast<size_t>(head_dim),
                    r[h], HeadWeight(norm, h0 + h, head_dim), norm.style);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
