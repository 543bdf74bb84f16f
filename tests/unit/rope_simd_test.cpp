// The SIMD RoPE kernels on every compiled target this CPU runs, against the scalar reference.
//
// Tolerances (derived, not tuned):
//  * float32: the kernel computes fma(a, c, -(b*s)) (and the mirror forms), so its error is at most
//    half an ulp of the product it rounds plus half an ulp of the result; the reference rounds the
//    float64 value once (half an ulp of the result). With M = max(|a c|, |b s|, |ref|) per output,
//    |fast - ref| <= 1.5 ulp(M); we require <= 2 ulp(M), ulp(x) = 2^(floor(log2 x) - 23).
//  * float16 / bfloat16: both sides round to the storage type with round-to-nearest-even. The fast
//    path's float32 value is within 1.5 ulp_f32(M) of the exact value, so its 16-bit result is the
//    correct rounding of a value within 2 ulp_f32(M) of the exact one: it equals the reference's bit
//    for bit unless the exact value lies that close to a 16-bit rounding midpoint (then one unit
//    apart), or cancellation (|result| << M) leaves several 16-bit units inside 2 ulp_f32(M) (tiny
//    results, float16 subnormals). The test checks exactly that interval and prints how many differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <hwy/targets.h>

#include "posenc/core/parallel.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/kernels/simd.hpp"
#include "simd_targets.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

struct Shape {
  int64_t tokens, heads, head_dim, rotary_dim, rotary_start;
};

double Ulp(double m) {
  if (m < 1e-30) return std::ldexp(1.0, -149);
  return std::ldexp(1.0, std::ilogb(m) - 23);
}

// Storage buffer with a deliberate misalignment of `offset` elements.
struct Buffer {
  std::vector<uint8_t> bytes;
  size_t offset_bytes;
  void* data() { return bytes.data() + offset_bytes; }
};

Buffer MakeBuffer(DType dtype, const std::vector<float>& values, size_t offset_elems) {
  const size_t es = SizeOf(dtype);
  Buffer b{std::vector<uint8_t>((values.size() + offset_elems + 16) * es + 64), 0};
  // Base address rounded up to 64 then moved by offset_elems: misaligned for every vector width.
  const auto base = reinterpret_cast<uintptr_t>(b.bytes.data());
  b.offset_bytes = ((base + 63) / 64 * 64 - base) + offset_elems * es;
  auto* p = static_cast<uint8_t*>(b.data());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32: std::memcpy(p + i * 4, &values[i], 4); break;
      case DType::kF16: {
        f16_t h = F32ToF16(values[i]);
        std::memcpy(p + i * 2, &h, 2);
        break;
      }
      default: {
        bf16_t h = F32ToBF16(values[i]);
        std::memcpy(p + i * 2, &h, 2);
        break;
      }
    }
  }
  return b;
}

float Get(DType dtype, const void* data, size_t i) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case DType::kF16: {
      f16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return F16ToF32(h);
    }
    default: {
      bf16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return BF16ToF32(h);
    }
  }
}

double LoadStored(DType dtype, float v) {
  switch (dtype) {
    case DType::kF32: return v;
    case DType::kF16: return F16ToF32(F32ToF16(v));
    default: return BF16ToF32(F32ToBF16(v));
  }
}

uint16_t Bits16(DType dtype, const void* data, size_t i) {
  uint16_t u;
  std::memcpy(&u, static_cast<const uint8_t*>(data) + i * 2, 2);
  (void)dtype;
  return u;
}

// Checks fast vs reference for one shape; returns the number of 16-bit midpoint mismatches.
int64_t CheckCase(const std::string& target, DType dtype, RopePairing pairing, RopeDirection dir, const Shape& sh,
                  bool in_place, size_t misalign, uint64_t seed) {
  SCOPED_TRACE(fmt::format("target {} dtype {} layout {} {} shape [{}, {}, {}] rotary {}@{} {} misalign {} seed {}",
                           target, ToString(dtype), ToString(pairing), dir == RopeDirection::kForward ? "fwd" : "bwd",
                           sh.tokens, sh.heads, sh.head_dim, sh.rotary_dim, sh.rotary_start,
                           in_place ? "in-place" : "out-of-place", misalign, seed));
  RotaryLayout layout{pairing, sh.head_dim, sh.rotary_start, sh.rotary_dim};
  auto freqs = DefaultRopeFrequencies(sh.rotary_dim, 10000.0).value();
  // A short table: later positions take the on-the-fly path.
  auto table = RopeTable::Build(freqs, 64, RopePrecision::kReference).value();
  auto rng = testing::MakeRng(seed);
  std::vector<int64_t> positions(static_cast<size_t>(sh.tokens));
  for (size_t t = 0; t < positions.size(); ++t)
    positions[t] = (t % 3 == 0) ? static_cast<int64_t>(rng() % 64) : static_cast<int64_t>(rng() % 100000);
  const size_t count = static_cast<size_t>(sh.tokens * sh.heads * sh.head_dim);
  const std::vector<float> values = testing::RandomNormal(rng, count, 3.0f);
  Buffer in = MakeBuffer(dtype, values, misalign);
  Buffer ref_out = MakeBuffer(dtype, values, 0);
  Buffer fast_out = MakeBuffer(dtype, std::vector<float>(count, -7.0f), misalign);
  RopeArgs args{layout, &table, positions, dir};
  HeadsView in_view = HeadsView::Dense(in.data(), dtype, sh.tokens, sh.heads, sh.head_dim);
  HeadsView ref_view = HeadsView::Dense(ref_out.data(), dtype, sh.tokens, sh.heads, sh.head_dim);
  EXPECT_TRUE(ApplyRopeReference(args, in_view, ref_view).ok());
  void* fast_data = in_place ? in.data() : fast_out.data();
  HeadsView fast_view = HeadsView::Dense(fast_data, dtype, sh.tokens, sh.heads, sh.head_dim);
  Status st = in_place ? ApplyRope(args, fast_view) : ApplyRope(args, in_view, fast_view);
  EXPECT_TRUE(st.ok()) << st.ToString();

  int64_t midpoint_mismatches = 0, failures = 0;
  std::vector<float> c(static_cast<size_t>(layout.num_pairs())), s(c.size());
  const double sign = dir == RopeDirection::kForward ? 1.0 : -1.0;
  for (int64_t t = 0; t < sh.tokens && failures < 5; ++t) {
    table.CosSin(positions[static_cast<size_t>(t)], c.data(), s.data());
    for (int64_t h = 0; h < sh.heads && failures < 5; ++h) {
      const size_t row = static_cast<size_t>((t * sh.heads + h) * sh.head_dim);
      // Pass-through dims are copied exactly.
      for (int64_t d = 0; d < sh.head_dim; ++d) {
        if (d >= sh.rotary_start && d < sh.rotary_start + sh.rotary_dim) continue;
        const float want = Get(dtype, ref_out.data(), row + d), got = Get(dtype, fast_data, row + d);
        if (std::memcmp(&want, &got, 4) != 0 && ++failures <= 5)
          ADD_FAILURE() << fmt::format("pass-through token {} head {} dim {}: {} vs {}", t, h, d, got, want);
      }
      for (int64_t i = 0; i < layout.num_pairs(); ++i) {
        const size_t ia = row + static_cast<size_t>(layout.first(i)), ib = row + static_cast<size_t>(layout.second(i));
        // Inputs as stored (rounded to the storage type), from the untouched values.
        const double va = LoadStored(dtype, values[ia]), vb = LoadStored(dtype, values[ib]);
        const double ci = c[static_cast<size_t>(i)], si = sign * s[static_cast<size_t>(i)];
        const double exact[2] = {va * ci - vb * si, va * si + vb * ci};
        const double terms[2][2] = {{std::fabs(va * ci), std::fabs(vb * si)}, {std::fabs(va * si), std::fabs(vb * ci)}};
        const size_t idx[2] = {ia, ib};
        for (int k = 0; k < 2; ++k) {
          const double want = Get(dtype, ref_out.data(), idx[k]);
          const double got = Get(dtype, fast_data, idx[k]);
          const double m = std::max({terms[k][0], terms[k][1], std::fabs(want)});
          if (dtype == DType::kF32) {
            if (std::fabs(got - want) > 2 * Ulp(m) && ++failures <= 5)
              ADD_FAILURE() << fmt::format(
                  "token {} head {} pair {} out {}: fast {} ref {} diff {:.3} ulp(M) (a {} b {} cos {} sin {})", t, h,
                  i, k, got, want, std::fabs(got - want) / Ulp(m), va, vb, ci, si);
          } else {
            const uint16_t wb = Bits16(dtype, ref_out.data(), idx[k]), gb = Bits16(dtype, fast_data, idx[k]);
            if (wb == gb) continue;
            // The 16-bit result must be the rounding of some value within 2 ulp_f32(M) of the exact one.
            const double e = 2 * Ulp(m);
            const double lo = LoadStored(dtype, static_cast<float>(exact[k] - e));
            const double hi = LoadStored(dtype, static_cast<float>(exact[k] + e));
            if (got >= lo && got <= hi) {
              ++midpoint_mismatches;
            } else if (++failures <= 5) {
              ADD_FAILURE() << fmt::format(
                  "token {} head {} pair {} out {}: fast {:#06x} ({}) ref {:#06x} ({}) exact {} allowed [{}, {}]", t, h,
                  i, k, gb, got, wb, want, exact[k], lo, hi);
            }
          }
        }
      }
    }
  }
  return midpoint_mismatches;
}

// Every compiled target this CPU runs, best first; each test forces them in turn and restores "best".
class PerTarget : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(ForceSimdTarget("best").ok()); }
};

TEST_F(PerTarget, ListsAndForcesTargets) {
  const auto compiled = CompiledSimdTargets();
  const auto available = AvailableSimdTargets();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(ChosenSimdTarget(), available.front());
  for (const auto& name : available) {
    ASSERT_TRUE(ForceSimdTarget(name).ok()) << name;
    // ChosenSimdTarget asks dispatch which code it runs. Asking Highway for its target list must not
    // undo the cap (under hwy::DisableTargets it did: every later kernel ran the best target).
    EXPECT_EQ(ChosenSimdTarget(), name);
    (void)hwy::SupportedTargets();
    EXPECT_EQ(ChosenSimdTarget(), name);
    // The list does not shrink under a cap: per-target loops nested in other loops ask for it again.
    EXPECT_EQ(AvailableSimdTargets(), available) << name;
  }
  Status bad = ForceSimdTarget("MMX9");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("MMX9"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find(compiled.front()), std::string::npos) << bad.message();
}

// The RoPE cases of the kernel list: the odd sizes (tokens 0, 1, 2, 17, 4096; heads 1, 3, 32; head_dim 64..640;
// partial windows with and without an offset; odd pair counts; past the 256 pairs of stack scratch) and
// Llama-3-8B's rows at 17 tokens, each dtype and pairing; in place or not, misalignment and direction by
// the case's index.
TEST_F(PerTarget, MatchesReferenceOnEveryTarget) {
  std::map<std::string, int64_t> midpoint;
  testing::ForEachKernelCase(cases::KernelFamily::kRope, 4096, [&](const cases::KernelCase& k, size_t i, bool) {
    const uint64_t seed = i + 1;
    const Shape sh{k.model.empty() ? k.tokens : std::min<int64_t>(k.tokens, 17), k.heads, k.head_dim, k.rotary_dim,
                   k.rotary_start};
    const bool in_place = (seed % 2) == 0;
    const size_t misalign = seed % 3;  // 0, 1 or 2 elements off a 64-byte boundary
    const RopeDirection dir = (seed % 5 == 4) ? RopeDirection::kBackward : RopeDirection::kForward;
    const std::string target = ChosenSimdTarget();
    midpoint[target] += CheckCase(target, k.dtype, k.pairing, dir, sh, in_place, misalign, seed);
  });
  for (const auto& [target, n] : midpoint)
    std::printf("[ target %s ] 16-bit results differing from the reference (inside the bound): %lld\n", target.c_str(),
                static_cast<long long>(n));
}

// Rounding to float16/bfloat16, bit for bit. At position 0 cos = attention_scaling and sin = 0, so
// a' = a * scaling and b' = b * scaling. With scaling = 1 + 2^-8 (and 1 - 2^-9) the float32 product of a
// 16-bit value is exact (at most 8 + 9 significant bits for bfloat16, 11 + 10 for float16; or it
// overflows to infinity both ways), so the kernel and the reference round the same number: every one of
// the 65536 bit patterns for a (ties to even, carries into the exponent, overflow to infinity,
// subnormals, signed zeros, infinities, NaN payloads) must give the reference's bits exactly. b runs
// over the finite patterns so that b * sin never makes a NaN of its own.
TEST_F(PerTarget, SixteenBitRoundingIsBitExactOnEveryTarget) {
  const int64_t D = 64, H = 8, T = 65536 / (H * D / 2);  // every pattern once as an `a`
  for (double scaling : {1.0 + 1.0 / 256, 1.0 - 1.0 / 512}) {
    RopeFrequencies freqs = DefaultRopeFrequencies(D, 10000.0).value();
    freqs.attention_scaling = scaling;
    auto table = RopeTable::Build(freqs, 1, RopePrecision::kReference).value();
    const std::vector<int64_t> positions(static_cast<size_t>(T), 0);
    for (DType dtype : {DType::kBF16, DType::kF16})
      for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved}) {
        const RotaryLayout layout{pairing, D, 0, D};
        std::vector<uint16_t> in(static_cast<size_t>(T * H * D));
        uint32_t a_bits = 0, b_bits = 0x1234;
        for (int64_t row = 0; row < T * H; ++row)
          for (int64_t i = 0; i < D / 2; ++i) {
            in[static_cast<size_t>(row * D + layout.first(i))] = static_cast<uint16_t>(a_bits++);
            do b_bits = (b_bits * 75 + 74) % 65537;
            while (((b_bits & 0x7fff) >> (dtype == DType::kBF16 ? 7 : 10)) == (dtype == DType::kBF16 ? 0xffu : 0x1fu));
            in[static_cast<size_t>(row * D + layout.second(i))] = static_cast<uint16_t>(b_bits & 0xffff);
          }
        std::vector<uint16_t> want(in.size());
        RopeArgs args{layout, &table, positions};
        ASSERT_TRUE(ApplyRopeReference(args, HeadsView::Dense(in.data(), dtype, T, H, D),
                                       HeadsView::Dense(want.data(), dtype, T, H, D))
                        .ok());
        testing::ForEachSimdTarget([&](const std::string& target) {
          std::vector<uint16_t> got = in;
          ASSERT_TRUE(ApplyRope(args, HeadsView::Dense(got.data(), dtype, T, H, D)).ok());
          int64_t bad = 0;
          for (size_t k = 0; k < got.size(); ++k)
            if (got[k] != want[k] && ++bad <= 3)
              ADD_FAILURE() << fmt::format(
                  "target {} {} {} scaling {}: element {} input {:#06x} -> {:#06x}, reference {:#06x}", target,
                  ToString(dtype), ToString(pairing), scaling, k, in[k], got[k], want[k]);
          ASSERT_EQ(bad, 0);
        });
      }
  }
}

TEST_F(PerTarget, InPlaceOutOfPlaceAndBothDirectionsOnEveryTarget) {
  uint64_t seed = 1000;
  const Shape sh{17, 3, 80, 80, 0};
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
      for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved})
        for (RopeDirection dir : {RopeDirection::kForward, RopeDirection::kBackward})
          for (bool in_place : {false, true}) CheckCase(target, dtype, pairing, dir, sh, in_place, 1, ++seed);
  });
}

// Strided views (heads inside a fused QKV row, head-major storage, padded heads): the kernels see
// the strides only through pointer steps, so every (token, head) row must come out bit for bit as it
// does from a dense copy of the same rows (which the tests above hold to the reference), and nothing
// between the rows may be written.
TEST_F(PerTarget, StridedViewsMatchDenseCopiesOnEveryTarget) {
  struct Strides {
    const char* name;
    int64_t token_stride, head_stride, offset;
  };
  const int64_t T = 5, H = 3;
  uint64_t seed = 2000;
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (const Shape& sh : {Shape{T, H, 80, 80, 0}, Shape{T, H, 128, 96, 16}})
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
        for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved}) {
          const int64_t D = sh.head_dim;
          const Strides layouts[] = {{"fused qkv", (H + 5) * D + 3, D, 2 * D},
                                     {"head-major", D, T * D + 7, 1},
                                     {"padded heads", H * (D + 5) + 1, D + 5, 0}};
          const RotaryLayout layout{pairing, D, sh.rotary_start, sh.rotary_dim};
          auto table =
              RopeTable::Build(DefaultRopeFrequencies(sh.rotary_dim, 10000.0).value(), 64, RopePrecision::kReference)
                  .value();
          auto rng = testing::MakeRng(++seed);
          std::vector<int64_t> positions(static_cast<size_t>(T));
          for (auto& p : positions) p = static_cast<int64_t>(rng() % 100);  // in and past the table
          const size_t es = SizeOf(dtype);
          for (RopeDirection dir : {RopeDirection::kForward, RopeDirection::kBackward}) {
            RopeArgs args{layout, &table, positions, dir};
            for (const Strides& in_st : layouts)
              for (const Strides& out_st : layouts) {  // the diagonal: in place
                SCOPED_TRACE(fmt::format("target {} {} {} head_dim {} rotary {}@{} {} in {} out {}", target,
                                         ToString(dtype), ToString(pairing), D, sh.rotary_dim, sh.rotary_start,
                                         dir == RopeDirection::kForward ? "fwd" : "bwd", in_st.name, out_st.name));
                const bool in_place = &in_st == &out_st;
                const auto extent = [&](const Strides& st) {
                  return static_cast<size_t>(st.offset + (T - 1) * st.token_stride + (H - 1) * st.head_stride + D);
                };
                const Buffer src = MakeBuffer(dtype, testing::RandomNormal(rng, extent(in_st), 3.0f), 0);
                Buffer in = src, out = MakeBuffer(dtype, std::vector<float>(extent(out_st), -7.0f), 0);
                const auto view = [&](Buffer& b, const Strides& st) {
                  return HeadsView{static_cast<uint8_t*>(b.data()) + st.offset * es,
                                   dtype,
                                   T,
                                   H,
                                   D,
                                   st.token_stride,
                                   st.head_stride};
                };
                // The dense copy, rotated in place.
                std::vector<uint8_t> dense(static_cast<size_t>(T * H * D) * es);
                const HeadsView in_view = view(in, in_st);
                for (int64_t t = 0; t < T; ++t)
                  for (int64_t h = 0; h < H; ++h)
                    std::memcpy(dense.data() + static_cast<size_t>((t * H + h) * D) * es,
                                static_cast<const uint8_t*>(in_view.data) +
                                    static_cast<size_t>(t * in_view.token_stride + h * in_view.head_stride) * es,
                                D * es);
                ASSERT_TRUE(ApplyRope(args, HeadsView::Dense(dense.data(), dtype, T, H, D)).ok());
                Buffer& dst = in_place ? in : out;
                const Buffer before = dst;
                const HeadsView out_view = in_place ? in_view : view(out, out_st);
                const Status st = in_place ? ApplyRope(args, in_view) : ApplyRope(args, in_view, out_view);
                ASSERT_TRUE(st.ok()) << st.ToString();
                // Rows equal the dense result; every other byte of the destination is as it was.
                std::vector<bool> in_row(dst.bytes.size(), false);
                const auto base = static_cast<uint8_t*>(out_view.data);
                for (int64_t t = 0; t < T; ++t)
                  for (int64_t h = 0; h < H; ++h) {
                    const size_t at = static_cast<size_t>((t * out_view.token_stride + h * out_view.head_stride)) * es;
                    ASSERT_EQ(0,
                              std::memcmp(base + at, dense.data() + static_cast<size_t>((t * H + h) * D) * es, D * es))
                        << "token " << t << " head " << h;
                    const size_t first = static_cast<size_t>(base - dst.bytes.data()) + at;
                    std::fill(in_row.begin() + static_cast<std::ptrdiff_t>(first),
                              in_row.begin() + static_cast<std::ptrdiff_t>(first + D * es), true);
                  }
                for (size_t b = 0; b < dst.bytes.size(); ++b)
                  if (!in_row[b]) {
                    ASSERT_EQ(dst.bytes[b], before.bytes[b]) << "byte " << b << " outside the view changed";
                  }
                if (!in_place) { EXPECT_TRUE(in.bytes == src.bytes) << "the input changed"; }
              }
          }
        }
  });
}

TEST(RopeSimd, QueriesAndKeysInOneCallMatchSeparateCalls) {
  const int64_t T = 9, Hq = 8, Hk = 2, D = 64;
  RotaryLayout layout{RopePairing::kHalf, D, 0, D};
  auto table = RopeTable::Build(DefaultRopeFrequencies(D, 500000.0).value(), 8, RopePrecision::kExact).value();
  std::vector<int64_t> pos = {0, 3, 7, 8, 100, 2, 5000, 1, 6};  // in and past the table
  auto rng = testing::MakeRng(7);
  auto q = testing::RandomNormal(rng, T * Hq * D), k = testing::RandomNormal(rng, T * Hk * D);
  auto q2 = q, k2 = k;
  RopeArgs args{layout, &table, pos};
  ASSERT_TRUE(ApplyRopeQK(args, HeadsView::Dense(q.data(), DType::kF32, T, Hq, D),
                          HeadsView::Dense(k.data(), DType::kF32, T, Hk, D))
                  .ok());
  ASSERT_TRUE(ApplyRope(args, HeadsView::Dense(q2.data(), DType::kF32, T, Hq, D)).ok());
  ASSERT_TRUE(ApplyRope(args, HeadsView::Dense(k2.data(), DType::kF32, T, Hk, D)).ok());
  EXPECT_EQ(0, std::memcmp(q.data(), q2.data(), q.size() * 4));
  EXPECT_EQ(0, std::memcmp(k.data(), k2.data(), k.size() * 4));
}

// Table storage (detail::TableAllocator): small tables 64-byte aligned, tables of 2 MiB or more
// 2 MiB-aligned (the huge-page advice needs it); a copy is a deep copy with the same alignment.
TEST(RopeSimd, TableStorageIsAlignedAndCopies) {
  auto freqs = DefaultRopeFrequencies(128, 500000.0).value();
  for (int64_t positions : {int64_t{1}, int64_t{100}, int64_t{8192}, int64_t{8193}}) {
    const auto table = RopeTable::Build(freqs, positions, RopePrecision::kReference).value();
    const size_t bytes = static_cast<size_t>(positions) * 64 * sizeof(float);
    const uintptr_t align = bytes >= (size_t{2} << 20) ? (uintptr_t{2} << 20) : 64;
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(table.cos_row(0)) % align) << positions << " positions";
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(table.sin_row(0)) % align) << positions << " positions";
    const RopeTable copy = table;
    EXPECT_NE(copy.cos_row(0), table.cos_row(0));
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(copy.cos_row(0)) % align);
    EXPECT_EQ(0, std::memcmp(copy.cos_row(0), table.cos_row(0), bytes));
    EXPECT_EQ(0, std::memcmp(copy.sin_row(positions - 1), table.sin_row(positions - 1), 64 * sizeof(float)));
  }
}

// The threaded reference table is ComputeCosSin row for row.
TEST(RopeSimd, ReferenceTableBuildIsComputeCosSinBitForBit) {
  auto freqs = DefaultRopeFrequencies(128, 500000.0).value();
  freqs.attention_scaling = 1.0986;
  const int64_t P = 3000;
  auto table = RopeTable::Build(freqs, P, RopePrecision::kReference).value();
  std::vector<float> c(64), s(64);
  for (int64_t p = 0; p < P; ++p) {
    ComputeCosSin(freqs, p, RopePrecision::kReference, c.data(), s.data());
    ASSERT_EQ(0, std::memcmp(c.data(), table.cos_row(p), 64 * 4)) << "position " << p;
    ASSERT_EQ(0, std::memcmp(s.data(), table.sin_row(p), 64 * 4)) << "position " << p;
  }
}

// The exact table is built by angle addition (rope_table.cpp): each entry is within
// s (2^-52 |p w| + 2^-50) + one float32 ulp of ComputeCosSin's, and equal at the block anchors
// (multiples of 32). Checked over many positions and over large ones (few pairs, so the table stays small).
TEST(RopeSimd, ExactTableBuildIsWithinItsBoundOfComputeCosSin) {
  struct Case {
    int64_t rotary_dim, positions;
    double base, scaling;
  };
  for (const Case& k :
       {Case{128, 3000, 500000.0, 1.0986}, Case{4, int64_t{1} << 21, 10000.0, 1.0}, Case{6, 100003, 10.0, 0.7}}) {
    auto freqs = DefaultRopeFrequencies(k.rotary_dim, k.base).value();
    freqs.attention_scaling = k.scaling;
    const size_t n = freqs.inv_freq.size();
    auto table = RopeTable::Build(freqs, k.positions, RopePrecision::kExact).value();
    std::vector<float> c(n), s(n);
    int64_t differ = 0;
    double worst = 0;  // largest |difference| in float32 ulps of the entry
    for (int64_t p = 0; p < k.positions; ++p) {
      ComputeCosSin(freqs, p, RopePrecision::kExact, c.data(), s.data());
      if (p % 32 == 0) {
        ASSERT_EQ(0, std::memcmp(c.data(), table.cos_row(p), n * 4)) << "anchor position " << p;
        ASSERT_EQ(0, std::memcmp(s.data(), table.sin_row(p), n * 4)) << "anchor position " << p;
      }
      for (size_t i = 0; i < n; ++i) {
        const double e =
            k.scaling * (std::ldexp(std::fabs(static_cast<double>(p) * freqs.inv_freq[i]), -52) + std::ldexp(1.0, -50));
        for (auto [want, got] : {std::pair{c[i], table.cos_row(p)[i]}, std::pair{s[i], table.sin_row(p)[i]}}) {
          const double allowed = e + Ulp(std::max(std::fabs(want), std::fabs(got)));
          const double d = std::fabs(static_cast<double>(want) - static_cast<double>(got));
          ASSERT_LE(d, allowed) << "position " << p << " pair " << i << ": " << want << " vs " << got;
          worst = std::max(worst, d / Ulp(std::max(std::fabs(want), std::fabs(got))));
          differ += want != got;
        }
      }
    }
    std::printf(
        "exact table [%lld positions, %zu pairs]: %lld of %lld entries differ from ComputeCosSin, "
        "worst %.2f float32 ulp\n",
        static_cast<long long>(k.positions), n, static_cast<long long>(differ),
        static_cast<long long>(2 * k.positions * static_cast<int64_t>(n)), worst);
  }
}

TEST(RopeSimd, RejectsPartialOverlapAndMixedDtypes) {
  const int64_t T = 4, H = 2, D = 8;
  std::vector<float> buf(T * H * D + 8);
  RotaryLayout layout{RopePairing::kHalf, D, 0, D};
  auto table = RopeTable::Build(DefaultRopeFrequencies(D, 10000.0).value(), 16, RopePrecision::kReference).value();
  std::vector<int64_t> pos(T, 1);
  RopeArgs args{layout, &table, pos};
  Status s = ApplyRope(args, HeadsView::Dense(buf.data(), DType::kF32, T, H, D),
                       HeadsView::Dense(buf.data() + 4, DType::kF32, T, H, D));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("overlaps"), std::string::npos) << s.message();
  std::vector<uint16_t> k16(T * H * D);
  s = ApplyRopeQK(args, HeadsView::Dense(buf.data(), DType::kF32, T, H, D),
                  HeadsView::Dense(k16.data(), DType::kBF16, T, H, D));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bfloat16"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace posenc
