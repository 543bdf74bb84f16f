// Roofline passes (see roofline.hpp): a SIMD XOR pass per target and a threaded memcpy.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "roofline.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void XorWords(uint32_t* p, size_t n, uint32_t key) {
  const hn::ScalableTag<uint32_t> d;
  const size_t N = hn::Lanes(d);
  const auto k = hn::Set(d, key);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {  // 4 vectors per step: enough loads in flight
    const auto a = hn::LoadU(d, p + i), b = hn::LoadU(d, p + i + N);
    const auto c = hn::LoadU(d, p + i + 2 * N), e = hn::LoadU(d, p + i + 3 * N);
    hn::StoreU(hn::Xor(a, k), d, p + i);
    hn::StoreU(hn::Xor(b, k), d, p + i + N);
    hn::StoreU(hn::Xor(c, k), d, p + i + 2 * N);
    hn::StoreU(hn::Xor(e, k), d, p + i + 3 * N);
  }
  for (; i < n; ++i) p[i] ^= key;
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstring>

#include "roofline.hpp"

namespace posenc {
HWY_EXPORT(XorWords);

namespace detail {

void RooflineRmw(void* data, size_t bytes, uint32_t key, ParallelRunner* runner) {
  const int64_t words = static_cast<int64_t>(bytes / 4);
  const int64_t chunks = 1024;  // contiguous pieces, like the kernels' token ranges
  ParallelFor(runner, chunks, static_cast<int64_t>(2 * bytes), [&](int64_t b, int64_t e) {
    const int64_t w0 = words * b / chunks, w1 = words * e / chunks;
    HWY_DYNAMIC_DISPATCH(XorWords)(static_cast<uint32_t*>(data) + w0, static_cast<size_t>(w1 - w0), key);
  });
}

void RooflineCopy(void* dst, const void* src, size_t bytes, ParallelRunner* runner) {
  const int64_t chunks = 1024;
  const int64_t n = static_cast<int64_t>(bytes);
  ParallelFor(runner, chunks, 2 * n, [&](int64_t b, int64_t e) {
    const int64_t o0 = n * b / chunks, o1 = n * e / chunks;
    std::memcpy(static_cast<char*>(dst) + o0, static_cast<const char*>(src) + o0, static_cast<size_t>(o1 - o0));
  });
}

}  // namespace detail
}  // namespace posenc
#endif  // HWY_ONCE
