// Per-target memory helpers of the kernels: lines prefetched, and a streaming copy (memory.hpp says when
// a kernel streams; callers end their loop with hwy::FlushStream() before the data is read). Per target,
// not in memory.hpp: g++ 12 dropped the prefetch loop of a target-independent inline helper from the
// per-target kernels that called it (RopeTokensT's QK-norm path lost 6 of its 14 prefetches, cold decode
// 18% slower, zen4).
#if defined(POSENC_KERNELS_MEMORY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_MEMORY_INL_H_
#undef POSENC_KERNELS_MEMORY_INL_H_
#else
#define POSENC_KERNELS_MEMORY_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Every 64-byte line that [p, p + bytes) touches from p on, one prefetch each (into all cache levels).
HWY_INLINE void PrefetchLines(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t l = 0; l < bytes; l += 64) hwy::Prefetch(c + l);
}

// The same lines into L2 (and L3) only (x86 prefetcht1). On zen4 a walk that skips lines ran 2.5x
// faster with these than with L1 prefetches, which each hold one of L1's few miss buffers, the likely
// cause (rope_internal.hpp's WindowPrefetch).
HWY_INLINE void PrefetchLinesL2(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t l = 0; l < bytes; l += 64) __builtin_prefetch(c + l, 0, 2);  // x86: prefetcht1
}
HWY_INLINE void PrefetchLinesTo(bool l2, const void* p, size_t bytes) {
  l2 ? PrefetchLinesL2(p, bytes) : PrefetchLines(p, bytes);
}

// dst[0, bytes) = src[0, bytes): the whole 64-byte lines of dst with streaming stores, the partial lines
// at either end (a streaming store of part of a line is slow) with plain ones.
HWY_INLINE void StreamCopy(void* dst, const void* src, size_t bytes) {
  const hn::ScalableTag<uint8_t> d8;
  const size_t N = hn::Lanes(d8);
  auto* o = static_cast<uint8_t*>(dst);
  const auto* i = static_cast<const uint8_t*>(src);
  size_t p = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(o) % 64) % 64);
  if (N > 64) p = bytes;  // vectors wider than a line: plain stores
  std::memcpy(o, i, p);
  for (; p + 64 <= bytes; p += 64) {
    for (size_t j = 0; j < 64; j += N) hn::Stream(hn::LoadU(d8, i + p + j), d8, o + p + j);
  }
  std::memcpy(o + p, i + p, bytes - p);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#endif  // include guard toggled per target
