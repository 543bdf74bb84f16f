// .npy reader and writer. The header dict is parsed by a small strict scanner: only the three keys
// numpy writes, in any order, with Python literal syntax.
#include "posenc/io/npy.hpp"

#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "io/io_util.hpp"
#include "posenc/io/file_io.hpp"
#include "posenc/io/mapped_file.hpp"

namespace posenc {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMaxNpyDims = 64;  // numpy's NPY_MAXDIMS

struct Scanner {
  std::string_view s;
  size_t i = 0;
  void SkipSpace() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool Eat(char c) {
    SkipSpace();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    SkipSpace();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) return false;
    *out = std::string(s.substr(start, i - start));
    ++i;
    return true;
  }
  bool Word(std::string_view w) {
    SkipSpace();
    if (s.substr(i, w.size()) == w) {
      i += w.size();
      return true;
    }
    return false;
  }
  bool Int(int64_t* out) {
    SkipSpace();
    size_t start = i;
    int64_t v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      v = v * 10 + (s[i++] - '0');
    }
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix
    *out = v;
    return i > start;
  }
};

bool DescrToDType(const std::string& d, DType* t) {
  if (d.size() < 2) return false;
  const char order = d[0];
  const std::string_view code = std::string_view(d).substr(1);
  const bool single_byte = code == "u1" || code == "i1";
  if (!(order == '<' || order == '|' || (order == '='))) return false;
  if (order == '|' && !single_byte) return false;
  if (code == "f4")
    *t = DType::kF32;
  else if (code == "f2")
    *t = DType::kF16;
  else if (code == "f8")
    *t = DType::kF64;
  else if (code == "i4")
    *t = DType::kI32;
  else if (code == "i8")
    *t = DType::kI64;
  else if (code == "u1")
    *t = DType::kU8;
  else if (code == "i1")
    *t = DType::kI8;
  else
    return false;
  return true;
}

std::string DTypeToDescr(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kF64: return "<f8";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    case DType::kU8: return "|u1";
    case DType::kI8: return "|i1";
    default: return "";
  }
}

}  // namespace

Result<Array> ParseNpy(std::span<const std::byte> bytes, const std::string& name) {
  auto fail = [&](StatusCode c, const std::string& why) {
    return Status(c, fmt::format("reading {}: {}", io::Printable(name), why));
  };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    return fail(StatusCode::kDataLoss, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<int>(bytes[6]);
  const int minor = static_cast<int>(bytes[7]);
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len = static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail(StatusCode::kDataLoss, "truncated header length");
    header_len = 0;
    for (int k = 0; k < 4; ++k) header_len |= static_cast<size_t>(bytes[8 + k]) << (8 * k);
    offset = 12;
  } else {
    return fail(StatusCode::kUnimplemented,
                fmt::format("format version {}.{} (supported: 1.0, 2.0, 3.0)", major, minor));
  }
  if (minor != 0)
    return fail(StatusCode::kUnimplemented,
                fmt::format("format version {}.{} (supported: 1.0, 2.0, 3.0)", major, minor));
  if (header_len > bytes.size() - offset)
    return fail(StatusCode::kDataLoss,
                fmt::format("header of {} bytes runs past the end of the {}-byte file", header_len, bytes.size()));
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + offset, header_len);
  const size_t data_offset = offset + header_len;

  Scanner sc{header};
  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  std::vector<int64_t> shape;
  if (!sc.Eat('{')) return fail(StatusCode::kDataLoss, "header is not a dict");
  while (!sc.Eat('}')) {
    std::string key;
    const size_t key_at = sc.i;
    if (!sc.String(&key) || !sc.Eat(':'))
      return fail(StatusCode::kDataLoss, fmt::format("malformed header dict at header byte {}", key_at));
    if ((key == "descr" && have_descr) || (key == "fortran_order" && have_order) || (key == "shape" && have_shape))
      return fail(StatusCode::kDataLoss, fmt::format("header key '{}' is given twice", key));
    if (key == "descr") {
      if (!sc.String(&descr))
        return fail(StatusCode::kUnimplemented,
                    "'descr' is not a plain dtype string (structured dtypes are not supported)");
      have_descr = true;
    } else if (key == "fortran_order") {
      if (sc.Word("True"))
        fortran = true;
      else if (sc.Word("False"))
        fortran = false;
      else
        return fail(StatusCode::kDataLoss, "'fortran_order' is not True or False");
      have_order = true;
    } else if (key == "shape") {
      if (!sc.Eat('(')) return fail(StatusCode::kDataLoss, "'shape' is not a tuple");
      while (!sc.Eat(')')) {
        int64_t d;
        sc.SkipSpace();
        const size_t dim_at = sc.i;
        if (!sc.Int(&d)) {
          size_t end = dim_at;
          while (end < header.size() && end - dim_at < 40 && header[end] != ',' && header[end] != ')') ++end;
          return fail(StatusCode::kDataLoss,
                      fmt::format("'shape' dimension {} '{}' is not an integer in [0, 2^63)", shape.size(),
                                  io::Printable(header.substr(dim_at, end - dim_at))));
        }
        if (shape.size() == kMaxNpyDims)
          return fail(StatusCode::kDataLoss, fmt::format("'shape' has more than {} dimensions", kMaxNpyDims));
        shape.push_back(d);
        if (!sc.Eat(',')) {
          if (!sc.Eat(')')) return fail(StatusCode::kDataLoss, "'shape' tuple is not closed");
          break;
        }
      }
      have_shape = true;
    } else {
      return fail(StatusCode::kDataLoss, fmt::format("unknown header key '{}'", io::Printable(key)));
    }
    if (!sc.Eat(',')) {
      if (!sc.Eat('}')) return fail(StatusCode::kDataLoss, "malformed header dict");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    return fail(StatusCode::kDataLoss, "header lacks one of 'descr', 'fortran_order', 'shape'");
  if (!descr.empty() && descr[0] == '>')
    return fail(StatusCode::kUnimplemented,
                fmt::format("big-endian dtype '{}' (only little-endian is supported)", io::Printable(descr)));
  DType dtype;
  if (!DescrToDType(descr, &dtype))
    return fail(StatusCode::kUnimplemented,
                fmt::format("dtype '{}' (supported: <f2 <f4 <f8 <i4 <i8 |u1 |i1)", io::Printable(descr)));
  if (fortran) {
    int64_t big = 0;
    for (int64_t d : shape) big += d > 1;
    if (big > 1) return fail(StatusCode::kUnimplemented, "Fortran-order array (only C order is supported)");
  }
  // Count elements with overflow checks before allocating.
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      return fail(StatusCode::kDataLoss, fmt::format("shape {} overflows", ShapeToString(shape)));
    n *= static_cast<uint64_t>(d);
  }
  const uint64_t available = bytes.size() - data_offset;
  if (n > available / SizeOf(dtype) || n * SizeOf(dtype) != available) {
    if (n <= available / SizeOf(dtype) && n * SizeOf(dtype) < available)
      return fail(StatusCode::kDataLoss,
                  fmt::format("{} trailing bytes after the {} data of shape {}", available - n * SizeOf(dtype),
                              ToString(dtype), ShapeToString(shape)));
    return fail(
        StatusCode::kDataLoss,
        fmt::format("truncated: shape {} of {} needs {} data bytes, file has {}", ShapeToString(shape), ToString(dtype),
                    n <= std::numeric_limits<uint64_t>::max() / SizeOf(dtype) ? fmt::to_string(n * SizeOf(dtype))
                                                                              : std::string("more than 2^64"),
                    available));
  }
  POSENC_ASSIGN_OR_RETURN(Array a, Array::Zeros(dtype, shape));
  if (a.nbytes()) std::memcpy(a.bytes(), bytes.data() + data_offset, a.nbytes());
  return a;
}

Result<Array> ReadNpy(const std::string& path) {
  // Mapped, not read into a buffer: a directory, FIFO or device is refused before a byte is read,
  // and the only allocation is the array the header describes, checked against the file's size.
  POSENC_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  return ParseNpy(file.bytes(), path);
}

Result<std::string> SerializeNpy(const Array& a) {
  const std::string descr = DTypeToDescr(a.dtype());
  if (descr.empty())
    return InvalidArgumentError(fmt::format("writing .npy: dtype {} has no numpy equivalent", ToString(a.dtype())));
  std::string shape = "(";
  for (int64_t i = 0; i < a.ndim(); ++i)
    shape += std::to_string(a.dim(i)) + (a.ndim() == 1 ? "," : (i + 1 < a.ndim() ? ", " : ""));
  shape += ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  const bool v2 = dict.size() + 11 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const size_t hl = dict.size();
  out += static_cast<char>(hl & 0xff);
  out += static_cast<char>((hl >> 8) & 0xff);
  if (v2) {
    out += static_cast<char>((hl >> 16) & 0xff);
    out += static_cast<char>((hl >> 24) & 0xff);
  }
  out += dict;
  out.append(reinterpret_cast<const char*>(a.bytes()), a.nbytes());
  return out;
}

Status WriteNpy(const std::string& path, const Array& a) {
  POSENC_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(a));
  // A temporary file in the same folder renamed over `path`: a failed write leaves the old file.
  return WriteFileAtomic(path, bytes);
}

}  // namespace posenc
