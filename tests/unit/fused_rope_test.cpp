// RoPE fused with the QKV split and the KV-cache write (kernels/fused_rope.hpp), and the cache write
// itself (kernels/kv_cache.hpp):
//  * the fused fast path equals the unfused sequence of posenc's own calls (ApplyRope out of place for
//    q and for k, ApplyQueryTemperature, StoreKvCache) bit for bit, on every SIMD target this CPU runs;
//  * the fused reference equals the same sequence with ApplyRopeReference and StoreKvCacheReference;
//  * StoreKvCache equals StoreKvCacheReference on every target; Q8_0 equals ggml's definition on its
//    edge values (a zero block, ties x * id = n.5, amax in the last lane);
//  * slot collisions, slots outside the cache and other bad input are refused naming the token and
//    the slot, and nothing is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/parallel.hpp"
#include "posenc/io/quant.hpp"
#include "posenc/kernels/attn_temperature.hpp"
#include "posenc/kernels/fused_rope.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/kernels/simd.hpp"
#include "posenc/math/multi_axis.hpp"
#include "kernel_fixture.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

using Buf = testing::AlignedBuf;

bool SameBytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

struct Case {
  int64_t tokens, q_heads, kv_heads, head_dim, rotary_start, rotary_dim;
  RopePairing pairing;
  DType dtype;
  KvCacheType cache_type;
  int64_t page_size;
  size_t misalign_elems;
  bool q_scale;
  bool in_place;
  bool backward = false;
  std::string Name() const {
    return fmt::format("T{} Hq{} Hkv{} D{} window[{}, +{}) {} {} cache {} page {} misalign {}{}{}", tokens, q_heads,
                       kv_heads, head_dim, rotary_start, rotary_dim, ToString(pairing), ToString(dtype),
                       ToString(cache_type), page_size, misalign_elems, q_scale ? " q_scale" : "",
                       in_place ? " in-place" : "") +
           (backward ? " backward" : "");
  }
};

// Scattered slots of a paged cache: each sequence's pages picked at random from the pool; tokens
// belong to 3 sequences, packed, with positions continuing per sequence.
struct PagedSetup {
  std::vector<int32_t> table;
  std::vector<int64_t> seq, pos, slots;
  int64_t num_pages = 0;
};

PagedSetup MakePaged(int64_t tokens, int64_t page_size, std::mt19937_64& rng) {
  PagedSetup p;
  const int64_t seqs = 3, max_pages = (tokens + 300 + page_size - 1) / page_size + 1;
  p.num_pages = seqs * max_pages + 5;
  std::vector<int32_t> pool(static_cast<size_t>(p.num_pages));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  p.table.assign(pool.begin(), pool.begin() + seqs * max_pages);
  int64_t next[3] = {5, 250, 0};  // sequences already hold some tokens (decode continues them)
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t s = t % seqs;
    p.seq.push_back(s);
    p.pos.push_back(next[s]++);
  }
  PagedKvTable pt{page_size, p.num_pages, max_pages, p.table};
  p.slots = PagedKvSlots(pt, p.seq, p.pos).value();
  return p;
}

class FusedRope : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(ForceSimdTarget("best").ok()); }
};

// Runs one case on the current target: fused fast vs the unfused fast sequence, and (when
// `check_reference`) the fused reference vs the unfused reference sequence.
void RunCase(const Case& c, bool check_reference, ParallelRunner* runner) {
  SCOPED_TRACE(c.Name());
  std::mt19937_64 rng(c.tokens * 131 + c.head_dim * 7 + c.q_heads);
  const RotaryLayout L{c.pairing, c.head_dim, c.rotary_start, c.rotary_dim};
  auto freqs = DefaultRopeFrequencies(c.rotary_dim, 10000.0).value();
  auto table = RopeTable::Build(freqs, 1024, RopePrecision::kReference).value();  // positions past 1024: on the fly
  PagedSetup paged = MakePaged(c.tokens, c.page_size, rng);
  const int64_t slots = paged.num_pages * c.page_size;
  // RoPE positions: the cache positions (some past the table).
  std::vector<int64_t> positions = paged.pos;
  for (auto& p : positions) p = p * 7 % 2000;
  const int64_t W = (c.q_heads + 2 * c.kv_heads) * c.head_dim;
  const size_t es = SizeOf(c.dtype);
  const size_t mis = c.misalign_elems * es;
  Buf in(static_cast<size_t>(c.tokens * W) * es, mis, 0);
  testing::FillNormal(c.dtype, in.data(), static_cast<size_t>(c.tokens * W), rng);
  std::vector<float> scales;
  if (c.q_scale) {
    AttnTemperature temp{true, 4.0, 0.1};
    scales = AttnTemperatureScales(temp, positions).value();
  }

  const KvCacheView shape{nullptr, nullptr, c.cache_type, 2, slots, c.kv_heads, c.head_dim};
  const size_t cache_bytes = static_cast<size_t>(shape.bytes());
  const size_t q_bytes = static_cast<size_t>(c.tokens * c.q_heads * c.head_dim) * es;
  auto run = [&](bool fused, bool reference, std::vector<uint8_t>* q_res, std::vector<uint8_t>* k_res,
                 std::vector<uint8_t>* v_res) {
    Buf input = in;  // fresh copy of the input (in-place cases write it)
    QkvViews x = SplitFusedQkv(input.data(), c.dtype, c.tokens, c.q_heads, c.kv_heads, c.head_dim).value();
    // Caches off the vector alignment, at their element's (float32 4 bytes, the others 2).
    const size_t ca = c.cache_type == KvCacheType::kF32 ? 4 : 2;
    Buf qo(q_bytes, mis, 0xCD), kc(cache_bytes, 3 * ca, 0xAB), vc(cache_bytes, 5 * ca, 0xAB);
    HeadsView q_out = c.in_place ? x.q : HeadsView::Dense(qo.data(), c.dtype, c.tokens, c.q_heads, c.head_dim);
    KvCacheView cache = shape;
    cache.k = kc.data();
    cache.v = vc.data();
    RopeArgs ra{L, &table, positions};
    ra.parallel = runner;
    if (c.backward) ra.direction = RopeDirection::kBackward;
    if (fused) {
      FusedRopeArgs fa{ra, paged.slots, /*layer=*/1, scales};
      const Status s =
          reference ? ApplyRopeKvCacheReference(fa, x, q_out, cache) : ApplyRopeKvCache(fa, x, q_out, cache);
      ASSERT_TRUE(s.ok()) << s.ToString();
    } else {
      // The unfused sequence: q out of place, k out of place into a scratch tensor, q scaled, cache write.
      std::vector<uint8_t> k_tmp(static_cast<size_t>(c.tokens * c.kv_heads * c.head_dim) * es + 16);
      HeadsView kt = HeadsView::Dense(k_tmp.data(), c.dtype, c.tokens, c.kv_heads, c.head_dim);
      if (reference) {
        ASSERT_TRUE(ApplyRopeReference(ra, x.q, q_out).ok());
        ASSERT_TRUE(ApplyRopeReference(ra, x.k, kt).ok());
      } else {
        ASSERT_TRUE(ApplyRope(ra, x.q, q_out).ok());
        ASSERT_TRUE(ApplyRope(ra, x.k, kt).ok());
      }
      if (c.q_scale) { ASSERT_TRUE(ApplyQueryTemperature(q_out, scales).ok()); }
      const Status s = reference ? StoreKvCacheReference(cache, 1, paged.slots, kt, x.v)
                                 : StoreKvCache(cache, 1, paged.slots, kt, x.v, runner);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    const uint8_t* qp = static_cast<const uint8_t*>(c.in_place ? x.q.data : qo.data());
    if (c.in_place) {
      q_res->assign(static_cast<const uint8_t*>(input.data()),
                    static_cast<const uint8_t*>(input.data()) + static_cast<size_t>(c.tokens * W) * es);
    } else {
      q_res->assign(qp, qp + q_bytes);
    }
    // The whole cache memory plus 64 bytes past it (nothing outside the slots may change).
    const auto* kb = static_cast<const uint8_t*>(kc.data());
    const auto* vb = static_cast<const uint8_t*>(vc.data());
    k_res->assign(kb, kb + cache_bytes + 64);
    v_res->assign(vb, vb + cache_bytes + 64);
  };
  for (bool reference : {false, true}) {
    if (reference && !check_reference) continue;
    SCOPED_TRACE(reference ? "reference" : "fast path");
    std::vector<uint8_t> q1, k1, v1, q2, k2, v2;
    run(true, reference, &q1, &k1, &v1);
    run(false, reference, &q2, &k2, &v2);
    EXPECT_TRUE(q1 == q2) << "queries differ";
    EXPECT_TRUE(k1 == k2) << "key cache differs";
    EXPECT_TRUE(v1 == v2) << "value cache differs";
  }
}

// A case of the kernel list with the test's own variations, by its index in the family: paged slots of
// 16 or 256 rows, 0..2 elements of misalignment, a query temperature, the backward rotation.
Case FromKernelCase(const cases::KernelCase& k, size_t i) {
  Case c{k.tokens, k.heads,      k.kv_heads,         k.head_dim, k.rotary_start, k.rotary_dim, k.pairing,
         k.dtype,  k.cache_type, (i % 2) ? 16 : 256, i % 3,      i % 4 == 1,     k.in_place};
  c.backward = i % 6 == 5;
  return c;
}

// The fused RoPE + KV cases of the kernel list (the odd sizes, 0 and 1 token, and Llama-3-8B's prefill and
// decode at 17 tokens, float8 caches included), on every target.
TEST_F(FusedRope, EqualsUnfusedSequenceOnEveryTarget) {
  for (auto family : {cases::KernelFamily::kFusedRopeKv, cases::KernelFamily::kFloat8Kv})
    testing::ForEachKernelCase(family, 17, [&](const cases::KernelCase& k, size_t i, bool first) {
      if (family == cases::KernelFamily::kFloat8Kv && k.model.empty()) return;  // kv_float8_test's
      RunCase(FromKernelCase(k, i), /*check_reference=*/first, &SerialRunner());
    });
}

// Llama-3-8B's 4096-token prefill rows of the list, on two threads.
TEST_F(FusedRope, LongPrefillAndThreads) {
  ThreadPool pool(2);
  for (const cases::KernelCase& k : cases::KernelCases(cases::KernelFamily::kFusedRopeKv))
    if (k.op == "fused_prefill" && k.dtype != DType::kF16 &&
        (k.cache_type == KvCacheType::kF16 || k.cache_type == KvCacheType::kQ8_0)) {
      Case c = FromKernelCase(k, 1);  // misaligned by one element, with a query temperature
      c.page_size = 256;
      RunCase(c, /*check_reference=*/false, &pool);
    }
}

TEST_F(FusedRope, ThreadCountDoesNotChangeBytes) {
  const int64_t T = 64, Hq = 32, Hkv = 8, D = 128, W = (Hq + 2 * Hkv) * D;
  std::mt19937_64 rng(5);
  std::vector<float> in(static_cast<size_t>(T * W));
  testing::FillNormal(DType::kF32, in.data(), in.size(), rng);
  auto table = RopeTable::Build(DefaultRopeFrequencies(D, 500000.0).value(), 4096, RopePrecision::kReference).value();
  std::vector<int64_t> pos(T), slots(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = 3 * t, slots[t] = (t * 37) % 200;
  ThreadPool pool(2);
  std::vector<std::vector<uint8_t>> results;
  for (ParallelRunner* r : {&SerialRunner(), static_cast<ParallelRunner*>(&pool)}) {
    auto x = SplitFusedQkv(in.data(), DType::kF32, T, Hq, Hkv, D).value();
    std::vector<float> q(static_cast<size_t>(T * Hq * D));
    KvCacheView cache{nullptr, nullptr, KvCacheType::kQ8_0, 1, 200, Hkv, D};
    std::vector<uint8_t> kv(static_cast<size_t>(2 * cache.bytes()));
    cache.k = kv.data();
    cache.v = kv.data() + cache.bytes();
    RopeArgs ra{{RopePairing::kHalf, D, 0, D}, &table, pos};
    ra.parallel = r;
    ASSERT_TRUE(ApplyRopeKvCache({ra, slots, 0, {}}, x, HeadsView::Dense(q.data(), DType::kF32, T, Hq, D), cache).ok());
    kv.insert(kv.end(), reinterpret_cast<uint8_t*>(q.data()), reinterpret_cast<uint8_t*>(q.data() + q.size()));
    results.push_back(kv);
  }
  EXPECT_TRUE(results[0] == results[1]);
}

// Separate q / k / v tensors (not one fused row), with head-strided keys.
TEST_F(FusedRope, SeparateViews) {
  const int64_t T = 9, Hq = 4, Hkv = 2, D = 64;
  std::mt19937_64 rng(9);
  std::vector<f16_t> q(static_cast<size_t>(T * Hq * D)), k(static_cast<size_t>(T * Hkv * D * 2)),
      v(static_cast<size_t>(T * Hkv * D));
  testing::FillNormal(DType::kF16, q.data(), q.size(), rng);
  testing::FillNormal(DType::kF16, k.data(), k.size(), rng);
  testing::FillNormal(DType::kF16, v.data(), v.size(), rng);
  auto table = RopeTable::Build(DefaultRopeFrequencies(D, 10000.0).value(), 64, RopePrecision::kReference).value();
  std::vector<int64_t> pos{0, 1, 2, 3, 70, 71, 5, 6, 7}, slots{8, 9, 10, 11, 0, 1, 2, 3, 4};
  QkvViews x{HeadsView::Dense(q.data(), DType::kF16, T, Hq, D),
             {k.data(), DType::kF16, T, Hkv, D, 2 * Hkv * D, 2 * D},
             HeadsView::Dense(v.data(), DType::kF16, T, Hkv, D)};
  testing::ForEachSimdTarget([&](const std::string& target) {
    std::vector<f16_t> q1(q.size()), q2(q.size()), kt(static_cast<size_t>(T * Hkv * D));
    KvCacheView c1{nullptr, nullptr, KvCacheType::kBF16, 1, 12, Hkv, D}, c2 = c1;
    std::vector<uint8_t> m1(static_cast<size_t>(2 * c1.bytes())), m2 = m1;
    c1.k = m1.data(), c1.v = m1.data() + c1.bytes(), c2.k = m2.data(), c2.v = m2.data() + c2.bytes();
    RopeArgs ra{{RopePairing::kInterleaved, D, 0, D}, &table, pos};
    ASSERT_TRUE(ApplyRopeKvCache({ra, slots, 0, {}}, x, HeadsView::Dense(q1.data(), DType::kF16, T, Hq, D), c1).ok());
    ASSERT_TRUE(ApplyRope(ra, x.q, HeadsView::Dense(q2.data(), DType::kF16, T, Hq, D)).ok());
    HeadsView ktv = HeadsView::Dense(kt.data(), DType::kF16, T, Hkv, D);
    ASSERT_TRUE(ApplyRope(ra, x.k, ktv).ok());
    ASSERT_TRUE(StoreKvCache(c2, 0, slots, ktv, x.v).ok());
    EXPECT_TRUE(SameBytes(q1.data(), q2.data(), q1.size() * 2)) << target;
    EXPECT_TRUE(m1 == m2) << target;
  });
}

// Multi-axis positions in the fused pass: the per-token table an engine builds once per forward
// (RopeTable::BuildPerToken, Qwen2.5-VL's chunked and Qwen3-VL's interleaved sections over (t, h, w)
// positions of an image between text) at row indices 0..T-1 gives the same q and cache bytes as
// ApplyMultiAxisRope on q and k followed by StoreKvCache, on every target, dtype and cache type.
TEST_F(FusedRope, MultiAxisPositionsEqualTheUnfusedMultiAxisSequence) {
  const int64_t T = 23, Hq = 3, Hkv = 1, D = 96,
                pairs = D / 2;  // 48 pairs: not a multiple of 32; Q8_0 rows of 3 blocks
  for (SectionLayout sl : {SectionLayout::kChunked, SectionLayout::kInterleaved}) {
    MultiAxisRope m;
    m.layout = sl;
    m.sections = sl == SectionLayout::kChunked ? std::vector<int64_t>{8, 20, 20} : std::vector<int64_t>{18, 15, 15};
    const std::vector<int64_t> comp = PairComponents(m, pairs, "test").value();
    const RopeFrequencies freqs = DefaultRopeFrequencies(D, 1e6).value();
    // 5 text tokens, a 3 x 4 grid at t = 5, then 6 text tokens from 9.
    std::vector<int64_t> pos(static_cast<size_t>(3 * T));
    for (int64_t t = 0; t < T; ++t) {
      int64_t p[3];
      if (t < 5) {
        p[0] = p[1] = p[2] = t;
      } else if (t < 17) {
        p[0] = 5, p[1] = 5 + (t - 5) / 4, p[2] = 5 + (t - 5) % 4;
      } else {
        p[0] = p[1] = p[2] = 9 + (t - 17);
      }
      for (int c = 0; c < 3; ++c) pos[static_cast<size_t>(c * T + t)] = p[c];
    }
    const RopeTable table = RopeTable::BuildPerToken(freqs, comp, 3, pos, RopePrecision::kReference).value();
    std::vector<int64_t> rows(static_cast<size_t>(T)), slots(static_cast<size_t>(T));
    std::iota(rows.begin(), rows.end(), 0);
    for (int64_t t = 0; t < T; ++t) slots[static_cast<size_t>(t)] = (t * 7) % 29;
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      const size_t es = SizeOf(dt), W = static_cast<size_t>((Hq + 2 * Hkv) * D);
      std::mt19937_64 rng(21);
      std::vector<uint8_t> proj(static_cast<size_t>(T) * W * es);
      testing::FillNormal(dt, proj.data(), static_cast<size_t>(T) * W, rng);
      const QkvViews x = SplitFusedQkv(proj.data(), dt, T, Hq, Hkv, D).value();
      for (KvCacheType ct : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kBF16, KvCacheType::kQ8_0}) {
        testing::ForEachSimdTarget([&](const std::string& target) {
          SCOPED_TRACE(fmt::format("{} {} {} {}", ToString(sl), ToString(dt), ToString(ct), target));
          std::vector<uint8_t> q1(static_cast<size_t>(T * Hq * D) * es), q2 = q1;
          std::vector<uint8_t> kt(static_cast<size_t>(T * Hkv * D) * es);
          KvCacheView c1{nullptr, nullptr, ct, 1, 29, Hkv, D}, c2 = c1;
          std::vector<uint8_t> m1(static_cast<size_t>(2 * c1.bytes())), m2 = m1;
          c1.k = m1.data(), c1.v = m1.data() + c1.bytes(), c2.k = m2.data(), c2.v = m2.data() + c2.bytes();
          const RotaryLayout layout{RopePairing::kHalf, D, 0, D};
          const RopeArgs ra{layout, &table, rows};
          ASSERT_TRUE(ApplyRopeKvCache({ra, slots, 0, {}}, x, HeadsView::Dense(q1.data(), dt, T, Hq, D), c1).ok());
          const MultiAxisRopeArgs ma{layout, &freqs, comp, 3, pos};
          const HeadsView ktv = HeadsView::Dense(kt.data(), dt, T, Hkv, D);
          ASSERT_TRUE(ApplyMultiAxisRope(ma, x.q, HeadsView::Dense(q2.data(), dt, T, Hq, D)).ok());
          ASSERT_TRUE(ApplyMultiAxisRope(ma, x.k, ktv).ok());
          ASSERT_TRUE(StoreKvCache(c2, 0, slots, ktv, x.v).ok());
          EXPECT_TRUE(q1 == q2);
          EXPECT_TRUE(m1 == m2);
        });
      }
    }
  }
}

// ---- Q8_0 ----

TEST(Q8_0, EdgeValuesAsGgmlDefinesThem) {
  // Block 0: all zeros -> d = 0, id = 0, every q 0.
  // Block 1: amax 127 in the last lane -> d = 1, id = 1; ties 2.5 -> 3, -2.5 -> -3, 0.5 -> 1, -0.5 -> -1.
  // Block 2: amax 12.7 in the last lane, negative -> d = 0.1f, values x * id near n.5 from float32.
  std::vector<float> x(96, 0.0f);
  for (int j = 0; j < 31; ++j) x[32 + j] = (j % 2 ? -1.0f : 1.0f) * (0.5f + static_cast<float>(j));
  x[63] = 127.0f;
  for (int j = 0; j < 31; ++j) x[64 + j] = 0.05f * static_cast<float>(j) - 0.8f;
  x[95] = -12.7f;
  std::vector<BlockQ8_0> ref(3);
  QuantizeRowQ8_0Reference(x.data(), 96, ref.data());
  EXPECT_EQ(ref[0].d.bits, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(ref[0].qs[j], 0);
  EXPECT_EQ(F16ToF32(ref[1].d), 1.0f);
  EXPECT_EQ(ref[1].qs[0], 1);   // 0.5 -> 1 (away from zero)
  EXPECT_EQ(ref[1].qs[1], -2);  // -1.5 -> -2
  EXPECT_EQ(ref[1].qs[2], 3);   // 2.5 -> 3 (not 2, as nearest-even would give)
  EXPECT_EQ(ref[1].qs[3], -4);  // -3.5 -> -4
  EXPECT_EQ(ref[1].qs[31], 127);
  EXPECT_EQ(ref[2].qs[31], -127);
  // The definition, independently: d from float32 amax / 127, id = 1 / d, roundf.
  const float d2 = 12.7f / 127.0f, id2 = 1.0f / d2;
  for (int j = 0; j < 32; ++j) EXPECT_EQ(ref[2].qs[j], static_cast<int8_t>(std::roundf(x[64 + j] * id2))) << j;
  EXPECT_EQ(ref[2].d.bits, F32ToF16(d2).bits);
  // The blocks decode with posenc's ggml reader (io/quant) to within d/2 of the input.
  std::vector<float> back(96);
  DequantizeRowUnchecked(DType::kQ8_0, reinterpret_cast<const std::byte*>(ref.data()), 96, back.data());
  for (int i = 0; i < 96; ++i) EXPECT_NEAR(back[i], x[i], 0.5 * F16ToF32(ref[i / 32].d) + 1e-3) << i;

  // Values next to the rounding boundaries (id = 1 exactly: amax 127 in the last lane): n + 0.5 and the
  // floats either side of it, 0.5 and the float below, negatives.
  std::vector<float> edge(32, 0.0f);
  const float near[] = {0.5f,
                        0.49999997f,
                        2.5f,
                        std::nextafter(2.5f, 0.0f),
                        std::nextafter(2.5f, 9.0f),
                        126.5f,
                        std::nextafter(126.5f, 0.0f),
                        1.5f,
                        3.49999976f,
                        0.0f};
  for (int j = 0; j < 10; ++j) edge[static_cast<size_t>(j)] = near[j], edge[static_cast<size_t>(j + 10)] = -near[j];
  edge[31] = 127.0f;
  x.insert(x.end(), edge.begin(), edge.end());
  ref.resize(4);
  QuantizeRowQ8_0Reference(x.data(), 128, ref.data());
  EXPECT_EQ(ref[3].qs[0], 1);
  EXPECT_EQ(ref[3].qs[1], 0);
  EXPECT_EQ(ref[3].qs[3], 2);
  EXPECT_EQ(ref[3].qs[4], 3);
  EXPECT_EQ(ref[3].qs[15], -127);  // -126.5 -> -127
  // Every target quantizes the same bytes (through StoreKvCache: one token, one head of 128).
  testing::ForEachSimdTarget([&](const std::string& target) {
    std::vector<BlockQ8_0> k(4), v(4);
    KvCacheView cache{k.data(), v.data(), KvCacheType::kQ8_0, 1, 1, 1, 128};
    std::vector<int64_t> slot{0};
    HeadsView xv = HeadsView::Dense(x.data(), DType::kF32, 1, 1, 128);
    ASSERT_TRUE(StoreKvCache(cache, 0, slot, xv, xv).ok());
    EXPECT_TRUE(SameBytes(k.data(), ref.data(), 4 * 34)) << target;
    EXPECT_TRUE(SameBytes(v.data(), ref.data(), 4 * 34)) << target;
  });
  EXPECT_TRUE(ForceSimdTarget("best").ok());
}

// Every row length from 1 to 40 blocks (groups of 4, 8 or 16 blocks in the vector forms, odd tails,
// several passes), blocks of mixed scales with zero blocks among them, from every activation dtype, on
// every target: the bytes of the scalar definition.
TEST(Q8_0, EveryRowLengthEqualsTheDefinitionOnEveryTarget) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto targets = AvailableSimdTargets();
  int checked = 0;
  for (int64_t blocks = 1; blocks <= 40; ++blocks) {
    const int64_t n = blocks * 32;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t b = 0; b < blocks; ++b) {
      const float scale = b % 7 == 3 ? 0.0f : std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
      for (int64_t j = 0; j < 32; ++j) x[static_cast<size_t>(b * 32 + j)] = scale * nd(rng);
      if (b % 5 == 1) x[static_cast<size_t>(b * 32 + 31)] = -scale * 9.0f;  // amax in the last lane
    }
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      std::vector<float> rounded = x;  // the values the reference sees: x in the activation dtype
      for (size_t i = 0; i < x.size(); ++i) {
        if (dt == DType::kF16) h[i] = F32ToF16(x[i]).bits, rounded[i] = F16ToF32(f16_t{h[i]});
        if (dt == DType::kBF16) h[i] = F32ToBF16(x[i]).bits, rounded[i] = BF16ToF32(bf16_t{h[i]});
      }
      std::vector<BlockQ8_0> ref(static_cast<size_t>(blocks));
      QuantizeRowQ8_0Reference(rounded.data(), n, ref.data());
      void* src = dt == DType::kF32 ? static_cast<void*>(x.data()) : static_cast<void*>(h.data());
      testing::ForEachSimdTarget([&](const std::string& target) {
        ASSERT_EQ(ChosenSimdTarget(), target);
        std::vector<BlockQ8_0> k(static_cast<size_t>(blocks)), v(static_cast<size_t>(blocks));
        KvCacheView cache{k.data(), v.data(), KvCacheType::kQ8_0, 1, 1, 1, n};
        std::vector<int64_t> slot{0};
        HeadsView xv = HeadsView::Dense(src, dt, 1, 1, n);
        ASSERT_TRUE(StoreKvCache(cache, 0, slot, xv, xv).ok());
        EXPECT_TRUE(SameBytes(k.data(), ref.data(), static_cast<size_t>(blocks) * 34))
            << target << " " << ToString(dt) << " " << blocks << " blocks";
        EXPECT_TRUE(SameBytes(v.data(), ref.data(), static_cast<size_t>(blocks) * 34))
            << target << " " << ToString(dt) << " " << blocks << " blocks";
        ++checked;
      });
    }
  }
  EXPECT_EQ(checked, 40 * 3 * static_cast<int>(targets.size()));
  EXPECT_TRUE(ForceSimdTarget("best").ok());
}

// ---- StoreKvCache ----

TEST(StoreKvCache, EqualsReferenceOnEveryTarget) {
  const int64_t T = 13, H = 4, D = 80;
  std::mt19937_64 rng(3);
  std::vector<int64_t> slots{5, 0, 7, 9, 1, 2, 3, 4, 6, 8, 10, 11, 12};
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (KvCacheType ct : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kBF16, KvCacheType::kQ8_0}) {
        SCOPED_TRACE(fmt::format("{} {} -> {}", target, ToString(dt), ToString(ct)));
        Buf k(static_cast<size_t>(T * H * D) * 4, 4, 0), v(static_cast<size_t>(T * H * D) * 4, SizeOf(dt), 0);
        testing::FillNormal(dt, k.data(), static_cast<size_t>(T * H * D), rng);
        testing::FillNormal(dt, v.data(), static_cast<size_t>(T * H * D), rng);
        // Special values for the conversions: f16 overflow, subnormals, infinities.
        if (dt == DType::kF32 && ct != KvCacheType::kQ8_0) {  // (non-finite q8_0 blocks are unspecified)
          auto* kp = static_cast<float*>(k.data());
          kp[0] = 70000.0f, kp[1] = 1e-6f, kp[2] = -INFINITY, kp[3] = 65519.0f, kp[4] = 3e-39f;
        }
        KvCacheView c1{nullptr, nullptr, ct, 1, 16, H, D}, c2 = c1;
        std::vector<uint8_t> m1(static_cast<size_t>(2 * c1.bytes()), 0x11), m2 = m1;
        c1.k = m1.data(), c1.v = m1.data() + c1.bytes(), c2.k = m2.data(), c2.v = m2.data() + c2.bytes();
        HeadsView kv = HeadsView::Dense(k.data(), dt, T, H, D), vv = HeadsView::Dense(v.data(), dt, T, H, D);
        ASSERT_TRUE(StoreKvCache(c1, 0, slots, kv, vv).ok());
        ASSERT_TRUE(StoreKvCacheReference(c2, 0, slots, kv, vv).ok());
        EXPECT_TRUE(m1 == m2);
      }
  });
  EXPECT_TRUE(ForceSimdTarget("best").ok());
}

// ---- errors ----

struct ErrorSetup {
  int64_t T = 6, Hq = 4, Hkv = 2, D = 64;
  std::vector<float> in, q;
  std::vector<uint8_t> mem;
  RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(64, 10000.0).value(), 64, RopePrecision::kReference).value();
  std::vector<int64_t> pos{0, 1, 2, 3, 4, 5};
  KvCacheView cache{nullptr, nullptr, KvCacheType::kF16, 2, 8, 2, 64};
  QkvViews x;
  ErrorSetup() : in(static_cast<size_t>(6 * 8 * 64), 1.0f), q(static_cast<size_t>(6 * 4 * 64), 7.0f) {
    mem.assign(static_cast<size_t>(2 * cache.bytes()), 0x5A);
    cache.k = mem.data();
    cache.v = mem.data() + cache.bytes();
    x = SplitFusedQkv(in.data(), DType::kF32, T, Hq, Hkv, D).value();
  }
  Status Run(std::vector<int64_t> slots, int64_t layer = 0, bool reference = false) {
    RopeArgs ra{{RopePairing::kHalf, D, 0, D}, &table, pos};
    FusedRopeArgs fa{ra, slots, layer, {}};
    HeadsView qo = HeadsView::Dense(q.data(), DType::kF32, T, Hq, D);
    return reference ? ApplyRopeKvCacheReference(fa, x, qo, cache) : ApplyRopeKvCache(fa, x, qo, cache);
  }
  bool Untouched() const {
    return std::all_of(mem.begin(), mem.end(), [](uint8_t b) { return b == 0x5A; }) &&
           std::all_of(q.begin(), q.end(), [](float f) { return f == 7.0f; });
  }
  // The fast kernel and the reference both refuse `slots` (with `code`, where given) in a message
  // holding `text`, and write nothing.
  void ExpectRefused(const std::vector<int64_t>& slots, std::optional<StatusCode> code, std::string_view text) {
    for (bool reference : {false, true}) {
      SCOPED_TRACE(reference ? "reference" : "fast");
      const Status s = Run(slots, 0, reference);
      if (code) { EXPECT_EQ(s.code(), *code); }
      EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
      EXPECT_TRUE(Untouched());
    }
  }
};

TEST(FusedRopeErrors, SlotCollisionNamesBothTokensAndTheSlot) {
  ErrorSetup().ExpectRefused({0, 1, 7, 3, 4, 7}, StatusCode::kInvalidArgument, "tokens 2 and 5 both write slot 7");
}

TEST(FusedRopeErrors, SlotOutsideTheCacheNamesTokenAndSlot) {
  ErrorSetup().ExpectRefused({0, 1, 2, 8, 4, 5}, StatusCode::kOutOfRange, "token 3 writes slot 8");
  ErrorSetup().ExpectRefused({0, 1, 2, 3, -1, 5}, std::nullopt, "token 4 writes slot -1");
}

TEST(FusedRopeErrors, OtherBadInput) {
  ErrorSetup e;
  Status s = e.Run({0, 1, 2, 3, 4, 5}, 2);
  EXPECT_NE(s.message().find("layer 2 outside [0, 2)"), std::string::npos) << s.message();
  s = e.Run({0, 1, 2});
  EXPECT_NE(s.message().find("3 slots for 6 tokens"), std::string::npos) << s.message();
  e.pos[2] = -4;
  s = e.Run({0, 1, 2, 3, 4, 5});
  EXPECT_NE(s.message().find("position -4 at index 2"), std::string::npos) << s.message();
  e.pos[2] = 2;
  e.cache.type = KvCacheType::kQ8_0;
  e.cache.head_dim = 72;
  s = e.cache.Validate();
  EXPECT_NE(s.message().find("multiple of 32"), std::string::npos) << s.message();
  EXPECT_TRUE(e.Untouched());
  // Sizes past int64 (each factor alone is fine).
  KvCacheView huge{e.mem.data(), e.mem.data() + 1, KvCacheType::kF32, int64_t{1} << 40, int64_t{1} << 40, 8, 128};
  s = huge.Validate();
  EXPECT_NE(s.message().find("is too large"), std::string::npos) << s.message();
  huge.layers = INT64_MAX, huge.slots = INT64_MAX, huge.kv_heads = INT64_MAX, huge.head_dim = INT64_MAX;
  s = huge.Validate();
  EXPECT_NE(s.message().find("is too large"), std::string::npos) << s.message();
  // q_scale of the wrong length or not finite.
  e.cache = ErrorSetup().cache;
  e.cache.k = e.mem.data(), e.cache.v = e.mem.data() + e.cache.bytes();
  std::vector<float> bad(6, 1.0f);
  bad[4] = NAN;
  RopeArgs ra{{RopePairing::kHalf, 64, 0, 64}, &e.table, e.pos};
  std::vector<int64_t> slots{0, 1, 2, 3, 4, 5};
  s = ApplyRopeKvCache({ra, slots, 0, bad}, e.x, HeadsView::Dense(e.q.data(), DType::kF32, 6, 4, 64), e.cache);
  EXPECT_NE(s.message().find("q_scale[4]"), std::string::npos) << s.message();
  EXPECT_TRUE(e.Untouched());
  // Memory off its element's alignment: a float16 cache at an odd address, float32 q at 2 bytes past a
  // float (undefined behaviour for the scalar paths), named before anything is written.
  KvCacheView odd = e.cache;
  odd.v = e.mem.data() + e.cache.bytes() + 1;
  s = ApplyRopeKvCache({ra, slots, 0, {}}, e.x, HeadsView::Dense(e.q.data(), DType::kF32, 6, 4, 64), odd);
  EXPECT_NE(s.message().find("v memory"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is not aligned to 2 bytes (float16 cache)"), std::string::npos) << s.message();
  HeadsView qo = HeadsView::Dense(reinterpret_cast<std::byte*>(e.q.data()) + 2, DType::kF32, 5, 4, 64);
  s = qo.Validate("q_out");
  EXPECT_NE(s.message().find("q_out: data"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is not aligned to its 4-byte float32 elements"), std::string::npos) << s.message();
  EXPECT_TRUE(e.Untouched());
}

// An output sharing memory with an input (beyond q rotated in place): the fast path writes a chunk of
// tokens at a time, the reference whole passes, so both refuse it in one line and write nothing.
TEST(FusedRopeErrors, OutputsSharingMemoryWithTheInputs) {
  ErrorSetup e;
  std::vector<float> qb(static_cast<size_t>(6 * 4 * 64), 1.0f), kvb(static_cast<size_t>(2 * 6 * 2 * 64), 1.0f);
  const QkvViews x{HeadsView::Dense(qb.data(), DType::kF32, 6, 4, 64),
                   HeadsView::Dense(kvb.data(), DType::kF32, 6, 2, 64),
                   HeadsView::Dense(kvb.data() + 6 * 2 * 64, DType::kF32, 6, 2, 64)};
  const HeadsView q_out = HeadsView::Dense(e.q.data(), DType::kF32, 6, 4, 64);
  KvCacheView cache_over_q = e.cache, cache_over_q_out = e.cache;
  cache_over_q.k = qb.data();
  cache_over_q_out.v = e.q.data();
  struct Bad {
    HeadsView q_out;
    KvCacheView cache;
    const char* text;
  };
  const Bad bad[] = {
      {HeadsView::Dense(kvb.data(), DType::kF32, 6, 4, 64), e.cache, "the query output overlaps k or v"},
      {HeadsView::Dense(kvb.data() + 6 * 2 * 64 + 64, DType::kF32, 1, 4, 64), e.cache,
       "the query output overlaps k or v"},
      {q_out, cache_over_q, "the cache memory overlaps an input or the query output"},
      {q_out, cache_over_q_out, "the cache memory overlaps an input or the query output"},
  };
  const RopeArgs ra{{RopePairing::kHalf, 64, 0, 64}, &e.table, e.pos};
  const std::vector<int64_t> slots{0, 1, 2, 3, 4, 5};
  for (const Bad& b : bad) {
    for (bool reference : {false, true}) {
      SCOPED_TRACE(std::string(b.text) + (reference ? " (reference)" : " (fast)"));
      QkvViews xb = x;
      if (b.q_out.tokens == 1) {  // a one-token call, so q_out's shape matches
        xb.q.tokens = xb.k.tokens = xb.v.tokens = 1;
      }
      const std::vector<int64_t> sl(slots.begin(), slots.begin() + xb.q.tokens);
      RopeArgs rb = ra;
      rb.positions = rb.positions.first(static_cast<size_t>(xb.q.tokens));
      const FusedRopeArgs fa{rb, sl, 0, {}};
      const Status s =
          reference ? ApplyRopeKvCacheReference(fa, xb, b.q_out, b.cache) : ApplyRopeKvCache(fa, xb, b.q_out, b.cache);
      EXPECT_FALSE(s.ok());
      EXPECT_NE(s.message().find(b.text), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
      EXPECT_TRUE(e.Untouched());
      EXPECT_TRUE(std::all_of(qb.begin(), qb.end(), [](float f) { return f == 1.0f; }));
      EXPECT_TRUE(std::all_of(kvb.begin(), kvb.end(), [](float f) { return f == 1.0f; }));
    }
  }
  // In place, and into separate memory: accepted.
  EXPECT_TRUE(ApplyRopeKvCache({ra, slots, 0, {}}, x, x.q, e.cache).ok());
  EXPECT_TRUE(ApplyRopeKvCache({ra, slots, 0, {}}, x, q_out, e.cache).ok());
}

// ---- slot helpers ----

TEST(KvSlots, ContiguousAndPaged) {
  std::vector<int64_t> seq{0, 1, 1}, off{3, 0, 9};
  EXPECT_EQ(ContiguousKvSlots(2, 10, seq, off).value(), (std::vector<int64_t>{3, 10, 19}));
  off[2] = 10;
  auto bad = ContiguousKvSlots(2, 10, seq, off);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("token 2 has offset 10"), std::string::npos);
  // Two sequences, pages of 16, two pages each.
  std::vector<int32_t> table{4, 1, 0, -1};
  PagedKvTable pt{16, 5, 2, table};
  std::vector<int64_t> ps{0, 0, 1}, pp{0, 17, 15};
  EXPECT_EQ(PagedKvSlots(pt, ps, pp).value(), (std::vector<int64_t>{64, 17, 15}));
  auto none = PagedKvSlots(pt, std::vector<int64_t>{1}, std::vector<int64_t>{16});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("token 0 (sequence 1, position 16) maps to page -1"), std::string::npos)
      << none.status().message();
  auto past = PagedKvSlots(pt, std::vector<int64_t>{0}, std::vector<int64_t>{32});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("token 0 has position 32"), std::string::npos) << past.status().message();
}

}  // namespace
}  // namespace posenc
