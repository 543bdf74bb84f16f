// Threads for posenc's kernels: a `parallel_for`-style interface a calling engine can implement with
// its own workers, and a small internal pool used when it does not.
//
// Every kernel splits its work into independent index ranges whose results do not depend on how the
// ranges are grouped or ordered, so the output is bit-identical for any thread count and any runner.
//
// Example (an engine with its own pool):
//   class MyRunner : public posenc::ParallelRunner {
//    public:
//     int num_threads() const override { return pool_.size(); }
//     void For(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
//       pool_.RunTasks(n, [&](int64_t i) { fn(i, i + 1); });   // any grouping of [0, n) is fine
//     }
//   };
//   RopeArgs args{...}; args.parallel = &my_runner;
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "posenc/core/status.hpp"

namespace posenc {

// Runs `fn(begin, end)` over a partition of [0, n) into non-overlapping ranges, possibly on several
// threads at once, and returns when all have finished. `fn` is thread-safe for disjoint ranges.
// Implementations may use any partition (including one call with [0, n)).
class ParallelRunner {
 public:
  virtual ~ParallelRunner() = default;
  // How many ranges a kernel should aim for (>= 1); a hint for chunk sizes.
  virtual int num_threads() const = 0;
  virtual void For(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn) = 0;
};

// A fixed pool: num_threads - 1 workers plus the calling thread, which takes a share. `For` splits
// [0, n) into num_threads contiguous ranges of near-equal size. One `For` at a time per pool
// (concurrent callers are serialized); calling `For` from inside `fn` of the same pool runs inline.
// After each job the workers poll for the next one for 200 us (a core stays busy that long), then
// sleep; the caller likewise polls for the workers to finish before it sleeps.
//
// Starting threads can fail (a process thread limit, an address-space cap): the constructor starts
// what it can, then keeps half of those (at least the caller's thread) and stops the rest, so the
// memory their stacks held is left for the work; the pool runs with what it kept (num_threads() says
// how many, start_error() why). Create refuses instead, leaving nothing running.
class ThreadPool : public ParallelRunner {
 public:
  // num_threads <= 0 means DefaultThreadCount(); more than kMaxThreads means kMaxThreads.
  explicit ThreadPool(int num_threads);
  // A pool of exactly num_threads threads (in [1, kMaxThreads]), or kInvalidArgument outside that, or
  // kInternal naming how many started when the OS refused a thread (those are stopped and joined first).
  static Result<std::unique_ptr<ThreadPool>> Create(int num_threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The threads running (the caller's included): the number asked for, or fewer when the OS refused some.
  int num_threads() const override;
  // The number asked for (after the defaults and the kMaxThreads bound).
  int requested_threads() const { return requested_; }
  // Why num_threads() < requested_threads() (one line), or "".
  const std::string& start_error() const { return start_error_; }
  void For(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int requested_ = 1;
  std::string start_error_;
};

// The most threads a pool takes (each is an OS thread): set_num_threads' bound in Python too.
inline constexpr int kMaxThreads = 1024;

// A thread count written as text (POSENC_NUM_THREADS, a flag): digits only, in [1, kMaxThreads]; else
// kInvalidArgument "<what> is '<text>', expected a thread count in [1, 1024] (digits only)".
Result<int> ParseThreadCount(std::string_view text, std::string_view what);

// std::thread::hardware_concurrency() (at most kMaxThreads), or POSENC_NUM_THREADS from the environment
// when set. A value ParseThreadCount refuses ("8x", "-1", "1000000", " 4") is not used: posenc writes one
// warning line naming the variable to stderr (once per process) and takes the CPU count.
int DefaultThreadCount();

// The process-wide pool used when a kernel is given no runner (created on first use with
// DefaultThreadCount() threads). Thread-safe.
ParallelRunner& DefaultRunner();

// A runner that runs everything on the calling thread (one range [0, n)).
ParallelRunner& SerialRunner();

// Runs `fn` over [0, n) with `runner` (nullptr: DefaultRunner()); when the whole job touches fewer
// than kMinBytesForThreads bytes, runs inline on the calling thread instead (threads cost more
// than they save on tiny inputs). Results must not depend on the choice, which only moves work.
void ParallelFor(ParallelRunner* runner, int64_t n, int64_t bytes, const std::function<void(int64_t, int64_t)>& fn);

// 256 KiB. The pool's workers poll for the next job for 200 us after each one before they sleep, so
// a kernel called right after another hands work over in about a microsecond; waking a sleeping
// worker costs tens of microseconds (20-100 us measured on a 2-vCPU KVM guest). Measured there with
// a warm pool (float32 RoPE, 32 heads x 128, in place): 8 tokens (256 KiB read + written) run 1.4x
// faster on 2 threads than on 1, 16 tokens 1.75x; 4 tokens break even. The environment variable
// POSENC_MIN_BYTES_FOR_THREADS (bytes, >= 0) overrides it.
inline constexpr int64_t kMinBytesForThreads = int64_t{1} << 18;

}  // namespace posenc
