// Aligned, huge-page-advised storage for large read-mostly tables (rope.hpp, detail::TableAllocator).
#include <new>

#include "posenc/core/table_alloc.hpp"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace posenc::detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t TableAlignment(size_t bytes) { return bytes >= kHugePage ? kHugePage : 64; }

}  // namespace

void* AllocateTableBytes(size_t bytes) {
  const size_t align = TableAlignment(bytes);
  // Aligned operator new (portable C++17; throws std::bad_alloc), sized up to a whole alignment unit.
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = ::operator new (rounded == 0 ? align : rounded, std::align_val_t{align});
#ifdef __linux__
  // Advice only (ignored where THP is off), and only for the whole huge pages inside the table: its
  // tail keeps 4 KiB pages, so rounding up costs address space, never memory.
  if (align == kHugePage) (void)madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return p;
}

void FreeTableBytes(void* p, size_t bytes) noexcept { ::operator delete (p, std::align_val_t{TableAlignment(bytes)}); }

}  // namespace posenc::detail
