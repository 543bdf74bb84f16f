// Streaming stores (StreamStoreMinBytes, posenc/kernels/simd.hpp): calls that write enough bytes to
// stream them, into 64-byte aligned q rows and cache rows (where they stream: the fused RoPE + KV-cache
// call, out-of-place ApplyRope, StoreKvCache), give the bytes of posenc's unfused sequence (norm, RoPE,
// cache write) into rows 4 bytes off the lines (stored plainly), on every SIMD target, for every
// activation dtype, float, Q8_0 and float8 cache (float8 scales that are powers of two and ones that are
// not), both pairings, with and without QK-norm, and write nothing past the rows. The fused call into
// misaligned rows too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/parallel.hpp"
#include "posenc/kernels/fused_rope.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/kernels/simd.hpp"
#include "kernel_fixture.hpp"
#include "simd_targets.hpp"

namespace posenc {
namespace {

using Buf = testing::AlignedBuf;

struct StreamCase {
  DType dtype;
  KvCacheType cache_type;
  RopePairing pairing;
  int64_t head_dim;
  bool qk_norm;
};

// q_out, then the k and the v cache, each with 64 bytes past its end; `misalign` bytes off 64 of q_out and
// both caches.
std::vector<uint8_t> Rows(const StreamCase& c, int64_t T, bool fused, size_t misalign) {
  const int64_t Hq = 16, Hkv = 4, D = c.head_dim, W = (Hq + 2 * Hkv) * D;
  const size_t es = SizeOf(c.dtype);
  std::mt19937_64 rng(static_cast<uint64_t>(T * 31 + D));
  Buf in(static_cast<size_t>(T * W) * es, 0, 0);
  testing::FillNormal(c.dtype, in.data(), static_cast<size_t>(T * W), rng);
  auto table = RopeTable::Build(DefaultRopeFrequencies(D, 10000.0).value(), 4096, RopePrecision::kReference).value();
  const std::vector<int64_t> pos = testing::SpreadPositions(T, 7, 1, 5000);  // some past the table
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slots[static_cast<size_t>(t)] = T + 6 - t;  // backward, 7 rows left free
  std::vector<float> qw(static_cast<size_t>(D)), kw(static_cast<size_t>(D));
  for (size_t i = 0; i < qw.size(); ++i) qw[i] = 0.5f + 0.01f * static_cast<float>(i), kw[i] = 1.5f - qw[i] + 0.5f;
  HeadRmsNorm qn, kn;
  if (c.qk_norm) {
    qn = {qw, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead};
    kn = {kw, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead};
  }
  KvCacheView cache{nullptr, nullptr, c.cache_type, 1, T + 7, Hkv, D};
  // Float8: per-head key scales, two of them not powers of two (divided), and a per-tensor value scale.
  static const float kScales[] = {0.25f, 1.0f / 3.0f, 2.0f, 0.7f, 0.375f};
  if (c.cache_type == KvCacheType::kF8E4M3 || c.cache_type == KvCacheType::kF8E5M2) {
    cache.k_scale = std::span<const float>(kScales, static_cast<size_t>(Hkv));
    cache.v_scale = std::span<const float>(kScales + Hkv, 1);
  }
  const size_t cache_bytes = static_cast<size_t>(cache.bytes()), q_bytes = static_cast<size_t>(T * Hq * D) * es;
  Buf qo(q_bytes, misalign, 0xCD), kc(cache_bytes, misalign, 0xAB), vc(cache_bytes, misalign, 0xAB);
  cache.k = kc.data();
  cache.v = vc.data();
  const QkvViews x = SplitFusedQkv(in.data(), c.dtype, T, Hq, Hkv, D).value();
  const HeadsView q_out = HeadsView::Dense(qo.data(), c.dtype, T, Hq, D);
  RopeArgs ra{{c.pairing, D, 0, D}, &table, pos};
  ra.parallel = &SerialRunner();
  if (fused) {
    const Status s = ApplyRopeKvCache({ra, slots, 0, {}, qn, kn}, x, q_out, cache);
    EXPECT_TRUE(s.ok()) << s.ToString();
  } else {
    Buf k_tmp(static_cast<size_t>(T * Hkv * D) * es, 0, 0);
    const HeadsView kt = HeadsView::Dense(k_tmp.data(), c.dtype, T, Hkv, D);
    if (c.qk_norm) {
      EXPECT_TRUE(ApplyHeadRmsNorm(qn, x.q, q_out).ok());
      EXPECT_TRUE(ApplyRope(ra, q_out).ok());
      EXPECT_TRUE(ApplyHeadRmsNorm(kn, x.k, kt).ok());
      EXPECT_TRUE(ApplyRope(ra, kt).ok());
    } else {
      EXPECT_TRUE(ApplyRope(ra, x.q, q_out).ok());
      EXPECT_TRUE(ApplyRope(ra, x.k, kt).ok());
    }
    const Status s = StoreKvCache(cache, 0, slots, kt, x.v, &SerialRunner());
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<uint8_t> all;
  for (const Buf* b : {&qo, &kc, &vc}) {
    const auto* p = static_cast<const uint8_t*>(b->data());
    all.insert(all.end(), p, p + (b == &qo ? q_bytes : cache_bytes) + 64);
  }
  return all;
}

// Every target and case with streaming forced (ctest's stream_stores_test_forced, POSENC_STREAM_STORES=1:
// 1 and 9 tokens); by default (16 MiB) a call of that size on the best target, for three of the cases.
TEST(StreamStores, FusedCallThatStreamsEqualsThePlainSequence) {
  const size_t min_bytes = StreamStoreMinBytes();
  if (min_bytes == std::numeric_limits<size_t>::max()) GTEST_SKIP() << "POSENC_STREAM_STORES=0: nothing streams";
  const bool forced = min_bytes == 0;
  const auto cases = [&](const std::string&) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
      for (KvCacheType cache_type : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kBF16, KvCacheType::kQ8_0,
                                     KvCacheType::kF8E4M3, KvCacheType::kF8E5M2})
        for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved})
          for (int64_t D : {int64_t{128}, int64_t{64}, int64_t{256}})
            for (bool qk_norm : {false, true}) {
              // head_dim 64 on fewer cases, 256 only for Q8_0 (its rows of 4 heads are whole lines, 1088
              // bytes, and stream; at 128 they are 544 and do not); by default three cases (16 MiB each).
              if (D == 64 && (cache_type == KvCacheType::kQ8_0 || qk_norm || pairing == RopePairing::kHalf)) continue;
              if (D == 256 && cache_type != KvCacheType::kQ8_0) continue;
              if (!forced && (D != 128 || qk_norm == (dtype == DType::kF32) ||
                              static_cast<DType>(cache_type) != dtype || pairing != RopePairing::kHalf))
                continue;
              const StreamCase c{dtype, cache_type, pairing, D, qk_norm};
              // By default enough tokens that the call writes min_bytes (q rows and both cache rows).
              const int64_t per_token = 16 * D * static_cast<int64_t>(SizeOf(dtype)) +
                                        2 * KvCacheView{nullptr, nullptr, cache_type, 1, 1, 4, D}.slot_bytes();
              for (int64_t T : forced ? std::vector<int64_t>{1, 9}
                                      : std::vector<int64_t>{static_cast<int64_t>(min_bytes) / per_token + 3}) {
                SCOPED_TRACE(fmt::format("{} cache {} {} D{} T{}{}", ToString(dtype), ToString(cache_type),
                                         ToString(pairing), D, T, qk_norm ? " qk-norm" : ""));
                const std::vector<uint8_t> plain = Rows(c, T, /*fused=*/false, 4);
                EXPECT_TRUE(Rows(c, T, true, 0) == plain) << "the fused call's streamed rows differ";
                EXPECT_TRUE(Rows(c, T, false, 0) == plain) << "ApplyRope's, StoreKvCache's streamed rows differ";
                EXPECT_TRUE(Rows(c, T, true, 4) == plain) << "the fused call's misaligned rows differ";
              }
            }
  };
  if (forced) {
    testing::ForEachSimdTarget(cases);
  } else {
    cases("best");
  }
}

}  // namespace
}  // namespace posenc
