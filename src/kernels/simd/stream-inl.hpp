// Per-target streaming copy: a row built in L1 written to memory with non-temporal stores (memory.hpp
// says when a kernel streams). Callers end their loop with hwy::FlushStream() before the data is read.
#if defined(POSENC_KERNELS_STREAM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_STREAM_INL_H_
#undef POSENC_KERNELS_STREAM_INL_H_
#else
#define POSENC_KERNELS_STREAM_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
