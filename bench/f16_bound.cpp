// The compute bound of 16-bit RoPE on one core (docs/PERFORMANCE.md, "What limits each kernel"):
// [8 tokens, 8 heads, 128], half layout, in place and L1-resident, rotated by bare intrinsics loops of
// the cheapest exact sequence each x86 target offers, beside posenc's ApplyRope on the same data:
//   float16   f16c       AVX2/F16C: per 8 values vcvtph2ps, multiply/FMA, vcvtps2ph (ymm)
//             f16c_512   AVX-512: the same instructions on 16 lanes (zmm), the token's cos/sin in
//                        registers across its heads
//             sw_both / sw_one   operands widened by integer instructions (normal numbers only: bounds
//                        for a software widening, not exact)
//             f16c_tab / f16c_hin  the f16c loop on the RopeTable's rows / with the heads innermost
//   bfloat16  bf16_pack / bf16_pack_512  two values per 32-bit lane widened by a shift and a mask,
//                        rounded to nearest even two results per lane with 16-bit integer lanes (AVX2
//                        ymm / AVX-512 zmm, the 512-bit loop with the token's factors in registers across
//                        its heads); no exact bfloat16 conversion instruction exists (AVX512-BF16 flushes
//                        subnormal inputs)
// Every exact loop is checked to give ApplyRope's bytes on one pass. The line "ApplyRope / <loop>" is
// the ratio to the fastest exact loop the chosen target can run (the 512-bit loops only under AVX3).
// Medians of 21 samples, each a block of repetitions; the modes alternate within each sample. Built only for x86-64 (-mavx2 -mfma -mf16c for the file; the
// AVX-512 loops carry a target attribute and run only where the CPU has AVX-512F/BW):
//   build/bench/f16_bound [TARGET]      (TARGET caps posenc's SIMD target, e.g. AVX2)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "posenc/posenc.hpp"
#include "probe_target.hpp"

namespace {

constexpr int kT = 8, kH = 8, kD = 128, kP = kD / 2;

__m256 WidenNormal(const uint16_t* p) {  // f16 -> f32 for normal numbers: shift into place, rebias
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sign_exp_mant = _mm256_srai_epi32(_mm256_slli_epi32(w, 16), 3);
  return _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_and_si256(sign_exp_mant, _mm256_set1_epi32(0x8FFFFFFF)), _mm256_set1_epi32(112 << 23)));
}

__m256 WidenF16c(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Heads innermost: per step of 8 pairs, cos/sin loaded once, then every head of the token.
void RotateHeadsInner(uint16_t* buf, const float* cs, const float* sn) {
  for (int t = 0; t < kT; ++t) {
    for (int i = 0; i < kP; i += 8) {
      const __m256 vc = _mm256_loadu_ps(cs + t * kP + i), vs = _mm256_loadu_ps(sn + t * kP + i);
      for (int h = 0; h < kH; ++h) {
        uint16_t* x = buf + (t * kH + h) * kD;
        const __m256 a = WidenF16c(x + i), b = WidenF16c(x + kP + i);
        const __m256 ra = _mm256_fmsub_ps(a, vc, _mm256_mul_ps(b, vs));
        const __m256 rb = _mm256_fmadd_ps(a, vs, _mm256_mul_ps(b, vc));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i), _mm256_cvtps_ph(ra, _MM_FROUND_TO_NEAREST_INT));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(x + kP + i), _mm256_cvtps_ph(rb, _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
}

// mode 0: f16c, 1: sw_both, 2: sw_one (cos/sin rows of kP floats per token at cs/sn).
void Rotate(int mode, uint16_t* buf, const float* cs, const float* sn) {
  for (int t = 0; t < kT; ++t) {
    const float* c = cs + t * kP;
    const float* s = sn + t * kP;
    for (int h = 0; h < kH; ++h) {
      uint16_t* x = buf + (t * kH + h) * kD;
      for (int i = 0; i < kP; i += 8) {
        const __m256 a = mode == 1 ? WidenNormal(x + i) : WidenF16c(x + i);
        const __m256 b = mode == 0 ? WidenF16c(x + kP + i) : WidenNormal(x + kP + i);
        const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
        const __m256 ra = _mm256_fmsub_ps(a, vc, _mm256_mul_ps(b, vs));
        const __m256 rb = _mm256_fmadd_ps(a, vs, _mm256_mul_ps(b, vc));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i), _mm256_cvtps_ph(ra, _MM_FROUND_TO_NEAREST_INT));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(x + kP + i), _mm256_cvtps_ph(rb, _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
}

// ---- The cheapest exact sequence each target offers (issue 17: `attainable` must be honest) ----
// float16: F16C at the widest width the target has: AVX2 vcvtph2ps / vcvtps2ph on 8 lanes (Rotate mode
// 0 above); AVX-512 the same instructions on 16 lanes (zmm). Both are exact (IEEE widening; narrowing
// with round to nearest even, subnormals, inf and NaN kept). AVX512-FP16 arithmetic is not used: a
// product in float16 is not the float32 product posenc (and PyTorch) round once.
// bfloat16: widening is exact as a 16-bit shift; narrowing to nearest even has no exact instruction
// (AVX512-BF16's vcvtneps2bf16 flushes subnormal inputs to zero), so the cheapest exact sequence is
// integer, two results per 32-bit lane (below), as posenc's packed kernel rounds them (finite values).
// AVX2: 8 lanes (16 values) per vector; AVX-512: 16 lanes (32 values).
// Loads: AVX-512 holds a token's factors (64 pairs: 8 zmm) in registers across its heads, as posenc's
// kernel does; AVX2's 16 ymm registers cannot hold them (16 for 64 pairs), and there the loop order
// decides how often they are loaded (f16c per head, f16c_hin once per token with the heads innermost).

// The token's cos/sin held in registers across its heads (4 + 4 zmm for 64 pairs): the loads of the
// factors are not repeated per head.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))) void RotateF16Avx512(uint16_t* buf, const float* cs,
                                                                                   const float* sn) {
  constexpr int kV = kP / 16;
  for (int t = 0; t < kT; ++t) {
    __m512 vc[kV], vs[kV];
    for (int j = 0; j < kV; ++j) {
      vc[j] = _mm512_loadu_ps(cs + t * kP + 16 * j);
      vs[j] = _mm512_loadu_ps(sn + t * kP + 16 * j);
    }
    for (int h = 0; h < kH; ++h) {
      uint16_t* x = buf + (t * kH + h) * kD;
      for (int j = 0; j < kV; ++j) {
        const int i = 16 * j;
        const __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
        const __m512 b = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kP + i)));
        const __m512 ra = _mm512_fmsub_ps(a, vc[j], _mm512_mul_ps(b, vs[j]));
        const __m512 rb = _mm512_fmadd_ps(a, vs[j], _mm512_mul_ps(b, vc[j]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + i), _mm512_cvtps_ph(ra, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + kP + i), _mm512_cvtps_ph(rb, _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
}

// bfloat16 pairs two values per 32-bit lane: the lane's low half widens by a shift, its high half by a
// mask (both exact), and two float32 results are rounded to nearest even into one lane with 16-bit
// lanes (a blend, an average-with-bias carry, an add: no cross-lane shuffle). cos/sin are reordered per
// token, outside the timing, into the even pairs and the odd pairs of each vector's worth.
__m256i PackBf16x8(__m256 lo, __m256 hi) {  // lo -> low halves, hi -> high halves, nearest even
  const __m256i ul = _mm256_castps_si256(lo), uh = _mm256_castps_si256(hi);
  const __m256i p = _mm256_blend_epi16(_mm256_srli_epi32(ul, 16), uh, 0xAA);
  const __m256i q = _mm256_blend_epi16(ul, _mm256_slli_epi32(uh, 16), 0xAA);
  const __m256i bias = _mm256_or_si256(_mm256_and_si256(p, _mm256_set1_epi16(1)), _mm256_set1_epi16(0x7ffe));
  return _mm256_add_epi16(p, _mm256_srli_epi16(_mm256_avg_epu16(q, bias), 15));
}
// ce/co/se/so: per token kP / 2 factors each, for the even and the odd pairs of each group of 2N pairs.
void RotateBf16Avx2(uint16_t* buf, const float* ce, const float* co, const float* se, const float* so) {
  constexpr int kN = 8;
  for (int t = 0; t < kT; ++t) {
    for (int h = 0; h < kH; ++h) {
      uint16_t* x = buf + (t * kH + h) * kD;
#pragma GCC unroll 4
      for (int i = 0; i < kP; i += 2 * kN) {
        const int f = t * (kP / 2) + i / 2;
        const __m256i A = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        const __m256i B = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kP + i));
        const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
        const __m256 ae = _mm256_castsi256_ps(_mm256_slli_epi32(A, 16)),
                     ao = _mm256_castsi256_ps(_mm256_and_si256(A, hi));
        const __m256 be = _mm256_castsi256_ps(_mm256_slli_epi32(B, 16)),
                     bo = _mm256_castsi256_ps(_mm256_and_si256(B, hi));
        const __m256 vce = _mm256_loadu_ps(ce + f), vco = _mm256_loadu_ps(co + f);
        const __m256 vse = _mm256_loadu_ps(se + f), vso = _mm256_loadu_ps(so + f);
        const __m256 rae = _mm256_fmsub_ps(ae, vce, _mm256_mul_ps(be, vse));
        const __m256 rao = _mm256_fmsub_ps(ao, vco, _mm256_mul_ps(bo, vso));
        const __m256 rbe = _mm256_fmadd_ps(ae, vse, _mm256_mul_ps(be, vce));
        const __m256 rbo = _mm256_fmadd_ps(ao, vso, _mm256_mul_ps(bo, vco));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + i), PackBf16x8(rae, rao));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + kP + i), PackBf16x8(rbe, rbo));
      }
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) __m512i PackBf16x16(__m512 lo, __m512 hi) {
  const __m512i ul = _mm512_castps_si512(lo), uh = _mm512_castps_si512(hi);
  const __mmask32 odd = 0xAAAAAAAAu;
  const __m512i p = _mm512_mask_blend_epi16(odd, _mm512_srli_epi32(ul, 16), uh);
  const __m512i q = _mm512_mask_blend_epi16(odd, ul, _mm512_slli_epi32(uh, 16));
  const __m512i bias = _mm512_or_si512(_mm512_and_si512(p, _mm512_set1_epi16(1)), _mm512_set1_epi16(0x7ffe));
  return _mm512_add_epi16(p, _mm512_srli_epi16(_mm512_avg_epu16(q, bias), 15));
}
// The token's factors in registers across its heads (2 x 4 zmm for 64 pairs).
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) void RotateBf16Avx512(uint16_t* buf, const float* ce,
                                                                               const float* co, const float* se,
                                                                               const float* so) {
  constexpr int kN = 16, kV = kP / (2 * kN);
  for (int t = 0; t < kT; ++t) {
    __m512 vce[kV], vco[kV], vse[kV], vso[kV];
    for (int j = 0; j < kV; ++j) {
      const int f = t * (kP / 2) + j * kN;
      vce[j] = _mm512_loadu_ps(ce + f);
      vco[j] = _mm512_loadu_ps(co + f);
      vse[j] = _mm512_loadu_ps(se + f);
      vso[j] = _mm512_loadu_ps(so + f);
    }
    for (int h = 0; h < kH; ++h) {
      uint16_t* x = buf + (t * kH + h) * kD;
      for (int j = 0; j < kV; ++j) {
        const int i = 2 * kN * j;
        const __m512i A = _mm512_loadu_si512(x + i), B = _mm512_loadu_si512(x + kP + i);
        const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
        const __m512 ae = _mm512_castsi512_ps(_mm512_slli_epi32(A, 16)),
                     ao = _mm512_castsi512_ps(_mm512_and_si512(A, hi));
        const __m512 be = _mm512_castsi512_ps(_mm512_slli_epi32(B, 16)),
                     bo = _mm512_castsi512_ps(_mm512_and_si512(B, hi));
        const __m512 rae = _mm512_fmsub_ps(ae, vce[j], _mm512_mul_ps(be, vse[j]));
        const __m512 rao = _mm512_fmsub_ps(ao, vco[j], _mm512_mul_ps(bo, vso[j]));
        const __m512 rbe = _mm512_fmadd_ps(ae, vse[j], _mm512_mul_ps(be, vce[j]));
        const __m512 rbo = _mm512_fmadd_ps(ao, vso[j], _mm512_mul_ps(bo, vco[j]));
        _mm512_storeu_si512(x + i, PackBf16x16(rae, rao));
        _mm512_storeu_si512(x + kP + i, PackBf16x16(rbe, rbo));
      }
    }
  }
}

// Even / odd pair factors per group of 2N pairs (N = 8 for AVX2, 16 for AVX-512), per token.
void SplitEvenOdd(const float* c, int n_lanes, std::vector<float>* even, std::vector<float>* odd) {
  even->assign(kT * kP / 2, 0.0f);
  odd->assign(kT * kP / 2, 0.0f);
  for (int t = 0; t < kT; ++t)
    for (int g = 0; g < kP; g += 2 * n_lanes)
      for (int k = 0; k < n_lanes; ++k) {
        (*even)[t * kP / 2 + g / 2 + k] = c[t * kP + g + 2 * k];
        (*odd)[t * kP / 2 + g / 2 + k] = c[t * kP + g + 2 * k + 1];
      }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace posenc;
  // build/bench/f16_bound [TARGET]: cap posenc's SIMD target (AVX2, AVX3, ...; `posenc info` lists them).
  if (!bench::CapSimdTargetFromArgs(argc, argv)) return 2;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(kD, 500000.0).value(), kT, RopePrecision::kReference).value();
  std::vector<float> cs(kT * kP), sn(kT * kP);
  for (int t = 0; t < kT; ++t)
    for (int i = 0; i < kP; ++i) {
      cs[t * kP + i] = table.cos_row(t)[i];
      sn[t * kP + i] = table.sin_row(t)[i];
    }
  std::vector<int64_t> pos(kT);
  for (int t = 0; t < kT; ++t) pos[t] = t;
  RopeArgs args{RotaryLayout{RopePairing::kHalf, kD, 0, kD}, &table, pos};
  args.parallel = &SerialRunner();
  const float* table_c = table.cos_row(0);  // the table's rows are consecutive: kP floats per position
  const float* table_s = table.sin_row(0);
  std::vector<float> ce8, co8, se8, so8, ce16, co16, se16, so16;
  SplitEvenOdd(cs.data(), 8, &ce8, &co8);
  SplitEvenOdd(sn.data(), 8, &se8, &so8);
  SplitEvenOdd(cs.data(), 16, &ce16, &co16);
  SplitEvenOdd(sn.data(), 16, &se16, &so16);
  constexpr int kSamples = 21, kReps = 2000;
  std::printf("[%d, %d, %d], half layout, in place, L1-resident; simd %s; G values/s, medians of %d samples\n", kT, kH,
              kD, ChosenSimdTarget().c_str(), kSamples);
  // Per dtype: the modes alternate within each sample; the bound is the fastest exact loop the chosen target runs.
  for (DType dt : {DType::kF16, DType::kBF16}) {
    std::vector<uint16_t> buf(kT * kH * kD);
    for (size_t i = 0; i < buf.size(); ++i) {
      const float f = static_cast<float>(i % 97) / 97.0f + 0.5f;
      buf[i] = dt == DType::kF16 ? F32ToF16(f).bits : F32ToBF16(f).bits;
    }
    const HeadsView v = HeadsView::Dense(buf.data(), dt, kT, kH, kD);
    struct Mode {
      const char* name;
      std::function<void()> run;
    };
    std::vector<Mode> modes;
    uint16_t* b = buf.data();
    if (dt == DType::kF16) {
      modes.push_back({"f16c", [&] { Rotate(0, b, cs.data(), sn.data()); }});
      modes.push_back({"sw_both", [&] { Rotate(1, b, cs.data(), sn.data()); }});
      modes.push_back({"sw_one", [&] { Rotate(2, b, cs.data(), sn.data()); }});
      modes.push_back({"f16c_tab", [&] { Rotate(0, b, table_c, table_s); }});
      modes.push_back({"f16c_hin", [&] { RotateHeadsInner(b, table_c, table_s); }});
      if (avx512) modes.push_back({"f16c_512", [&] { RotateF16Avx512(b, table_c, table_s); }});
    } else {
      modes.push_back({"bf16_pack", [&] { RotateBf16Avx2(b, ce8.data(), co8.data(), se8.data(), so8.data()); }});
      if (avx512)
        modes.push_back(
            {"bf16_pack_512", [&] { RotateBf16Avx512(b, ce16.data(), co16.data(), se16.data(), so16.data()); }});
    }
    modes.push_back({"ApplyRope", [&] {
                       if (!ApplyRope(args, v).ok()) std::abort();
                     }});
    // Each loop that claims exactness must give ApplyRope's bytes on one pass over the same input
    // (sw_both / sw_one are only bounds: they widen normal numbers only).
    {
      const std::vector<uint16_t> input = buf;
      buf = input;
      modes.back().run();
      const std::vector<uint16_t> want = buf;
      for (size_t m = 0; m + 1 < modes.size(); ++m) {
        const std::string name = modes[m].name;
        if (name == "sw_both" || name == "sw_one") continue;
        buf = input;
        modes[m].run();
        if (buf != want)
          std::printf("%-9s %-13s NOT equal to ApplyRope's result\n", std::string(ToString(dt)).c_str(), modes[m].name);
      }
      buf = input;
    }
    std::vector<std::vector<double>> ns(modes.size());
    for (int sample = 0; sample < kSamples; ++sample) {
      for (size_t m = 0; m < modes.size(); ++m) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < kReps; ++r) {
          modes[m].run();
          asm volatile("" ::: "memory");
        }
        ns[m].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                        kReps);
      }
    }
    std::vector<double> rate(modes.size());
    for (size_t m = 0; m < modes.size(); ++m) {
      std::sort(ns[m].begin(), ns[m].end());
      rate[m] = kT * kH * kD / ns[m][kSamples / 2];
      std::printf("%-9s %-13s %6.2f\n", std::string(ToString(dt)).c_str(), modes[m].name, rate[m]);
    }
    // The bound for the chosen target: the fastest exact loop it can run (the 512-bit ones only where
    // posenc runs AVX3; sw_both / sw_one are not exact).
    const bool wide = avx512 && ChosenSimdTarget() == "AVX3";
    const char* bound_name = "";
    double bound = 0;
    for (size_t m = 0; m + 1 < modes.size(); ++m) {
      const std::string name = modes[m].name;
      if (name == "sw_both" || name == "sw_one" || (!wide && name.find("_512") != std::string::npos)) continue;
      if (rate[m] > bound) {
        bound = rate[m];
        bound_name = modes[m].name;
      }
    }
    std::printf("%-9s ApplyRope / %s = %.3f\n", std::string(ToString(dt)).c_str(), bound_name, rate.back() / bound);
  }
  return 0;
}
