// Per-target KV-cache row writes, included once per SIMD target by kv_cache.cpp and fused_rope.cpp
// (foreach_target.h): float32 / float16 / bfloat16 rows converted to the cache type through
// convert-inl.hpp's rounding stores, and Q8_0 blocks quantized as QuantizeRowQ8_0Reference defines
// them (the same float32 operations in the same order, so the bytes are equal on every target).
#if defined(POSENC_KERNELS_KV_CACHE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_KV_CACHE_INL_H_
#undef POSENC_KERNELS_KV_CACHE_INL_H_
#else
#define POSENC_KERNELS_KV_CACHE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include <hwy/highway.h>

#include "kernels/convert-inl.hpp"
#include "posenc/kernels/kv_cache.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[i] = round_to_TD(float32(src[i])), n values.
template <typename TS, typename TD>
HWY_INLINE void ConvertRow(const TS* src, TD* dst, size_t n) {
  if constexpr (std::is_same_v<TS, TD>) {
    std::memcpy(dst, src, n * sizeof(TS));
  } else {
    const DF df;
    const size_t N = hn::Lanes(df);
    size_t i = 0;
#pragma GCC unroll 4
    for (; i + N <= n; i += N) StoreF(df, LoadF(df, src + i), dst + i);
    for (; i < n; ++i) StoreFromF32(LoadAsF32(src + i), dst + i);
  }
}

// roundf(v) as int32: halves away from zero. v + copysign(0.49999997, v) (the float below 0.5) rounds,
// in float32 round-to-nearest-even, to a value whose truncation is roundf(v) for every |v| < 2^23: a
// fraction of exactly .5 reaches the next integer (n + 0.99999997 rounds up to n + 1, and at v = 0.5 the
// sum is the midpoint 1 - 2^-25, which rounds to the even 1.0), a fraction below .5 stays below it
// (0.49999997 + 0.49999997 = 1 - 2^-24 is exact). ConvertTo truncates toward zero. Q8_0's |x * id| is
// at most about 127.
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> RoundHalfAwayToInt(hn::Vec<DF> v) {
  const DF df;
  return hn::ConvertTo(hn::RebindToSigned<DF>(), hn::Add(v, hn::CopySign(hn::Set(df, 0.49999997f), v)));
}

// n / 32 blocks of ggml's block_q8_0 from n values (n a multiple of 32).
template <typename T>
HWY_INLINE void QuantizeRowQ8(const T* src, BlockQ8_0* dst, size_t n) {
  const DF df;
  const hn::Rebind<int8_t, DF> d8;
  const size_t N = hn::Lanes(df);
  if (N > static_cast<size_t>(kQ8_0Block) || kQ8_0Block % N != 0) {  // vectors wider than a block
    float row[kQ8_0Block];
    for (size_t b = 0; b < n / kQ8_0Block; ++b) {
      for (size_t j = 0; j < kQ8_0Block; ++j) row[j] = LoadAsF32(src + b * kQ8_0Block + j);
      QuantizeRowQ8_0Reference(row, kQ8_0Block, dst + b);
    }
    return;
  }
  // Three passes over the row (it is in L1): each block's amax; d and id for up to kGroup blocks at once
  // in full vectors (one division per N blocks instead of two scalar divisions per block); the quants.
  constexpr size_t kGroup = 64;
  HWY_ALIGN float amax[kGroup + hn::MaxLanes(df)], ids[kGroup + hn::MaxLanes(df)];
  HWY_ALIGN f16_t ds[kGroup + hn::MaxLanes(df)];
  const size_t nb = n / kQ8_0Block;
  for (size_t g = 0; g < nb; g += kGroup) {
    const size_t m = std::min(kGroup, nb - g);
    const T* xg = src + g * kQ8_0Block;
    for (size_t b = 0; b < m; ++b) {
      const T* x = xg + b * kQ8_0Block;
      auto vmax = hn::Abs(LoadF(df, x));
      for (size_t j = N; j < static_cast<size_t>(kQ8_0Block); j += N) vmax = hn::Max(vmax, hn::Abs(LoadF(df, x + j)));
      amax[b] = hn::GetLane(hn::MaxOfLanes(df, vmax));
    }
    for (size_t b = m; b < (m + N - 1) / N * N; ++b) amax[b] = 0.0f;
    const auto v127 = hn::Set(df, 127.0f), one = hn::Set(df, 1.0f);
    for (size_t b = 0; b < m; b += N) {
      const auto d = hn::Div(hn::Load(df, amax + b), v127);
      hn::Store(hn::IfThenZeroElse(hn::Eq(d, hn::Zero(df)), hn::Div(one, d)), df, ids + b);
      StoreF(df, d, ds + b);  // float16, nearest even (F32ToF16)
    }
    for (size_t b = 0; b < m; ++b) {
      const T* x = xg + b * kQ8_0Block;
      BlockQ8_0& out = dst[g + b];
      out.d = ds[b];
      const auto vid = hn::Set(df, ids[b]);
      for (size_t j = 0; j < static_cast<size_t>(kQ8_0Block); j += N) {
        const auto q = RoundHalfAwayToInt(hn::Mul(LoadF(df, x + j), vid));
        hn::StoreU(hn::DemoteTo(d8, q), d8, out.qs + j);
      }
    }
  }
}

// One row of n values of T into the cache type at dst.
template <typename T>
HWY_INLINE void StoreRowFrom(const T* src, KvCacheType type, void* dst, size_t n) {
  switch (type) {
    case KvCacheType::kF32: ConvertRow(src, static_cast<float*>(dst), n); return;
    case KvCacheType::kF16: ConvertRow(src, static_cast<f16_t*>(dst), n); return;
    case KvCacheType::kBF16: ConvertRow(src, static_cast<bf16_t*>(dst), n); return;
    case KvCacheType::kQ8_0: QuantizeRowQ8(src, static_cast<BlockQ8_0*>(dst), n); return;
  }
}

HWY_INLINE void StoreRow(DType dtype, const void* src, KvCacheType type, void* dst, size_t n) {
  switch (dtype) {
    case DType::kF32: StoreRowFrom(static_cast<const float*>(src), type, dst, n); return;
    case DType::kF16: StoreRowFrom(static_cast<const f16_t*>(src), type, dst, n); return;
    case DType::kBF16: StoreRowFrom(static_cast<const bf16_t*>(src), type, dst, n); return;
    default: return;  // validated at the boundary
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
