// Whole-file reads with a regular-file check and a bound; atomic writes; output-is-input refusal.
#include "posenc/io/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "posenc/core/message.hpp"

namespace posenc {
namespace {

std::string Q(const std::string& path) { return QuoteForMessage(path); }

const char* KindOf(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a file";
}

Status NotRegular(std::string_view action, const std::string& path, mode_t m) {
  return InvalidArgumentError(fmt::format("{} {}: not a regular file ({})", action, Q(path), KindOf(m)));
}

std::string Errno(int err) { return std::strerror(err); }

// The folder part of `path` ("." when there is none).
std::string Folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status CheckRegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) { return NotFoundError(fmt::format("reading {}: {}", Q(path), Errno(errno))); }
  if (!S_ISREG(st.st_mode)) return NotRegular("reading", path, st.st_mode);
  return OkStatus();
}

Result<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return NotFoundError(fmt::format("opening {}: {}", Q(path), Errno(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return NotFoundError(fmt::format("reading {}: {}", Q(path), Errno(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return NotRegular("reading", path, st.st_mode);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    return OutOfRangeError(fmt::format("reading {}: the file has {} bytes, more than the {} this reader accepts",
                                       Q(path), size, max_bytes));
  }
  std::string out(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return DataLossError(fmt::format("reading {}: {}", Q(path), Errno(err)));
    }
    if (n == 0) break;  // shrank while read
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Status WriteFileAtomic(const std::string& path_in, std::span<const std::byte> bytes) {
  if (path_in.empty()) return InvalidArgumentError("writing: the output path is empty");
  std::string path = path_in;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    // Replace the file the link points to, not the link.
    char* real = ::realpath(path.c_str(), nullptr);
    if (real != nullptr) {
      path = real;
      std::free(real);
    }
  }
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) return NotRegular("writing", path_in, st.st_mode);
  if (!exists && errno != ENOENT) return InvalidArgumentError(fmt::format("writing {}: {}", Q(path_in), Errno(errno)));

  std::string tmp = Folder(path) + "/.posenc-tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return InvalidArgumentError(
        fmt::format("writing {}: cannot create a temporary file in {}: {}", Q(path_in), Q(Folder(path)), Errno(errno)));
  }
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return DataLossError(
        fmt::format("writing {}: {}: {} (the old file, if any, is unchanged)", Q(path_in), what, Errno(err)));
  };
  mode_t mode;
  if (exists) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (::fchmod(fd, mode) != 0) return fail("setting permissions", errno);
  const char* p = reinterpret_cast<const char*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(fmt::format("{} of {} bytes written", bytes.size() - left, bytes.size()), errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return DataLossError(
        fmt::format("writing {}: close: {} (the old file, if any, is unchanged)", Q(path_in), Errno(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return DataLossError(
        fmt::format("writing {}: rename from the temporary file: {} (the old file, if any, is "
                    "unchanged)",
                    Q(path_in), Errno(err)));
  }
  // Make the rename itself durable (best effort: a folder that cannot be opened is not an error).
  const int dfd = ::open(Folder(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  return WriteFileAtomic(path, std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

Status RefuseOutputIsInput(const std::string& out, std::span<const std::string> inputs) {
  struct stat so {};
  if (out.empty() || ::stat(out.c_str(), &so) != 0) return OkStatus();  // does not exist yet: no input is it
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    struct stat si {};
    if (::stat(in.c_str(), &si) != 0) continue;
    if (si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
      return InvalidArgumentError(
          fmt::format("output {} is the input {} (the same file): writing it would destroy "
                      "the input; choose another output path",
                      Q(out), Q(in)));
    }
    if (S_ISDIR(si.st_mode)) {
      // A model folder: every file already in it may be read (config.json, shards, the index).
      struct stat sd {};
      if (::stat(Folder(out).c_str(), &sd) == 0 && sd.st_dev == si.st_dev && sd.st_ino == si.st_ino) {
        return InvalidArgumentError(
            fmt::format("output {} is a file inside the input folder {}: writing it could "
                        "destroy an input; choose another output path",
                        Q(out), Q(in)));
      }
    }
  }
  return OkStatus();
}

}  // namespace posenc
