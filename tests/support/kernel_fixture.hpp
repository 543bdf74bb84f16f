// Inputs of the fused kernel tests (fused RoPE + KV, QK-norm, MLA, float8 caches): activations filled
// from N(0, 2) in the storage type, 64-byte-aligned buffers handed out misaligned, cache slots; and
// their one fused-versus-unfused byte comparison.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/kv_cache.hpp"

namespace posenc::testing {

// n values of N(0, sd), rounded to `dt` (float32, float16, else bfloat16), at p.
inline void FillNormal(DType dt, void* p, size_t n, std::mt19937_64& rng, float sd = 2.0f) {
  std::normal_distribution<float> nd(0.0f, sd);
  for (size_t i = 0; i < n; ++i) {
    const float x = nd(rng);
    switch (dt) {
      case DType::kF32: static_cast<float*>(p)[i] = x; break;
      case DType::kF16: static_cast<f16_t*>(p)[i] = F32ToF16(x); break;
      default: static_cast<bf16_t*>(p)[i] = F32ToBF16(x); break;
    }
  }
}

// 64-byte aligned storage, handed out `misalign` bytes past the alignment; a copy keeps the bytes and
// the misalignment.
struct AlignedBuf {
  static constexpr size_t kSlack = 192;
  std::vector<uint8_t> bytes;
  size_t off = 0;
  // Room for the alignment (< 64), the misalignment (< 64) and 64 bytes past the end tests compare.
  AlignedBuf(size_t n, size_t misalign, uint8_t fill) : bytes(n + kSlack, fill) {
    const auto base = reinterpret_cast<uintptr_t>(bytes.data());
    off = (base + 63) / 64 * 64 - base + misalign;
  }
  AlignedBuf(const AlignedBuf& o)
      : AlignedBuf(o.bytes.size() - kSlack,
                   o.off - ((reinterpret_cast<uintptr_t>(o.bytes.data()) + 63) / 64 * 64 -
                            reinterpret_cast<uintptr_t>(o.bytes.data())),
                   0) {
    std::memcpy(data(), o.data(), o.bytes.size() - kSlack);
  }
  void* data() { return bytes.data() + off; }
  const void* data() const { return bytes.data() + off; }
};

// `tokens` positions (t * step + first) % wrap: out of order where they wrap, and past a table shorter
// than `wrap`.
inline std::vector<int64_t> SpreadPositions(int64_t tokens, int64_t step, int64_t first, int64_t wrap) {
  std::vector<int64_t> positions(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) positions[static_cast<size_t>(t)] = (t * step + first) % wrap;
  return positions;
}

// A test's cache slots, one a token, and the rows of the cache that holds them.
struct CacheSlots {
  std::vector<int64_t> slots;
  int64_t num_slots = 0;
};

// One sequence's `tokens` cache slots at positions first_pos.. in pages of `page` rows, the pages taken
// from a shuffled pool with room for two more; num_slots is the pool's rows.
inline CacheSlots ShuffledPageSlots(int64_t tokens, int64_t page, int64_t first_pos, std::mt19937_64& rng) {
  const int64_t pages = (tokens + first_pos) / page + 2;
  std::vector<int32_t> bt(static_cast<size_t>(pages));
  std::iota(bt.begin(), bt.end(), 0);
  std::shuffle(bt.begin(), bt.end(), rng);
  std::vector<int64_t> seq(static_cast<size_t>(tokens), 0), pos(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) pos[static_cast<size_t>(t)] = t + first_pos;
  return {PagedKvSlots({page, pages, pages, bt}, seq, pos).value(), pages * page};
}

// The fused-versus-unfused check: run(fused, reference) returns every byte a call leaves (outputs and
// cache memory); the fused call's must equal the unfused sequence's on the fast path and, when
// `check_reference`, on the references. A mismatch names the first differing bytes (index:fused/unfused).
template <typename Run>
void ExpectFusedEqualsUnfused(Run&& run, bool check_reference) {
  for (bool reference : {false, true}) {
    if (reference && !check_reference) continue;
    SCOPED_TRACE(reference ? "reference" : "fast path");
    const std::vector<uint8_t> a = run(true, reference), b = run(false, reference);
    ASSERT_EQ(a.size(), b.size());
    size_t ndiff = 0, first = a.size(), last = 0;
    std::string where;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] == b[i]) continue;
      if (ndiff == 0) first = i;
      if (ndiff < 12) where += fmt::format(" {}:{:02x}/{:02x}", i, a[i], b[i]);
      ++ndiff;
      last = i;
    }
    EXPECT_EQ(ndiff, 0u) << "fused and unfused differ first at byte " << first << " of " << a.size() << where
                         << fmt::format(" ({} bytes differ, the last at {})", ndiff, last);
  }
}

}  // namespace posenc::testing
