// _posenc: reused output buffers, the Hugging Face drop-in's fresh outputs (python/posenc/hf.py).
#include "binding.hpp"

#include <cstdlib>
#include <mutex>

namespace posenc::python {
namespace {

// A fresh large tensor costs a page fault per 4 KiB page on its first write (glibc serves it from a new
// mmap and unmaps it on free): for a 4096-token prefill's q and k, more than the rotation itself. The
// drop-in's outputs of 1 MiB and more come from here instead: a freed buffer goes back to a small cache
// (exact sizes, at most kMaxCached buffers and kMaxCachedBytes) and the next call of that size reuses
// its already-mapped pages. Buffers are uninitialized, as torch.empty_like's are.
class OutputCache {
 public:
  static constexpr size_t kMaxCached = 16;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;
  void* Get(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].second == n) {
          void* p = free_[i].first;
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          bytes_ -= n;
          return p;
        }
    }
    void* p = std::aligned_alloc(4096, n);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void Put(void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    while (!free_.empty() && (free_.size() >= kMaxCached || bytes_ + n > kMaxCachedBytes)) {
      std::free(free_.front().first);  // the oldest goes first
      bytes_ -= free_.front().second;
      free_.erase(free_.begin());
    }
    if (n > kMaxCachedBytes) {
      std::free(p);
      return;
    }
    free_.emplace_back(p, n);
    bytes_ += n;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, n] : free_) std::free(p);
    free_.clear();
    bytes_ = 0;
  }
  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> free_;
  size_t bytes_ = 0;
};
OutputCache& TheOutputCache() {
  static auto* cache = new OutputCache;  // never destroyed: capsules may outlive module teardown
  return *cache;
}
// A uint8 numpy array of `nbytes` (rounded up to 4 KiB) whose memory returns to the cache when freed.
py::array OutputBuffer(int64_t nbytes) {
  if (nbytes < 0) throw py::value_error("nbytes: negative");
  const size_t n = (static_cast<size_t>(nbytes) + 4095) & ~size_t{4095};
  struct Block {
    void* p;
    size_t n;
  };
  auto* b = new Block{TheOutputCache().Get(n == 0 ? 4096 : n), n == 0 ? 4096 : n};
  py::capsule keep(b, [](void* v) {
    auto* blk = static_cast<Block*>(v);
    TheOutputCache().Put(blk->p, blk->n);
    delete blk;
  });
  return py::array(py::dtype("uint8"), {static_cast<py::ssize_t>(nbytes)}, {}, b->p, keep);
}

}  // namespace

void RegisterBuffers(py::module_& m) {
  m.def("output_buffer", &OutputBuffer, py::arg("nbytes"));
  m.def("output_cache_clear", [] { TheOutputCache().Clear(); });
  m.def("output_cache_bytes", [] { return TheOutputCache().cached_bytes(); });
}

}  // namespace posenc::python
