// Per-target loads and stores of float32 / float16 / bfloat16 storage as float32 vectors. Stores round
// to nearest, ties to even, bit for bit like posenc::F32ToF16 / F32ToBF16 in dtype.hpp (Highway
// 1.0.3's DemoteTo truncates bfloat16, and float16 too where there is no F16C, so we round ourselves).
#if defined(POSENC_KERNELS_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_CONVERT_INL_H_
#undef POSENC_KERNELS_CONVERT_INL_H_
#else
#define POSENC_KERNELS_CONVERT_INL_H_
#endif

#include <cstddef>
#include <type_traits>

#include <hwy/highway.h>

#include "posenc/core/dtype.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> LoadF(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF(DF df, const bf16_t* p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  const auto bits = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
  return hn::BitCast(df, hn::ShiftLeft<16>(bits));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF(DF df, const f16_t* p) {
#if HWY_TARGET == HWY_SCALAR
  // Highway 1.0.3's scalar PromoteTo turns float16 infinities and NaNs into finite numbers (it
  // rebiases exponent 31 like any other); posenc's own widening is exact.
  return hn::Set(df, F16ToF32(*p));
#else
  const hn::Rebind<hwy::float16_t, DF> df16;  // F16C, or Highway's integer code
  const auto widened = hn::PromoteTo(df, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX2
  // x86 without F16C (SSE4, SSSE3): Highway 1.0.3's integer widening rebiases exponent 31 like any
  // other, so infinities and NaNs came out finite (+-65536 and up); those lanes are rebuilt exactly.
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> du16;
  const auto bits = hn::PromoteTo(du, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
  const auto special = hn::Eq(hn::And(bits, hn::Set(du, 0x7c00u)), hn::Set(du, 0x7c00u));
  const auto rebuilt = hn::Or(hn::Or(hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u))), hn::Set(du, 0x7f800000u)),
                              hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x3ffu))));
  return hn::IfThenElse(hn::RebindMask(df, special), hn::BitCast(df, rebuilt), widened);
#else
  return widened;
#endif
#endif
}

// A destination written with streaming (non-temporal) stores: StoreF and StoreBF16Pairs stream each
// vector into it, and so do the kernels that store through them (RoPE's RotateRegs, ConvertRow). Each
// vector's address must be a multiple of its size: 64-byte aligned rows of whole vectors (the callers
// check). The caller ends with hwy::FlushStream() before anything reads the rows.
template <typename T>
struct Streamed {
  T* p;
  Streamed operator+(size_t i) const { return {p + i}; }
};
template <typename U, typename T>
HWY_INLINE U* As(T* p) {
  return reinterpret_cast<U*>(p);
}
template <typename U, typename T>
HWY_INLINE Streamed<U> As(Streamed<T> p) {
  return {reinterpret_cast<U*>(p.p)};
}
template <typename T>
HWY_INLINE T* Raw(T* p) {
  return p;
}
template <typename T>
HWY_INLINE T* Raw(Streamed<T> p) {
  return p.p;
}
// The last step of every store below: plain or streamed.
template <class D, typename TS>
HWY_INLINE void Put(D d, hn::Vec<D> v, TS* p) {
  hn::StoreU(v, d, p);
}
template <class D, typename TS>
HWY_INLINE void Put(D d, hn::Vec<D> v, Streamed<TS> p) {
  if constexpr (hn::MaxLanes(D()) * sizeof(TS) >= 16) {
    hn::Stream(v, d, p.p);
  } else {  // Highway's Stream writes 16 bytes for a narrower vector
    hn::StoreU(v, d, p.p);
  }
}
// P (a pointer or a Streamed) writes values of T.
template <typename P>
struct PtrTo;
template <typename T>
struct PtrTo<T*> {
  using type = T;
};
template <typename T>
struct PtrTo<Streamed<T>> {
  using type = T;
};
template <class P, typename T>
using IfPtrTo = std::enable_if_t<std::is_same_v<typename PtrTo<P>::type, T>, int>;

template <class DF, class P, IfPtrTo<P, float> = 0>
HWY_INLINE void StoreF(DF df, hn::Vec<DF> v, P p) {
  Put(df, v, p);
}

template <class DF, class P, IfPtrTo<P, bf16_t> = 0>
HWY_INLINE void StoreF(DF /*df*/, hn::Vec<DF> v, P p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto abs = hn::BitCast(di32, hn::And(u, hn::Set(du32, 0x7fffffffu)));
  const auto is_nan = hn::RebindMask(du32, hn::Gt(abs, hn::Set(di32, 0x7f800000)));
  // Round to nearest even: add 0x7fff plus the lowest kept bit; a carry moves into the exponent.
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), lsb)));
  const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du32, 0x40u));
  const auto bits = hn::IfThenElse(is_nan, quiet, rounded);
  Put(du16, hn::DemoteTo(du16, hn::BitCast(di32, bits)), As<uint16_t>(p));
}

template <class DF, class P, IfPtrTo<P, f16_t> = 0>
HWY_INLINE void StoreF(DF df, hn::Vec<DF> v, P p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  // F16C's vcvtps2ph rounds with MXCSR (nearest even), handles subnormals and quiets NaN exactly as
  // F32ToF16 does.
  const hn::Rebind<hwy::float16_t, DF> df16;
  const hn::Rebind<uint16_t, DF> du16;
  Put(du16, hn::BitCast(du16, hn::DemoteTo(df16, v)), As<uint16_t>(p));
#else
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 0x8000u));
  const auto abs_u = hn::And(u, hn::Set(du32, 0x7fffffffu));
  const auto abs_i = hn::BitCast(di32, abs_u);
  // Normal results: rebias the exponent (127 -> 15), round the 13 dropped bits to nearest even.
  const auto rebiased = hn::Sub(abs_u, hn::Set(du32, 0x38000000u));
  const auto lsb = hn::And(hn::ShiftRight<13>(rebiased), hn::Set(du32, 1u));
  const auto normal = hn::ShiftRight<13>(hn::Add(rebiased, hn::Add(hn::Set(du32, 0xfffu), lsb)));
  // Subnormal results: value * 2^24 rounded to an integer (ties to even) by adding 2^23 in float.
  const auto scaled = hn::MulAdd(hn::BitCast(df, abs_u), hn::Set(df, 16777216.0f), hn::Set(df, 8388608.0f));
  const auto sub = hn::Sub(hn::BitCast(du32, scaled), hn::Set(du32, 0x4b000000u));
  auto bits = hn::IfThenElse(hn::RebindMask(du32, hn::Lt(abs_i, hn::Set(di32, 0x38800000))), sub, normal);
  bits = hn::IfThenElse(hn::RebindMask(du32, hn::Gt(abs_i, hn::Set(di32, 0x477fefff))), hn::Set(du32, 0x7c00u), bits);
  const auto nan = hn::Or(hn::Set(du32, 0x7e00u), hn::And(hn::ShiftRight<13>(abs_u), hn::Set(du32, 0x3ffu)));
  bits = hn::IfThenElse(hn::RebindMask(du32, hn::Gt(abs_i, hn::Set(di32, 0x7f800000))), nan, bits);
  bits = hn::Or(bits, sign);
  Put(du16, hn::DemoteTo(du16, hn::BitCast(di32, bits)), As<uint16_t>(p));
#endif
}

// v rounded to T and widened back, in registers: the bits StoreF then LoadF give, for values whose
// NaNs have a zero lower word (the kernels' only NaNs, PackBF16Computed's note below): a norm's
// intermediate rounding without a trip through memory.
template <typename T, class DF>
HWY_INLINE hn::Vec<DF> RoundToStorage(DF df, hn::Vec<DF> v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (std::is_same_v<T, bf16_t>) {  // nearest even on the upper 16 bits, F32ToBF16's add
      const hn::RebindToUnsigned<DF> du;
      const auto b = hn::BitCast(du, v);
      const auto lsb = hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u));
      return hn::BitCast(df, hn::And(hn::Add(b, hn::Add(hn::Set(du, 0x7fffu), lsb)), hn::Set(du, 0xffff0000u)));
    }
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    if constexpr (std::is_same_v<T, f16_t>) {  // F16C both ways, as StoreF and LoadF on these targets
      const hn::Rebind<hwy::float16_t, DF> df16;
      return hn::PromoteTo(df, hn::DemoteTo(df16, v));
    }
#endif
    HWY_ALIGN T buf[hn::MaxLanes(DF())];
    StoreF(df, v, buf);
    return LoadF(df, buf);
  }
}

using DF = hn::ScalableTag<float>;

// bfloat16 two to a 32-bit lane: a bfloat16 value is the upper half of a float32, so the element in
// the upper half of a lane is that lane masked, and the one in the lower half is the lane shifted
// left by 16. This replaces widening loads and narrowing packs (the costly part on AVX2, which has
// no bfloat16 instructions).
using DU = hn::RebindToUnsigned<DF>;

// Two float32 results per 32-bit lane, rounded to bfloat16 (nearest, ties to even) and packed: `lo` into
// the lower half, `hi` into the upper half. Works on 16-bit words: p = the two truncated bfloat16 (hi's
// upper word stays, lo's upper word moves down), q = the two dropped lower words at the same word
// positions. Round to nearest even adds 1 to a word of p when q + lsb(p) > 0x8000, i.e. when
// q + 0x7fff + lsb carries out of 16 bits; AverageRound(q, 0x7ffe | lsb) = (q + 0x7ffe + lsb + 1) >> 1
// computed in 17 bits has that carry as its bit 15. A carry through the mantissa moves into the
// exponent (up to infinity) exactly as F32ToBF16's 32-bit add does; infinities round to themselves.
//
// NaN: F32ToBF16 returns a NaN's upper word with the quiet bit set. The packing gives the same bits
// for every NaN whose lower word is zero and whose quiet bit is set (q = 0 never carries), and those
// are the only NaNs the kernels can make: their values are products and sums of widened bfloat16
// (lower words zero) and finite float32 factors (cos, sin, the embedding multiplier), and an IEEE
// operation returns either a quieted operand NaN or the default NaN (x86 0xffc00000, Arm and RISC-V
// 0x7fc00000), all with a zero lower word. So no NaN test is needed (it cost 7-15% of the bfloat16 RoPE
// time); tests/unit/rope_simd_test.cpp and gather_simd_test.cpp feed every bfloat16 pattern,
// NaN payloads and 0 x infinity included, and compare bits with the reference.
// Not for arbitrary float32 input: a NaN with payload only in its lower word would round wrongly.
#if HWY_TARGET != HWY_SCALAR  // (the scalar target has no 16-bit lanes inside a 32-bit one)
using DU16 = hn::Repartition<uint16_t, DF>;
HWY_INLINE hn::Vec<DU> PackBF16Computed(hn::Vec<DF> lo, hn::Vec<DF> hi) {
  const DU du;
  const DU16 d16;
  const auto ul = hn::BitCast(du, lo), uh = hn::BitCast(du, hi);
  const auto p = hn::OddEven(hn::BitCast(d16, uh), hn::BitCast(d16, hn::ShiftRight<16>(ul)));
  const auto q = hn::OddEven(hn::BitCast(d16, hn::ShiftLeft<16>(uh)), hn::BitCast(d16, ul));
  const auto bias = hn::Or(hn::And(p, hn::Set(d16, 1)), hn::Set(d16, 0x7ffe));
  const auto carry = hn::ShiftRight<15>(hn::AverageRound(q, bias));
  return hn::BitCast(du, hn::Add(p, carry));
}

// Packed bfloat16 pairs (PackBF16Computed's lanes) stored at p, a pointer or a Streamed.
template <class P>
HWY_INLINE void StoreBF16Pairs(hn::Vec<DU> v, P p) {
  Put(DU(), v, As<uint32_t>(p));
}

HWY_INLINE hn::Vec<DF> LowBF16(hn::Vec<DU> x) { return hn::BitCast(DF(), hn::ShiftLeft<16>(x)); }
HWY_INLINE hn::Vec<DF> HighBF16(hn::Vec<DU> x) { return hn::BitCast(DF(), hn::And(x, hn::Set(DU(), 0xffff0000u))); }
#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
