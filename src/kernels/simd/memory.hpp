// Internal to the kernels: how they move memory, the same on every SIMD target: the size from which outputs
// are written with streaming (non-temporal) stores, and which rows can take them (the per-target helpers:
// memory-inl.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace posenc::detail {

// StreamStoreMinBytes()'s default (posenc/kernels/simd.hpp): a call that writes at least this many bytes
// writes them with streaming stores. They would not stay in cache anyway (half of a 32 MiB L3), and a
// streaming store skips reading each line before writing it, a third of a copy's traffic. glibc's
// memcpy, the benchmarks' roofline, does the same for large copies.
inline constexpr size_t kStreamOutputBytes = size_t{16} << 20;

// Whether rows of `row_bytes` bytes, `stride_bytes` apart from p on, take streaming stores from
// registers: each row whole 64-byte lines, so every vector store is whole and aligned (the kernels
// store vectors of 16 to 64 bytes at offsets that are multiples of their size).
inline bool StreamableRows(const void* p, int64_t stride_bytes, int64_t row_bytes) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0 && stride_bytes % 64 == 0 && row_bytes % 64 == 0;
}

}  // namespace posenc::detail
