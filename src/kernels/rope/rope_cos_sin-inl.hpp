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

#include "kernels/simd/convert-inl.hpp"
#include "kernels/rope/rope_cos_sin_f16.hpp"
#include "kernels/rope/rope_cos_sin_internal.hpp"
#include "posenc/kernels/simd.hpp"

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

#if HWY_TARGET != HWY_SCALAR
// bfloat16 products rounded to bfloat16 and widened back: (u + 0x7fff + lsb) with the lower word
// cleared, with no NaN test. Exact here because every product the kernel makes is of two widened
// bfloat16 (lower words zero): its NaNs are quieted operands or the default NaN, lower word zero too,
// so the bias never carries out of the lower word and the NaN comes back as RoundTo's NaN branch
// gives it (the argument of PackBF16Computed in convert-inl.hpp).
HWY_INLINE hn::Vec<DF> RoundProductBF16(hn::Vec<DF> v) {
  const DU du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  return hn::BitCast(DF(), hn::And(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb), hn::Set(du, 0xffff0000u)));
}

// y = round(round(x * c) + round(r * s)) on bfloat16 values already widened (as CosSinVec).
HWY_INLINE hn::Vec<DF> CosSinVecBF16(hn::Vec<DF> x, hn::Vec<DF> c, hn::Vec<DF> r, hn::Vec<DF> s) {
  return hn::Add(RoundProductBF16(hn::Mul(x, c)), RoundProductBF16(hn::Mul(r, s)));
}

// bfloat16 rows two elements to a 32-bit lane (convert-inl.hpp's LowBF16 / HighBF16 /
// PackBF16Computed): no widening loads or narrowing packs. Each lane's two elements meet only the
// same positions of the other rows, except the interleaved partner, which is the lane's other half.
// Negation flips the sign bit of both halves (0x80008000), as hn::Neg does after widening.
// Returns how far the vectors got; the caller finishes the row with the scalar code.
HWY_INLINE int64_t CosSinRowBF16Packed(RopePairing pairing, int64_t R, const bf16_t* x, bf16_t* y, const bf16_t* c,
                                       const bf16_t* s) {
  const DU du;
  const int64_t N2 = 2 * static_cast<int64_t>(hn::Lanes(du));  // bfloat16 elements per vector
  const auto sign = hn::Set(du, 0x80008000u);
  const auto load = [&](const bf16_t* p) { return hn::LoadU(du, reinterpret_cast<const uint32_t*>(p)); };
  int64_t i = 0;
  if (pairing == RopePairing::kHalf) {
    const int64_t h = R / 2;
    for (; i + N2 <= h; i += N2) {
      const auto A = load(x + i), B = load(x + h + i), nB = hn::Xor(B, sign);
      const auto Ca = load(c + i), Sa = load(s + i), Cb = load(c + h + i), Sb = load(s + h + i);
      const auto ya_lo = CosSinVecBF16(LowBF16(A), LowBF16(Ca), LowBF16(nB), LowBF16(Sa));
      const auto ya_hi = CosSinVecBF16(HighBF16(A), HighBF16(Ca), HighBF16(nB), HighBF16(Sa));
      const auto yb_lo = CosSinVecBF16(LowBF16(B), LowBF16(Cb), LowBF16(A), LowBF16(Sb));
      const auto yb_hi = CosSinVecBF16(HighBF16(B), HighBF16(Cb), HighBF16(A), HighBF16(Sb));
      hn::StoreU(PackBF16Computed(ya_lo, ya_hi), du, reinterpret_cast<uint32_t*>(y + i));
      hn::StoreU(PackBF16Computed(yb_lo, yb_hi), du, reinterpret_cast<uint32_t*>(y + h + i));
    }
    return i;
  }
  for (; i + N2 <= R; i += N2) {  // lane k holds the pair (2k, 2k + 1): low half even, high half odd
    const auto X = load(x + i), Cv = load(c + i), Sv = load(s + i);
    const auto even = LowBF16(X), odd = HighBF16(X);
    const auto y_even = CosSinVecBF16(even, LowBF16(Cv), HighBF16(hn::Xor(X, sign)), LowBF16(Sv));
    const auto y_odd = CosSinVecBF16(odd, HighBF16(Cv), even, HighBF16(Sv));
    hn::StoreU(PackBF16Computed(y_even, y_odd), du, reinterpret_cast<uint32_t*>(y + i));
  }
  return i;
}
#endif  // HWY_TARGET != HWY_SCALAR

// One head row: x, y at the rotary window (may be equal), c, s the token's rows.
// native_f16: float16 rows go to the CPU's float16 arithmetic first (NativeF16Arithmetic()).
template <typename T>
HWY_INLINE void CosSinRow(RopePairing pairing, int64_t R, const T* x, T* y, const T* c, const T* s,
                          [[maybe_unused]] bool native_f16) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (std::is_same_v<T, bf16_t>) i = CosSinRowBF16Packed(pairing, R, x, y, c, s);
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<T, f16_t>) {
    if (native_f16) i = detail::CosSinRowF16Native(pairing, R, x, y, c, s);
  }
#endif
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
  const bool native_f16 = std::is_same_v<T, f16_t> && NativeF16Arithmetic();
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
      CosSinRow<T>(L.pairing, R, x + start, y + start, c, s, native_f16);
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
