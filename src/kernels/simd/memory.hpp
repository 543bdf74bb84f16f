// Internal to the kernels: how they move memory, the same on every SIMD target. Software prefetch of a
// range's lines, and the size from which outputs are written with streaming (non-temporal) stores.
#pragma once

#include <cstddef>

#include <hwy/cache_control.h>

namespace posenc::detail {

// Every 64-byte line that [p, p + bytes) touches from p on, one prefetch each (into all cache levels).
inline void PrefetchLines(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
#pragma GCC unroll 16
  for (size_t l = 0; l < bytes; l += 64) hwy::Prefetch(c + l);
}

// StreamStoreMinBytes()'s default (posenc/kernels/simd.hpp): a call that writes at least this many bytes
// writes them with streaming stores. They would not stay in cache anyway (half of a 32 MiB L3), and a
// streaming store skips reading each line before writing it, a third of a copy's traffic. glibc's
// memcpy, the benchmarks' roofline, does the same for large copies.
inline constexpr size_t kStreamOutputBytes = size_t{16} << 20;

}  // namespace posenc::detail
