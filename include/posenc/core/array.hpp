// Array: an owning, C-ordered n-d array (the unit of .npy files and CLI data), and HeadsView, the
// strided [tokens, heads, head_dim] view over caller memory that RoPE kernels take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "posenc/core/dtype.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// "[4, 32, 128]"
std::string ShapeToString(std::span<const int64_t> shape);

// Owning array, storage 64-byte aligned, C order. Copyable (deep copy), movable.
class Array {
 public:
  Array() = default;
  // Zero-filled. Fails with kInvalidArgument on a negative dimension or a byte size past SIZE_MAX.
  static Result<Array> Zeros(DType dtype, std::vector<int64_t> shape);

  Array(const Array& other);
  Array& operator=(const Array& other);
  Array(Array&&) noexcept = default;
  Array& operator=(Array&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return size_; }  // number of elements
  size_t nbytes() const { return static_cast<size_t>(size_) * SizeOf(dtype_); }
  std::byte* bytes() { return data_.get(); }
  const std::byte* bytes() const { return data_.get(); }

  // Typed access; precondition: DTypeOf<T>() == dtype() (checked with an abort: a bug otherwise).
  template <typename T>
  T* data() {
    CheckType(DTypeOf<T>());
    return reinterpret_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data() const {
    CheckType(DTypeOf<T>());
    return reinterpret_cast<const T*>(data_.get());
  }
  template <typename T>
  std::span<T> span() {
    return {data<T>(), static_cast<size_t>(size_)};
  }
  template <typename T>
  std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(size_)};
  }

  // Same data, new shape with the same element count; kInvalidArgument otherwise.
  Status Reshape(std::vector<int64_t> shape);
  // A copy converted to `dtype` (float types round to nearest even; ints convert exactly or fail with
  // kOutOfRange naming the index; float<->int is refused).
  Result<Array> AsType(DType dtype) const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  void CheckType(DType t) const;

  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::unique_ptr<std::byte[], Free> data_;
};

// A [tokens, heads, head_dim] view over caller memory with element strides; the last dimension is
// contiguous. Heads of one token may be spaced (a fused QKV buffer) and tokens may be spaced (a KV
// cache slot). The view does not own the memory; the caller keeps it alive and unaliased with other
// outputs of the same call.
struct HeadsView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t token_stride = 0;  // elements between token t and t+1
  int64_t head_stride = 0;   // elements between head h and h+1

  // A dense view: token_stride = heads*head_dim, head_stride = head_dim.
  static HeadsView Dense(void* data, DType dtype, int64_t tokens, int64_t heads, int64_t head_dim) {
    return {data, dtype, tokens, heads, head_dim, heads * head_dim, head_dim};
  }
  // A dense view of a 3-d Array [tokens, heads, head_dim]; kInvalidArgument naming `what` otherwise.
  static Result<HeadsView> Of(Array& a, const char* what);
  template <typename T>
  T* at(int64_t t, int64_t h) const {
    return static_cast<T*>(data) + t * token_stride + h * head_stride;
  }
  // Checks dims >= 0, dtype a float storage type, and strides that keep the rows apart: heads nested
  // inside tokens (token-major, fused QKV rows) or tokens nested inside heads (head-major).
  Status Validate(const char* what) const;
};

// Whether `out` partly overlaps `in`: their byte extents (first element to one past the last)
// intersect and `out` is not exactly `in` (same data and strides). The out-of-place kernels accept
// exactly-in-place and disjoint outputs only. Empty views overlap nothing.
bool PartlyOverlaps(const HeadsView& in, const HeadsView& out);

}  // namespace posenc
