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

#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "kernels/simd/convert-inl.hpp"
#include "kernels/simd/memory-inl.hpp"
#include "posenc/kernels/kv_cache.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The first min(bytes, kStreamHead) bytes of a row, so the L2 streamer has found its stream.
constexpr size_t kStreamHead = 256, kWholeRowPrefetchBytes = 2048;
HWY_INLINE void PrefetchHead(const void* row, size_t bytes) { PrefetchLines(row, std::min(bytes, kStreamHead)); }

// A scattered cache row about to be written, fetched a chunk of tokens ahead: rows of up to 2 KiB (16-bit
// and 8-bit caches of 8 heads of 128, MLA's latent rows) whole into L2, as strided windows go
// (rope_internal.hpp's WindowPrefetch); longer rows only their heads into L1. zen4, cold fused decode, 1
// thread, runs of 4 and 6 rounds alternating: whole rows into L2 raised the 16-bit and Q8_0 rows' speedup
// over the unfused calls by up to 0.14 (bfloat16 -> q8_0 1.15 -> 1.27) and lowered the 4 KiB (float32)
// rows' 1.08-1.12 -> 1.04; whole rows into L1 measured the same or lower (2026-12-01).
// The kernels fetch the cos/sin rows of such tokens into L2 too.
constexpr bool WholeRowPrefetch(size_t bytes) { return bytes <= kWholeRowPrefetchBytes; }
HWY_INLINE void PrefetchCacheRow(const void* row, size_t bytes) {
  WholeRowPrefetch(bytes) ? PrefetchLinesL2(row, bytes) : PrefetchHead(row, bytes);
}

// dst[i] = round_to_TD(float32(src[i])), n values; dst a TD* or a Streamed<TD> (whole vectors streamed,
// the tail stored plainly).
template <typename TS, class P>
HWY_INLINE void ConvertRow(const TS* src, P dst, size_t n) {
  using TD = typename PtrTo<P>::type;
  if constexpr (std::is_same_v<TS, TD>) {
    if constexpr (std::is_same_v<P, TD*>) {
      std::memcpy(dst, src, n * sizeof(TS));
    } else {
      StreamCopy(dst.p, src, n * sizeof(TS));
    }
  } else {
    const DF df;
    const size_t N = hn::Lanes(df);
    size_t i = 0;
#pragma GCC unroll 4
    for (; i + N <= n; i += N) StoreF(df, LoadF(df, src + i), dst + i);
    for (; i < n; ++i) StoreFromF32(LoadAsF32(src + i), Raw(dst) + i);
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

// n / 32 blocks of ggml's block_q8_0 from n values (n a multiple of 32): the portable form, for the
// targets without a hand-scheduled one below.
template <typename T>
HWY_INLINE void QuantizeRowQ8Portable(const T* src, BlockQ8_0* dst, size_t n) {
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

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
// Hand-scheduled Q8_0 for AVX-512 and AVX2, the same operations on each value as the reference (amax =
// max |x|, d = amax / 127 and id = 1 / d in float32, roundf(x * id)), arranged for throughput on the
// shuffle port, which the portable form spends on one horizontal max per block and one 3-shuffle
// int8 narrowing per vector:
//  * the amaxes of kQ8Lanes blocks come out of one transpose-and-max tree (interleave 32-bit, then
//    64-bit, then 128-bit halves): kQ8Lanes - 1 shuffle pairs for kQ8Lanes blocks;
//  * the quants of a block pair (AVX-512: 4 vectors) or block (AVX2) narrow with two saturating packs
//    and one lane permutation; |x * id| <= 127.5 so the packs never saturate, and the float to int32
//    truncation needs none of the out-of-range fix-ups of hn::ConvertTo.
// roundf's halves away from zero: x * id + copysign(0.49999997, x * id), truncated (see
// RoundHalfAwayToInt). Non-finite blocks are unspecified, as in the portable form.

// Four vectors of int32 lanes narrowed to bytes in value order: Q8_0's quants (-127..127) with signed
// saturating packs, float8's codes (0..255) with unsigned ones, exact in those ranges. The packs work per
// 128-bit chunk, so chunk k of the packed vector holds the dwords [a_k b_k c_k d_k]; one lane permutation
// puts them back in order.
#if HWY_TARGET == HWY_AVX2
template <bool kUnsigned>
HWY_INLINE __m256i PackToBytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i p = kUnsigned ? _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d))
                              : _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#else
template <bool kUnsigned>
HWY_INLINE __m512i PackToBytes(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i p = kUnsigned ? _mm512_packus_epi16(_mm512_packus_epi32(a, b), _mm512_packus_epi32(c, d))
                              : _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
  return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), p);
}
#endif

#if HWY_TARGET == HWY_AVX2
constexpr size_t kQ8Lanes = 8;
using Q8Vec = __m256;
HWY_INLINE Q8Vec Q8Load(const float* p) { return _mm256_loadu_ps(p); }
HWY_INLINE Q8Vec Q8Max(Q8Vec a, Q8Vec b) { return _mm256_max_ps(a, b); }
HWY_INLINE Q8Vec Q8Abs(Q8Vec a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
// Lane b of the result: max over the lanes of m[b], b < 8.
HWY_INLINE Q8Vec Q8ReduceMax(const Q8Vec* m) {
  Q8Vec r1[4], r2[2];
  for (int i = 0; i < 4; ++i)  // 128-bit chunk of r1[i]: [a, b, a, b] partials (a = m[2i], b = m[2i + 1])
    r1[i] = _mm256_max_ps(_mm256_unpacklo_ps(m[2 * i], m[2 * i + 1]), _mm256_unpackhi_ps(m[2 * i], m[2 * i + 1]));
  for (int i = 0; i < 2; ++i) {  // chunk of r2[i]: blocks 4i .. 4i + 3, one partial each
    const __m256d a = _mm256_castps_pd(r1[2 * i]), b = _mm256_castps_pd(r1[2 * i + 1]);
    r2[i] = _mm256_max_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
  }
  return _mm256_max_ps(_mm256_permute2f128_ps(r2[0], r2[1], 0x20), _mm256_permute2f128_ps(r2[0], r2[1], 0x31));
}
// roundf(x * id) of one block (4 vectors) into its 32 quants.
HWY_INLINE void Q8StoreBlock(const float* x, __m256 id, int8_t* qs) {
  const __m256 half = _mm256_set1_ps(0.49999997f), sign = _mm256_set1_ps(-0.0f);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), id);
    q[j] = _mm256_cvttps_epi32(_mm256_add_ps(v, _mm256_or_ps(_mm256_and_ps(v, sign), half)));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), PackToBytes<false>(q[0], q[1], q[2], q[3]));
}
#else
constexpr size_t kQ8Lanes = 16;
using Q8Vec = __m512;
HWY_INLINE Q8Vec Q8Load(const float* p) { return _mm512_loadu_ps(p); }
HWY_INLINE Q8Vec Q8Max(Q8Vec a, Q8Vec b) { return _mm512_max_ps(a, b); }
HWY_INLINE Q8Vec Q8Abs(Q8Vec a) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
}
HWY_INLINE Q8Vec Q8ReduceMax(const Q8Vec* m) {
  Q8Vec r1[8], r2[4], r3[2];
  for (int i = 0; i < 8; ++i)
    r1[i] = _mm512_max_ps(_mm512_unpacklo_ps(m[2 * i], m[2 * i + 1]), _mm512_unpackhi_ps(m[2 * i], m[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // each 128-bit chunk of r2[i]: blocks 4i .. 4i + 3
    const __m512d a = _mm512_castps_pd(r1[2 * i]), b = _mm512_castps_pd(r1[2 * i + 1]);
    r2[i] = _mm512_max_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // Chunks [a0 a1 a2 a3], [b0 b1 b2 b3] -> [a0|a1, a2|a3, b0|b1, b2|b3] (| = max), twice.
  for (int i = 0; i < 2; ++i)
    r3[i] = _mm512_max_ps(_mm512_shuffle_f32x4(r2[2 * i], r2[2 * i + 1], 0x88),
                          _mm512_shuffle_f32x4(r2[2 * i], r2[2 * i + 1], 0xDD));
  return _mm512_max_ps(_mm512_shuffle_f32x4(r3[0], r3[1], 0x88), _mm512_shuffle_f32x4(r3[0], r3[1], 0xDD));
}
HWY_INLINE __m512i Q8Quant(__m512 x, __m512 id) {
  const __m512 v = _mm512_mul_ps(x, id);
  // copysign(0.49999997, v): the sign bit of v, the other bits of the constant (bitwise select 0xCA).
  const __m512i s = _mm512_ternarylogic_epi32(_mm512_set1_epi32(static_cast<int>(0x80000000u)), _mm512_castps_si512(v),
                                              _mm512_castps_si512(_mm512_set1_ps(0.49999997f)), 0xCA);
  return _mm512_cvttps_epi32(_mm512_add_ps(v, _mm512_castsi512_ps(s)));
}
// Two blocks (x0, x1: 32 values each) with their ids into qs0 and qs1.
HWY_INLINE void Q8StoreBlockPair(const float* x0, const float* x1, __m512 id0, __m512 id1, int8_t* qs0, int8_t* qs1) {
  const __m512i a = Q8Quant(_mm512_loadu_ps(x0), id0), b = Q8Quant(_mm512_loadu_ps(x0 + 16), id0);
  const __m512i c = Q8Quant(_mm512_loadu_ps(x1), id1), d = Q8Quant(_mm512_loadu_ps(x1 + 16), id1);
  const __m512i r = PackToBytes<false>(a, b, c, d);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs0), _mm512_castsi512_si256(r));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs1), _mm512_extracti64x4_epi64(r, 1));
}
#endif

// The amaxes of up to kQ8Lanes blocks (m of them) of float32 values at x, lane b for block b.
HWY_INLINE Q8Vec AmaxGroupQ8(const float* x, size_t m) {
  constexpr size_t kVecs = static_cast<size_t>(kQ8_0Block) / kQ8Lanes;  // vectors per block
  Q8Vec amax[kQ8Lanes];
  for (size_t b = 0; b < kQ8Lanes; ++b) {
    if (b >= m) {
      amax[b] = Q8Abs(Q8Load(x));  // any finite lanes; the lanes of blocks >= m are not used
      continue;
    }
    const float* xb = x + b * kQ8_0Block;
    Q8Vec v = Q8Abs(Q8Load(xb));
    for (size_t j = 1; j < kVecs; ++j) v = Q8Max(v, Q8Abs(Q8Load(xb + j * kQ8Lanes)));
    amax[b] = v;
  }
  return Q8ReduceMax(amax);
}

// The quants of m blocks at x with their ids.
HWY_INLINE void QuantsQ8(const float* x, const float* ids, BlockQ8_0* dst, size_t m) {
#if HWY_TARGET == HWY_AVX2
  for (size_t b = 0; b < m; ++b) Q8StoreBlock(x + b * kQ8_0Block, _mm256_set1_ps(ids[b]), dst[b].qs);
#else
  size_t b = 0;
  for (; b + 2 <= m; b += 2)
    Q8StoreBlockPair(x + b * kQ8_0Block, x + (b + 1) * kQ8_0Block, _mm512_set1_ps(ids[b]), _mm512_set1_ps(ids[b + 1]),
                     dst[b].qs, dst[b + 1].qs);
  if (b < m) {  // an odd last block: quantized as both halves of a pair, one copy kept
    HWY_ALIGN int8_t spare[kQ8_0Block];
    const __m512 id = _mm512_set1_ps(ids[b]);
    Q8StoreBlockPair(x + b * kQ8_0Block, x + b * kQ8_0Block, id, id, spare, dst[b].qs);
  }
#endif
}

// Three passes over up to kQ8Groups * kQ8Lanes blocks at a time (in L1): the amaxes, the scales (the
// groups' two divisions are independent, so their latencies overlap), the quants.
template <typename T>
HWY_INLINE void QuantizeRowQ8(const T* src, BlockQ8_0* dst, size_t n) {
  constexpr size_t kQ8Groups = 4, kSpan = kQ8Groups * kQ8Lanes;  // blocks per pass
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t nb = n / kQ8_0Block;
  HWY_ALIGN float ids[kSpan];
  HWY_ALIGN f16_t ds[kSpan];
  for (size_t s0 = 0; s0 < nb; s0 += kSpan) {
    const size_t ms = std::min(kSpan, nb - s0);
    const float* x;
    HWY_ALIGN float row[std::is_same_v<T, float> ? 1 : kSpan * kQ8_0Block];
    if constexpr (std::is_same_v<T, float>) {
      x = src + s0 * kQ8_0Block;
    } else {  // 16-bit values widened once, not once per pass
      const T* xs = src + s0 * kQ8_0Block;
      for (size_t i = 0; i < ms * kQ8_0Block; i += N) hn::Store(LoadF(df, xs + i), df, row + i);
      x = row;
    }
    const size_t groups = (ms + kQ8Lanes - 1) / kQ8Lanes;
    Q8Vec amax[kQ8Groups];
    for (size_t g = 0; g < groups; ++g)
      amax[g] = AmaxGroupQ8(x + g * kQ8Lanes * kQ8_0Block, std::min(kQ8Lanes, ms - g * kQ8Lanes));
    for (size_t g = 0; g < groups; ++g) {
      const auto d = hn::Div(hn::Vec<DF>{amax[g]}, hn::Set(df, 127.0f));
      hn::Store(hn::IfThenZeroElse(hn::Eq(d, hn::Zero(df)), hn::Div(hn::Set(df, 1.0f), d)), df, ids + g * kQ8Lanes);
      StoreF(df, d, ds + g * kQ8Lanes);  // float16, nearest even (F32ToF16)
    }
    for (size_t b = 0; b < ms; ++b) dst[s0 + b].d = ds[b];
    QuantsQ8(x, ids, dst + s0, ms);
  }
}
#else
template <typename T>
HWY_INLINE void QuantizeRowQ8(const T* src, BlockQ8_0* dst, size_t n) {
  QuantizeRowQ8Portable(src, dst, n);
}
#endif

// Float8 codes of float32 lanes, PyTorch's conversion (F32ToF8E4M3 / F32ToF8E5M2, core/dtype.hpp) in
// integer lanes: the same three cases (overflow / NaN, subnormal by a float addition, normal by a
// rebias and round-to-nearest-even add) computed for every lane and selected, so each lane's code is
// the scalar one bit for bit. |x| < 2^31 as bits, so signed compares order the magnitudes. For |x| at
// or above the smallest normal the rebiased code grows with |x| (the rebias wraps once, below any
// normal: 0x3c800000 + 0xc407ffff = 2^32 + 0x87ffff), so overflow is a Min with the overflow code: every
// |x| >= 480 (e4m3) / 65536 (e5m2), infinities and NaNs included, gives a code at or above it, and
// every smaller |x| one below or equal (e4m3: [464, 480) round to 0x7f as in the scalar code). The
// codes stay in int32 lanes, 0..255 with the sign in bit 7.
template <bool kE4M3>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Float8Codes(hn::Vec<DF> v) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(di, v);
  const auto a = hn::And(u, hn::Set(di, 0x7fffffff));
  constexpr int kDrop = kE4M3 ? 20 : 21;
  constexpr int32_t kSmallestNormal = kE4M3 ? 0x3c800000 : 0x38800000;  // 2^-6, 2^-14
  constexpr float kDenorm = kE4M3 ? 16384.0f : 128.0f;                  // 2^14, 2^7
  constexpr int32_t kDenormBits = kE4M3 ? 0x46800000 : 0x43000000;
  constexpr uint32_t kRebias = kE4M3 ? 0xc407ffffu : 0xc80fffffu;
  const auto sub =
      hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, kDenorm))), hn::Set(di, kDenormBits));
  const auto odd = hn::And(hn::ShiftRight<kDrop>(a), hn::Set(di, 1));
  // The rebias wraps modulo 2^32 in the scalar code: unsigned lanes here, shifted logically.
  const auto norm =
      hn::BitCast(di, hn::ShiftRight<kDrop>(hn::Add(hn::BitCast(du, hn::Add(a, odd)), hn::Set(du, kRebias))));
  auto r = hn::IfThenElse(hn::Lt(a, hn::Set(di, kSmallestNormal)), sub, norm);
  if constexpr (kE4M3) {
    r = hn::Min(r, hn::Set(di, 0x7f));  // 480 and above, infinities and NaN: 0x7f (NaN)
  } else {
    r = hn::Min(r, hn::Set(di, 0x7c));  // 65536 and above: infinity; NaN below
    r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7f), r);
  }
  // The sign into bit 7: (bits >> 24) & 0x80, or'ed in one three-input op.
  return hn::OrAnd(r, hn::BitCast(di, hn::ShiftRight<24>(hn::BitCast(du, u))), hn::Set(di, 0x80));
}

// The low byte of each int32 lane, stored: one narrowing instruction where the target has it.
HWY_INLINE void StoreLowBytes(hn::Vec<hn::RebindToSigned<DF>> codes, uint8_t* dst) {
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
  static_assert(hn::MaxLanes(DF()) == 16, "AVX-512 lanes");
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(codes.raw));
#else
  const hn::Rebind<uint8_t, DF> d8;
  const hn::RebindToUnsigned<DF> du;
  hn::StoreU(hn::TruncateTo(d8, hn::BitCast(du, codes)), d8, dst);
#endif
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
// The codes (0..255 in int32 lanes) of four vectors in value order, stored at dst (plain, or streamed:
// dst then a multiple of the 4N bytes) by PackToBytes, where one narrowing per vector (AVX-512's vpmovdb)
// costs two shuffles each (xeon, rows in L1, build/bench/kv_store_cost, exact-reciprocal scale: 0.17-0.20
// -> 0.15-0.18 ns/value).
constexpr bool kPackedCodes = true;
#if HWY_TARGET == HWY_AVX2
HWY_INLINE void StoreCodes4(const __m256i* c, uint8_t* dst, bool stream) {
  const __m256i r = PackToBytes<true>(c[0], c[1], c[2], c[3]);
  if (stream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), r);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), r);
  }
}
#else
HWY_INLINE void StoreCodes4(const __m512i* c, uint8_t* dst, bool stream) {
  const __m512i r = PackToBytes<true>(c[0], c[1], c[2], c[3]);
  if (stream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), r);
  } else {
    _mm512_storeu_si512(dst, r);
  }
}
#endif
#else
constexpr bool kPackedCodes = false;
#endif

// Whether x * (1 / s) is x / s for every float32 x: when 1 / s is a float32 (s = +-2^k, k in
// [-126, 127]; 2^-127 is subnormal but exact), both are the correctly rounded exact quotient, NaN,
// infinities, zeros and subnormal results included. vLLM's default scale, 1, is one.
inline bool ExactReciprocal(float s) {
  uint32_t b;
  std::memcpy(&b, &s, sizeof b);
  const uint32_t exponent = (b >> 23) & 0xffu;
  return (b & 0x7fffffu) == 0 && exponent >= 1 && exponent <= 254;
}

// dst[i] = fp8(float32(src[i]) / scale of i's head), n values; a multiplication where it is the same.
// dst a TD* or a Streamed<TD> (heads of whole 64-byte lines, 64-byte aligned: StreamsCacheRows).
template <typename T, class P>
HWY_INLINE void StoreRowFloat8(const T* src, P dst, size_t n, const detail::RowScale& scale) {
  using TD = typename PtrTo<P>::type;
  constexpr bool kE4M3 = std::is_same_v<TD, f8e4m3_t>;
  const DF df;
  const size_t N = hn::Lanes(df);
  uint8_t* const out = reinterpret_cast<uint8_t*>(Raw(dst));
  const size_t hd = scale.count > 1 ? static_cast<size_t>(scale.head_dim) : std::max<size_t>(n, 1);  // per head
  for (size_t h0 = 0; h0 < n; h0 += hd) {
    const size_t end = std::min(n, h0 + hd);
    const float s = scale.of_head(static_cast<int64_t>(h0 / hd));
    size_t i = h0;
    const auto head = [&](auto quotient) {  // quotient(x) = x / s
      const auto codes = [&](size_t at) { return Float8Codes<kE4M3>(quotient(LoadF(df, src + at))); };
      if constexpr (kPackedCodes) {
        for (; i + 4 * N <= end; i += 4 * N) {
          const decltype(codes(i).raw) c[4] = {codes(i).raw, codes(i + N).raw, codes(i + 2 * N).raw,
                                               codes(i + 3 * N).raw};
          StoreCodes4(c, out + i, !std::is_same_v<P, TD*>);
        }
      }
      for (; i + N <= end; i += N) StoreLowBytes(codes(i), out + i);
    };
    // A division where the multiplication by 1 / s is not the same. Measured against it (xeon, rows in L1,
    // build/bench/kv_store_cost): x * (1 / s) in float64 (exact after rounding to float32) cost 0.29
    // ns/value, the division 0.23.
    if (ExactReciprocal(s)) {
      head([vr = hn::Set(df, 1.0f / s)](hn::Vec<DF> x) { return hn::Mul(x, vr); });
    } else {
      head([vs = hn::Set(df, s)](hn::Vec<DF> x) { return hn::Div(x, vs); });
    }
    for (; i < end; ++i) StoreFromF32(LoadAsF32(src + i) / s, Raw(dst) + i);
  }
}

// One row of n values of T into the cache type at dst (scale: float8 caches only).
template <typename T>
HWY_INLINE void StoreRowFrom(const T* src, KvCacheType type, void* dst, size_t n, const detail::RowScale& scale = {}) {
  switch (type) {
    case KvCacheType::kF32: ConvertRow(src, static_cast<float*>(dst), n); return;
    case KvCacheType::kF16: ConvertRow(src, static_cast<f16_t*>(dst), n); return;
    case KvCacheType::kBF16: ConvertRow(src, static_cast<bf16_t*>(dst), n); return;
    case KvCacheType::kQ8_0: QuantizeRowQ8(src, static_cast<BlockQ8_0*>(dst), n); return;
    case KvCacheType::kF8E4M3: StoreRowFloat8(src, static_cast<f8e4m3_t*>(dst), n, scale); return;
    case KvCacheType::kF8E5M2: StoreRowFloat8(src, static_cast<f8e5m2_t*>(dst), n, scale); return;
    default: return;  // not a cache type: refused by KvCacheView::Validate
  }
}

// Q8_0 blocks of n values quantized 64 blocks (34 lines) at a time into L1 and copied out with streaming
// stores: the 34-byte blocks do not come out of the quantizer's registers in whole lines.
template <typename T>
HWY_INLINE void StreamRowQ8(const T* src, BlockQ8_0* dst, size_t n) {
  constexpr size_t kSpan = 64;
  HWY_ALIGN BlockQ8_0 staged[kSpan];
  const size_t nb = n / kQ8_0Block;
  for (size_t b = 0; b < nb; b += kSpan) {
    const size_t m = std::min(kSpan, nb - b);
    QuantizeRowQ8(src + b * kQ8_0Block, staged, m * kQ8_0Block);
    StreamCopy(dst + b, staged, m * sizeof(BlockQ8_0));
  }
}

// StoreRowFrom with streaming stores (the row 64-byte aligned, whole lines).
template <typename T>
HWY_INLINE void StreamRowFrom(const T* src, KvCacheType type, void* dst, size_t n, const detail::RowScale& scale) {
  switch (type) {
    case KvCacheType::kQ8_0: StreamRowQ8(src, static_cast<BlockQ8_0*>(dst), n); return;
    case KvCacheType::kF32: ConvertRow(src, Streamed<float>{static_cast<float*>(dst)}, n); return;
    case KvCacheType::kF16: ConvertRow(src, Streamed<f16_t>{static_cast<f16_t*>(dst)}, n); return;
    case KvCacheType::kBF16: ConvertRow(src, Streamed<bf16_t>{static_cast<bf16_t*>(dst)}, n); return;
    case KvCacheType::kF8E4M3: StoreRowFloat8(src, Streamed<f8e4m3_t>{static_cast<f8e4m3_t*>(dst)}, n, scale); return;
    case KvCacheType::kF8E5M2: StoreRowFloat8(src, Streamed<f8e5m2_t>{static_cast<f8e5m2_t*>(dst)}, n, scale); return;
    default: StoreRowFrom(src, type, dst, n, scale); return;
  }
}

// f(std::type_identity<T>()) with T the element type of a float32 / float16 / bfloat16 `dtype`;
// nothing for other types (validated at the boundary).
template <class F>
HWY_INLINE void VisitFloatDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(std::type_identity<float>()); return;
    case DType::kF16: f(std::type_identity<f16_t>()); return;
    case DType::kBF16: f(std::type_identity<bf16_t>()); return;
    default: return;  // validated at the boundary
  }
}

HWY_INLINE void StoreRow(DType dtype, const void* src, KvCacheType type, void* dst, size_t n,
                         const detail::RowScale& scale = {}, bool stream = false) {
  VisitFloatDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (stream) return StreamRowFrom(static_cast<const T*>(src), type, dst, n, scale);
    StoreRowFrom(static_cast<const T*>(src), type, dst, n, scale);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
