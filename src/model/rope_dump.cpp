// The dump read in place from the caller's tensors (MakeRopeDump, rope_check.hpp).
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "posenc/model/rope_check.hpp"

namespace posenc {
namespace {

bool Given(const RopeDumpTensor& t) { return t.data != nullptr || !t.shape.empty(); }

std::string ShapeText(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The element strides of `t` (C-contiguous when it states none), checked against its shape.
Result<std::vector<int64_t>> StridesOf(const RopeDumpTensor& t) {
  if (t.strides.empty()) {
    std::vector<int64_t> s(t.shape.size(), 1);
    for (size_t i = t.shape.size(); i-- > 1;) s[i - 1] = s[i] * t.shape[i];
    return s;
  }
  if (t.strides.size() != t.shape.size())
    return InvalidArgumentError(fmt::format("{}: {} strides for {} dims", t.name, t.strides.size(), t.shape.size()));
  return t.strides;
}

Status CheckExtents(const RopeDumpTensor& t) {
  int64_t n = 1;
  for (int64_t e : t.shape) {
    if (e < 0) return InvalidArgumentError(fmt::format("{}: shape {} has a negative extent", t.name, ShapeText(t.shape)));
    if (e != 0 && n > (int64_t{1} << 40) / e)
      return InvalidArgumentError(fmt::format("{}: shape {} is too large for a dump", t.name, ShapeText(t.shape)));
    n *= e;
  }
  if (n > 0 && t.data == nullptr) return InvalidArgumentError(fmt::format("{}: no data", t.name));
  return OkStatus();
}

// The values of `t` in the order of `perm` (the tensor's axes as the dump reads them), as float.
Result<std::vector<float>> FloatsOf(const RopeDumpTensor& t, const std::vector<size_t>& perm) {
  POSENC_RETURN_IF_ERROR(CheckExtents(t));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> st, StridesOf(t));
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16 && t.dtype != DType::kF64)
    return InvalidArgumentError(
        fmt::format("{}: dtype {} is not float32, float16, bfloat16 or float64", t.name, ToString(t.dtype)));
  const size_t nd = perm.size();
  std::vector<int64_t> shape(nd), stride(nd), idx(nd, 0);
  int64_t n = 1;
  for (size_t k = 0; k < nd; ++k) {
    shape[k] = t.shape[perm[k]];
    stride[k] = st[perm[k]];
    n *= shape[k];
  }
  std::vector<float> out(static_cast<size_t>(n));
  const auto* base = static_cast<const std::byte*>(t.data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < nd; ++k) off += idx[k] * stride[k];
    const std::byte* p = base + off * static_cast<int64_t>(SizeOf(t.dtype));
    float v = 0.0f;
    switch (t.dtype) {
      case DType::kF32: std::memcpy(&v, p, 4); break;
      case DType::kF64: {
        double x;
        std::memcpy(&x, p, 8);
        v = static_cast<float>(x);
        break;
      }
      case DType::kF16: {
        f16_t h;
        std::memcpy(&h, p, 2);
        v = F16ToF32(h);
        break;
      }
      default: {
        bf16_t h;
        std::memcpy(&h, p, 2);
        v = BF16ToF32(h);
        break;
      }
    }
    out[static_cast<size_t>(i)] = v;
    for (size_t k = nd; k-- > 0;)  // the next index, last axis fastest
      if (++idx[k] < shape[k]) break;
      else idx[k] = 0;
  }
  return out;
}

std::vector<size_t> Identity(size_t n) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  return p;
}

Result<std::vector<int64_t>> PositionsOf(const RopeDumpTensor& t) {
  POSENC_RETURN_IF_ERROR(CheckExtents(t));
  if (t.shape.size() != 1 && t.shape.size() != 2)
    return InvalidArgumentError(
        fmt::format("{}: shape {}; expected [T] or [components, T]", t.name, ShapeText(t.shape)));
  if (t.dtype != DType::kI32 && t.dtype != DType::kI64)
    return InvalidArgumentError(fmt::format("{}: dtype {} is not int32 or int64", t.name, ToString(t.dtype)));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> st, StridesOf(t));
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1, cols = t.shape.back();
  const int64_t rs = t.shape.size() == 2 ? st[0] : 0, cs = st.back();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(rows * cols));
  const auto* base = static_cast<const std::byte*>(t.data);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const std::byte* p = base + (r * rs + c * cs) * static_cast<int64_t>(SizeOf(t.dtype));
      if (t.dtype == DType::kI32) {
        int32_t v;
        std::memcpy(&v, p, 4);
        out.push_back(v);
      } else {
        int64_t v;
        std::memcpy(&v, p, 8);
        out.push_back(v);
      }
    }
  return out;
}

// The dump's dtype: the engine's where the caller names it, else the values' own (float64 reads as float32).
DType DumpDType(const RopeDumpTensor& t, const std::optional<DType>& engine) {
  if (engine.has_value()) return *engine;
  return t.dtype == DType::kF64 ? DType::kF32 : t.dtype;
}

}  // namespace

Result<RopeDump> MakeRopeDump(const RopeDumpTensors& t) {
  const bool rotated = Given(t.before) || Given(t.after);
  const bool cache = Given(t.cos) || Given(t.sin);
  const bool freqs = Given(t.inv_freq);
  if (rotated + cache + freqs != 1)
    return InvalidArgumentError("give exactly one dump: before/after, cos/sin, or inv_freq");
  RopeDump dump;
  dump.seq_len = t.seq_len;
  if (rotated) {
    if (!Given(t.before) || !Given(t.after) || !Given(t.positions))
      return InvalidArgumentError("rotated tensors need before, after and positions");
    if (t.before.shape != t.after.shape)
      return InvalidArgumentError(fmt::format("{} is {} but {} is {}: the same shape is needed", t.before.name,
                                              ShapeText(t.before.shape), t.after.name, ShapeText(t.after.shape)));
    const std::vector<int64_t>& s = t.after.shape;
    if (s.size() != 2 && s.size() != 3)
      return InvalidArgumentError(
          fmt::format("{}: shape {}; expected [T, H, D] or [H, T, D]", t.after.name, ShapeText(s)));
    // Read as [T, H, D]: heads-first [H, T, D] through its axes swapped; [T, D] (either order) is one head.
    std::vector<size_t> perm = s.size() == 2 ? Identity(2) : (t.heads_first ? std::vector<size_t>{1, 0, 2} : Identity(3));
    dump.kind = RopeDumpKind::kRotated;
    dump.what = t.after.name;
    dump.tokens = t.after.shape[perm[0]];
    dump.heads = s.size() == 2 ? 1 : t.after.shape[perm[1]];
    dump.width = s.back();
    POSENC_ASSIGN_OR_RETURN(dump.before, FloatsOf(t.before, perm));
    POSENC_ASSIGN_OR_RETURN(dump.after, FloatsOf(t.after, perm));
    dump.dtype = DumpDType(t.after, t.dtype);
  } else if (cache) {
    if (!Given(t.cos) || !Given(t.sin)) return InvalidArgumentError("a cache needs both cos and sin");
    if (t.cos.shape != t.sin.shape || t.cos.shape.size() != 2)
      return InvalidArgumentError(fmt::format("{} is {} and {} {}: both [T, R] or [T, R/2] needed", t.cos.name,
                                              ShapeText(t.cos.shape), t.sin.name, ShapeText(t.sin.shape)));
    dump.kind = RopeDumpKind::kCosSin;
    dump.what = t.cos.name;
    dump.tokens = t.cos.shape[0], dump.width = t.cos.shape[1];
    POSENC_ASSIGN_OR_RETURN(dump.cos, FloatsOf(t.cos, Identity(2)));
    POSENC_ASSIGN_OR_RETURN(dump.sin, FloatsOf(t.sin, Identity(2)));
    dump.dtype = DumpDType(t.cos, t.dtype);
  } else {
    if (t.inv_freq.shape.size() != 1)
      return InvalidArgumentError(
          fmt::format("{}: shape {}; expected [R/2]", t.inv_freq.name, ShapeText(t.inv_freq.shape)));
    dump.kind = RopeDumpKind::kInvFreq;
    dump.what = t.inv_freq.name;
    POSENC_ASSIGN_OR_RETURN(dump.inv_freq, FloatsOf(t.inv_freq, Identity(1)));
    dump.dtype = DumpDType(t.inv_freq, t.dtype);
  }
  if (Given(t.positions)) {
    POSENC_ASSIGN_OR_RETURN(dump.positions, PositionsOf(t.positions));
    if (t.positions.shape.size() == 2) dump.position_rows = t.positions.shape[0];
  }
  // A bfloat16 engine's dump stored wider holds only bfloat16 values.
  if (t.dtype == DType::kBF16)
    for (const std::vector<float>* v : {&dump.after, &dump.cos, &dump.sin, &dump.inv_freq})
      for (float x : *v)
        if (std::isfinite(x) && BF16ToF32(F32ToBF16(x)) != x)
          return InvalidArgumentError(fmt::format(
              "{}: value {:.9g} is not a bfloat16 value: the dump is not bfloat16 (do not name bf16 as its dtype)",
              dump.what, x));
  return dump;
}

}  // namespace posenc
