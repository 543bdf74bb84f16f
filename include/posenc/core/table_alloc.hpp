// Storage for large read-mostly tables (RoPE's cos/sin rows): 2 MiB-aligned, huge-page advised.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace posenc::detail {

// Storage for RopeTable's rows. Allocations of 2 MiB or more are 2 MiB-aligned and, on Linux, advised
// to transparent huge pages (madvise MADV_HUGEPAGE; advice only, ignored where THP is off), so decode's
// scattered cos/sin rows cost no TLB miss and page walk each (a cold [64, 32, 128] float16 decode step
// at scattered positions took ~10% less time). Smaller ones are 64-byte aligned. Throws
// std::bad_alloc like std::allocator. For trivially constructible T only (it is used for float).
void* AllocateTableBytes(size_t bytes);
void FreeTableBytes(void* p, size_t bytes) noexcept;  // bytes: as given to AllocateTableBytes

template <typename T>
struct TableAllocator {
  static_assert(std::is_trivially_default_constructible_v<T>, "TableAllocator leaves elements uninitialized");
  using value_type = T;
  TableAllocator() = default;
  template <typename U>
  TableAllocator(const TableAllocator<U>& /*other*/) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateTableBytes(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { FreeTableBytes(p, n * sizeof(T)); }
  // resize() default-initializes (no zero fill): Build writes every entry, so the pages are first
  // touched, and faulted in, by the threads that fill them.
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U>
  bool operator==(const TableAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

}  // namespace posenc::detail
