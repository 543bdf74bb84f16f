// Reading and writing whole files safely: the only way posenc's readers and the CLI touch paths.
//
// Reading: a path that is a directory, FIFO, socket or device is refused as "not a regular file"
// before a byte is read (opened with O_NONBLOCK, so a FIFO never blocks; checked with fstat after
// following links, so a config.json that links to /dev/zero is refused, not read until memory runs
// out). Text files read whole are bounded (kMaxTextFileBytes unless the caller states another bound).
//
// Writing: WriteFileAtomic writes a temporary file in the target's folder, flushes and fsyncs it,
// then renames it over the target. A failed write (full disk, read-only folder, a directory in the
// way) leaves the old target byte for byte and removes the temporary; errors carry errno's text.
//
// RefuseOutputIsInput: an output path that names one of the command's inputs (the same file, also
// through symlinks or hard links: same st_dev and st_ino) is refused before anything is written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "posenc/core/status.hpp"

namespace posenc {

// The largest text file (config.json, ggml parameter JSON, a golden case.json) read whole: 64 MiB.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{64} << 20;

// OK if `path` (links followed) is a regular file. kNotFound naming the path and errno's text if it
// cannot be stat'ed; kInvalidArgument "reading '<path>': not a regular file (a directory)" otherwise.
Status CheckRegularFile(const std::string& path);
// The whole of `path`, at most `max_bytes` (kOutOfRange naming the size and the bound beyond).
Result<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes = kMaxTextFileBytes);

// Writes `bytes` to `path` atomically (see above). A target that exists and is not a regular file is
// refused; a target that is a symlink replaces the file it points to; a new file gets 0666 & ~umask,
// a replaced one keeps its permission bits.
Status WriteFileAtomic(const std::string& path, std::span<const std::byte> bytes);
Status WriteFileAtomic(const std::string& path, std::string_view bytes);

// kInvalidArgument "output '<out>' is the input '<in>' (the same file): ..." when `out` exists and is
// the same file as any of `inputs` (empty strings are skipped; inputs that do not exist are not it),
// or, for an input that is a folder (a Hugging Face model folder), an existing file directly inside it.
Status RefuseOutputIsInput(const std::string& out, std::span<const std::string> inputs);

}  // namespace posenc
