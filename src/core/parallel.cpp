// The internal thread pool behind posenc::ParallelRunner: workers poll a generation counter for a
// while, then sleep on a condition variable; each `For` hands every thread one contiguous range, the
// caller runs range 0.
#include "posenc/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace posenc {

namespace {
thread_local const void* tls_running_pool = nullptr;  // the pool whose `For` this thread is inside
}  // namespace

// How long a worker keeps polling for the next job before it sleeps, and how long the caller polls
// for the workers to finish before it sleeps: an engine calls kernels back to back (layer after
// layer), and a polled hand-off costs about a microsecond where a futex wake-up of a sleeping thread
// costs tens (20-100 us measured on a 2-vCPU KVM guest).
constexpr std::chrono::microseconds kSpinFor{200};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done()` for up to kSpinFor; true if it became true.
template <class Pred>
bool SpinUntil(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinFor;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

struct ThreadPool::Impl {
  int num_threads = 1;
  std::vector<std::thread> workers;
  std::mutex call_mu;  // one For at a time
  // Hand-off: the caller publishes n/fn, then bumps `generation` (release, under mu so a sleeping
  // worker cannot miss it); workers poll it for kSpinFor, then sleep on `wake`. Each worker
  // decrements `pending` when its share is done; the caller polls it, then sleeps on `done`.
  std::mutex mu;
  std::condition_variable wake, done;
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};
  int64_t n = 0;
  const std::function<void(int64_t, int64_t)>* fn = nullptr;

  void RunShare(int index) {
    const int64_t begin = n * index / num_threads;
    const int64_t end = n * (index + 1) / num_threads;
    if (begin < end) (*fn)(begin, end);
  }

  void WorkerLoop(int index) {
    uint64_t seen = 0;
    for (;;) {
      auto ready = [&] {
        return stop.load(std::memory_order_acquire) || generation.load(std::memory_order_acquire) != seen;
      };
      if (!SpinUntil(ready)) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, ready);
      }
      if (stop.load(std::memory_order_acquire)) return;
      seen = generation.load(std::memory_order_acquire);
      tls_running_pool = this;
      RunShare(index);
      tls_running_pool = nullptr;
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu);  // the caller checks `pending` under mu before sleeping
        done.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : impl_(std::make_unique<Impl>()) {
  impl_->num_threads = num_threads <= 0 ? DefaultThreadCount() : num_threads;
  for (int i = 1; i < impl_->num_threads; ++i) impl_->workers.emplace_back([this, i] { impl_->WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop.store(true, std::memory_order_release);
  }
  impl_->wake.notify_all();
  for (auto& w : impl_->workers) w.join();
}

int ThreadPool::num_threads() const { return impl_->num_threads; }

void ThreadPool::For(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (impl_->num_threads == 1 || n == 1 || tls_running_pool == impl_.get()) {
    fn(0, n);  // nothing to share, or a nested call: run inline
    return;
  }
  std::lock_guard<std::mutex> call_lock(impl_->call_mu);
  impl_->n = n;
  impl_->fn = &fn;
  impl_->pending.store(impl_->num_threads - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->generation.fetch_add(1, std::memory_order_release);
  }
  impl_->wake.notify_all();
  tls_running_pool = impl_.get();
  impl_->RunShare(0);
  tls_running_pool = nullptr;
  auto finished = [&] { return impl_->pending.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(finished)) {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->done.wait(lock, finished);
  }
  impl_->fn = nullptr;
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("POSENC_NUM_THREADS")) {
    const int v = std::atoi(env);
    if (v >= 1) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ParallelRunner& DefaultRunner() {
  static ThreadPool* pool = new ThreadPool(0);  // leaked on purpose: usable during static destruction
  return *pool;
}

namespace {
class Serial : public ParallelRunner {
 public:
  int num_threads() const override { return 1; }
  void For(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    if (n > 0) fn(0, n);
  }
};
}  // namespace

ParallelRunner& SerialRunner() {
  static Serial serial;
  return serial;
}

namespace {
// kMinBytesForThreads, or POSENC_MIN_BYTES_FOR_THREADS from the environment (>= 0) to tune it.
int64_t MinBytesForThreads() {
  static const int64_t v = [] {
    const char* env = std::getenv("POSENC_MIN_BYTES_FOR_THREADS");
    return env != nullptr && std::atoll(env) >= 0 ? std::atoll(env) : kMinBytesForThreads;
  }();
  return v;
}
}  // namespace

void ParallelFor(ParallelRunner* runner, int64_t n, int64_t bytes, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (bytes < MinBytesForThreads()) {
    fn(0, n);
    return;
  }
  (runner != nullptr ? runner : &DefaultRunner())->For(n, fn);
}

}  // namespace posenc
