// GGUF files (ggml/llama.cpp model format), versions 2 and 3, read-only and memory-mapped.
//
// Layout (little-endian): "GGUF", uint32 version, uint64 tensor_count, uint64 kv_count; kv_count
// metadata pairs (string key, uint32 value type, value); tensor_count tensor infos (string name,
// uint32 n_dims, uint64 dims[n_dims] with dims[0] varying fastest, uint32 ggml type, uint64 offset
// relative to the data section); padding to `general.alignment` (default 32); the data section.
// A string is a uint64 byte length and that many bytes (no terminator).
//
// Every count, length and offset is checked against the bytes that remain (and against overflow)
// before anything is allocated; a file that breaks a rule is rejected with kDataLoss (or
// kUnimplemented for a newer version / big-endian file / unknown tensor type) and a one-line message
// naming the file, the key or tensor, the value and the rule. Nothing is read outside the file.
//
// Thread-safety: a GgufFile is immutable after Open; any number of threads may read it.
//
// Example:
//   auto file = GgufFile::Open("model.gguf");
//   if (!file.ok()) return file.status();
//   int64_t d_model = file->GetInt("llama.embedding_length").value();
//   auto emb = file->FindTensor("token_embd.weight");          // Result<const GgufTensorInfo*>
//   auto bytes = file->TensorData(**emb);                        // Result<span<const std::byte>>
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/dtype.hpp"
#include "posenc/io/mapped_file.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// ggml tensor types (the numbering of ggml.h's enum ggml_type; gaps are removed types).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

// The reader's edge: a GGUF tensor's type id as posenc's one element-type vocabulary (DType), for the
// ids that have one (F32, F16, BF16, F64, I8, I32, I64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K); false for the rest (IQ*, Q2_K, ...: listed, never read). GgmlTypeOfDType is the inverse.
bool DTypeOfGgmlType(uint32_t ggml_type, DType* out);
bool GgmlTypeOfDType(DType dtype, uint32_t* out);

// Size facts of a ggml type (every id a file may hold, for the reader's size checks; a type with a
// DType has TraitsOf's block_size and type_size): `block_size` elements are stored in `type_size` bytes.
struct GgmlTypeTraits {
  std::string_view name;  // "F32", "Q4_K", ...
  int64_t block_size = 0;
  size_t type_size = 0;
};
// false for a number that is not a known ggml type (removed types 4, 5, 31-33, 36-38 included).
bool GetGgmlTypeTraits(uint32_t type, GgmlTypeTraits* out);
// "Q4_K", or "unknown type 99".
std::string GgmlTypeName(uint32_t type);

// Metadata value types (gguf.h's enum gguf_type).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
// "uint8", ..., "array"; "unknown type N" otherwise.
std::string GgufValueTypeName(uint32_t type);

// One metadata value; views into the file's bytes (valid while the GgufFile lives).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  // Scalars: integers in `i` (signed types and unsigned up to INT64_MAX) and `u` (unsigned types,
  // and non-negative signed ones), floats in `f`, bools in `b` (0/1 only; other bytes are rejected).
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  bool b = false;
  std::string_view str;  // kString
  // kArray: the element type (never kArray: nested arrays are rejected as kUnimplemented), the count,
  // the raw little-endian elements of a numeric/bool array, or the strings of a string array.
  GgufValueType elem_type = GgufValueType::kUint8;
  uint64_t count = 0;
  std::span<const std::byte> raw;
  std::vector<std::string_view> strings;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] (ne0) varies fastest; 1 to 4 dims
  uint32_t type = 0;          // a GgmlType value, known (checked at Open)
  uint64_t offset = 0;        // bytes from the start of the data section, a multiple of the alignment
  uint64_t nbytes = 0;        // bytes of data
  int64_t num_elements = 0;   // product of dims
  // Rows of dims[0] elements: num_elements / dims[0] (0 when dims[0] == 0), and bytes per row.
  int64_t num_rows() const { return dims.empty() || dims[0] == 0 ? 0 : num_elements / dims[0]; }
  uint64_t row_bytes() const;
  GgmlType ggml_type() const { return static_cast<GgmlType>(type); }
};

// Open(path) and FromBytes(bytes, name) (MappedFileReader) map or copy the file and call Parse.
class GgufFile : public MappedFileReader<GgufFile> {
 public:
  GgufFile() = default;
  // Parses the mapped file: header, every metadata pair, every tensor info, and checks that each
  // tensor lies inside the data section without overlapping another. Cost: one pass over the header
  // (the vocabulary strings included); tensor data is not read.
  static Result<GgufFile> Parse(MappedFile file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // byte where the data section starts
  uint64_t file_size() const { return file_.size(); }
  const std::vector<GgufKeyValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // nullptr if absent.
  const GgufValue* Find(std::string_view key) const;
  // Typed getters. kNotFound naming the key and file when absent; kInvalidArgument naming the key
  // and the actual type when the type does not fit. GetInt accepts every integer type (a uint64
  // above INT64_MAX is kOutOfRange); GetFloat accepts float32/float64 and integers; GetBool only bool.
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  // Arrays: the value must be an array (kInvalidArgument otherwise, naming key and type); the element
  // type must fit as for the scalar getters (kInvalidArgument naming the element type).
  Result<const GgufValue*> GetArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  Result<std::vector<double>> GetFloatArray(std::string_view key) const;
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;

  // kNotFound naming the tensor and the file when absent.
  Result<const GgufTensorInfo*> FindTensor(std::string_view name) const;
  // The tensor's bytes inside the mapping (bounds re-checked: kOutOfRange for an info that does not
  // belong to this file's data section).
  Result<std::span<const std::byte>> TensorData(const GgufTensorInfo& info) const;

 private:
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace posenc
