// The internal thread pool behind posenc::ParallelRunner: workers wait on a condition variable for a
// generation counter; each `For` hands every thread one contiguous range, the caller runs range 0.
#include "posenc/parallel.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace posenc {

namespace {
thread_local const void* tls_running_pool = nullptr;  // the pool whose `For` this thread is inside
}  // namespace

struct ThreadPool::Impl {
  int num_threads = 1;
  std::vector<std::thread> workers;
  std::mutex call_mu;  // one For at a time
  std::mutex mu;
  std::condition_variable wake, done;
  uint64_t generation = 0;
  int pending = 0;
  bool stop = false;
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
      {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return stop || generation != seen; });
        if (stop) return;
        seen = generation;
      }
      tls_running_pool = this;
      RunShare(index);
      tls_running_pool = nullptr;
      std::lock_guard<std::mutex> lock(mu);
      if (--pending == 0) done.notify_one();
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
    impl_->stop = true;
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
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->n = n;
    impl_->fn = &fn;
    impl_->pending = impl_->num_threads - 1;
    ++impl_->generation;
  }
  impl_->wake.notify_all();
  tls_running_pool = impl_.get();
  impl_->RunShare(0);
  tls_running_pool = nullptr;
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->done.wait(lock, [&] { return impl_->pending == 0; });
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

void ParallelFor(ParallelRunner* runner, int64_t n, int64_t bytes, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (bytes < kMinBytesForThreads) {
    fn(0, n);
    return;
  }
  (runner != nullptr ? runner : &DefaultRunner())->For(n, fn);
}

}  // namespace posenc
