// The MLA cache row (kernels/mla_cache.hpp): ApplyMlaRopeCache equals the unfused sequence of posenc's
// own calls (ApplyHeadRmsNorm of the latent, ApplyRope of k_pe and of q, StoreKvCache of the
// [kv_lora | k_rope] rows) bit for bit on every SIMD target, over DeepSeek-V3 shapes and odd ones (rope
// pairs not a multiple of the vector width), both pairings, every dtype and cache type, contiguous and
// paged slots, 0 and 1 tokens, q in place, q absent; the reference equals the reference sequence; bad
// input is a one-line error and nothing is written.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/parallel.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/mla_cache.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"
#include "kernel_fixture.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

struct MlaCase {
  int64_t tokens, q_heads, nope, rope, lora;
  RopePairing pairing;
  DType dtype;
  KvCacheType cache_type;
  bool paged, in_place, norm;
  RmsNormStyle style;
  std::string Name() const {
    return fmt::format("T{} Hq{} nope{} rope{} lora{} {} {} cache {} {}{} norm {} {}", tokens, q_heads, nope, rope,
                       lora, ToString(pairing), ToString(dtype), ToString(cache_type), paged ? "paged" : "contiguous",
                       in_place ? " in-place" : "", norm, ToString(style));
  }
};

// Contiguous slots in a cache of tokens + 4 rows, decreasing: not sorted.
testing::CacheSlots DecreasingSlots(int64_t tokens) {
  testing::CacheSlots s{{}, tokens + 4};
  for (int64_t t = 0; t < tokens; ++t) s.slots.push_back(s.num_slots - 1 - t);
  return s;
}

void RunMla(const MlaCase& c, bool check_reference, ParallelRunner* runner = &SerialRunner()) {
  SCOPED_TRACE(c.Name());
  std::mt19937_64 rng(static_cast<uint64_t>(c.tokens * 7 + c.lora + c.q_heads));
  const int64_t D = c.nope + c.rope, R = c.lora + c.rope;
  const RotaryLayout L{c.pairing, D, c.nope, c.rope};
  auto table = RopeTable::Build(DefaultRopeFrequencies(c.rope, 10000.0).value(), 256, RopePrecision::kReference).value();
  const std::vector<int64_t> positions = testing::SpreadPositions(c.tokens, 53, 11, 400);  // some past the table
  const auto [slots, num_slots] =
      c.paged ? testing::ShuffledPageSlots(c.tokens, 64, 5, rng) : DecreasingSlots(c.tokens);
  const size_t es = SizeOf(c.dtype);
  // The projection output as DeepSeek's kv_a_proj_with_mqa gives it: [kv_c | k_pe] per token.
  std::vector<uint8_t> kv_in(static_cast<size_t>(c.tokens * R) * es + 8), q_in(static_cast<size_t>(c.tokens * c.q_heads * D) * es + 8);
  testing::FillNormal(c.dtype, kv_in.data(), static_cast<size_t>(c.tokens * R), rng);
  testing::FillNormal(c.dtype, q_in.data(), static_cast<size_t>(c.tokens * c.q_heads * D), rng);
  std::vector<float> w(static_cast<size_t>(c.lora));
  for (auto& x : w) x = BF16ToF32(F32ToBF16(std::normal_distribution<float>(1.0f, 0.3f)(rng)));
  const HeadRmsNorm norm = c.norm ? HeadRmsNorm{w, 1e-6f, c.style, RmsNormScope::kPerHead} : HeadRmsNorm{};
  MlaCacheView shape{nullptr, c.cache_type, 2, num_slots, c.lora, c.rope};
  static const float kScale[1] = {0.375f};  // float8: stored = fp8(x / 0.375), not a power of two
  if (c.cache_type == DType::kF8E4M3 || c.cache_type == DType::kF8E5M2) shape.scale = kScale;
  const size_t cache_bytes = static_cast<size_t>(shape.bytes());

  auto run = [&](bool fused, bool reference) {
    std::vector<uint8_t> kv = kv_in, q = q_in, qo(q_in.size(), 0xCD), mem(cache_bytes + 64, 0xAB);
    const HeadsView kv_c{kv.data(), c.dtype, c.tokens, 1, c.lora, R, c.lora};
    const HeadsView k_pe{kv.data() + static_cast<size_t>(c.lora) * es, c.dtype, c.tokens, 1, c.rope, R, c.rope};
    const HeadsView qv = HeadsView::Dense(q.data(), c.dtype, c.tokens, c.q_heads, D);
    const HeadsView q_out = c.in_place ? qv : HeadsView::Dense(qo.data(), c.dtype, c.tokens, c.q_heads, D);
    MlaCacheView cache = shape;
    cache.data = mem.data();
    RopeArgs ra{L, &table, positions};
    ra.parallel = runner;
    if (fused) {
      const MlaRopeArgs a{ra, slots, 1, norm};
      const Status s = reference ? ApplyMlaRopeCacheReference(a, kv_c, k_pe, qv, q_out, cache)
                                 : ApplyMlaRopeCache(a, kv_c, k_pe, qv, q_out, cache);
      EXPECT_TRUE(s.ok()) << s.ToString();
    } else {  // norm, RoPE of k_pe and of q, then the rows stored into a one-head cache of R values
      // KvCacheView wants v memory of the cache's size, disjoint from k (never written: no values given).
      std::vector<uint8_t> rows(static_cast<size_t>(c.tokens * R) * es + 8), v_unused(cache_bytes + 64);
      const HeadsView latent{rows.data(), c.dtype, c.tokens, 1, c.lora, R, c.lora};
      const HeadsView pe{rows.data() + static_cast<size_t>(c.lora) * es, c.dtype, c.tokens, 1, c.rope, R, c.rope};
      if (c.norm) {
        EXPECT_TRUE((reference ? ApplyHeadRmsNormReference(norm, kv_c, latent) : ApplyHeadRmsNorm(norm, kv_c, latent)).ok());
      } else {
        for (int64_t t = 0; t < c.tokens; ++t)
          std::memcpy(rows.data() + static_cast<size_t>(t * R) * es, kv.data() + static_cast<size_t>(t * R) * es,
                      static_cast<size_t>(c.lora) * es);
      }
      RopeArgs ka = ra;
      ka.layout = {c.pairing, c.rope, 0, c.rope};
      EXPECT_TRUE((reference ? ApplyRopeReference(ka, k_pe, pe) : ApplyRope(ka, k_pe, pe)).ok());
      if (c.q_heads > 0) {
        EXPECT_TRUE((reference ? ApplyRopeReference(ra, qv, q_out) : ApplyRope(ra, qv, q_out)).ok());
      }
      const KvCacheView kc = cache.AsKvCache(v_unused.data());
      const HeadsView k_rows = HeadsView::Dense(rows.data(), c.dtype, c.tokens, 1, R);
      const HeadsView none{nullptr, c.dtype, 0, 1, R, R, R};
      const Status s = reference ? StoreKvCacheReference(kc, 1, slots, k_rows, none) : StoreKvCache(kc, 1, slots, k_rows, none);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    std::vector<uint8_t> all = c.in_place ? q : qo;
    all.insert(all.end(), mem.begin(), mem.end());
    return all;
  };
  testing::ExpectFusedEqualsUnfused(run, check_reference);
}

// An MLA case of the kernel list with the test's own variations by its index: with or without the
// latent's norm, and the norm's style. Paged slots where the case decodes.
MlaCase FromKernelCase(const cases::KernelCase& k, size_t i) {
  const RmsNormStyle styles[] = {RmsNormStyle::kCastThenScale, RmsNormStyle::kScaleThenCast,
                                 RmsNormStyle::kOnePlusWeight};
  return {k.tokens, k.heads, k.rotary_start, k.rotary_dim, k.kv_lora_rank, k.pairing, k.dtype, k.cache_type,
          k.decode, k.in_place, i % 4 != 3, styles[i % 3]};
}

// The MLA cases of the kernel list: DeepSeek-V3's row (16 heads, and DeepSeek-V3's prefill and decode
// rows at 37 tokens: past two of the kernel's 16-token chunks), a q-less write, 3 and 12 rope pairs; every dtype
// and cache type, 0, 1, 9 and 37 tokens.
TEST(MlaCache, EqualsUnfusedSequenceOnEveryTarget) {
  ASSERT_GT(cases::KernelCases(cases::KernelFamily::kMla).size(), 60u);
  testing::ForEachKernelCase(cases::KernelFamily::kMla, 37, [&](const cases::KernelCase& k, size_t i, bool first) {
    RunMla(FromKernelCase(k, i), first);
  });
}

// DeepSeek-V3's prefill row at 700 tokens on two threads, into bfloat16, Q8_0 and float8 caches.
TEST(MlaCache, DeepSeekV3PrefillWithThreads) {
  ThreadPool pool(2);
  for (const cases::KernelCase& k : cases::KernelCases(cases::KernelFamily::kMla))
    if (k.op == "mla_prefill" && k.cache_type == KvCacheType::kBF16)
      for (KvCacheType ct : {KvCacheType::kBF16, KvCacheType::kQ8_0, DType::kF8E4M3}) {
        MlaCase c = FromKernelCase(k.ScaledDown(700), 0);  // normed, kCastThenScale; 16 of the 128 heads
        c.cache_type = ct;
        c.q_heads = 16;
        c.paged = true;
        c.in_place = false;
        RunMla(c, false, &pool);
      }
}

TEST(MlaCache, BadInputIsOneLineErrorAndWritesNothing) {
  const int64_t T = 3, H = 2, nope = 8, rope = 8, lora = 24, D = nope + rope, R = lora + rope;
  std::vector<float> kv(static_cast<size_t>(T * R), 1.0f), q(static_cast<size_t>(T * H * D), 2.0f),
      mem(static_cast<size_t>(4 * R), 9.0f), w(lora, 1.0f), w_short(lora - 1, 1.0f);
  auto table = RopeTable::Build(DefaultRopeFrequencies(rope, 10000.0).value(), 16, RopePrecision::kReference).value();
  std::vector<int64_t> pos{0, 1, 2}, slots{0, 1, 2}, dup{0, 2, 2};
  const HeadsView kv_c{kv.data(), DType::kF32, T, 1, lora, R, lora};
  const HeadsView k_pe{kv.data() + lora, DType::kF32, T, 1, rope, R, rope};
  const HeadsView qv = HeadsView::Dense(q.data(), DType::kF32, T, H, D);
  const MlaCacheView cache{mem.data(), KvCacheType::kF32, 1, 4, lora, rope};
  const RopeArgs ra{{RopePairing::kInterleaved, D, nope, rope}, &table, pos};
  struct Bad {
    MlaRopeArgs args;
    MlaCacheView cache;
    HeadsView kv_c;
    const char* text;
  };
  const MlaCacheView q8{mem.data(), KvCacheType::kQ8_0, 1, 4, lora + 1, rope};
  const float zero_scale[1] = {0.0f}, one_scale[1] = {1.0f}, two_scales[2] = {1.0f, 1.0f};
  std::vector<uint8_t> mem8(static_cast<size_t>(4 * R), 9);
  MlaCacheView f8_zero{mem8.data(), DType::kF8E4M3, 1, 4, lora, rope}, f8_two = f8_zero, f32_scaled = cache;
  f8_zero.scale = zero_scale;
  f8_two.scale = two_scales;
  f32_scaled.scale = one_scale;
  const RopeArgs wide{{RopePairing::kInterleaved, D + 8, nope, rope + 8}, &table, pos};
  const Bad bad[] = {
      {{ra, slots, 0, {w_short, 1e-6f}}, cache, kv_c, "rms norm of kv_c: weight has 23 values"},
      {{ra, slots, 0, {w, -1.0f}}, cache, kv_c, "eps = -1 must be finite and > 0"},
      {{ra, slots, 0, {w, std::numeric_limits<float>::quiet_NaN()}}, cache, kv_c, "eps = nan"},
      {{ra, dup, 0, {w, 1e-6f}}, cache, kv_c, "tokens 1 and 2 both write slot 2"},
      {{ra, slots, 1, {w, 1e-6f}}, cache, kv_c, "layer 1 outside [0, 1)"},
      {{wide, slots, 0, {}}, cache, kv_c, "layout rotary_dim 16 differs from the cache's rope_dim 8"},
      {{ra, slots, 0, {}}, q8, kv_c, "q8_0 needs kv_lora_rank + rope_dim a multiple of 32, got 33"},
      {{ra, slots, 0, {}}, f8_zero, kv_c, "scale[0] = 0 is not a finite scale > 0"},
      {{ra, slots, 0, {}}, f8_two, kv_c, "scale has 2 values, not 1"},
      {{ra, slots, 0, {}}, f32_scaled, kv_c, "scale given for a float32 cache"},
      {{ra, slots, 0, {}}, MlaCacheView{kv.data(), KvCacheType::kF32, 1, 3, lora, rope}, kv_c,
       "overlaps an input"},
      {{ra, slots, 0, {}}, MlaCacheView{mem.data(), KvCacheType::kF32, int64_t{1} << 40, int64_t{1} << 40, lora, rope},
       kv_c, "is too large"},
      {{ra, slots, 0, {}}, cache, HeadsView{kv.data(), DType::kF32, T, 1, lora - 1, R, lora - 1},
       "kv_c is [3, 1, 23], the cache needs [T, 1, 24]"},
  };
  for (const Bad& b : bad) {
    for (bool reference : {false, true}) {
      const Status s = reference ? ApplyMlaRopeCacheReference(b.args, b.kv_c, k_pe, qv, qv, b.cache)
                                 : ApplyMlaRopeCache(b.args, b.kv_c, k_pe, qv, qv, b.cache);
      EXPECT_FALSE(s.ok()) << b.text;
      EXPECT_NE(s.message().find(b.text), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    }
  }
  // An out-of-place query output over the latent rows.
  const HeadsView q_over_kv = HeadsView::Dense(kv.data(), DType::kF32, T, 1, D);
  const HeadsView q1 = HeadsView::Dense(q.data(), DType::kF32, T, 1, D);
  for (bool reference : {false, true}) {
    const MlaRopeArgs a{ra, slots, 0, {}};
    const Status s = reference ? ApplyMlaRopeCacheReference(a, kv_c, k_pe, q1, q_over_kv, cache)
                               : ApplyMlaRopeCache(a, kv_c, k_pe, q1, q_over_kv, cache);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("the query output overlaps kv_c or k_pe"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
  for (float v : mem) ASSERT_EQ(v, 9.0f);
  for (uint8_t v : mem8) ASSERT_EQ(v, 9);
  for (float v : q) ASSERT_EQ(v, 2.0f);
  for (float v : kv) ASSERT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace posenc
