// The thread pool and the ParallelRunner contract: every index once, nested calls inline, and kernels
// bit-identical for every thread count and for a caller's own runner.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "posenc/parallel.hpp"
#include "posenc/rope.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.For(n, [&](int64_t b, int64_t e) {
        ASSERT_LE(0, b);
        ASSERT_LE(b, e);
        ASSERT_LE(e, n);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

TEST(ThreadPool, NestedForRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.For(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) pool.For(3, [&](int64_t b2, int64_t e2) { sum += (e2 - b2) * (i + 1); });
  });
  EXPECT_EQ(sum.load(), 3 * (1 + 2 + 3 + 4));
}

// A caller's runner that hands out one-index ranges in reverse order (an adversarial partition).
class ReverseRunner : public ParallelRunner {
 public:
  int num_threads() const override { return 7; }
  void For(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    ++calls;
    for (int64_t i = n - 1; i >= 0; --i) fn(i, i + 1);
  }
  int calls = 0;
};

TEST(Parallel, RopeIsBitIdenticalForAnyRunner) {
  const int64_t T = 1200, H = 8, D = 128;  // above kMinBytesForThreads in every dtype: split across threads
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved}) {
      RotaryLayout layout{pairing, D, 0, D};
      auto table = RopeTable::Build(DefaultRopeFrequencies(D, 10000.0).value(), 128, RopePrecision::kReference).value();
      std::vector<int64_t> pos(T);
      for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = (t * 37) % 1000;  // in and past the table
      auto rng = testing::MakeRng(11);
      const auto values = testing::RandomNormal(rng, T * H * D);
      const size_t es = SizeOf(dtype);
      std::vector<uint8_t> src(values.size() * es);
      for (size_t i = 0; i < values.size(); ++i) {
        if (dtype == DType::kF32) std::memcpy(&src[i * 4], &values[i], 4);
        else { bf16_t b = F32ToBF16(values[i]); std::memcpy(&src[i * 2], &b, 2); }
      }
      ThreadPool one(1), two(2), three(3);
      ReverseRunner reverse;
      std::vector<ParallelRunner*> runners = {&SerialRunner(), &one, &two, &three, &reverse, nullptr};
      std::vector<std::vector<uint8_t>> outs;
      for (ParallelRunner* r : runners) {
        std::vector<uint8_t> x = src;
        RopeArgs args{layout, &table, pos};
        args.parallel = r;
        ASSERT_TRUE(ApplyRope(args, HeadsView::Dense(x.data(), dtype, T, H, D)).ok());
        outs.push_back(std::move(x));
      }
      EXPECT_GT(reverse.calls, 0);
      for (size_t i = 1; i < outs.size(); ++i) EXPECT_TRUE(outs[i] == outs[0]) << "runner " << i << " " << ToString(dtype);
      EXPECT_FALSE(outs[0] == src);  // it did rotate
    }
  }
}

}  // namespace
}  // namespace posenc
