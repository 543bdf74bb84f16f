// QK-norm (kernels/rms_norm.hpp) and its fusion with RoPE and the KV-cache write (fused_rope.hpp):
//  * ApplyHeadRmsNorm equals ApplyHeadRmsNormReference bit for bit on every SIMD target, for head
//    sizes that cross the vector width (1..17, 80, 129, ...), every style and scope, strided and in place;
//  * the norm is an RMSNorm: float32 results within a stated bound of a float64 evaluation;
//  * the fused call with q_norm/k_norm equals the unfused sequence (ApplyHeadRmsNorm, ApplyRope in
//    place, ApplyQueryTemperature, StoreKvCache) bit for bit on every target, over layouts, windows,
//    dtypes, cache types, contiguous and paged slots, 0 and 1 tokens; the fused reference equals the
//    reference sequence;
//  * bad weights and eps are one-line errors and nothing is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/parallel.hpp"
#include "posenc/kernels/attn_temperature.hpp"
#include "posenc/kernels/fused_rope.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"
#include "kernel_fixture.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

// A weight as a checkpoint holds it: values of the activation dtype, widened to float32.
std::vector<float> Weight(DType dt, size_t n, std::mt19937_64& rng) {
  std::vector<float> w(n);
  std::normal_distribution<float> nd(1.0f, 0.5f);
  for (auto& x : w) {
    x = nd(rng);
    if (dt == DType::kF16) x = F16ToF32(F32ToF16(x));
    if (dt == DType::kBF16) x = BF16ToF32(F32ToBF16(x));
  }
  return w;
}

const RmsNormStyle kStyles[] = {RmsNormStyle::kCastThenScale, RmsNormStyle::kScaleThenCast,
                                RmsNormStyle::kOnePlusWeight};
const DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

TEST(HeadRmsNorm, EqualsReferenceOnEveryTarget) {
  const int64_t dims[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 80, 128, 129, 256};
  const int64_t tokens_list[] = {0, 1, 5};
  size_t checked = 0;
  testing::ForEachSimdTarget([&](const std::string& target) {
    size_t i = 0;
    for (DType dt : kDTypes)
      for (int64_t D : dims)
        for (RmsNormStyle st : kStyles) {
          ++i;
          const int64_t T = tokens_list[i % 3], H = 1 + static_cast<int64_t>(i % 4);
          const RmsNormScope scope = i % 5 == 2 ? RmsNormScope::kWholeRow : RmsNormScope::kPerHead;
          const bool in_place = i % 3 == 1, strided = i % 2 == 0;
          SCOPED_TRACE(fmt::format("{} D {} H {} T {} {} {}{}{}", ToString(dt), D, H, T, ToString(st), ToString(scope),
                                   in_place ? " in-place" : "", strided ? " strided" : ""));
          std::mt19937_64 rng(static_cast<uint64_t>(i));
          const size_t es = SizeOf(dt);
          // Strided: heads head_dim + 3 apart, tokens one spare head apart; 1 element misaligned.
          const int64_t hs = strided ? D + 3 : D, ts = strided ? (H + 1) * hs : H * hs;
          const size_t n = static_cast<size_t>(std::max<int64_t>(T, 1) * ts) + 1;
          std::vector<uint8_t> src(n * es);
          testing::FillNormal(dt, src.data(), n, rng);
          const auto w = Weight(dt, static_cast<size_t>(scope == RmsNormScope::kPerHead ? D : H * D), rng);
          HeadRmsNorm norm{w, 1e-6f, st, scope};
          auto run = [&](bool reference) {
            std::vector<uint8_t> buf = src, out(n * es, 0xEE);
            HeadsView in{buf.data() + es, dt, T, H, D, ts, hs};
            HeadsView o = in_place ? in : HeadsView{out.data() + es, dt, T, H, D, ts, hs};
            const Status s = reference ? ApplyHeadRmsNormReference(norm, in, o) : ApplyHeadRmsNorm(norm, in, o);
            EXPECT_TRUE(s.ok()) << s.ToString();
            return in_place ? buf : out;
          };
          const auto fast = run(false), ref = run(true);
          ASSERT_EQ(fast.size(), ref.size());
          for (size_t b = 0; b < fast.size(); ++b)
            if (fast[b] != ref[b]) {
              ADD_FAILURE() << target << ": first differing byte " << b << " of " << fast.size();
              break;
            }
          ++checked;
        }
  });
  EXPECT_GT(checked, 100u);
}

// Against float64: y = x / sqrt(mean(x^2) + eps) * w (or * (1 + w)). float32 evaluation: the sum of n
// squares is within n * 2^-24 relative, r within about (n / 2 + 3) * 2^-24, the product within 2 more
// ulps; the bound below is 4 * (n + 8) * 2^-24 relative to |y| plus 1e-30.
TEST(HeadRmsNorm, IsAnRmsNormInFloat32) {
  for (int64_t D : {1, 17, 128, 256}) {
    for (RmsNormStyle st : kStyles) {
      std::mt19937_64 rng(static_cast<uint64_t>(D));
      const int64_t T = 3, H = 2;
      std::vector<float> x(static_cast<size_t>(T * H * D)), y(x.size());
      testing::FillNormal(DType::kF32, x.data(), x.size(), rng, 3.0f);
      const auto w = Weight(DType::kF32, static_cast<size_t>(D), rng);
      HeadRmsNorm norm{w, 1e-5f, st, RmsNormScope::kPerHead};
      ASSERT_TRUE(ApplyHeadRmsNorm(norm, HeadsView::Dense(x.data(), DType::kF32, T, H, D),
                                   HeadsView::Dense(y.data(), DType::kF32, T, H, D))
                      .ok());
      const double bound = 4.0 * static_cast<double>(D + 8) * std::ldexp(1.0, -24);
      for (int64_t r = 0; r < T * H; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < D; ++i) ss += double(x[r * D + i]) * x[r * D + i];
        const double inv = 1.0 / std::sqrt(ss / double(D) + double(1e-5f));
        for (int64_t i = 0; i < D; ++i) {
          const double wi = st == RmsNormStyle::kOnePlusWeight ? 1.0 + double(w[i]) : double(w[i]);
          const double want = double(x[r * D + i]) * inv * wi;
          ASSERT_NEAR(y[r * D + i], want, bound * std::fabs(want) + 1e-30)
              << "D " << D << " " << ToString(st) << " row " << r << " i " << i;
        }
      }
    }
  }
}

// Whole-row scope (OLMo 2) normalises over every head of a token: one head of it equals a per-head
// norm of a [T, 1, H * D] view of the same contiguous values when H * D values are one head.
TEST(HeadRmsNorm, WholeRowEqualsOneLongHeadWhenHeadsAreMultiplesOf16) {
  const int64_t T = 4, H = 8, D = 64;
  std::mt19937_64 rng(3);
  std::vector<float> x(static_cast<size_t>(T * H * D)), a(x.size()), b(x.size());
  testing::FillNormal(DType::kF32, x.data(), x.size(), rng);
  const auto w = Weight(DType::kF32, static_cast<size_t>(H * D), rng);
  ASSERT_TRUE(ApplyHeadRmsNorm({w, 1e-6f, RmsNormStyle::kScaleThenCast, RmsNormScope::kWholeRow},
                               HeadsView::Dense(x.data(), DType::kF32, T, H, D),
                               HeadsView::Dense(a.data(), DType::kF32, T, H, D))
                  .ok());
  ASSERT_TRUE(ApplyHeadRmsNorm({w, 1e-6f, RmsNormStyle::kScaleThenCast, RmsNormScope::kPerHead},
                               HeadsView::Dense(x.data(), DType::kF32, T, 1, H * D),
                               HeadsView::Dense(b.data(), DType::kF32, T, 1, H * D))
                  .ok());
  // Not bit-equal in general (head sums are added in head order, not in 16 partials across the row),
  // but within float32 rounding of each other.
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * std::fabs(b[i]) + 1e-30) << i;
}

TEST(HeadRmsNorm, BadInputIsOneLineErrorAndWritesNothing) {
  std::vector<float> x(2 * 3 * 8, 1.0f), y(x.size(), 7.0f), w(8, 1.0f), w_short(7, 1.0f);
  HeadsView in = HeadsView::Dense(x.data(), DType::kF32, 2, 3, 8), out = HeadsView::Dense(y.data(), DType::kF32, 2, 3, 8);
  struct Bad {
    HeadRmsNorm norm;
    const char* text;
  };
  std::vector<float> w_nan = w;
  w_nan[5] = std::numeric_limits<float>::quiet_NaN();
  const Bad bad[] = {
      {{w_short, 1e-6f}, "weight has 7 values, per_head norm of [3, 8] heads needs 8"},
      {{w, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kWholeRow}, "weight has 8 values, whole_row norm"},
      {{w, 0.0f}, "eps = 0 must be finite and > 0"},
      {{w, -1e-6f}, "must be finite and > 0"},
      {{w, std::numeric_limits<float>::quiet_NaN()}, "eps = nan"},
      {{w, std::numeric_limits<float>::infinity()}, "eps = inf"},
      {{w_nan, 1e-6f}, "weight[5] = nan is not finite"},
  };
  for (const Bad& b : bad) {
    for (bool reference : {false, true}) {
      const Status s = reference ? ApplyHeadRmsNormReference(b.norm, in, out) : ApplyHeadRmsNorm(b.norm, in, out);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find(b.text), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    }
  }
  for (float v : y) ASSERT_EQ(v, 7.0f);
}

// ---- The fused call -------------------------------------------------------------------------------

struct FusedCase {
  int64_t tokens, q_heads, kv_heads, head_dim, rotary_start, rotary_dim;
  RopePairing pairing;
  DType dtype;
  KvCacheType cache_type;
  bool paged, in_place, q_scale;
  RmsNormStyle style;
  bool q_norm = true, k_norm = true;
  bool backward = false;  // the inverse rotation (the fused kernel norms first then: its other path)
  std::string Name() const {
    return fmt::format("T{} Hq{} Hkv{} D{} window[{}, +{}) {} {} cache {} {}{}{} {} q_norm {} k_norm {}", tokens,
                       q_heads, kv_heads, head_dim, rotary_start, rotary_dim, ToString(pairing), ToString(dtype),
                       ToString(cache_type), paged ? "paged" : "contiguous", in_place ? " in-place" : "",
                       q_scale ? " q_scale" : "", ToString(style), q_norm, k_norm) +
           (backward ? " backward" : "");
  }
};

// Sequence 1 of a contiguous cache of 2, its tokens at offsets from 3.
testing::CacheSlots SecondSequenceSlots(int64_t tokens) {
  const int64_t max_len = tokens + 3;
  std::vector<int64_t> seq(static_cast<size_t>(tokens), 1), off(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) off[t] = t + 3;
  return {ContiguousKvSlots(2, max_len, seq, off).value(), 2 * max_len};
}

void RunFused(const FusedCase& c, bool check_reference) {
  SCOPED_TRACE(c.Name());
  std::mt19937_64 rng(static_cast<uint64_t>(c.tokens * 131 + c.head_dim * 7 + c.q_heads));
  const RotaryLayout L{c.pairing, c.head_dim, c.rotary_start, c.rotary_dim};
  auto table = RopeTable::Build(DefaultRopeFrequencies(c.rotary_dim, 1000000.0).value(), 512,
                                RopePrecision::kReference)
                   .value();
  const std::vector<int64_t> positions = testing::SpreadPositions(c.tokens, 37, 3, 700);  // some past the table
  // Slots: contiguous (sequence 1 of 2, offsets from 3) or paged (16-row pages in shuffled order).
  const auto [slots, num_slots] =
      c.paged ? testing::ShuffledPageSlots(c.tokens, 16, 3, rng) : SecondSequenceSlots(c.tokens);
  const int64_t W = (c.q_heads + 2 * c.kv_heads) * c.head_dim;
  const size_t es = SizeOf(c.dtype);
  std::vector<uint8_t> in(static_cast<size_t>(c.tokens * W) * es + 8);
  testing::FillNormal(c.dtype, in.data(), static_cast<size_t>(c.tokens * W), rng);
  const auto qw = Weight(c.dtype, static_cast<size_t>(c.head_dim), rng);
  const auto kw = Weight(c.dtype, static_cast<size_t>(c.head_dim), rng);
  HeadRmsNorm qn, kn;
  if (c.q_norm) qn = {qw, 1e-6f, c.style, RmsNormScope::kPerHead};
  if (c.k_norm) kn = {kw, 1e-6f, c.style, RmsNormScope::kPerHead};
  std::vector<float> scales;
  if (c.q_scale) scales = AttnTemperatureScales({true, 4.0, 0.1}, positions).value();
  const KvCacheView shape{nullptr, nullptr, c.cache_type, 2, num_slots, c.kv_heads, c.head_dim};
  const size_t cache_bytes = static_cast<size_t>(shape.bytes());
  const size_t q_bytes = static_cast<size_t>(c.tokens * c.q_heads * c.head_dim) * es;

  auto run = [&](bool fused, bool reference) {
    std::vector<uint8_t> input = in, qo(q_bytes + 8, 0xCD), kc(cache_bytes + 64, 0xAB), vc(cache_bytes + 64, 0xAB);
    QkvViews x = SplitFusedQkv(input.data(), c.dtype, c.tokens, c.q_heads, c.kv_heads, c.head_dim).value();
    HeadsView q_out = c.in_place ? x.q : HeadsView::Dense(qo.data(), c.dtype, c.tokens, c.q_heads, c.head_dim);
    KvCacheView cache = shape;
    cache.k = kc.data();
    cache.v = vc.data();
    RopeArgs ra{L, &table, positions};
    ra.parallel = &SerialRunner();
    if (c.backward) ra.direction = RopeDirection::kBackward;
    RopeArgs rr{L, &table, positions};
    rr.direction = ra.direction;
    if (fused) {
      FusedRopeArgs fa{ra, slots, 1, scales, qn, kn};
      const Status s =
          reference ? ApplyRopeKvCacheReference(fa, x, q_out, cache) : ApplyRopeKvCache(fa, x, q_out, cache);
      EXPECT_TRUE(s.ok()) << s.ToString();
    } else {  // norm, then RoPE in place, then scale, then the cache write
      std::vector<uint8_t> k_tmp(static_cast<size_t>(c.tokens * c.kv_heads * c.head_dim) * es + 8);
      HeadsView kt = HeadsView::Dense(k_tmp.data(), c.dtype, c.tokens, c.kv_heads, c.head_dim);
      auto norm = [&](const HeadRmsNorm& nm, HeadsView a, HeadsView b) {
        if (!nm.enabled()) return reference ? ApplyRopeReference(rr, a, b) : ApplyRope(ra, a, b);
        const Status s = reference ? ApplyHeadRmsNormReference(nm, a, b) : ApplyHeadRmsNorm(nm, a, b);
        if (!s.ok()) return s;
        return reference ? ApplyRopeReference(rr, b, b) : ApplyRope(ra, b);
      };
      EXPECT_TRUE(norm(qn, x.q, q_out).ok());
      EXPECT_TRUE(norm(kn, x.k, kt).ok());
      if (c.q_scale) {
        EXPECT_TRUE(ApplyQueryTemperature(q_out, scales).ok());
      }
      const Status s = reference ? StoreKvCacheReference(cache, 1, slots, kt, x.v) : StoreKvCache(cache, 1, slots, kt, x.v);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    std::vector<uint8_t> all = c.in_place ? input : qo;
    all.insert(all.end(), kc.begin(), kc.end());
    all.insert(all.end(), vc.begin(), vc.end());
    return all;
  };
  testing::ExpectFusedEqualsUnfused(run, check_reference);
}

// A QK-norm case of the kernel list with the test's own variations by its index: paged or contiguous
// slots, a query temperature, the norm's style, q_norm or k_norm alone.
FusedCase FromKernelCase(const cases::KernelCase& k, size_t i) {
  FusedCase c{k.tokens, k.heads, k.kv_heads, k.head_dim, k.rotary_start, k.rotary_dim, k.pairing, k.dtype,
              k.cache_type, i % 2 == 1, k.in_place, i % 4 == 2, kStyles[i % 3]};
  c.q_norm = i % 11 != 4;
  c.k_norm = i % 13 != 6;
  c.backward = i % 7 == 3;
  return c;
}

// The QK-norm cases of the kernel list: odd sizes, 0 and 1 token, Qwen3-8B's rows at 13 tokens.
TEST(FusedQkNorm, EqualsUnfusedSequenceOnEveryTarget) {
  testing::ForEachKernelCase(cases::KernelFamily::kQkNormFused, 13,
                             [&](const cases::KernelCase& k, size_t i, bool first) { RunFused(FromKernelCase(k, i), first); });
}

// Qwen3-8B's prefill rows of the list (bfloat16 into a bfloat16 cache, float32 into float32) at 300 tokens.
TEST(FusedQkNorm, Qwen3ShapesWithThreads) {
  for (const cases::KernelCase& k : cases::KernelCases(cases::KernelFamily::kQkNormFused))
    if (k.op == "qknorm_prefill" && (k.cache_type == KvCacheType::kBF16 || k.dtype == DType::kF32)) {
      FusedCase c = FromKernelCase(k.ScaledDown(300), 1);  // paged, q out of place, no temperature
      c.style = RmsNormStyle::kCastThenScale;
      c.q_norm = c.k_norm = true;
      RunFused(c, false);
    }
}

TEST(FusedQkNorm, BadNormIsRefusedAndNothingWritten) {
  const int64_t T = 2, Hq = 2, Hkv = 1, D = 16;
  std::vector<float> in(static_cast<size_t>(T * (Hq + 2 * Hkv) * D), 1.0f), q(static_cast<size_t>(T * Hq * D), 5.0f);
  auto x = SplitFusedQkv(in.data(), DType::kF32, T, Hq, Hkv, D).value();
  auto table = RopeTable::Build(DefaultRopeFrequencies(D, 10000.0).value(), 8, RopePrecision::kReference).value();
  std::vector<int64_t> pos{0, 1}, slots{0, 1};
  std::vector<float> kv(static_cast<size_t>(2 * 2 * Hkv * D), 9.0f), w(D, 1.0f), w_long(D + 1, 1.0f);
  KvCacheView cache{kv.data(), kv.data() + 2 * Hkv * D, KvCacheType::kF32, 1, 2, Hkv, D};
  RopeArgs ra{{RopePairing::kHalf, D, 0, D}, &table, pos};
  HeadsView qo = HeadsView::Dense(q.data(), DType::kF32, T, Hq, D);
  FusedRopeArgs a{ra, slots, 0, {}, {w_long, 1e-6f}, {}};
  for (bool reference : {false, true}) {
    Status s = reference ? ApplyRopeKvCacheReference(a, x, qo, cache) : ApplyRopeKvCache(a, x, qo, cache);
    EXPECT_NE(s.message().find("rms norm of queries: weight has 17 values"), std::string::npos) << s.message();
    FusedRopeArgs b{ra, slots, 0, {}, {}, {w, std::numeric_limits<float>::quiet_NaN()}};
    s = reference ? ApplyRopeKvCacheReference(b, x, qo, cache) : ApplyRopeKvCache(b, x, qo, cache);
    EXPECT_NE(s.message().find("rms norm of keys: eps = nan"), std::string::npos) << s.message();
  }
  for (float v : q) ASSERT_EQ(v, 5.0f);
  for (float v : kv) ASSERT_EQ(v, 9.0f);
}

}  // namespace
}  // namespace posenc
