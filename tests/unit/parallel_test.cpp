// The thread pool and the ParallelRunner contract: every index once, nested calls inline, and kernels
// bit-identical for every thread count and for a caller's own runner.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "posenc/core/parallel.hpp"
#include "posenc/kernels/rope.hpp"
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
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

// Jobs handed over while the workers poll (back to back) and after they have gone to sleep (a pause
// longer than the 200 us polling window): every job runs every index once, and none is lost.
TEST(ThreadPool, HandsOverWhilePollingAndAfterSleeping) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 40; ++round) {
      if (round % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const int64_t n = 1 + round % 13;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> ranges{0};
      pool.For(n, [&](int64_t b, int64_t e) {
        ++ranges;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      EXPECT_LE(ranges.load(), threads);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "round " << round << " i " << i;
    }
  }
}

// Several threads calling one pool at once are served one job at a time, each completely.
TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 200; ++r) pool.For(10, [&](int64_t b, int64_t e) { total += e - b; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 200 * 10);
}

// Destroying a pool whose workers are polling, or asleep, returns (no hang, no lost thread).
TEST(ThreadPool, DestroysWhilePollingOrSleeping) {
  for (int pause_ms : {0, 2}) {
    auto pool = std::make_unique<ThreadPool>(3);
    std::atomic<int> runs{0};
    pool->For(3, [&](int64_t b, int64_t e) { runs += static_cast<int>(e - b); });
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pool.reset();
    EXPECT_EQ(runs.load(), 3);
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
        if (dtype == DType::kF32)
          std::memcpy(&src[i * 4], &values[i], 4);
        else {
          bf16_t b = F32ToBF16(values[i]);
          std::memcpy(&src[i * 2], &b, 2);
        }
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
      for (size_t i = 1; i < outs.size(); ++i)
        EXPECT_TRUE(outs[i] == outs[0]) << "runner " << i << " " << ToString(dtype);
      EXPECT_FALSE(outs[0] == src);  // it did rotate
    }
  }
}

// RopeTable::Build and BuildPerToken fill rows over the caller's runner (and give the same table for
// every runner); before, both always used the internal pool.
TEST(Parallel, RopeTableBuildUsesTheCallersRunner) {
  const int64_t D = 128, N = 8192;  // 4 MiB of rows: above kMinBytesForThreads, so the job is split
  const RopeFrequencies freqs = DefaultRopeFrequencies(D, 500000.0).value();
  for (RopePrecision precision : {RopePrecision::kReference, RopePrecision::kExact}) {
    ReverseRunner reverse;
    const RopeTable base = RopeTable::Build(freqs, N, precision).value();
    const RopeTable mine = RopeTable::Build(freqs, N, precision, &reverse).value();
    EXPECT_GT(reverse.calls, 0) << ToString(precision);
    for (int64_t p = 0; p < N; p += 997) {
      EXPECT_EQ(0, std::memcmp(base.cos_row(p), mine.cos_row(p), sizeof(float) * D / 2)) << p;
      EXPECT_EQ(0, std::memcmp(base.sin_row(p), mine.sin_row(p), sizeof(float) * D / 2)) << p;
    }
  }
  std::vector<int64_t> positions(2 * N);
  for (int64_t i = 0; i < 2 * N; ++i) positions[static_cast<size_t>(i)] = i % 5000;
  std::vector<int64_t> component(static_cast<size_t>(D / 2));
  for (size_t j = 0; j < component.size(); ++j) component[j] = static_cast<int64_t>(j % 2);
  ReverseRunner reverse;
  const RopeTable a = RopeTable::BuildPerToken(freqs, component, 2, positions, RopePrecision::kReference).value();
  const RopeTable b =
      RopeTable::BuildPerToken(freqs, component, 2, positions, RopePrecision::kReference, &reverse).value();
  EXPECT_GT(reverse.calls, 0);
  EXPECT_EQ(0, std::memcmp(a.cos_row(N - 1), b.cos_row(N - 1), sizeof(float) * D / 2));
}

}  // namespace
}  // namespace posenc
