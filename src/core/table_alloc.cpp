// Aligned, huge-page-advised storage for large read-mostly tables (rope.hpp, detail::TableAllocator).
#include <cstdlib>
#include <new>

#include "posenc/rope.hpp"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace posenc::detail {

void* AllocateTableBytes(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t align = bytes >= kHugePage ? kHugePage : 64;
  const size_t rounded = (bytes + align - 1) / align * align;  // aligned_alloc wants a multiple of align
  void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (p == nullptr) throw std::bad_alloc();
#ifdef __linux__
  // Only the whole huge pages inside the table: its tail keeps 4 KiB pages, so rounding up costs
  // address space, never memory.
  if (align == kHugePage) (void)madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return p;
}

void FreeTableBytes(void* p) noexcept { std::free(p); }

}  // namespace posenc::detail
