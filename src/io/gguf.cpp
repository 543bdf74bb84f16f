// GGUF reader. Written from the format description in ggml's docs/gguf.md and the rules ggml's
// gguf.cpp enforces (counts and sizes against the remaining bytes, known types, dims product without
// overflow, aligned offsets, duplicate names); every failure is a Status, never an abort.
#include "posenc/io/gguf.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/io_util.hpp"

namespace posenc {
namespace {

using io::LoadLE;
using io::Printable;

constexpr int kMaxDims = 4;  // ggml's GGML_MAX_DIMS

struct TypeRow {
  uint32_t id;
  GgmlTypeTraits traits;
};

// Block sizes and bytes per block, from ggml-common.h's block structs.
constexpr std::array<TypeRow, 33> kTypes = {{
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},      {3, {"Q4_1", 32, 20}},
    {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},      {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},
    {10, {"Q2_K", 256, 84}},    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
    {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},
    {22, {"IQ2_S", 256, 82}},   {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},        {29, {"IQ1_M", 256, 56}},
    {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},   {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
    {0xffffffffu, {"", 0, 0}},
}};

size_t ScalarSize(uint32_t t) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    default: return 0;  // string, array, unknown
  }
}

bool IsInteger(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}
bool IsFloat(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

// Decodes one scalar of type `t` at `p` (the caller checked the size).
void DecodeScalar(GgufValueType t, const std::byte* p, GgufValue* v) {
  auto set_signed = [v](int64_t x) {
    v->i = x;
    v->u = x >= 0 ? static_cast<uint64_t>(x) : 0;
    v->f = static_cast<double>(x);
  };
  auto set_unsigned = [v](uint64_t x) {
    v->u = x;
    v->i = x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? static_cast<int64_t>(x) : 0;
    v->f = static_cast<double>(x);
  };
  switch (t) {
    case GgufValueType::kUint8: set_unsigned(LoadLE<uint8_t>(p)); break;
    case GgufValueType::kInt8: set_signed(LoadLE<int8_t>(p)); break;
    case GgufValueType::kUint16: set_unsigned(LoadLE<uint16_t>(p)); break;
    case GgufValueType::kInt16: set_signed(LoadLE<int16_t>(p)); break;
    case GgufValueType::kUint32: set_unsigned(LoadLE<uint32_t>(p)); break;
    case GgufValueType::kInt32: set_signed(LoadLE<int32_t>(p)); break;
    case GgufValueType::kUint64: set_unsigned(LoadLE<uint64_t>(p)); break;
    case GgufValueType::kInt64: set_signed(LoadLE<int64_t>(p)); break;
    case GgufValueType::kFloat32: v->f = LoadLE<float>(p); break;
    case GgufValueType::kFloat64: v->f = LoadLE<double>(p); break;
    case GgufValueType::kBool:
      v->b = LoadLE<uint8_t>(p) != 0;
      v->u = v->b;
      v->i = v->b;
      break;
    default: break;
  }
}

// A bounds-checked cursor over the file's bytes; every error names the file and the byte offset.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& file) : b_(bytes), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return b_.size() - pos_; }
  const std::byte* here() const { return b_.data() + pos_; }

  Status Need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      return DataLossError(
          fmt::format("reading GGUF '{}': {} needs {} bytes at byte {} but only {} remain "
                      "(file size {}): truncated, or a length past the end",
                      file_, what, n, pos_, remaining(), b_.size()));
    }
    return OkStatus();
  }
  template <typename T>
  Status Read(T* out, std::string_view what) {
    POSENC_RETURN_IF_ERROR(Need(sizeof(T), what));
    *out = LoadLE<T>(here());
    pos_ += sizeof(T);
    return OkStatus();
  }
  Status Skip(uint64_t n, std::string_view what) {
    POSENC_RETURN_IF_ERROR(Need(n, what));
    pos_ += static_cast<size_t>(n);
    return OkStatus();
  }
  Status ReadString(std::string_view* out, std::string_view what) {
    uint64_t len = 0;
    POSENC_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return DataLossError(
          fmt::format("reading GGUF '{}': {} has string length {} at byte {} but only {} bytes "
                      "remain (file size {})",
                      file_, what, len, pos_ - 8, remaining(), b_.size()));
    }
    *out = std::string_view(reinterpret_cast<const char*>(here()), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return OkStatus();
  }

 private:
  std::span<const std::byte> b_;
  const std::string& file_;
  size_t pos_ = 0;
};

Status ParseValue(Cursor& c, const std::string& file, const std::string& what, uint32_t type, GgufValue* v) {
  if (type > static_cast<uint32_t>(GgufValueType::kFloat64)) {
    return DataLossError(
        fmt::format("reading GGUF '{}': {} has unknown value type {} (0..12 are defined)", file, what, type));
  }
  v->type = static_cast<GgufValueType>(type);
  if (v->type == GgufValueType::kString) return c.ReadString(&v->str, what);
  if (v->type != GgufValueType::kArray) {
    const size_t size = ScalarSize(type);
    POSENC_RETURN_IF_ERROR(c.Need(size, what));
    if (v->type == GgufValueType::kBool && LoadLE<uint8_t>(c.here()) > 1) {
      return DataLossError(fmt::format("reading GGUF '{}': {} is a bool with byte value {} (only 0 and 1 are valid)",
                                       file, what, LoadLE<uint8_t>(c.here())));
    }
    DecodeScalar(v->type, c.here(), v);
    return c.Skip(size, what);
  }
  uint32_t elem = 0;
  POSENC_RETURN_IF_ERROR(c.Read(&elem, what + " (array element type)"));
  POSENC_RETURN_IF_ERROR(c.Read(&v->count, what + " (array count)"));
  if (elem == static_cast<uint32_t>(GgufValueType::kArray)) {
    return UnimplementedError(fmt::format("reading GGUF '{}': {} is an array of arrays (not supported)", file, what));
  }
  if (elem > static_cast<uint32_t>(GgufValueType::kFloat64)) {
    return DataLossError(fmt::format("reading GGUF '{}': {} is an array of unknown value type {} (0..12 are defined)",
                                     file, what, elem));
  }
  v->elem_type = static_cast<GgufValueType>(elem);
  if (v->elem_type == GgufValueType::kString) {
    // Each string takes at least its 8-byte length: bound the count before reserving.
    if (v->count > c.remaining() / 8) {
      return DataLossError(fmt::format("reading GGUF '{}': {} claims {} strings at byte {} but only {} bytes remain",
                                       file, what, v->count, c.pos(), c.remaining()));
    }
    v->strings.reserve(static_cast<size_t>(std::min<uint64_t>(v->count, 1 << 16)));
    for (uint64_t k = 0; k < v->count; ++k) {
      std::string_view s;
      POSENC_RETURN_IF_ERROR(c.ReadString(&s, fmt::format("{} element {}", what, k)));
      v->strings.push_back(s);
    }
    return OkStatus();
  }
  const size_t size = ScalarSize(elem);
  uint64_t total = 0;
  if (io::MulOverflows(v->count, size, &total) || total > c.remaining()) {
    return DataLossError(
        fmt::format("reading GGUF '{}': {} claims {} elements of {} ({} bytes each) at byte {} but "
                    "only {} bytes remain",
                    file, what, v->count, GgufValueTypeName(elem), size, c.pos(), c.remaining()));
  }
  v->raw = std::span<const std::byte>(c.here(), static_cast<size_t>(total));
  if (v->elem_type == GgufValueType::kBool) {
    for (size_t k = 0; k < v->raw.size(); ++k) {
      if (static_cast<uint8_t>(v->raw[k]) > 1) {
        return DataLossError(
            fmt::format("reading GGUF '{}': {} element {} is a bool with byte value {} (only 0 and 1 "
                        "are valid)",
                        file, what, k, static_cast<uint8_t>(v->raw[k])));
      }
    }
  }
  return c.Skip(total, what);
}

std::string KeyLabel(size_t index, std::string_view key) {
  return fmt::format("metadata key #{} '{}'", index, Printable(key));
}

}  // namespace

bool GetGgmlTypeTraits(uint32_t type, GgmlTypeTraits* out) {
  for (const TypeRow& row : kTypes) {
    if (row.id == type && row.traits.block_size > 0) {
      *out = row.traits;
      return true;
    }
  }
  return false;
}

namespace {
constexpr std::pair<GgmlType, DType> kGgmlDTypes[] = {
    {GgmlType::kF32, DType::kF32},   {GgmlType::kF16, DType::kF16},   {GgmlType::kBF16, DType::kBF16},
    {GgmlType::kF64, DType::kF64},   {GgmlType::kI8, DType::kI8},     {GgmlType::kI32, DType::kI32},
    {GgmlType::kI64, DType::kI64},   {GgmlType::kQ8_0, DType::kQ8_0}, {GgmlType::kQ4_0, DType::kQ4_0},
    {GgmlType::kQ4_1, DType::kQ4_1}, {GgmlType::kQ5_0, DType::kQ5_0}, {GgmlType::kQ5_1, DType::kQ5_1},
    {GgmlType::kQ4_K, DType::kQ4_K}, {GgmlType::kQ5_K, DType::kQ5_K}, {GgmlType::kQ6_K, DType::kQ6_K}};
}  // namespace

bool DTypeOfGgmlType(uint32_t ggml_type, DType* out) {
  for (const auto& [g, d] : kGgmlDTypes) {
    if (static_cast<uint32_t>(g) == ggml_type) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool GgmlTypeOfDType(DType dtype, uint32_t* out) {
  for (const auto& [g, d] : kGgmlDTypes) {
    if (d == dtype) {
      *out = static_cast<uint32_t>(g);
      return true;
    }
  }
  return false;
}

std::string GgmlTypeName(uint32_t type) {
  GgmlTypeTraits t;
  if (GetGgmlTypeTraits(type, &t)) return std::string(t.name);
  return fmt::format("unknown type {}", type);
}

std::string GgufValueTypeName(uint32_t type) {
  static constexpr std::string_view kNames[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                                "bool",  "string", "array",  "uint64", "int64",  "float64"};
  if (type < std::size(kNames)) return std::string(kNames[type]);
  return fmt::format("unknown type {}", type);
}

uint64_t GgufTensorInfo::row_bytes() const {
  GgmlTypeTraits t;
  if (dims.empty() || !GetGgmlTypeTraits(type, &t)) return 0;
  return static_cast<uint64_t>(dims[0] / t.block_size) * t.type_size;
}

Result<GgufFile> GgufFile::Parse(MappedFile mapped) {
  GgufFile g;
  g.file_ = std::move(mapped);
  const std::string file = io::Printable(g.file_.name());  // for messages
  const std::span<const std::byte> bytes = g.file_.bytes();
  Cursor c(bytes, file);

  // Magic and version first, with a hint for big-endian or newer files.
  if (bytes.size() < 4) {
    return DataLossError(
        fmt::format("reading GGUF '{}': file has {} bytes, too short for the magic 'GGUF'", file, bytes.size()));
  }
  if (std::memcmp(bytes.data(), "GGUF", 4) != 0) {
    return DataLossError(fmt::format("reading GGUF '{}': bad magic '{}' (expected 'GGUF'): not a GGUF file", file,
                                     Printable(std::string_view(reinterpret_cast<const char*>(bytes.data()), 4))));
  }
  POSENC_RETURN_IF_ERROR(c.Skip(4, "magic"));
  POSENC_RETURN_IF_ERROR(c.Read(&g.version_, "header (version)"));
  if (g.version_ != 2 && g.version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(g.version_);
    if (g.version_ != 0 && (g.version_ & 0xffffu) == 0 && swapped >= 1 && swapped <= 3) {
      return UnimplementedError(
          fmt::format("reading GGUF '{}': version field reads {} (0x{:08x}); this looks like a "
                      "big-endian GGUF (version {}), which posenc does not read",
                      file, g.version_, g.version_, swapped));
    }
    if (g.version_ == 1) {
      return UnimplementedError(
          fmt::format("reading GGUF '{}': GGUF version 1 is obsolete and not supported "
                      "(versions 2 and 3 are)",
                      file));
    }
    if (g.version_ > 3) {
      return UnimplementedError(
          fmt::format("reading GGUF '{}': unknown GGUF version {} (posenc reads 2 and 3; the "
                      "file may be newer than this reader)",
                      file, g.version_));
    }
    return DataLossError(
        fmt::format("reading GGUF '{}': invalid GGUF version {} (2 and 3 are valid)", file, g.version_));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  POSENC_RETURN_IF_ERROR(c.Read(&tensor_count, "header (tensor count)"));
  POSENC_RETURN_IF_ERROR(c.Read(&kv_count, "header (metadata count)"));
  // Minimum sizes: a pair is an 8-byte key length, a 4-byte type and at least 1 byte of value; a
  // tensor info is an 8-byte name length, 4-byte n_dims, 8 bytes per dim (>= 1), 4-byte type, 8-byte offset.
  if (kv_count > c.remaining() / 13) {
    return DataLossError(
        fmt::format("reading GGUF '{}': header claims {} metadata pairs but only {} bytes remain "
                    "(each needs at least 13)",
                    file, kv_count, c.remaining()));
  }
  if (tensor_count > c.remaining() / 32) {
    return DataLossError(
        fmt::format("reading GGUF '{}': header claims {} tensors but only {} bytes remain (each "
                    "tensor info needs at least 32)",
                    file, tensor_count, c.remaining()));
  }

  std::unordered_set<std::string_view> keys;
  // Counts are bounded by the bytes left, but an entry in memory is larger than its least size in
  // the file: reserve at most kMaxReserve up front and let the vectors grow with what was parsed.
  constexpr uint64_t kMaxReserve = 4096;
  g.kv_.reserve(static_cast<size_t>(std::min(kv_count, kMaxReserve)));
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string_view key;
    POSENC_RETURN_IF_ERROR(c.ReadString(&key, fmt::format("metadata key #{}", k)));
    const std::string label = KeyLabel(static_cast<size_t>(k), key);
    if (!IsValidUtf8(key)) {
      return DataLossError(fmt::format("reading GGUF '{}': {} is not valid UTF-8", file, label));
    }
    if (!keys.insert(key).second) {
      return DataLossError(fmt::format("reading GGUF '{}': duplicate {} (keys must be unique)", file, label));
    }
    uint32_t type = 0;
    POSENC_RETURN_IF_ERROR(c.Read(&type, label + " (value type)"));
    GgufKeyValue kv;
    kv.key = std::string(key);
    POSENC_RETURN_IF_ERROR(ParseValue(c, file, label, type, &kv.value));
    g.kv_.push_back(std::move(kv));
  }

  if (const GgufValue* a = g.Find("general.alignment")) {
    if (a->type != GgufValueType::kUint32) {
      return DataLossError(fmt::format("reading GGUF '{}': general.alignment is {} (must be uint32)", file,
                                       GgufValueTypeName(static_cast<uint32_t>(a->type))));
    }
    if (a->u == 0 || !std::has_single_bit(a->u)) {
      return DataLossError(
          fmt::format("reading GGUF '{}': general.alignment = {} (must be a power of two)", file, a->u));
    }
    g.alignment_ = a->u;
  }

  std::unordered_set<std::string_view> names;
  g.tensors_.reserve(static_cast<size_t>(std::min(tensor_count, kMaxReserve)));
  for (uint64_t k = 0; k < tensor_count; ++k) {
    std::string_view name;
    POSENC_RETURN_IF_ERROR(c.ReadString(&name, fmt::format("tensor info #{} name", k)));
    const std::string label = fmt::format("tensor #{} '{}'", k, Printable(name));
    if (!IsValidUtf8(name)) {
      return DataLossError(fmt::format("reading GGUF '{}': {} name is not valid UTF-8", file, label));
    }
    if (!names.insert(name).second) {
      return DataLossError(fmt::format("reading GGUF '{}': duplicate {} (tensor names must be unique)", file, label));
    }
    GgufTensorInfo info;
    info.name = std::string(name);
    uint32_t n_dims = 0;
    POSENC_RETURN_IF_ERROR(c.Read(&n_dims, label + " (n_dims)"));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return DataLossError(
          fmt::format("reading GGUF '{}': {} has {} dims (1 to {} are valid)", file, label, n_dims, kMaxDims));
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      POSENC_RETURN_IF_ERROR(c.Read(&ne, label + " (dims)"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLossError(fmt::format("reading GGUF '{}': {} dim {} = {} is past INT64_MAX", file, label, d, ne));
      }
      info.dims.push_back(static_cast<int64_t>(ne));
      if (io::MulOverflows(elements, ne, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLossError(fmt::format("reading GGUF '{}': {} dims {} have a product past INT64_MAX", file, label,
                                         fmt::join(info.dims, ", ")));
      }
    }
    info.num_elements = static_cast<int64_t>(elements);
    POSENC_RETURN_IF_ERROR(c.Read(&info.type, label + " (type)"));
    GgmlTypeTraits traits;
    if (!GetGgmlTypeTraits(info.type, &traits)) {
      return UnimplementedError(fmt::format("reading GGUF '{}': {} has unknown ggml type {}", file, label, info.type));
    }
    if (info.dims[0] % traits.block_size != 0) {
      return DataLossError(fmt::format("reading GGUF '{}': {} row length {} is not a multiple of the {} block size {}",
                                       file, label, info.dims[0], traits.name, traits.block_size));
    }
    const uint64_t blocks = elements / static_cast<uint64_t>(traits.block_size);
    if (io::MulOverflows(blocks, traits.type_size, &info.nbytes)) {
      return DataLossError(fmt::format("reading GGUF '{}': {} byte size overflows ({} blocks of {} bytes)", file, label,
                                       blocks, traits.type_size));
    }
    POSENC_RETURN_IF_ERROR(c.Read(&info.offset, label + " (offset)"));
    if (info.offset % g.alignment_ != 0) {
      return DataLossError(fmt::format("reading GGUF '{}': {} offset {} is not a multiple of the alignment {}", file,
                                       label, info.offset, g.alignment_));
    }
    g.tensors_.push_back(std::move(info));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = c.pos();
  uint64_t padded = 0;
  if (io::AddOverflows(header_end, g.alignment_ - 1, &padded)) {
    return DataLossError(fmt::format("reading GGUF '{}': data offset overflows", file));
  }
  g.data_offset_ = padded / g.alignment_ * g.alignment_;
  if (!g.tensors_.empty()) {
    const uint64_t size = bytes.size();
    if (g.data_offset_ > size) {
      return DataLossError(
          fmt::format("reading GGUF '{}': data section would start at byte {} past the end of the "
                      "file ({} bytes) but there are {} tensors",
                      file, g.data_offset_, size, g.tensors_.size()));
    }
    const uint64_t data_size = size - g.data_offset_;
    for (const GgufTensorInfo& t : g.tensors_) {
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        uint64_t end = 0;
        const std::string end_text = io::AddOverflows(t.offset, t.nbytes, &end) ? "2^64+" : std::to_string(end);
        return DataLossError(
            fmt::format("reading GGUF '{}': tensor '{}' data [{}, {}) lies past the end of the data "
                        "section ({} bytes, file size {})",
                        file, Printable(t.name), t.offset, end_text, data_size, size));
      }
    }
    std::vector<size_t> order(g.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return g.tensors_[a].offset < g.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = g.tensors_[order[k - 1]];
      const GgufTensorInfo& next = g.tensors_[order[k]];
      if (prev.nbytes > 0 && next.nbytes > 0 && prev.offset + prev.nbytes > next.offset) {
        return DataLossError(fmt::format("reading GGUF '{}': tensor '{}' [{}, {}) overlaps tensor '{}' [{}, {})", file,
                                         Printable(prev.name), prev.offset, prev.offset + prev.nbytes,
                                         Printable(next.name), next.offset, next.offset + next.nbytes));
      }
    }
  }
  return g;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  for (const GgufKeyValue& kv : kv_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

namespace {
Status NotFoundKey(const std::string& file, std::string_view key) {
  return NotFoundError(fmt::format("GGUF '{}': metadata key '{}' not found", file, key));
}
Status WrongType(const std::string& file, std::string_view key, const GgufValue& v, std::string_view wanted) {
  std::string type = GgufValueTypeName(static_cast<uint32_t>(v.type));
  if (v.type == GgufValueType::kArray) {
    type = fmt::format("array of {}", GgufValueTypeName(static_cast<uint32_t>(v.elem_type)));
  }
  return InvalidArgumentError(fmt::format("GGUF '{}': metadata key '{}' is {}, not {}", file, key, type, wanted));
}
Status CheckIntRange(const std::string& file, std::string_view key, GgufValueType t, uint64_t u) {
  if (t == GgufValueType::kUint64 && u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return OutOfRangeError(fmt::format("GGUF '{}': metadata key '{}' = {} does not fit int64", file, key, u));
  }
  return OkStatus();
}
}  // namespace

Result<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFoundKey(name(), key);
  if (v->type != GgufValueType::kString) return WrongType(name(), key, *v, "a string");
  return std::string(v->str);
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFoundKey(name(), key);
  if (!IsInteger(v->type)) return WrongType(name(), key, *v, "an integer");
  POSENC_RETURN_IF_ERROR(CheckIntRange(name(), key, v->type, v->u));
  return v->i;
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFoundKey(name(), key);
  if (!IsInteger(v->type) && !IsFloat(v->type)) return WrongType(name(), key, *v, "a number");
  return v->f;
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFoundKey(name(), key);
  if (v->type != GgufValueType::kBool) return WrongType(name(), key, *v, "a bool");
  return v->b;
}

Result<const GgufValue*> GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFoundKey(name(), key);
  if (v->type != GgufValueType::kArray) return WrongType(name(), key, *v, "an array");
  return v;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  POSENC_ASSIGN_OR_RETURN(const GgufValue* v, GetArray(key));
  if (!IsInteger(v->elem_type)) return WrongType(name(), key, *v, "an array of integers");
  const size_t size = ScalarSize(static_cast<uint32_t>(v->elem_type));
  std::vector<int64_t> out(static_cast<size_t>(v->count));
  for (size_t k = 0; k < out.size(); ++k) {
    GgufValue e;
    DecodeScalar(v->elem_type, v->raw.data() + k * size, &e);
    if (v->elem_type == GgufValueType::kUint64 && e.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return OutOfRangeError(
          fmt::format("GGUF '{}': metadata key '{}' element {} = {} does not fit int64", name(), key, k, e.u));
    }
    out[k] = e.i;
  }
  return out;
}

Result<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  POSENC_ASSIGN_OR_RETURN(const GgufValue* v, GetArray(key));
  if (!IsInteger(v->elem_type) && !IsFloat(v->elem_type)) return WrongType(name(), key, *v, "an array of numbers");
  const size_t size = ScalarSize(static_cast<uint32_t>(v->elem_type));
  std::vector<double> out(static_cast<size_t>(v->count));
  for (size_t k = 0; k < out.size(); ++k) {
    GgufValue e;
    DecodeScalar(v->elem_type, v->raw.data() + k * size, &e);
    out[k] = e.f;
  }
  return out;
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  POSENC_ASSIGN_OR_RETURN(const GgufValue* v, GetArray(key));
  if (v->elem_type != GgufValueType::kString) return WrongType(name(), key, *v, "an array of strings");
  return v->strings;
}

Result<const GgufTensorInfo*> GgufFile::FindTensor(std::string_view tensor) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == tensor) return &t;
  }
  return NotFoundError(
      fmt::format("GGUF '{}': tensor '{}' not found ({} tensors in the file)", name(), tensor, tensors_.size()));
}

Result<std::span<const std::byte>> GgufFile::TensorData(const GgufTensorInfo& info) const {
  const uint64_t size = file_.size();
  if (data_offset_ > size || info.offset > size - data_offset_ || info.nbytes > size - data_offset_ - info.offset) {
    return OutOfRangeError(fmt::format("GGUF '{}': tensor '{}' data [{}, +{}) is outside the data section", name(),
                                       Printable(info.name), info.offset, info.nbytes));
  }
  return file_.bytes().subspan(static_cast<size_t>(data_offset_ + info.offset), static_cast<size_t>(info.nbytes));
}

}  // namespace posenc
