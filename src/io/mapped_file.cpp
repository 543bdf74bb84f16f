// MappedFile: POSIX mmap of a whole file, read-only, or an owned copy of caller bytes.
#include "posenc/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/message.hpp"

namespace posenc {

struct MappedFile::Storage {
  std::string name;
  void* map = nullptr;  // mmap'd region (nullptr for owned bytes or an empty file)
  size_t map_size = 0;
  std::vector<std::byte> owned;
  std::span<const std::byte> bytes;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (map != nullptr) munmap(map, map_size);
  }
};

Result<MappedFile> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below, like a directory).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return NotFoundError(fmt::format("opening {}: {}", QuoteForMessage(path), std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return NotFoundError(fmt::format("reading {}: {}", QuoteForMessage(path), std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    return InvalidArgumentError(fmt::format("reading {}: not a regular file ({})", QuoteForMessage(path), kind));
  }
  auto storage = std::make_shared<Storage>();
  storage->name = path;
  const size_t size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return DataLossError(fmt::format("mapping {} ({} bytes): {}", QuoteForMessage(path), size, std::strerror(err)));
    }
    storage->map = p;
    storage->map_size = size;
    storage->bytes = std::span<const std::byte>(static_cast<const std::byte*>(p), size);
  }
  ::close(fd);  // the mapping keeps its own reference
  MappedFile f;
  f.storage_ = std::move(storage);
  return f;
}

MappedFile MappedFile::FromBytes(std::span<const std::byte> bytes, std::string name) {
  auto storage = std::make_shared<Storage>();
  storage->name = std::move(name);
  storage->owned.assign(bytes.begin(), bytes.end());
  storage->bytes = std::span<const std::byte>(storage->owned.data(), storage->owned.size());
  MappedFile f;
  f.storage_ = std::move(storage);
  return f;
}

std::span<const std::byte> MappedFile::bytes() const {
  return storage_ ? storage_->bytes : std::span<const std::byte>();
}

const std::string& MappedFile::name() const {
  static const std::string kEmpty;
  return storage_ ? storage_->name : kEmpty;
}

void AdviseRandomAccess(std::span<const std::byte> bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  if (bytes.empty() || end <= begin) return;
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_RANDOM);
}

}  // namespace posenc
