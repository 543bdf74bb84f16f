// Array storage and conversions.
#include "posenc/core/array.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include <fmt/format.h>

namespace posenc {

std::string ShapeToString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void Array::Free::operator()(std::byte* p) const { std::free(p); }

void Array::CheckType(DType t) const {
  if (t != dtype_) std::abort();
}

Result<Array> Array::Zeros(DType dtype, std::vector<int64_t> shape) {
  if (!IsElementType(dtype))
    return InvalidArgumentError(
        fmt::format("array of {}: a block type (rows of blocks), not an element type", ToString(dtype)));
  int64_t n = 1;
  const size_t elem = SizeOf(dtype);
  for (int64_t d : shape) {
    if (d < 0)
      return InvalidArgumentError(fmt::format("array shape {} has a negative dimension", ShapeToString(shape)));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return InvalidArgumentError(
          fmt::format("array shape {} has more elements than int64 holds", ShapeToString(shape)));
    n *= d;
  }
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / elem / 2)
    return InvalidArgumentError(
        fmt::format("array shape {} needs more bytes than memory can address", ShapeToString(shape)));
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.size_ = n;
  const size_t bytes = (static_cast<size_t>(n) * elem + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  if (p == nullptr)
    return InvalidArgumentError(fmt::format("cannot allocate {} bytes for array {}", bytes, ShapeToString(a.shape_)));
  std::memset(p, 0, bytes == 0 ? 64 : bytes);
  a.data_.reset(static_cast<std::byte*>(p));
  return a;
}

Array::Array(const Array& other) { *this = other; }

Array& Array::operator=(const Array& other) {
  if (this == &other) return *this;
  Result<Array> copy = Zeros(other.dtype_, other.shape_);
  // The source exists, so its size is valid: only memory can be gone. Thrown like any allocation
  // failure (a copy has no Status to return), it is caught at the CLI's command boundary.
  if (!copy.ok()) throw std::bad_alloc();
  if (other.nbytes()) std::memcpy(copy->bytes(), other.bytes(), other.nbytes());
  *this = std::move(copy).value();
  return *this;
}

Status Array::Reshape(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgumentError(fmt::format("reshape to {}: negative dimension", ShapeToString(shape)));
    n *= d;
  }
  if (n != size_)
    return InvalidArgumentError(fmt::format("reshape {} to {}: element counts differ ({} vs {})", ShapeToString(shape_),
                                            ShapeToString(shape), size_, n));
  shape_ = std::move(shape);
  return OkStatus();
}

namespace {

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64; }

// One element of type T from (to) unaligned bytes.
template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void Store(T v, std::byte* p) {
  std::memcpy(p, &v, sizeof(T));
}
// Stores v as a T if T holds it; false (nothing stored) otherwise.
template <typename T>
bool StoreIfFits(int64_t v, std::byte* p) {
  if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
  Store(static_cast<T>(v), p);
  return true;
}

double LoadF64(const std::byte* p, DType t) {
  switch (t) {
    case DType::kF32: return Load<float>(p);
    case DType::kF16: return F16ToF32(Load<f16_t>(p));
    case DType::kBF16: return BF16ToF32(Load<bf16_t>(p));
    case DType::kF64: return Load<double>(p);
    default: return 0;
  }
}

int64_t LoadI64(const std::byte* p, DType t) {
  switch (t) {
    case DType::kI32: return Load<int32_t>(p);
    case DType::kI64: return Load<int64_t>(p);
    case DType::kU8: return Load<uint8_t>(p);
    case DType::kI8: return Load<int8_t>(p);
    default: return 0;
  }
}

}  // namespace

Result<Array> Array::AsType(DType to) const {
  if (to == dtype_) return Array(*this);
  if (IsFloat(to) != IsFloat(dtype_))
    return InvalidArgumentError(fmt::format("cannot convert {} array to {}: float and integer types do not mix",
                                            posenc::ToString(dtype_), posenc::ToString(to)));
  POSENC_ASSIGN_OR_RETURN(Array out, Zeros(to, shape_));
  const size_t in_size = SizeOf(dtype_);
  const size_t out_size = SizeOf(to);
  for (int64_t i = 0; i < size_; ++i) {
    const std::byte* src = bytes() + static_cast<size_t>(i) * in_size;
    std::byte* dst = out.bytes() + static_cast<size_t>(i) * out_size;
    if (IsFloat(to)) {
      const double v = LoadF64(src, dtype_);
      // float64 -> float16/bfloat16 goes through float32: double rounding is possible but only for
      // values within 2^-29 relative of a tie; posenc's narrowing of computed values happens from float32.
      switch (to) {
        case DType::kF32: Store(static_cast<float>(v), dst); break;
        case DType::kF64: Store(v, dst); break;
        case DType::kF16: Store(F32ToF16(static_cast<float>(v)), dst); break;
        case DType::kBF16: Store(F32ToBF16(static_cast<float>(v)), dst); break;
        default: break;
      }
    } else {
      const int64_t v = LoadI64(src, dtype_);
      bool fits = true;
      switch (to) {
        case DType::kI32: fits = StoreIfFits<int32_t>(v, dst); break;
        case DType::kI64: fits = StoreIfFits<int64_t>(v, dst); break;
        case DType::kU8: fits = StoreIfFits<uint8_t>(v, dst); break;
        case DType::kI8: fits = StoreIfFits<int8_t>(v, dst); break;
        default: break;
      }
      if (!fits)
        return OutOfRangeError(fmt::format("converting {} array to {}: element {} = {} does not fit",
                                           posenc::ToString(dtype_), posenc::ToString(to), i, v));
    }
  }
  return out;
}

bool PartlyOverlaps(const HeadsView& in, const HeadsView& out) {
  if (in.tokens == 0 || in.heads == 0 || in.head_dim == 0 || out.tokens == 0 || out.heads == 0 || out.head_dim == 0)
    return false;
  if (in.data == out.data && in.token_stride == out.token_stride && in.head_stride == out.head_stride) return false;
  auto extent = [](const HeadsView& v) {
    const auto* b = static_cast<const std::byte*>(v.data);
    const int64_t last = (v.tokens - 1) * v.token_stride + (v.heads - 1) * v.head_stride + v.head_dim;
    return std::pair{b, b + last * static_cast<int64_t>(SizeOf(v.dtype))};
  };
  const auto [ib, ie] = extent(in);
  const auto [ob, oe] = extent(out);
  return ib < oe && ob < ie;
}

Result<HeadsView> HeadsView::Of(Array& a, const char* what) {
  if (a.ndim() != 3)
    return InvalidArgumentError(
        fmt::format("{}: expected shape [tokens, heads, head_dim], got {}", what, ShapeToString(a.shape())));
  HeadsView v = Dense(a.bytes(), a.dtype(), a.dim(0), a.dim(1), a.dim(2));
  POSENC_RETURN_IF_ERROR(v.Validate(what));
  return v;
}

Status HeadsView::Validate(const char* what) const {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    return InvalidArgumentError(fmt::format("{}: dtype {} is not a float storage type (float32, float16, bfloat16)",
                                            what, posenc::ToString(dtype)));
  if (tokens < 0 || heads < 0 || head_dim < 0)
    return InvalidArgumentError(fmt::format("{}: negative shape [{}, {}, {}]", what, tokens, heads, head_dim));
  if (tokens > 0 && heads > 0 && head_dim > 0) {
    if (data == nullptr) return InvalidArgumentError(fmt::format("{}: null data for a non-empty view", what));
    // Elements at their natural alignment: the scalar paths read and write them as T (a float at an odd
    // address is undefined behaviour in C++, and what UBSan flags); every allocator and framework gives it.
    if (reinterpret_cast<uintptr_t>(data) % SizeOf(dtype) != 0)
      return InvalidArgumentError(fmt::format("{}: data {} is not aligned to its {}-byte {} elements", what, data,
                                              SizeOf(dtype), posenc::ToString(dtype)));
    // Rows are disjoint when one axis nests inside the other: heads inside a token (token-major,
    // [tokens, heads, head_dim] and fused QKV rows) or tokens inside a head (head-major, as
    // [batch, heads, seq, head_dim] tensors store them). 128-bit products: no stride can overflow.
    using Wide = __int128;
    const bool token_major = (heads == 1 || head_stride >= head_dim) &&
                             (tokens == 1 || Wide{token_stride} >= Wide{heads - 1} * head_stride + head_dim);
    const bool head_major = (tokens == 1 || token_stride >= head_dim) &&
                            (heads == 1 || Wide{head_stride} >= Wide{tokens - 1} * token_stride + head_dim);
    if (!token_major && !head_major)
      return InvalidArgumentError(
          fmt::format("{}: strides (token {}, head {}) overlap rows of head_dim {} with {} tokens and {} heads "
                      "(neither heads inside "
                      "tokens nor tokens inside heads)",
                      what, token_stride, head_stride, head_dim, tokens, heads));
    // The view's byte extent must be a pointer offset (kernels and overlap checks compute it in int64).
    const Wide last = Wide{tokens - 1} * token_stride + Wide{heads - 1} * head_stride + head_dim;
    if (last * static_cast<Wide>(SizeOf(dtype)) > Wide{INT64_MAX})
      return InvalidArgumentError(
          fmt::format("{}: strides (token {}, head {}) span more than 2^63 bytes", what, token_stride, head_stride));
  }
  return OkStatus();
}

}  // namespace posenc
