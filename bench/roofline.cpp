// Roofline passes (see roofline.hpp): a SIMD XOR pass per target and a threaded memcpy.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "roofline.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// Windows [0, count) of `window` bytes, `stride` bytes apart from base, each 32-bit word w becoming
// w ^ key; window i + ahead's lines prefetched into L2 first where i + ahead < reach (as the RoPE
// kernels prefetch strided windows: rope_internal.hpp's WindowPrefetch).
void XorWindows(uint8_t* base, size_t count, size_t stride, size_t window, size_t ahead, size_t reach, uint32_t key) {
  const hn::ScalableTag<uint32_t> d;
  const size_t N = hn::Lanes(d), words = window / 4;
  const auto k = hn::Set(d, key);
  for (size_t i = 0; i < count; ++i) {
    if (i + ahead < reach)
      for (size_t l = 0; l < window; l += 64) __builtin_prefetch(base + (i + ahead) * stride + l, 0, 2);
    auto* w = reinterpret_cast<uint32_t*>(base + i * stride);
    size_t j = 0;
    for (; j + N <= words; j += N) hn::StoreU(hn::Xor(hn::LoadU(d, w + j), k), d, w + j);
    for (; j < words; ++j) w[j] ^= key;
  }
}

// dst = src, n bytes, the lines of dst from its first aligned one on written with streaming stores, 4
// vectors per step (dst's head and tail by memcpy).
void CopyStreaming(uint8_t* dst, const uint8_t* src, size_t n) {
  const hn::ScalableTag<uint8_t> d;
  const size_t N = hn::Lanes(d);
  size_t i = std::min(n, (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64);
  std::memcpy(dst, src, i);
  for (; N <= 64 && i + 4 * N <= n; i += 4 * N) {
    const auto a = hn::LoadU(d, src + i), b = hn::LoadU(d, src + i + N);
    const auto c = hn::LoadU(d, src + i + 2 * N), e = hn::LoadU(d, src + i + 3 * N);
    hn::Stream(a, d, dst + i);
    hn::Stream(b, d, dst + i + N);
    hn::Stream(c, d, dst + i + 2 * N);
    hn::Stream(e, d, dst + i + 3 * N);
  }
  std::memcpy(dst + i, src + i, n - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include "posenc/kernels/simd.hpp"
#include "roofline.hpp"

namespace posenc {
HWY_EXPORT(XorWords);
HWY_EXPORT(CopyStreaming);
HWY_EXPORT(XorWindows);

namespace detail {

void RooflineRmw(void* data, size_t bytes, uint32_t key, ParallelRunner* runner) {
  const int64_t words = static_cast<int64_t>(bytes / 4);
  const int64_t chunks = 1024;  // contiguous pieces, like the kernels' token ranges
  ParallelFor(runner, chunks, static_cast<int64_t>(2 * bytes), [&](int64_t b, int64_t e) {
    const int64_t w0 = words * b / chunks, w1 = words * e / chunks;
    HWY_DYNAMIC_DISPATCH(XorWords)(static_cast<uint32_t*>(data) + w0, static_cast<size_t>(w1 - w0), key);
  });
}

bool RooflineCopyStreams(size_t bytes) { return bytes >= StreamStoreMinBytes(); }

void RooflineCopy(void* dst, const void* src, size_t bytes, ParallelRunner* runner) {
  const int64_t chunks = 1024;
  const int64_t n = static_cast<int64_t>(bytes);
  const bool stream = RooflineCopyStreams(bytes);
  ParallelFor(runner, chunks, 2 * n, [&](int64_t b, int64_t e) {
    const int64_t o0 = n * b / chunks, o1 = n * e / chunks;
    auto* d = static_cast<uint8_t*>(dst) + o0;
    const auto* s = static_cast<const uint8_t*>(src) + o0;
    CopyBytes(d, s, static_cast<size_t>(o1 - o0), stream);
    if (stream) hwy::FlushStream();
  });
}

void RewriteWindows(void* base, size_t count, size_t stride, size_t window, size_t ahead, size_t reach, uint32_t key) {
  HWY_DYNAMIC_DISPATCH(XorWindows)(static_cast<uint8_t*>(base), count, stride, window, ahead, reach, key);
}

void CopyBytes(void* dst, const void* src, size_t bytes, bool stream) {
  if (stream) {
    HWY_DYNAMIC_DISPATCH(CopyStreaming)(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace detail
}  // namespace posenc
#endif  // HWY_ONCE
