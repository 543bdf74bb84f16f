// Cost of the KV-cache row write per value (StoreKvCache: convert or quantize), one thread, rows in L1
// and L2 (64 tokens x 8 heads x 128, k and v): float32 / float16 / bfloat16 activations into a float16
// cache (the conversion), into Q8_0 (the block quantizer) and into float8 e4m3fn / e5m2 (per-tensor
// scale 0.37, a true division; and 0.5, whose exact reciprocal the writer multiplies by). Median and minimum of 200 timings of 20
// calls each. For A/B comparisons of the quantizer; `posenc bench`'s fused rows are the reported figures.
//   build/bench/kv_store_cost [TARGET]      (TARGET: a SIMD target from `posenc info`; default best)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/core/array.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/simd.hpp"
#include "probe_target.hpp"

using namespace posenc;

int main(int argc, char** argv) {
  if (!bench::CapSimdTargetFromArgs(argc, argv)) return 2;
  const int64_t T = 64, H = 8, D = 128, n = T * H * D;
  ThreadPool pool(1);
  std::printf("simd %s, [%lld, %lld, %lld] k and v, 1 thread\n", ChosenSimdTarget().c_str(), static_cast<long long>(T),
              static_cast<long long>(H), static_cast<long long>(D));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> kf(static_cast<size_t>(n)), vf(static_cast<size_t>(n));
  for (auto& x : kf) x = nd(rng);
  for (auto& x : vf) x = nd(rng);
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) slots[static_cast<size_t>(i)] = i;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    const size_t es = SizeOf(dt);
    std::vector<uint8_t> k(static_cast<size_t>(n) * es), v(k.size());
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      if (dt == DType::kF32) {
        std::memcpy(&k[i * 4], &kf[i], 4);
        std::memcpy(&v[i * 4], &vf[i], 4);
      } else {
        const uint16_t a = dt == DType::kF16 ? F32ToF16(kf[i]).bits : F32ToBF16(kf[i]).bits;
        const uint16_t b = dt == DType::kF16 ? F32ToF16(vf[i]).bits : F32ToBF16(vf[i]).bits;
        std::memcpy(&k[i * 2], &a, 2);
        std::memcpy(&v[i * 2], &b, 2);
      }
    }
    const HeadsView kv = HeadsView::Dense(k.data(), dt, T, H, D), vv = HeadsView::Dense(v.data(), dt, T, H, D);
    for (KvCacheType ct : {KvCacheType::kF16, KvCacheType::kQ8_0, KvCacheType::kF8E4M3, KvCacheType::kF8E5M2})
    for (float scale : {0.37f, 0.5f}) {
      const bool f8 = ct == KvCacheType::kF8E4M3 || ct == KvCacheType::kF8E5M2;
      if (!f8 && scale != 0.37f) continue;
      KvCacheView c{nullptr, nullptr, ct, 1, T, H, D};
      if (f8) c.k_scale = c.v_scale = {&scale, 1};
      std::vector<uint8_t> kc(static_cast<size_t>(c.bytes())), vc(kc.size());
      c.k = kc.data();
      c.v = vc.data();
      std::vector<double> ns;
      for (int rep = 0; rep < 200; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int it = 0; it < 20; ++it) (void)StoreKvCache(c, 0, slots, kv, vv, &pool);
        const auto t1 = std::chrono::steady_clock::now();
        ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 20.0 / (2.0 * static_cast<double>(n)));
      }
      std::sort(ns.begin(), ns.end());
      std::printf("%-8s -> %-14s %-11s %.3f ns/value (min %.3f)\n", std::string(ToString(dt)).c_str(),
                  std::string(ToString(ct)).c_str(), f8 ? (scale == 0.5f ? "scale 0.5" : "scale 0.37") : "",
                  ns[ns.size() / 2], ns.front());
    }
  }
  return 0;
}
