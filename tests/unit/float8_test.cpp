// float8_e4m3fn / float8_e5m2: the conversions of core/dtype.hpp against independent oracles (PyTorch's
// decode bit trick, written out; a brute-force nearest-even search over the 256 codes), every edge by
// name, and the SIMD row conversion of the KV-cache writers against the scalar one on every target over
// a set of float32 patterns that covers every exponent and every kept-bits / guard / sticky combination.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

float Bits(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t BitsOf(float f) { return std::bit_cast<uint32_t>(f); }

// PyTorch's fp8e4m3fn_to_fp32_value, written out from its description: renormalise a subnormal with
// a leading-zero count, rebias by 0x78 - shift, force the exponent to all ones for 0x7f / 0xff.
uint32_t TorchE4M3ToF32Bits(uint8_t code) {
  const uint32_t w = uint32_t{code} << 24;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t nonsign = w & 0x7fffffffu;
  uint32_t shift = nonsign == 0 ? 32 : static_cast<uint32_t>(std::countl_zero(nonsign));
  shift = shift > 4 ? shift - 4 : 0;
  const uint32_t inf_nan = static_cast<uint32_t>(static_cast<int32_t>(nonsign + 0x01000000u) >> 8) & 0x7f800000u;
  const uint32_t zero = static_cast<uint32_t>(static_cast<int32_t>(nonsign - 1) >> 31);
  return sign | ((((nonsign << shift >> 4) + ((0x78 - shift) << 23)) | inf_nan) & ~zero);
}

// The value of a code by the format's definition, in double: (-1)^s 2^(e - bias) (1 + m / 2^M), or
// 2^(1 - bias) m / 2^M for e = 0. NaN / inf by the caller.
double CodeValue(uint8_t code, int exp_bits, int man_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (code >> man_bits) & ((1 << exp_bits) - 1);
  const int m = code & ((1 << man_bits) - 1);
  const double mag = e == 0 ? std::ldexp(m, 1 - bias - man_bits) : std::ldexp((1 << man_bits) + m, e - bias - man_bits);
  return (code & 0x80) ? -mag : mag;
}

// Brute force: the nearest of the finite positive codes and the first value past them (e4m3fn: 480,
// code 0x7f, which is NaN; e5m2: 65536, code 0x7c, infinity), ties to the even code; then the sign.
uint8_t NearestEven(float x, bool e4m3) {
  const uint8_t sign = (BitsOf(x) >> 24) & 0x80;
  if (std::isnan(x)) return static_cast<uint8_t>(0x7f | sign);
  const double a = std::fabs(static_cast<double>(x));
  const int eb = e4m3 ? 4 : 5, mb = e4m3 ? 3 : 2;
  const int top = e4m3 ? 0x7f : 0x7c;  // codes 0 .. top, top standing for the value past the largest
  const double past = e4m3 ? 480.0 : 65536.0;
  if (a >= past) return static_cast<uint8_t>(top | sign);
  int best = 0;
  double best_d = a;
  for (int c = 1; c <= top; ++c) {
    const double v = c == top ? past : CodeValue(static_cast<uint8_t>(c), eb, mb);
    const double d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  return static_cast<uint8_t>(best | sign);
}

TEST(Float8, EveryE4M3CodeDecodesAsPyTorch) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float f = F8E4M3ToF32(f8e4m3_t{code});
    EXPECT_EQ(BitsOf(f), TorchE4M3ToF32Bits(code)) << "code " << c;
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << c;
    } else {
      EXPECT_EQ(static_cast<double>(f), CodeValue(code, 4, 3)) << "code " << c;
      EXPECT_EQ(std::signbit(f), (c & 0x80) != 0) << c;  // -0 included
    }
  }
  EXPECT_EQ(F8E4M3ToF32(f8e4m3_t{0x7e}), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(f8e4m3_t{0x01}), std::ldexp(1.0f, -9));
  EXPECT_EQ(F8E4M3ToF32(f8e4m3_t{0x08}), std::ldexp(1.0f, -6));
}

TEST(Float8, EveryE5M2CodeDecodes) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float f = F8E5M2ToF32(f8e5m2_t{code});
    // PyTorch: float16's bits << 8, widened.
    EXPECT_EQ(BitsOf(f), BitsOf(F16ToF32(f16_t{static_cast<uint16_t>(c << 8)}))) << c;
    if ((c & 0x7f) > 0x7c) {
      EXPECT_TRUE(std::isnan(f)) << c;
    } else if ((c & 0x7f) == 0x7c) {
      EXPECT_TRUE(std::isinf(f)) << c;
      EXPECT_EQ(std::signbit(f), (c & 0x80) != 0);
    } else {
      EXPECT_EQ(static_cast<double>(f), CodeValue(code, 5, 2)) << "code " << c;
    }
  }
  EXPECT_EQ(F8E5M2ToF32(f8e5m2_t{0x7b}), 57344.0f);
  EXPECT_EQ(F8E5M2ToF32(f8e5m2_t{0x01}), std::ldexp(1.0f, -16));
}

TEST(Float8, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const uint8_t sign = code & 0x80;
    const uint8_t e4 = F32ToF8E4M3(F8E4M3ToF32(f8e4m3_t{code})).bits;
    EXPECT_EQ(e4, (c & 0x7f) == 0x7f ? static_cast<uint8_t>(0x7f | sign) : code) << c;
    const uint8_t e5 = F32ToF8E5M2(F8E5M2ToF32(f8e5m2_t{code})).bits;
    EXPECT_EQ(e5, (c & 0x7f) > 0x7c ? static_cast<uint8_t>(0x7f | sign) : code) << c;
  }
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Edge {
  float x;
  uint8_t want;
};

// Each edge's code from the conversion to e4m3fn (else e5m2) and from the nearest-even oracle, and
// its mirror's: -x converts to the same code with the sign bit set.
void ExpectEdges(const std::vector<Edge>& edges, bool e4m3) {
  for (const Edge& edge : edges)
    for (const Edge& e : {edge, Edge{-edge.x, static_cast<uint8_t>(edge.want ^ 0x80)}}) {
      const uint8_t got = e4m3 ? F32ToF8E4M3(e.x).bits : F32ToF8E5M2(e.x).bits;
      EXPECT_EQ(got, e.want) << (e4m3 ? "e4m3fn" : "e5m2") << ", x = " << e.x << " (bits " << std::hex << BitsOf(e.x)
                             << ")";
      EXPECT_EQ(NearestEven(e.x, e4m3), e.want) << "oracle, x = " << e.x;
    }
}

// Edges by name, each standing for its mirror too.
TEST(Float8, E4M3EdgesByName) {
  const std::vector<Edge> edges = {
      {0.0f, 0x00},
      {448.0f, 0x7e},                        // the largest finite value
      {456.0f, 0x7e},                        // between 448 and the midpoint 464
      {464.0f, 0x7e},                        // the tie above 448: even 448
      {std::nextafter(464.0f, kInf), 0x7f},  // past the tie: rounds to the missing 480, NaN
      {480.0f, 0x7f},                        // PyTorch's overflow threshold: NaN, not saturation
      {1e30f, 0x7f},
      {kInf, 0x7f},
      {kNaN, 0x7f},
      {std::ldexp(1.0f, -6), 0x08},   // the smallest normal
      {std::ldexp(7.0f, -9), 0x07},   // the largest subnormal
      {std::ldexp(7.5f, -9), 0x08},   // its tie with 2^-6: even 0x08
      {std::ldexp(1.0f, -9), 0x01},   // the smallest subnormal
      {std::ldexp(1.0f, -10), 0x00},  // half of it: the tie goes to even 0
      {std::nextafter(std::ldexp(1.0f, -10), 1.0f), 0x01},
      {std::ldexp(3.0f, -10), 0x02},  // 1.5 x 2^-9: tie between 0x01 and 0x02, even 0x02
      {std::ldexp(5.0f, -10), 0x02},  // 2.5 x 2^-9: tie, even 0x02
      {1.0f, 0x38},
      {1.0625f, 0x38},  // tie between 1 and 1.125: even 1
      {1.1875f, 0x3a},  // tie between 1.125 and 1.25: even 1.25
      {std::nextafter(1.0625f, 2.0f), 0x39},
      {std::ldexp(1.0f, -30), 0x00},  // far below the subnormals
  };
  ExpectEdges(edges, true);
}

TEST(Float8, E5M2EdgesByName) {
  const std::vector<Edge> edges = {
      {0.0f, 0x00},
      {57344.0f, 0x7b},                        // the largest finite value
      {std::nextafter(61440.0f, 0.0f), 0x7b},  // below the midpoint of 57344 and 65536
      {61440.0f, 0x7c},                        // the tie: even, which is infinity
      {65536.0f, 0x7c},
      {-1e30f, 0xfc},
      {kInf, 0x7c},
      {kNaN, 0x7f},
      {std::ldexp(1.0f, -14), 0x04},  // the smallest normal
      {std::ldexp(1.0f, -16), 0x01},  // the smallest subnormal
      {std::ldexp(1.0f, -17), 0x00},  // the tie with 0: even 0
      {std::nextafter(std::ldexp(1.0f, -17), 1.0f), 0x01},
      {std::ldexp(3.0f, -17), 0x02},
      {1.0f, 0x3c},
      {1.125f, 0x3c},  // tie between 1 and 1.25: even 1
      {1.375f, 0x3e},  // tie between 1.25 and 1.5: even 1.5
  };
  ExpectEdges(edges, false);
}

// Every sign, exponent and top 7 mantissa bits (the upper 16 bits: both formats' kept bits, guard bit
// and the first sticky bits), each with low 16 bits that make the sticky part zero, tiny, half and full.
std::vector<float> PatternsOfInterest() {
  std::vector<float> xs;
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0u, 1u, 0x7fffu, 0x8000u, 0xffffu}) xs.push_back(Bits(hi << 16 | lo));
  return xs;
}

TEST(Float8, ScalarEqualsNearestEvenOverPatterns) {
  for (float x : PatternsOfInterest()) {
    ASSERT_EQ(F32ToF8E4M3(x).bits, NearestEven(x, true)) << "e4m3fn, bits " << std::hex << BitsOf(x);
    ASSERT_EQ(F32ToF8E5M2(x).bits, NearestEven(x, false)) << "e5m2, bits " << std::hex << BitsOf(x);
  }
}

// The cache writers' SIMD conversion (scale 1: x / 1 is x, NaN payloads and -0 included) equals the
// scalar conversion on every SIMD target, over the patterns as one long row and as odd rows.
TEST(Float8, SimdCacheConversionEqualsScalarOnEveryTarget) {
  const std::vector<float> xs = PatternsOfInterest();
  for (DType type : {DType::kF8E4M3, DType::kF8E5M2}) {
    SCOPED_TRACE(std::string(ToString(type)));
    std::vector<uint8_t> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i)
      want[i] = type == DType::kF8E4M3 ? F32ToF8E4M3(xs[i]).bits : F32ToF8E5M2(xs[i]).bits;
    for (int64_t head_dim : {int64_t(xs.size()), int64_t(7), int64_t(33)}) {
      const int64_t slots = static_cast<int64_t>(xs.size()) / head_dim;
      const int64_t n = slots * head_dim;
      std::vector<int64_t> slot_ids(static_cast<size_t>(slots));
      for (int64_t s = 0; s < slots; ++s) slot_ids[static_cast<size_t>(s)] = s;
      const float one = 1.0f;
      testing::ForEachSimdTarget([&](const std::string&) {
        std::vector<uint8_t> k(static_cast<size_t>(n), 0xaa), v(static_cast<size_t>(n), 0xaa);
        KvCacheView cache{k.data(), v.data(), type, 1, slots, 1, head_dim};
        cache.k_scale = {&one, 1};
        HeadsView kv = HeadsView::Dense(const_cast<float*>(xs.data()), DType::kF32, slots, 1, head_dim);
        const Status s = StoreKvCache(cache, 0, slot_ids, kv, HeadsView{});
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(k[static_cast<size_t>(i)], want[static_cast<size_t>(i)])
              << "head_dim " << head_dim << " index " << i << " bits " << std::hex << BitsOf(xs[static_cast<size_t>(i)]);
      });
    }
  }
}

TEST(Float8, TraitsAndNames) {
  EXPECT_EQ(ToString(DType::kF8E4M3), "float8_e4m3fn");
  EXPECT_EQ(ToString(DType::kF8E5M2), "float8_e5m2");
  DType d;
  ASSERT_TRUE(ParseDType("e4m3", &d));
  EXPECT_EQ(d, DType::kF8E4M3);
  ASSERT_TRUE(ParseDType("float8_e5m2", &d));
  EXPECT_EQ(d, DType::kF8E5M2);
  EXPECT_EQ(SizeOf(DType::kF8E4M3), 1u);
  const float x[3] = {1.0f, 500.0f, -0.0f};
  uint8_t codes[3];
  TraitsOf(DType::kF8E4M3).from_float(x, codes, 3);
  EXPECT_EQ(codes[0], 0x38);
  EXPECT_EQ(codes[1], 0x7f);
  EXPECT_EQ(codes[2], 0x80);
  float back[3];
  TraitsOf(DType::kF8E4M3).to_float(codes, back, 3);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_TRUE(std::isnan(back[1]));
  EXPECT_TRUE(std::signbit(back[2]));
}

}  // namespace
}  // namespace posenc
