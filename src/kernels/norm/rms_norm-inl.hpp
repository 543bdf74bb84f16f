// Per-target RMSNorm of attention heads (rms_norm.hpp's definition), included once per SIMD target by
// rms_norm.cpp and by the fused kernels (kv_cache/fused_rope.cpp, kv_cache/mla_cache.cpp) through
// foreach_target.h. The sum of squares keeps its 16 partials in 16 / N vectors of N lanes (N = 16, 8,
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

// One head: out[i] from x[i], the scale r and the weight w (n values) in the style.
template <typename T>
HWY_INLINE void NormalizeHead(const T* x, T* out, size_t n, float r, const float* w, RmsNormStyle style) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto vr = hn::Set(df, r);
  size_t i = 0;
  switch (style) {
    case RmsNormStyle::kCastThenScale:
      if constexpr (std::is_same_v<T, float>) {
        for (; i + N <= n; i += N) StoreF(df, hn::Mul(hn::LoadU(df, w + i), hn::Mul(LoadF(df, x + i), vr)), out + i);
      } else if constexpr (std::is_same_v<T, bf16_t>) {
        // round_T(y) in the register: nearest even on the upper 16 bits (bits + 0x7fff + lsb, low word
        // cleared), F32ToBF16's arithmetic. A NaN here is a product of a widened bfloat16 (low word zero),
        // which the add leaves alone, as F32ToBF16 does (convert-inl.hpp explains why no other NaN occurs).
        const DU du;
        const auto bias = hn::Set(du, 0x7fffu), one = hn::Set(du, 1u), hi = hn::Set(du, 0xffff0000u);
        for (; i + N <= n; i += N) {
          const auto b = hn::BitCast(du, hn::Mul(LoadF(df, x + i), vr));
          const auto r16 = hn::And(hn::Add(hn::Add(b, bias), hn::And(hn::ShiftRight<16>(b), one)), hi);
          StoreF(df, hn::Mul(hn::LoadU(df, w + i), hn::BitCast(df, r16)), out + i);
        }
      } else {
        for (; i + N <= n; i += N) {
          StoreF(df, hn::Mul(LoadF(df, x + i), vr), out + i);  // round_T(y), read back widened
          StoreF(df, hn::Mul(hn::LoadU(df, w + i), LoadF(df, out + i)), out + i);
        }
      }
      for (; i < n; ++i) {
        StoreFromF32(LoadAsF32(x + i) * r, out + i);
        StoreFromF32(w[i] * LoadAsF32(out + i), out + i);
      }
      return;
    case RmsNormStyle::kScaleThenCast:
      for (; i + N <= n; i += N) StoreF(df, hn::Mul(hn::LoadU(df, w + i), hn::Mul(LoadF(df, x + i), vr)), out + i);
      for (; i < n; ++i) StoreFromF32(w[i] * (LoadAsF32(x + i) * r), out + i);
      return;
    case RmsNormStyle::kOnePlusWeight: {
      const auto one = hn::Set(df, 1.0f);
      for (; i + N <= n; i += N)
        StoreF(df, hn::Mul(hn::Mul(LoadF(df, x + i), vr), hn::Add(one, hn::LoadU(df, w + i))), out + i);
      for (; i < n; ++i) StoreFromF32((LoadAsF32(x + i) * r) * (1.0f + w[i]), out + i);
      return;
    }
  }
}

// One token's heads (see detail::RmsNormToken).
template <typename T>
HWY_INLINE void RmsNormTokenT(const HeadRmsNorm& norm, const T* in, int64_t in_head_stride, T* out,
                              int64_t out_head_stride, int64_t heads, int64_t head_dim) {
  const size_t n = static_cast<size_t>(head_dim);
  const float* w = norm.weight.data();
  if (norm.scope == RmsNormScope::kPerHead) {
    // Every head's scale first, then the heads normalised: the heads' sums are independent chains the
    // core overlaps (one head's sum is a chain of n / 16 dependent adds, then the fold, sqrt and divide).
    constexpr int64_t kChunk = 64;
    float r[kChunk];
    for (int64_t h0 = 0; h0 < heads; h0 += kChunk) {
      const int64_t m = std::min(kChunk, heads - h0);
      for (int64_t h = 0; h < m; ++h) r[h] = HeadSumSquares(in + (h0 + h) * in_head_stride, n);
      for (int64_t h = 0; h < m; ++h) r[h] = detail::RmsScale(r[h], head_dim, norm.eps);
      for (int64_t h = 0; h < m; ++h)
        NormalizeHead(in + (h0 + h) * in_head_stride, out + (h0 + h) * out_head_stride, n, r[h], w, norm.style);
    }
    return;
  }
  float sum = 0.0f;
  for (int64_t h = 0; h < heads; ++h) sum += HeadSumSquares(in + h * in_head_stride, n);
  const float r = detail::RmsScale(sum, heads * head_dim, norm.eps);
  for (int64_t h = 0; h < heads; ++h)
    NormalizeHead(in + h * in_head_stride, out + h * out_head_stride, n, r, w + h * head_dim, norm.style);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
