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

// roundf: halves away from zero. Exact for |v| < 2^23 (Q8_0's |x * id| is at most about 127).
HWY_INLINE hn::Vec<DF> RoundHalfAway(hn::Vec<DF> v) {
  const DF df;
  const auto t = hn::Trunc(v);
  const auto half_or_more = hn::Ge(hn::Abs(hn::Sub(v, t)), hn::Set(df, 0.5f));
  return hn::Add(t, hn::IfThenElseZero(half_or_more, hn::CopySign(hn::Set(df, 1.0f), v)));
}

// n / 32 blocks of ggml's block_q8_0 from n values (n a multiple of 32).
template <typename T>
HWY_INLINE void QuantizeRowQ8(const T* src, BlockQ8_0* dst, size_t n) {
  const DF df;
  const hn::RebindToSigned<DF> di;
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
  for (size_t b = 0; b < n / kQ8_0Block; ++b) {
    const T* x = src + b * kQ8_0Block;
    auto vmax = hn::Zero(df);
    for (size_t j = 0; j < static_cast<size_t>(kQ8_0Block); j += N) vmax = hn::Max(vmax, hn::Abs(LoadF(df, x + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = F32ToF16(d);
    const auto vid = hn::Set(df, id);
    for (size_t j = 0; j < static_cast<size_t>(kQ8_0Block); j += N) {
      const auto q = hn::ConvertTo(di, RoundHalfAway(hn::Mul(LoadF(df, x + j), vid)));
      hn::StoreU(hn::DemoteTo(d8, q), d8, dst[b].qs + j);
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
