// Float8 KV caches (float8_e4m3fn, float8_e5m2) with per-tensor and per-head scales: the SIMD writers
// equal the scalar reference and the definition fp8(x / scale) bit for bit on every SIMD target, for the
// plain store and the fused RoPE + KV write, contiguous and paged slots, odd sizes, 0 and 1 tokens; bad
// scales are refused with one line naming the scale.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/fused_rope.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_table.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

uint8_t Code(DType type, float x) { return type == DType::kF8E4M3 ? F32ToF8E4M3(x).bits : F32ToF8E5M2(x).bits; }

// n float32 values of `dtype` at p: normal values spread over the float8 range (some past it) and
// the edges: +-0, subnormals of both formats, 448, 464, 480, 57344, 61440, infinities, NaN.
std::vector<uint8_t> Values(DType dtype, size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> out(n * SizeOf(dtype) + 8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 17);
  const float edges[] = {0.0f,    -0.0f,   std::ldexp(1.0f, -9), std::ldexp(1.0f, -10), std::ldexp(3.0f, -10),
                         448.0f,  464.0f,  465.0f,               480.0f,                57344.0f,
                         61440.0f, -61440.0f, INFINITY,          -INFINITY,             NAN,
                         std::ldexp(1.0f, -16), std::ldexp(1.0f, -17)};
  for (size_t i = 0; i < n; ++i) {
    float x = i % 5 == 4 ? edges[(i / 5) % std::size(edges)] : std::ldexp(normal(rng), expo(rng));
    switch (dtype) {
      case DType::kF32: std::memcpy(out.data() + 4 * i, &x, 4); break;
      case DType::kF16: {
        const f16_t h = F32ToF16(x);
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      default: {
        const bf16_t h = F32ToBF16(x);
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
    }
  }
  return out;
}

float Widen(DType dtype, const uint8_t* p, size_t i) {
  switch (dtype) {
    case DType::kF32: return LoadAsF32(reinterpret_cast<const float*>(p) + i);
    case DType::kF16: {
      f16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return F16ToF32(h);
    }
    default: {
      bf16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return BF16ToF32(h);
    }
  }
}

// Scale modes: none, per tensor, per head.
std::vector<float> Scales(int mode, int64_t heads, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.01f, 4.0f);
  if (mode == 0) return {};
  std::vector<float> s(mode == 1 ? 1 : static_cast<size_t>(heads));
  for (float& x : s) x = u(rng);
  if (mode == 2 && heads > 1) s[1] = 1.0f / 3.0f;  // a scale that is not a power of two
  return s;
}

TEST(KvFloat8, StoreEqualsDefinitionAndReferenceOnEveryTarget) {
  std::mt19937_64 rng(11);
  struct Shape {
    int64_t tokens, heads, head_dim;
  };
  const Shape shapes[] = {{0, 2, 8}, {1, 1, 1}, {1, 3, 5}, {13, 4, 80}, {7, 3, 33}, {5, 1, 128}, {3, 2, 17}};
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (DType ct : {DType::kF8E4M3, DType::kF8E5M2})
        for (const Shape& sh : shapes)
          for (int mode : {0, 1, 2}) {
            const auto [T, H, D] = sh;
            SCOPED_TRACE(fmt::format("{} {} -> {} T={} H={} D={} scale mode {}", target, ToString(dt), ToString(ct),
                                     T, H, D, mode));
            const size_t n = static_cast<size_t>(T * H * D);
            const std::vector<uint8_t> k = Values(dt, n, rng), v = Values(dt, n, rng);
            const std::vector<float> ks = Scales(mode, H, rng), vs = Scales((mode + 1) % 3, H, rng);
            const int64_t slots_n = 2 * T + 1;
            std::vector<int64_t> slots;
            for (int64_t t = 0; t < T; ++t) slots.push_back(2 * (T - 1 - t) + 1);  // descending, with gaps
            KvCacheView c1{nullptr, nullptr, ct, 2, slots_n, H, D};
            c1.k_scale = ks;
            c1.v_scale = vs;
            KvCacheView c2 = c1;
            // Caches at odd addresses (float8 rows need no alignment).
            std::vector<uint8_t> m1(static_cast<size_t>(2 * c1.bytes()) + 2, 0x11), m2 = m1;
            c1.k = m1.data() + 1, c1.v = m1.data() + 1 + c1.bytes();
            c2.k = m2.data() + 1, c2.v = m2.data() + 1 + c2.bytes();
            HeadsView kv = HeadsView::Dense(const_cast<uint8_t*>(k.data()), dt, T, H, D);
            HeadsView vv = HeadsView::Dense(const_cast<uint8_t*>(v.data()), dt, T, H, D);
            Status s = StoreKvCache(c1, 1, slots, kv, vv);
            ASSERT_TRUE(s.ok()) << s.ToString();
            s = StoreKvCacheReference(c2, 1, slots, kv, vv);
            ASSERT_TRUE(s.ok()) << s.ToString();
            ASSERT_TRUE(m1 == m2) << "fast path differs from the reference";
            // The definition, element by element: code = fp8(float32(x) / scale[head]).
            for (int64_t t = 0; t < T; ++t)
              for (int64_t h = 0; h < H; ++h)
                for (int64_t d = 0; d < D; ++d) {
                  const size_t i = static_cast<size_t>((t * H + h) * D + d);
                  const float kd = ks.empty() ? 1.0f : ks[ks.size() == 1 ? 0 : static_cast<size_t>(h)];
                  const float vd = vs.empty() ? 1.0f : vs[vs.size() == 1 ? 0 : static_cast<size_t>(h)];
                  const size_t at = static_cast<size_t>(h * D + d);
                  ASSERT_EQ(reinterpret_cast<uint8_t*>(c1.k_row(1, slots[static_cast<size_t>(t)]))[at],
                            Code(ct, Widen(dt, k.data(), i) / kd))
                      << "key t " << t << " h " << h << " d " << d;
                  ASSERT_EQ(reinterpret_cast<uint8_t*>(c1.v_row(1, slots[static_cast<size_t>(t)]))[at],
                            Code(ct, Widen(dt, v.data(), i) / vd))
                      << "value t " << t << " h " << h << " d " << d;
                }
            // Layer 0 and unused slots untouched.
            for (int64_t b = 0; b < c1.bytes() / 2; ++b) ASSERT_EQ(m1[static_cast<size_t>(1 + b)], 0x11);
          }
  });
}

// The SIMD writers' codes equal fp8(x / scale) with the float32 division for every bfloat16 pattern,
// 2^16 random float32 patterns and values whose quotient lies within a few ulp of a rounding midpoint
// between two codes (where a quotient one ulp off changes the code: a reciprocal multiply without its
// correction step failed here), over scales with significands of all ones, 1 + 1 ulp, 1/3, powers of
// two (the writers multiply by their exact reciprocals: the extremes 2^127 and 2^-126, and the subnormal
// 2^-127, whose reciprocal is exact but which takes the division) and log-uniform over 2^-20..2^20, on
// every target.
TEST(KvFloat8, DivisionByScaleIsTheFloat32DivisionOnEveryTarget) {
  std::mt19937_64 rng(5);
  std::vector<float> xs(1 << 17);
  for (uint32_t i = 0; i < (1u << 16); ++i) xs[i] = BF16ToF32(bf16_t{static_cast<uint16_t>(i)});
  for (size_t i = 1 << 16; i < xs.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    std::memcpy(&xs[i], &u, 4);
  }
  std::vector<float> scales = {1.0f,     1.0f / 3.0f, 0.125f,   1024.0f, std::nextafter(1.0f, 2.0f), std::nextafter(2.0f, 0.0f),
                               0x1p127f, 0x1p-126f,   0x1p-127f, 0x1p-60f, 0x1p60f};
  std::uniform_real_distribution<float> lg(-20.0f, 20.0f);
  while (scales.size() < 45) {
    float s = std::exp2(lg(rng));
    uint32_t u;
    std::memcpy(&u, &s, 4);
    if (scales.size() % 3 == 0) u |= 0x7fffffu;                         // all-ones significand
    if (scales.size() % 5 == 0) u = (u & 0xff800000u) | 1u;              // 1 + 1 ulp
    std::memcpy(&s, &u, 4);
    scales.push_back(s);
  }
  const int64_t D = 128, slots = static_cast<int64_t>(xs.size()) / D;
  std::vector<int64_t> slot_ids(static_cast<size_t>(slots));
  for (int64_t t = 0; t < slots; ++t) slot_ids[static_cast<size_t>(t)] = t;
  HeadsView x = HeadsView::Dense(xs.data(), DType::kF32, slots, 1, D);
  for (DType ct : {DType::kF8E4M3, DType::kF8E5M2})
    for (float scale : scales) {
      // The last slots: x within a few ulp of (a midpoint between two codes) * scale, where the code
      // turns on the quotient's last bits (a quotient one ulp off changes these codes).
      const int max_code = ct == DType::kF8E4M3 ? 0x7e : 0x7b;
      size_t at = xs.size() - 4096;
      for (int c = 0; c < max_code && at + 14 <= xs.size(); ++c) {
        const float lo = ct == DType::kF8E4M3 ? F8E4M3ToF32(f8e4m3_t{static_cast<uint8_t>(c)})
                                              : F8E5M2ToF32(f8e5m2_t{static_cast<uint8_t>(c)});
        const float hi = ct == DType::kF8E4M3 ? F8E4M3ToF32(f8e4m3_t{static_cast<uint8_t>(c + 1)})
                                              : F8E5M2ToF32(f8e5m2_t{static_cast<uint8_t>(c + 1)});
        float near = (lo + hi) / 2 * scale;
        for (int j = 0; j < 3; ++j) near = std::nextafter(near, 0.0f);
        for (int j = 0; j < 7; ++j, near = std::nextafter(near, INFINITY)) {
          xs[at++] = near;
          xs[at++] = -near;
        }
      }
      std::vector<uint8_t> want(xs.size());
      for (size_t i = 0; i < xs.size(); ++i) want[i] = Code(ct, xs[i] / scale);
      testing::ForEachSimdTarget([&](const std::string& target) {
        std::vector<uint8_t> k(xs.size(), 0xaa), v(xs.size(), 0xaa);
        KvCacheView cache{k.data(), v.data(), ct, 1, slots, 1, D};
        cache.k_scale = {&scale, 1};
        const Status st = StoreKvCache(cache, 0, slot_ids, x, HeadsView{});
        ASSERT_TRUE(st.ok()) << st.ToString();
        for (size_t i = 0; i < xs.size(); ++i)
          ASSERT_EQ(k[i], want[i]) << target << " " << ToString(ct) << " scale " << std::hexfloat << scale << " x "
                                   << xs[i];
      });
    }
}

// The fused RoPE + KV write into a float8 cache equals the unfused sequence (ApplyRope, then
// StoreKvCache) on every target, and its reference the reference sequence; contiguous and paged slots.
TEST(KvFloat8, FusedEqualsUnfusedOnEveryTarget) {
  std::mt19937_64 rng(5);
  // The float8 cases of the kernel list: odd sizes (0 and 1 token, head_dim 10, 34, 80) and Llama-3-8B's
  // float8 benchmark rows at 9 tokens; paged slots by the case's index (model rows: where they decode).
  testing::ForEachKernelCase(cases::KernelFamily::kFloat8Kv, 9, [&](const cases::KernelCase& k, size_t i, bool first) {
    const DType dt = k.dtype, ct = k.cache_type;
    struct {
      int64_t tokens, q_heads, kv_heads, head_dim, rotary_dim;
      bool paged;
    } const fc{k.tokens, k.heads, k.kv_heads, k.head_dim, k.rotary_dim, k.model.empty() ? i % 2 == 1 : k.decode};
    const RotaryLayout L{k.pairing, fc.head_dim, 0, fc.rotary_dim};
    auto f = DefaultRopeFrequencies(fc.rotary_dim, 10000.0).value();
    auto table = RopeTable::Build(f, 64, RopePrecision::kReference).value();
    std::vector<int64_t> positions, slots;
    const int64_t slots_n = fc.paged ? 64 : 2 * 32;
    if (fc.paged) {  // pages of 16, a shuffled block table, two sequences
      std::vector<int32_t> block_table = {3, 0, 2, 1};
      PagedKvTable pt{16, 4, 2, block_table};
      std::vector<int64_t> seq;
      for (int64_t t = 0; t < fc.tokens; ++t) seq.push_back(t % 2), positions.push_back(t * 3 + 1);
      slots = PagedKvSlots(pt, seq, positions).value();
    } else {
      std::vector<int64_t> seq, off;
      for (int64_t t = 0; t < fc.tokens; ++t) seq.push_back(1), off.push_back(t + 4), positions.push_back(t + 4);
      slots = ContiguousKvSlots(2, 32, seq, off).value();
    }
    const int64_t W = (fc.q_heads + 2 * fc.kv_heads) * fc.head_dim;
    const std::vector<uint8_t> in = Values(dt, static_cast<size_t>(fc.tokens * W), rng);
    const std::vector<float> ks = Scales(2, fc.kv_heads, rng), vs = Scales(1, fc.kv_heads, rng);
    auto run = [&](bool fused, bool reference, std::vector<uint8_t>* q_res, std::vector<uint8_t>* cache_res) {
      std::vector<uint8_t> input = in;
      QkvViews x = SplitFusedQkv(input.data(), dt, fc.tokens, fc.q_heads, fc.kv_heads, fc.head_dim).value();
      std::vector<uint8_t> qo(static_cast<size_t>(fc.tokens * fc.q_heads * fc.head_dim) * SizeOf(dt) + 4, 0xCD);
      HeadsView q_out = HeadsView::Dense(qo.data(), dt, fc.tokens, fc.q_heads, fc.head_dim);
      KvCacheView cache{nullptr, nullptr, ct, 2, slots_n, fc.kv_heads, fc.head_dim};
      cache.k_scale = ks;
      cache.v_scale = vs;
      std::vector<uint8_t> mem(static_cast<size_t>(2 * cache.bytes()) + 1, 0xAB);
      cache.k = mem.data() + 1;
      cache.v = mem.data() + 1 + cache.bytes();
      RopeArgs ra{L, &table, positions};
      if (fused) {
        FusedRopeArgs fa{ra, slots, 1, {}};
        const Status s =
            reference ? ApplyRopeKvCacheReference(fa, x, q_out, cache) : ApplyRopeKvCache(fa, x, q_out, cache);
        ASSERT_TRUE(s.ok()) << s.ToString();
      } else {
        std::vector<uint8_t> k_tmp(static_cast<size_t>(fc.tokens * fc.kv_heads * fc.head_dim) * SizeOf(dt) + 8);
        HeadsView kt = HeadsView::Dense(k_tmp.data(), dt, fc.tokens, fc.kv_heads, fc.head_dim);
        if (reference) {
          ASSERT_TRUE(ApplyRopeReference(ra, x.q, q_out).ok());
          ASSERT_TRUE(ApplyRopeReference(ra, x.k, kt).ok());
          ASSERT_TRUE(StoreKvCacheReference(cache, 1, slots, kt, x.v).ok());
        } else {
          ASSERT_TRUE(ApplyRope(ra, x.q, q_out).ok());
          ASSERT_TRUE(ApplyRope(ra, x.k, kt).ok());
          ASSERT_TRUE(StoreKvCache(cache, 1, slots, kt, x.v).ok());
        }
      }
      *q_res = qo;
      *cache_res = mem;
    };
    for (bool reference : {false, true}) {
      if (reference && !first) continue;  // the reference does not depend on the target
      std::vector<uint8_t> q1, c1, q2, c2;
      run(true, reference, &q1, &c1);
      run(false, reference, &q2, &c2);
      EXPECT_TRUE(q1 == q2) << (reference ? "reference: " : "") << "queries differ";
      EXPECT_TRUE(c1 == c2) << (reference ? "reference: " : "") << "float8 cache differs";
    }
  });
}

TEST(KvFloat8, BadScalesAreRefusedWithOneLine) {
  std::vector<uint8_t> mem(2 * 4 * 3 * 8, 0);
  std::vector<float> x(static_cast<size_t>(2 * 3 * 8), 1.0f);
  const std::vector<int64_t> slots{0, 1};
  HeadsView k = HeadsView::Dense(x.data(), DType::kF32, 2, 3, 8);
  struct Bad {
    std::vector<float> scale;
    bool on_v;
    const char* want;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Bad bads[] = {
      {{0.0f}, false, "k_scale[0] = 0 is not a finite scale > 0"},
      {{1.0f, -2.0f, 1.0f}, false, "k_scale[1] = -2 is not a finite scale > 0"},
      {{std::nanf("")}, true, "v_scale[0] = nan is not a finite scale > 0"},
      {{inf}, false, "k_scale[0] = inf is not a finite scale > 0"},
      {{1.0f, 2.0f}, true, "v_scale has 2 values, not 1 (per tensor) or 3 (per head)"},
      {{-0.0f}, false, "k_scale[0] = -0 is not a finite scale > 0"},
  };
  for (DType ct : {DType::kF8E4M3, DType::kF8E5M2}) {
    for (const Bad& b : bads) {
      KvCacheView cache{mem.data(), mem.data() + mem.size() / 2, ct, 1, 4, 3, 8};
      (b.on_v ? cache.v_scale : cache.k_scale) = b.scale;
      for (bool reference : {false, true}) {
        const Status s = reference ? StoreKvCacheReference(cache, 0, slots, k, k) : StoreKvCache(cache, 0, slots, k, k);
        ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << b.want;
        EXPECT_NE(s.message().find(b.want), std::string::npos) << s.message();
        EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
      }
      for (uint8_t byte : mem) ASSERT_EQ(byte, 0) << "a refused write changed the cache";
    }
  }
  // Scales on a cache that is not float8.
  std::vector<uint8_t> m16(2 * 4 * 3 * 8 * 2);
  KvCacheView f16{m16.data(), m16.data() + m16.size() / 2, DType::kF16, 1, 4, 3, 8};
  const float one = 1.0f;
  f16.k_scale = {&one, 1};
  const Status s = StoreKvCache(f16, 0, slots, k, k);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k_scale given for a float16 cache"), std::string::npos) << s.message();
  // A block type that is not a cache type.
  KvCacheView q4{mem.data(), mem.data() + mem.size() / 2, DType::kQ4_0, 1, 4, 4, 8};
  EXPECT_NE(q4.Validate().message().find("q4_0 is not a cache type"), std::string::npos) << q4.Validate().message();
}

TEST(KvFloat8, CacheTypeNamesParse) {
  KvCacheType t;
  ASSERT_TRUE(ParseKvCacheType("float8_e4m3fn", &t));
  EXPECT_EQ(t, DType::kF8E4M3);
  ASSERT_TRUE(ParseKvCacheType("e5m2", &t));
  EXPECT_EQ(t, DType::kF8E5M2);
  ASSERT_TRUE(ParseKvCacheType("q8_0", &t));
  EXPECT_FALSE(ParseKvCacheType("q4_0", &t));
  EXPECT_FALSE(ParseKvCacheType("int8", &t));
  KvCacheView c{nullptr, nullptr, DType::kF8E4M3, 2, 10, 4, 32};
  EXPECT_EQ(c.slot_bytes(), 128);
  EXPECT_EQ(c.bytes(), 2 * 10 * 128);
}

}  // namespace
}  // namespace posenc
