// safetensors files (Hugging Face), read-only and memory-mapped.
//
// Layout: uint64 little-endian N, then N bytes of UTF-8 JSON, then the data buffer. The JSON object
// maps tensor names to {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]} (byte
// offsets into the data buffer) and may hold "__metadata__": {string: string}.
//
// Checks (each failure kDataLoss naming the file, the tensor and the rule): N within the file, the
// header valid JSON and valid UTF-8, an object, no duplicate names, every entry well formed, begin <=
// end <= data size, end - begin == product(shape) * dtype size (no overflow), no two tensors
// overlapping. dtypes: every safetensors name is accepted for listing; posenc reads the data of F32,
// F16 and BF16 only (TensorRows on any other dtype is kUnimplemented naming it); an unknown dtype
// name is kUnimplemented.
//
// Thread-safety: immutable after Open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "posenc/io/mapped_file.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;            // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;   // row-major, outermost first
  uint64_t begin = 0, end = 0;  // byte offsets into the data buffer
  size_t element_size = 0;
  int64_t num_elements = 0;
};

// Open(path) and FromBytes(bytes, name) (MappedFileReader) map or copy the file and call Parse.
class SafetensorsFile : public MappedFileReader<SafetensorsFile> {
 public:
  SafetensorsFile() = default;
  static Result<SafetensorsFile> Parse(MappedFile file);

  uint64_t header_size() const { return header_size_; }
  uint64_t data_offset() const { return 8 + header_size_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in header order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // nullptr if absent.
  const SafetensorsTensor* Find(const std::string& tensor) const;
  // kNotFound naming the tensor and file.
  Result<const SafetensorsTensor*> FindTensor(const std::string& tensor) const;
  // The tensor's bytes inside the mapping.
  std::span<const std::byte> TensorData(const SafetensorsTensor& t) const;

 private:
  uint64_t header_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace posenc
