// Every float32 bit pattern through the float8 cache writers (StoreKvCache into e4m3fn and e5m2
// caches, scale 1) against the scalar conversion (F32ToF8E4M3 / F32ToF8E5M2), on one SIMD target.
// 2^32 values per format, about 20 s per target; the unit tests (float8_test.cpp) cover every upper
// half-word with five lower ones on every target, this covers the rest. Prints the first mismatches
// and exits 1 if there are any.
//   build/bench/float8_all_patterns [TARGET]      (TARGET: a SIMD target from `posenc info`; default best)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/simd.hpp"
#include "probe_target.hpp"

using namespace posenc;

int main(int argc, char** argv) {
  if (!bench::CapSimdTargetFromArgs(argc, argv)) return 2;
  constexpr int64_t kSlots = 64, kDim = int64_t{1} << 16, kChunk = kSlots * kDim;  // 4 Mi values a call
  std::vector<float> x(static_cast<size_t>(kChunk));
  std::vector<uint8_t> k(x.size()), v(x.size());
  std::vector<int64_t> slots(static_cast<size_t>(kSlots));
  for (int64_t i = 0; i < kSlots; ++i) slots[static_cast<size_t>(i)] = i;
  const float one = 1.0f;
  uint64_t bad = 0;
  for (KvCacheType type : {KvCacheType::kF8E4M3, KvCacheType::kF8E5M2}) {
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += static_cast<uint64_t>(kChunk)) {
      for (size_t i = 0; i < x.size(); ++i) {
        const auto bits = static_cast<uint32_t>(base + i);
        std::memcpy(&x[i], &bits, sizeof bits);
      }
      KvCacheView cache{k.data(), v.data(), type, 1, kSlots, 1, kDim};
      cache.k_scale = {&one, 1};
      const Status s = StoreKvCache(cache, 0, slots, HeadsView::Dense(x.data(), DType::kF32, kSlots, 1, kDim), HeadsView{});
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 2;
      }
      for (size_t i = 0; i < x.size(); ++i) {
        const uint8_t want = type == KvCacheType::kF8E4M3 ? F32ToF8E4M3(x[i]).bits : F32ToF8E5M2(x[i]).bits;
        if (k[i] != want && bad++ < 10)
          std::printf("%s: bits %08x -> %02x, scalar %02x\n", std::string(ToString(type)).c_str(),
                      static_cast<uint32_t>(base + i), k[i], want);
      }
    }
  }
  std::printf("simd %s: %llu of 2 x 2^32 patterns differ from the scalar conversion\n", ChosenSimdTarget().c_str(),
              static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
