// RoPE from the caller's cos/sin rows (kernels/rope_cos_sin.hpp): the SIMD kernel equals the scalar
// reference bit for bit on every Highway target this CPU runs (float32, float16, bfloat16; half and
// interleaved pairing; odd sizes and rotary windows not a multiple of the vector width; 0 and 1
// tokens; misaligned pointers; strided and broadcast rows; in place and out of place; infinities,
// NaN, signed zeros and overflow among the inputs: a NaN result need only be a NaN), and both do
// torch's arithmetic: separate roundings, no fused multiply-add.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/rope_cos_sin.hpp"
#include "posenc/kernels/simd.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

class RopeCosSin : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_TRUE(ForceSimdTarget("best").ok());
    AllowNativeF16Arithmetic(true);
  }
};

// Random bits of a finite value in storage type `dt` (a wide spread of magnitudes, subnormals included
// for 16-bit types), `n` elements, written at `p`.
void FillRandom(DType dt, void* p, size_t n, std::mt19937& g, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::uniform_int_distribution<int> pick(0, 15);
  for (size_t i = 0; i < n; ++i) {
    float v = nd(g);
    if (pick(g) == 0) v *= 1e-6f;                         // tiny values: float16 subnormals, cancellation
    if (pick(g) == 1) v = std::ldexp(1.0f, pick(g) - 8);  // exact powers of two: rounding ties
    if (pick(g) == 2 && pick(g) < 4) {  // infinities, NaN, signed zeros, overflow to infinity (0 * inf: NaN)
      const float special[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 65504.0f, 3.0e38f};
      v = special[pick(g) % 8];
    }
    if (dt == DType::kF32) static_cast<float*>(p)[i] = v;
    if (dt == DType::kF16) static_cast<f16_t*>(p)[i] = F32ToF16(v);
    if (dt == DType::kBF16) static_cast<bf16_t*>(p)[i] = F32ToBF16(v);
  }
}

struct Case {
  DType dtype;
  RopePairing pairing;
  int64_t head_dim, rotary_start, rotary_dim, tokens, heads;
  bool head_major;    // [heads, tokens, head_dim] storage instead of token-major
  int64_t misalign;   // elements the data starts past an aligned address
  int64_t cs_stride;  // cos/sin token stride (0: one row broadcast; else >= rotary_dim)
};

std::string Name(const Case& c) {
  return fmt::format("{} {} D={} start={} R={} T={} H={} {} misalign={} cs_stride={}", ToString(c.dtype),
                     c.pairing == RopePairing::kHalf ? "half" : "interleaved", c.head_dim, c.rotary_start, c.rotary_dim,
                     c.tokens, c.heads, c.head_major ? "head-major" : "token-major", c.misalign, c.cs_stride);
}

// Whether the element at `p` (storage type `dt`) is a NaN.
bool IsNan(DType dt, const std::byte* p) {
  if (dt == DType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return std::isnan(f);
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return dt == DType::kF16 ? (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0 : (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
}

std::string Bits(const std::byte* p, size_t es) {
  uint32_t b = 0;
  std::memcpy(&b, p, es);
  return fmt::format("{:#x}", b);
}

// Runs one case on the current target: fast out of place, fast in place, reference; returns whether all
// three agree bit for bit (and reports the first difference).
void CheckCase(const Case& c, uint32_t seed) {
  const size_t es = SizeOf(c.dtype);
  std::mt19937 g(seed);
  const int64_t n = c.tokens * c.heads * c.head_dim;
  const int64_t cs_rows = c.cs_stride == 0 ? 1 : c.tokens;
  const int64_t cs_n = c.cs_stride == 0 ? c.rotary_dim : cs_rows * c.cs_stride;
  std::vector<std::byte> xbuf((n + 8) * es), ref((n + 8) * es), fast((n + 8) * es), inplace((n + 8) * es);
  std::vector<std::byte> cbuf((cs_n + 8) * es), sbuf((cs_n + 8) * es);
  std::byte* x = xbuf.data() + c.misalign * es;
  FillRandom(c.dtype, x, n, g, 2.0f);
  FillRandom(c.dtype, cbuf.data() + c.misalign * es, cs_n, g, 0.8f);
  FillRandom(c.dtype, sbuf.data() + c.misalign * es, cs_n, g, 0.8f);
  auto view = [&](std::byte* p) {
    HeadsView v{p, c.dtype, c.tokens, c.heads, c.head_dim, c.heads * c.head_dim, c.head_dim};
    if (c.head_major) v.token_stride = c.head_dim, v.head_stride = c.tokens * c.head_dim;
    return v;
  };
  RopeCosSinArgs args;
  args.layout = {c.pairing, c.head_dim, c.rotary_start, c.rotary_dim};
  args.rows = {cbuf.data() + c.misalign * es,
               sbuf.data() + c.misalign * es,
               c.dtype,
               c.tokens,
               c.rotary_dim,
               c.cs_stride,
               c.cs_stride};
  std::byte* r = ref.data() + c.misalign * es;
  std::byte* f = fast.data() + c.misalign * es;
  std::byte* ip = inplace.data() + c.misalign * es;
  std::memcpy(ip, x, n * es);
  ASSERT_TRUE(ApplyRopeCosSinReference(args, view(x), view(r)).ok()) << Name(c);
  ASSERT_TRUE(ApplyRopeCosSin(args, view(x), view(f)).ok()) << Name(c);
  ASSERT_TRUE(ApplyRopeCosSin(args, view(ip), view(ip)).ok()) << Name(c);
  // Equal bits, except that a NaN result need only be a NaN: which operand's payload and sign a NaN
  // carries follows the CPU's operand order (x86 returns the first NaN operand, 0 * inf the default
  // NaN), not part of the contract; torch's own NaNs differ between its vector and scalar loops.
  auto same = [&](const std::byte* a, const std::byte* b) {
    return std::memcmp(a, b, es) == 0 || (IsNan(c.dtype, a) && IsNan(c.dtype, b));
  };
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(r + i * es, f + i * es))
        << Name(c) << " out of place, element " << i << ": reference bits " << Bits(r + i * es, es) << ", fast "
        << Bits(f + i * es, es) << ", input " << Bits(x + i * es, es);
    ASSERT_TRUE(same(r + i * es, ip + i * es)) << Name(c) << " in place, element " << i;
  }
  // The reference in place agrees with itself out of place.
  std::memcpy(ip, x, n * es);
  ASSERT_TRUE(ApplyRopeCosSinReference(args, view(ip), view(ip)).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(r + i * es, ip + i * es)) << Name(c) << " reference in place";
}

TEST_F(RopeCosSin, FastEqualsReferenceOnEveryTarget) {
  struct Shape {
    int64_t D, start, R;
  };
  const Shape shapes[] = {{128, 0, 128}, {64, 0, 64}, {2, 0, 2},   {6, 0, 6},     {34, 0, 34}, {80, 0, 80},
                          {96, 0, 32},   {64, 0, 16}, {18, 2, 14}, {130, 0, 130}, {40, 4, 26}, {256, 64, 192}};
  int cases = 0;
  const auto targets = AvailableSimdTargets();
  ASSERT_FALSE(targets.empty());
  // Where the CPU has native float16 arithmetic, every target runs with it allowed and again without
  // (only the AVX3 float16 rows differ between the two).
  const bool native = NativeF16Arithmetic();
  for (const bool allow : {true, false}) {
    if (!allow && !native) break;
    AllowNativeF16Arithmetic(allow);
    testing::ForEachSimdTarget([&](const std::string& target) {
      uint32_t seed = 1;
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        for (RopePairing p : {RopePairing::kHalf, RopePairing::kInterleaved})
          for (const Shape& s : shapes)
            for (int64_t tokens : {0, 1, 3, 17})
              for (int64_t misalign : {0, 1}) {
                const bool head_major = (seed % 3) == 0;
                const int64_t cs_stride = tokens == 1 && seed % 2 ? 0 : s.R + (seed % 2) * 3;
                Case c{dt, p, s.D, s.start, s.R, tokens, tokens == 17 ? 2 : 3, head_major, misalign, cs_stride};
                SCOPED_TRACE(target + (allow && native ? " with native float16 arithmetic" : ""));
                CheckCase(c, seed++);
                if (HasFatalFailure()) return;
                ++cases;
              }
    });
  }
  std::printf("%d cases on %zu targets (%s first), native float16 arithmetic %s\n", cases, targets.size(),
              targets.front().c_str(), native ? "with and without" : "not on this CPU");
}

// Uniformly random 16-bit patterns for x, cos and sin: every exponent, subnormals, products and sums
// that overflow, cancel or land on rounding ties (the double-rounding argument of the native float16
// path, rope_cos_sin_f16.cpp, and the packed bfloat16 rounding), on every target, native float16
// arithmetic allowed and not.
TEST_F(RopeCosSin, SixteenBitEveryBitPatternRegion) {
  const bool native = NativeF16Arithmetic();
  constexpr int64_t kTokens = 64, kHeads = 16, kDim = 128;
  constexpr int64_t n = kTokens * kHeads * kDim;
  std::mt19937 g(7);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  std::vector<uint16_t> x(n), c(kTokens * kDim), s(kTokens * kDim), ref(n), fast(n);
  for (auto* v : {&x, &c, &s})
    for (auto& b : *v) b = static_cast<uint16_t>(bits(g));
  int runs = 0;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (RopePairing p : {RopePairing::kHalf, RopePairing::kInterleaved}) {
      RopeCosSinArgs args;
      args.layout = {p, kDim, 0, kDim};
      args.rows = {c.data(), s.data(), dt, kTokens, kDim, kDim, kDim};
      auto view = [&](uint16_t* d) { return HeadsView{d, dt, kTokens, kHeads, kDim, kHeads * kDim, kDim}; };
      ASSERT_TRUE(ApplyRopeCosSinReference(args, view(x.data()), view(ref.data())).ok());
      for (const bool allow : {true, false}) {
        if (!allow && !native) break;
        AllowNativeF16Arithmetic(allow);
        testing::ForEachSimdTarget([&](const std::string& target) {
          ASSERT_TRUE(ApplyRopeCosSin(args, view(x.data()), view(fast.data())).ok());
          for (int64_t i = 0; i < n; ++i)
            ASSERT_TRUE(ref[i] == fast[i] || (IsNan(dt, reinterpret_cast<const std::byte*>(&ref[i])) &&
                                              IsNan(dt, reinterpret_cast<const std::byte*>(&fast[i]))))
                << ToString(dt) << (p == RopePairing::kHalf ? " half " : " interleaved ") << target
                << (allow && native ? " native float16" : "") << ", element " << i << ": reference "
                << Bits(reinterpret_cast<const std::byte*>(&ref[i]), 2) << ", fast "
                << Bits(reinterpret_cast<const std::byte*>(&fast[i]), 2);
          ++runs;
        });
      }
    }
  EXPECT_GE(runs, 4 * 2);
}

// Threads split tokens; each output element is written once: same bits as one thread.
TEST_F(RopeCosSin, ThreadsGiveTheSameBits) {
  ThreadPool pool(2);
  const int64_t T = 512, H = 8, D = 128;
  std::mt19937 g(7);
  std::vector<bf16_t> x(T * H * D), c(T * D), s(T * D), one(T * H * D), two(T * H * D);
  FillRandom(DType::kBF16, x.data(), x.size(), g, 2.0f);
  FillRandom(DType::kBF16, c.data(), c.size(), g, 1.0f);
  FillRandom(DType::kBF16, s.data(), s.size(), g, 1.0f);
  RopeCosSinArgs args{{RopePairing::kHalf, D, 0, D}, {c.data(), s.data(), DType::kBF16, T, D, D, D}, nullptr};
  ASSERT_TRUE(ApplyRopeCosSin(args, HeadsView::Dense(x.data(), DType::kBF16, T, H, D),
                              HeadsView::Dense(one.data(), DType::kBF16, T, H, D))
                  .ok());
  args.parallel = &pool;
  ASSERT_TRUE(ApplyRopeCosSin(args, HeadsView::Dense(x.data(), DType::kBF16, T, H, D),
                              HeadsView::Dense(two.data(), DType::kBF16, T, H, D))
                  .ok());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(bf16_t)), 0);
}

// a * c + r * s with a = c = 1 + 2^-12, r = -(1 + 2^-11), s = 1: a * c = 1 + 2^-11 + 2^-24 rounds (a tie,
// to even) to 1 + 2^-11, so torch's two roundings give exactly 0; one fused multiply-add would give 2^-24.
TEST_F(RopeCosSin, NoFusedMultiplyAdd) {
  const float a = 1.0f + std::ldexp(1.0f, -12), b = 1.0f + std::ldexp(1.0f, -11);
  ASSERT_EQ(std::fma(a, a, -b), std::ldexp(1.0f, -24));  // what contraction would give
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (int64_t D : {2, 64}) {  // the scalar tail and the vector loop
      std::vector<float> x(D, 0.0f), c(D, 0.0f), s(D, 0.0f), y(D, -1.0f), yr(D, -1.0f);
      for (int64_t i = 0; i < D / 2; ++i) x[i] = a, x[i + D / 2] = b, c[i] = a, s[i] = 1.0f;
      RopeCosSinArgs args{{RopePairing::kHalf, D, 0, D}, {c.data(), s.data(), DType::kF32, 1, D, D, D}, nullptr};
      ASSERT_TRUE(ApplyRopeCosSin(args, HeadsView::Dense(x.data(), DType::kF32, 1, 1, D),
                                  HeadsView::Dense(y.data(), DType::kF32, 1, 1, D))
                      .ok());
      ASSERT_TRUE(ApplyRopeCosSinReference(args, HeadsView::Dense(x.data(), DType::kF32, 1, 1, D),
                                           HeadsView::Dense(yr.data(), DType::kF32, 1, 1, D))
                      .ok());
      for (int64_t i = 0; i < D / 2; ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), 0u) << target << " D=" << D << " i=" << i << " " << y[i];
        EXPECT_EQ(std::bit_cast<uint32_t>(yr[i]), 0u) << "reference D=" << D;
      }
    }
  });
}

// bfloat16: each product rounded before the sum. x0 = c0 = 1 + 3 * 2^-7 (exact in bfloat16): x0^2 =
// 1 + 6 * 2^-7 + 9 * 2^-14 rounds to 1 + 6 * 2^-7; with r = -1, s = 1 the sum is 6 * 2^-7 exactly, where
// one rounding of x0^2 - 1 gives 6 * 2^-7 + 2^-11.
TEST_F(RopeCosSin, BFloat16RoundsEachOperation) {
  const float x0 = 1.0f + 3.0f * std::ldexp(1.0f, -7), want = 6.0f * std::ldexp(1.0f, -7);
  std::vector<bf16_t> x = {F32ToBF16(x0), F32ToBF16(1.0f)}, c = {F32ToBF16(x0), F32ToBF16(0.0f)},
                      s = {F32ToBF16(1.0f), F32ToBF16(0.0f)}, y(2), yr(2);
  RopeCosSinArgs args{{RopePairing::kHalf, 2, 0, 2}, {c.data(), s.data(), DType::kBF16, 1, 2, 2, 2}, nullptr};
  ASSERT_TRUE(ApplyRopeCosSin(args, HeadsView::Dense(x.data(), DType::kBF16, 1, 1, 2),
                              HeadsView::Dense(y.data(), DType::kBF16, 1, 1, 2))
                  .ok());
  ASSERT_TRUE(ApplyRopeCosSinReference(args, HeadsView::Dense(x.data(), DType::kBF16, 1, 1, 2),
                                       HeadsView::Dense(yr.data(), DType::kBF16, 1, 1, 2))
                  .ok());
  EXPECT_EQ(BF16ToF32(y[0]), want);
  EXPECT_EQ(BF16ToF32(yr[0]), want);
  EXPECT_EQ(BF16ToF32(F32ToBF16(x0 * x0 - 1.0f)), want + std::ldexp(1.0f, -11));
}

TEST_F(RopeCosSin, RefusesBadArgumentsNamingThem) {
  std::vector<float> x(2 * 64), c(64), s(64), y(2 * 64);
  auto in = HeadsView::Dense(x.data(), DType::kF32, 1, 2, 64), out = HeadsView::Dense(y.data(), DType::kF32, 1, 2, 64);
  RopeCosSinArgs ok{{RopePairing::kHalf, 64, 0, 64}, {c.data(), s.data(), DType::kF32, 1, 64, 64, 64}, nullptr};
  ASSERT_TRUE(ApplyRopeCosSin(ok, in, out).ok());
  auto bad = ok;
  bad.rows.width = 32;
  Status st = ApplyRopeCosSin(bad, in, out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("width 32"), std::string::npos) << st.message();
  bad = ok;
  bad.rows.dtype = DType::kBF16;
  st = ApplyRopeCosSin(bad, in, out);
  EXPECT_NE(st.message().find("cos: dtype bfloat16"), std::string::npos) << st.message();
  bad = ok;
  bad.rows.tokens = 2;
  st = ApplyRopeCosSinReference(bad, in, out);
  EXPECT_NE(st.message().find("2 rows for 1 tokens"), std::string::npos) << st.message();
  std::vector<float> big(2 * 64 + 1);
  auto a = HeadsView::Dense(big.data(), DType::kF32, 1, 2, 64),
       b = HeadsView::Dense(big.data() + 1, DType::kF32, 1, 2, 64);
  st = ApplyRopeCosSin(ok, a, b);
  EXPECT_NE(st.message().find("partly overlaps"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace posenc
