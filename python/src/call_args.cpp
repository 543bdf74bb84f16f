// RopeCall's one-call entries (rope_call.cpp) read their arguments from the Python objects as they are:
// each reader returns false for anything python/posenc's general path converts or words as an error,
// and the entry then hands the call to it, nothing written.
#include <cstring>

#include "binding.hpp"

namespace posenc::python {
namespace {

// A Python float or int (not bool) as a double.
bool NumberOf(py::handle x, double* out) {
  if (!PyFloat_CheckExact(x.ptr()) && !PyLong_CheckExact(x.ptr())) return false;
  *out = PyFloat_AsDouble(x.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// A 1-D contiguous float32 / float16 / bfloat16 tensor (float32 only if asked) widened to float32;
// None leaves `out` empty.
bool FloatRow(py::handle x, std::vector<float>* out, bool float32_only) {
  if (x.is_none()) return true;
  ForeignTensor t;
  if (!ReadTensor(x, false, &t) || t.t.shape.size() != 1 || t.t.shape[0] <= 0 || t.t.stride[0] != 1 ||
      (float32_only && t.t.dtype != DType::kF32))
    return false;
  out->resize(static_cast<size_t>(t.t.shape[0]));
  for (size_t i = 0; i < out->size(); ++i) {  // (each element through a local: no alignment needed)
    const std::byte* p = t.t.data + i * SizeOf(t.t.dtype);
    uint16_t h = 0;
    switch (t.t.dtype) {
      case DType::kF32: std::memcpy(&(*out)[i], p, 4); break;
      case DType::kF16: std::memcpy(&h, p, 2), (*out)[i] = F16ToF32(f16_t{h}); break;
      case DType::kBF16: std::memcpy(&h, p, 2), (*out)[i] = BF16ToF32(bf16_t{h}); break;
      default: return false;
    }
  }
  return true;
}

}  // namespace

bool TokenInts(py::handle x, int64_t tokens, IntRows* r) {
  if (!ReadInts(x, r)) return false;
  int64_t n = 1;
  for (int64_t d : r->shape) n *= d;
  return n == tokens;
}

bool LayerOf(py::handle layer, int64_t* out) {
  if (!PyLong_CheckExact(layer.ptr())) return false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(layer.ptr(), &overflow);
  if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  *out = v;
  return true;
}

bool RowView(const ForeignTensor& t, HeadsView* v) {
  const auto& sh = t.t.shape;
  const auto& st = t.t.stride;
  if (sh.size() == 3 ? (sh[1] != 1 || st[2] != 1) : (sh.size() != 2 || st[1] != 1)) return false;
  const int64_t n = sh.back();
  *v = HeadsView{t.t.data, t.t.dtype, sh[0], 1, n, st[0], n};
  return v->Validate("row").ok();
}

HeadRmsNorm CallNorms::Of(const std::vector<float>& weight) const {
  return weight.empty() ? HeadRmsNorm{} : HeadRmsNorm{weight, settings.eps, settings.style, settings.scope};
}

bool ReadNorms(py::handle first, py::handle second, py::handle eps, py::handle norm, CallNorms* out) {
  if (first.is_none() && second.is_none()) return eps.is_none() && norm.is_none();
  double e = 0;
  QkNorm convention = QkNorm::kNone;
  if (!NumberOf(eps, &e) || !py::isinstance<py::str>(norm) || !ParseQkNorm(norm.cast<std::string>(), &convention) ||
      !QkNormAsRmsNorm(convention, &out->settings.style, &out->settings.scope))
    return false;
  out->settings.eps = static_cast<float>(e);
  return FloatRow(first, &out->first, false) && FloatRow(second, &out->second, false);
}

bool ReadScales(py::handle cache_type, py::handle first, py::handle second, CallScales* out) {
  if (!cache_type.is_none()) {
    if (!py::isinstance<py::str>(cache_type)) return false;
    out->float8 = cache_type.cast<std::string>();
    if (out->float8 != "float8_e4m3fn" && out->float8 != "float8_e5m2") return false;
  }
  const auto scale = [](py::handle x, std::vector<float>* s) {
    double d = 0;
    if (NumberOf(x, &d)) {
      s->assign(1, static_cast<float>(d));
      return true;
    }
    return FloatRow(x, s, true);
  };
  return scale(first, &out->first) && scale(second, &out->second);
}

bool HoldsFloat8(const std::string& float8, CacheMemory* c) {
  if (float8.empty()) return true;
  if (c->type != "q8_0") return false;
  c->type = float8;
  return true;
}

}  // namespace posenc::python
