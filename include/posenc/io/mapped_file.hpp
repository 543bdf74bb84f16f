// MappedFile: the read-only bytes of a model file, memory-mapped (or, for tests and fuzzing, an owned
// copy of caller bytes). Readers (GGUF, safetensors, llama2.c) parse from it and hand out spans that
// stay valid as long as any copy of the MappedFile (or of the reader holding it) is alive.
//
// Mapping costs no reads: pages are faulted in only when touched, so looking up a few rows of a
// large embedding table touches a few pages, not the whole file.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "posenc/core/status.hpp"

namespace posenc {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only. kNotFound if it cannot be opened (the message names the path and errno's
  // text), kInvalidArgument "not a regular file" for a directory, FIFO or device
  // (opened non-blocking, so a FIFO does not wait for a writer). An empty file is valid (bytes() is empty).
  static Result<MappedFile> Open(const std::string& path);
  // An owned copy of `bytes`, named `name` in messages (tests, fuzzing, in-memory files).
  static MappedFile FromBytes(std::span<const std::byte> bytes, std::string name);

  std::span<const std::byte> bytes() const;
  size_t size() const { return bytes().size(); }
  const std::string& name() const;  // the path, or the name given to FromBytes

 private:
  struct Storage;
  std::shared_ptr<const Storage> storage_;  // shared: copies are cheap; unmapped with the last copy
};

// What every reader over one mapped file shares (GgufFile, SafetensorsFile and Llama2cFile derive from
// it): Open maps `path` (errors as MappedFile::Open), FromBytes reads a copy of `bytes` (`name` stands
// for the file in messages); both hand the mapping to File::Parse, which reads and checks it and keeps
// it in file_, so the views it hands out stay valid while the reader or a copy of it lives.
template <typename File>
class MappedFileReader {
 public:
  static Result<File> Open(const std::string& path) {
    POSENC_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    return File::Parse(std::move(file));
  }
  static Result<File> FromBytes(std::span<const std::byte> bytes, const std::string& name) {
    return File::Parse(MappedFile::FromBytes(bytes, name));
  }

  const std::string& name() const { return file_.name(); }
  const MappedFile& file() const { return file_; }

 protected:
  MappedFile file_;
};

// Hints the kernel that `bytes` (inside a mapping) will be read at random, a few rows at a time: no
// readahead, so a page fault brings in that page only and the resident set grows by about the rows
// touched. Applies to the whole pages inside the span; a no-op where unsupported. Never fails.
void AdviseRandomAccess(std::span<const std::byte> bytes);

}  // namespace posenc
