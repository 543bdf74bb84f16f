// The internal thread pool behind posenc::ParallelRunner: workers poll a generation counter for a
// while, then sleep on a condition variable; each `For` hands every thread one contiguous range, the
// caller runs range 0.
#include "posenc/core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/message.hpp"

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
  std::atomic<int> keep{std::numeric_limits<int>::max()};  // workers with index >= keep return
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
      auto stopped = [&] { return stop.load(std::memory_order_acquire) || index >= keep.load(std::memory_order_acquire); };
      auto ready = [&] { return stopped() || generation.load(std::memory_order_acquire) != seen; };
      if (!SpinUntil(ready)) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, ready);
      }
      if (stopped()) return;
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
  requested_ = num_threads <= 0 ? DefaultThreadCount() : std::min(num_threads, kMaxThreads);
  // Start what the OS allows: a worker that cannot start (EAGAIN under a thread or address-space
  // limit, or no memory for its state) ends the loop, and the pool runs with the threads it has
  // (the caller's among them), so no share of a job ever waits for a thread that does not exist.
  int started = 1;
  try {
    impl_->workers.reserve(static_cast<size_t>(requested_ - 1));
    for (int i = 1; i < requested_; ++i) {
      impl_->workers.emplace_back([this, i] { impl_->WorkerLoop(i); });
      started = i + 1;
    }
  } catch (const std::exception& e) {
    start_error_ = fmt::format("thread pool: started {} of {} threads; thread {} could not start: {}", started,
                               requested_, started, e.what());
    // The OS is out of threads or of address space (each stack holds megabytes of it): keep half of the
    // threads that started and stop the rest, so the work itself still has room to allocate.
    const int kept = std::max(1, started / 2);
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->keep.store(kept, std::memory_order_release);
    }
    impl_->wake.notify_all();
    for (int i = kept; i < started; ++i) impl_->workers[static_cast<size_t>(i - 1)].join();
    impl_->workers.resize(static_cast<size_t>(kept - 1));
    start_error_ += fmt::format("; kept {}, stopped {} again to leave room for the work", kept, started - kept);
    started = kept;
  }
  // The workers read num_threads only inside a job, which the first For publishes after this store.
  impl_->num_threads = started;
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(int num_threads) {
  if (num_threads < 1 || num_threads > kMaxThreads)
    return InvalidArgumentError(
        fmt::format("thread pool: {} threads is outside [1, {}]", num_threads, kMaxThreads));
  auto pool = std::make_unique<ThreadPool>(num_threads);
  if (pool->num_threads() < num_threads) {
    std::string why = pool->start_error();
    pool.reset();  // stops and joins the workers it started: nothing is left running or held
    return InternalError(why + " (refused: no threads were kept)");
  }
  return pool;
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

Result<int> ParseThreadCount(std::string_view text, std::string_view what) {
  int64_t v = 0;
  // At most 9 digits are read (no overflow); a longer text is refused whatever it holds.
  bool digits = !text.empty() && text.size() <= 9;
  for (char c : text) {
    if (!digits) break;
    if (c < '0' || c > '9') {
      digits = false;
      break;
    }
    v = v * 10 + (c - '0');
  }
  if (!digits || v < 1 || v > kMaxThreads)
    return InvalidArgumentError(fmt::format("{} is {}, expected a thread count in [1, {}] (digits only)", what,
                                            QuoteForMessage(text, 40), kMaxThreads));
  return static_cast<int>(v);
}

int DefaultThreadCount() {
  const int hardware = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, unsigned{kMaxThreads}));
  const char* env = std::getenv("POSENC_NUM_THREADS");
  if (env == nullptr) return hardware;
  Result<int> v = ParseThreadCount(env, "environment variable POSENC_NUM_THREADS");
  if (v.ok()) return *v;
  // A bad value is not fatal (a library cannot fail a process for its environment): one warning line
  // per process on stderr, and the CPU count.
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::fprintf(stderr, "posenc: warning: %s; using %d threads (the CPU count)\n", v.status().message().c_str(),
                 hardware);
  });
  return hardware;
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
