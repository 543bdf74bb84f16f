// The compute bound of float16 RoPE on one AVX2 core (docs/PERFORMANCE.md, "What limits each kernel"):
// [8 tokens, 8 heads, 128] float16, half layout, in place and L1-resident, rotated by
//   f16c      a hand-written intrinsics loop of the minimum instruction mix: per 16 values two
//             vcvtph2ps, four multiply/FMA, two vcvtps2ph (no dispatch, tails or prefetch);
//   sw_both   the same with both operands widened by integer instructions (normal numbers only, so
//             an upper bound for any exact software widening);
//   sw_one    one operand widened that way, the other by vcvtph2ps;
//   f16c_tab  the f16c loop reading cos/sin from the RopeTable's rows instead of private copies;
//   f16c_hin  the same with the heads innermost (each step's cos/sin loaded once per token);
//   ApplyRope posenc's kernel on the same shape (chosen SIMD target, one thread).
// f16c and f16c_tab differ only in where cos/sin live: a load of them that matches an earlier head's
// pending store in the low 12 bits of its address waits for it (4 KiB aliasing), and whether that
// happens depends on the addresses. 2026-11-30, one build: f16c 10.2, f16c_tab 8.0, f16c_hin 11.5
// G values/s; after code around it moved the allocations, f16c_tab ran as fast as f16c.
// Medians of 21 samples, each a block of repetitions; the modes alternate within each sample.
// Built only for x86-64 (the loops are AVX2/F16C intrinsics; this file alone gets -mavx2 -mfma -mf16c):
//   build/bench/f16_bound
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "posenc/posenc.hpp"

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

}  // namespace

int main() {
  using namespace posenc;
  std::vector<uint16_t> buf(kT * kH * kD);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = F32ToF16(static_cast<float>(i % 97) / 97.0f + 0.5f).bits;
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
  const HeadsView v = HeadsView::Dense(buf.data(), DType::kF16, kT, kH, kD);

  const char* names[] = {"f16c", "sw_both", "sw_one", "f16c_tab", "f16c_hin", "ApplyRope"};
  constexpr int kModes = 6, kSamples = 21, kReps = 2000;
  const float* table_c = table.cos_row(0);  // the table's rows are consecutive: kP floats per position
  const float* table_s = table.sin_row(0);
  std::vector<std::vector<double>> ns(kModes);
  for (int sample = 0; sample < kSamples; ++sample) {
    for (int mode = 0; mode < kModes; ++mode) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < kReps; ++r) {
        if (mode < 3) {
          Rotate(mode, buf.data(), cs.data(), sn.data());
        } else if (mode == 3) {
          Rotate(0, buf.data(), table_c, table_s);
        } else if (mode == 4) {
          RotateHeadsInner(buf.data(), table_c, table_s);
        } else if (!ApplyRope(args, v).ok()) {
          std::puts("ApplyRope failed");
          return 1;
        }
        asm volatile("" ::: "memory");
      }
      ns[mode].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                         kReps);
    }
  }
  std::printf("[%d, %d, %d] float16, half layout, in place, L1-resident; simd %s\n", kT, kH, kD,
              ChosenSimdTarget().c_str());
  for (int mode = 0; mode < kModes; ++mode) {
    std::sort(ns[mode].begin(), ns[mode].end());
    const double med = ns[mode][kSamples / 2];
    std::printf("%-10s %8.3f us  %6.2f G values/s\n", names[mode], med / 1000.0, kT * kH * kD / med);
  }
  return 0;
}
