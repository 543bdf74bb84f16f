// Memory roofline passes for benchmarks: the cheapest possible kernels over the same bytes as the
// real ones, so a benchmark can report its kernel's bandwidth as a fraction of what the machine
// delivers in the same run. Internal to posenc's tools and bench/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "posenc/core/parallel.hpp"

namespace posenc::detail {

// In-place read-modify-write: every 32-bit word w of [data, data + bytes) becomes w ^ key (key 0
// keeps the data; the compiler cannot drop the pass). bytes % 4 == 0. SIMD (best target), split
// over `runner` like the kernels.
void RooflineRmw(void* data, size_t bytes, uint32_t key, ParallelRunner* runner);
// A copy of `bytes`, split over `runner` in contiguous pieces: memcpy, or from StreamStoreMinBytes() on
// (as the kernels) a SIMD copy with streaming stores, which skips reading each destination line first
// (zen4, 200 MB, 1 thread: 37 GB/s against glibc 2.36's memcpy 22, `build/bench/copy_shapes 209715200`).
void RooflineCopy(void* dst, const void* src, size_t bytes, ParallelRunner* runner);
// Whether RooflineCopy of `bytes` streams (the rows' roofline name: "stream copy" or "memcpy").
bool RooflineCopyStreams(size_t bytes);
// One thread's in-place read-modify-write of `count` windows of `window` bytes (a multiple of 4),
// `stride` bytes apart from base (RooflineRmw's rule per word), window i + ahead's lines prefetched
// into L2 before window i where i + ahead < reach (the windows after the last one, when they exist).
void RewriteWindows(void* base, size_t count, size_t stride, size_t window, size_t ahead, size_t reach, uint32_t key);
// One thread's copy: memcpy, or with streaming stores (the caller then ends with hwy::FlushStream()).
void CopyBytes(void* dst, const void* src, size_t bytes, bool stream);

}  // namespace posenc::detail
