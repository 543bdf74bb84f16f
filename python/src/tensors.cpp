// _posenc: numpy arrays and torch CPU tensors read in C++ from the objects themselves (data pointer,
// dtype, shape, strides), torch's dtypes registered once, and the library's rules on strided tensors
// (the overlap rule, the [B,H,S,D] / [B,S,H,D] planner) for python/posenc/_tensors.py.
//
// The readers answer "not here" (false) for anything they do not take as it is: another type, a
// torch tensor that requires grad, a numpy view whose owner is not a plain array, a dtype or a layout
// out of the ordinary. The caller then goes through python/posenc/_tensors.py, which words the error
// (or handles the case): the fast path never raises for a bad argument, so every message has one source.
#include "binding.hpp"

#include <cstring>

namespace posenc::python {
namespace {

// torch's types, registered by python/posenc/_tensors.py when torch is first used (compared by
// identity; held for the life of the process, as torch holds them).
struct TorchTypes {
  PyObject *f32 = nullptr, *f16 = nullptr, *bf16 = nullptr, *i64 = nullptr, *i32 = nullptr, *u8 = nullptr,
           *i8 = nullptr, *tensor = nullptr;
};
TorchTypes& Torch() {
  static TorchTypes d;
  return d;
}
PyObject* Keep(py::handle h) { return h.is_none() ? nullptr : h.inc_ref().ptr(); }
void RegisterTorchTypes(py::handle f32, py::handle f16, py::handle bf16, py::handle i64, py::handle i32, py::handle u8,
                        py::handle i8, py::handle tensor) {
  Torch() = {Keep(f32), Keep(f16), Keep(bf16), Keep(i64), Keep(i32), Keep(u8), Keep(i8), Keep(tensor)};
}

// A tuple of Python ints (torch.Size, the result of stride()) as int64s.
std::vector<int64_t> IntTuple(PyObject* t, const char* what, const char* field) {
  if (t == nullptr || !PyTuple_Check(t))
    throw py::value_error(std::string(what) + ": " + field + " is not a tuple of ints");
  const Py_ssize_t n = PyTuple_GET_SIZE(t);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
    v[static_cast<size_t>(i)] = x;
  }
  return v;
}

PyObject* Name(const char* s) { return PyUnicode_InternFromString(s); }
py::object Get(py::handle x, PyObject* name) {
  PyObject* r = PyObject_GetAttr(x.ptr(), name);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}
py::object Call(py::handle x, PyObject* name) {
  PyObject* r = PyObject_CallMethodNoArgs(x.ptr(), name);
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

bool IsTorch(py::handle x) {
  const TorchTypes& t = Torch();
  return t.tensor != nullptr && PyObject_TypeCheck(x.ptr(), reinterpret_cast<PyTypeObject*>(t.tensor));
}

// numpy's type numbers (the same in numpy 1 and 2 on Linux, as are the descriptor fields read here).
constexpr int kNpyByte = 1, kNpyUByte = 2, kNpyInt = 5, kNpyLong = 7, kNpyLongLong = 9, kNpyFloat = 11, kNpyHalf = 23;

// The item size of numpy's common types (0: ask numpy).
long long ItemSize(int type_num) {
  switch (type_num) {
    case kNpyByte:
    case kNpyUByte: return 1;
    case kNpyHalf: return 2;
    case kNpyInt:
    case kNpyFloat: return 4;
    case kNpyLong:
    case kNpyLongLong:
    case 12: return 8;  // (12: NPY_DOUBLE)
    default: return 0;
  }
}

bool IsNumpy(py::handle x) { return py::isinstance<py::array>(x); }
int TypeNum(py::handle x) {
  return py::detail::array_descriptor_proxy(py::detail::array_proxy(x.ptr())->descr)->type_num;
}
bool NativeOrder(py::handle x) {
  return py::detail::array_descriptor_proxy(py::detail::array_proxy(x.ptr())->descr)->byteorder != '>';
}

// Whether a numpy view stays inside the memory of the array that owns it: x owns its memory, or the
// end of its .base chain (through as_strided's wrapper) is an array that owns its memory and holds
// every byte x reaches. false for any other owner (a buffer, a torch storage, a DLPack capsule):
// python/posenc/_tensors.py's check_in_owner decides those.
bool InOwner(py::handle x, const StridedTensor& t) {
  const auto* p = py::detail::array_proxy(x.ptr());
  if (p->base == nullptr) return true;
  static PyObject* const base = Name("base");
  py::object o = py::reinterpret_borrow<py::object>(p->base);
  for (int depth = 0; depth < 64; ++depth) {
    if (IsNumpy(o)) {
      const auto* q = py::detail::array_proxy(o.ptr());
      if (q->base == nullptr) {
        if (!(q->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_)) return false;
        long long owned = ItemSize(py::detail::array_descriptor_proxy(q->descr)->type_num);
        if (owned == 0) {  // another dtype: numpy says
          static PyObject* const nbytes = Name("nbytes");
          owned = PyLong_AsLongLong(Get(o, nbytes).ptr());
          if (owned < 0) {
            PyErr_Clear();
            return false;
          }
        } else {
          for (int i = 0; i < q->nd; ++i) owned *= q->dimensions[i];
        }
        const __int128 lo = reinterpret_cast<uintptr_t>(q->data), hi = lo + owned;
        const __int128 es = static_cast<__int128>(SizeOf(t.dtype));
        __int128 a = reinterpret_cast<uintptr_t>(t.data), b = a;
        for (size_t i = 0; i < t.shape.size(); ++i) {
          if (t.shape[i] == 0) return true;
          const __int128 reach = static_cast<__int128>(t.shape[i] - 1) * t.stride[i] * es;
          (reach < 0 ? a : b) += reach;
        }
        return lo <= a && b + es <= hi;
      }
      o = py::reinterpret_borrow<py::object>(q->base);
      continue;
    }
    if (PyMemoryView_Check(o.ptr())) return false;
    PyObject* next = PyObject_GetAttr(o.ptr(), base);
    if (next == nullptr) {
      PyErr_Clear();
      return false;
    }
    o = py::reinterpret_steal<py::object>(next);
  }
  return false;
}

}  // namespace

StridedTensor DescOfTorch(py::handle x, const char* what) {
  const TorchTypes& td = Torch();
  if (td.f32 == nullptr) throw py::value_error("internal: torch dtypes are not registered");
  static PyObject* const is_cpu = Name("is_cpu");
  static PyObject* const dtype = Name("dtype");
  static PyObject* const data_ptr = Name("data_ptr");
  static PyObject* const shape = Name("shape");
  static PyObject* const stride = Name("stride");
  if (Get(x, is_cpu).ptr() != Py_True)
    throw py::value_error(std::string(what) + ": tensor is on device " + py::str(x.attr("device")).cast<std::string>() +
                          "; posenc runs on CPU tensors only");
  const py::object dt = Get(x, dtype);
  StridedTensor d;
  if (dt.ptr() == td.f32) {
    d.dtype = DType::kF32;
  } else if (dt.ptr() == td.f16) {
    d.dtype = DType::kF16;
  } else if (dt.ptr() == td.bf16) {
    d.dtype = DType::kBF16;
  } else {
    throw py::value_error(std::string(what) + ": dtype " + py::str(dt).cast<std::string>() +
                          " is not float32, float16 or bfloat16");
  }
  PyObject* ptr_r = PyObject_CallMethodNoArgs(x.ptr(), data_ptr);
  if (ptr_r == nullptr) {  // a sparse or quantized layout: no strided memory to read
    PyErr_Clear();
    throw py::value_error(std::string(what) + ": tensor has no dense memory (layout " +
                          py::str(x.attr("layout")).cast<std::string>() + "); posenc needs a strided CPU tensor");
  }
  const py::object ptr = py::reinterpret_steal<py::object>(ptr_r);
  const unsigned long long address = PyLong_AsUnsignedLongLong(ptr.ptr());
  if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw py::error_already_set();
  d.data = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(address));
  d.shape = IntTuple(Get(x, shape).ptr(), what, "shape");
  d.stride = IntTuple(Call(x, stride).ptr(), what, "stride()");
  if (d.shape.size() != d.stride.size())
    throw py::value_error(std::string(what) + ": shape and strides differ in rank");
  return d;
}

bool ReadTensor(py::handle x, bool writable, ForeignTensor* out) {
  if (IsNumpy(x)) {
    const auto* p = py::detail::array_proxy(x.ptr());
    const int tn = TypeNum(x);
    if ((tn != kNpyFloat && tn != kNpyHalf) || !NativeOrder(x)) return false;
    if (writable && !(p->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_)) return false;
    StridedTensor& t = out->t;
    t.dtype = tn == kNpyFloat ? DType::kF32 : DType::kF16;
    const int64_t item = static_cast<int64_t>(SizeOf(t.dtype));
    t.data = reinterpret_cast<std::byte*>(p->data);
    t.shape.assign(p->dimensions, p->dimensions + p->nd);
    t.stride.resize(static_cast<size_t>(p->nd));
    for (int i = 0; i < p->nd; ++i) {
      if (p->strides[i] % item != 0) return false;
      t.stride[static_cast<size_t>(i)] = p->strides[i] / item;
    }
    if (!InOwner(x, t)) return false;
    out->kind = TensorKind::kNumpy;
    return true;
  }
  if (!IsTorch(x)) return false;
  static PyObject* const requires_grad = Name("requires_grad");
  if (writable && Get(x, requires_grad).ptr() != Py_False) return false;
  try {
    out->t = DescOfTorch(x, "x");
  } catch (const py::error_already_set&) {
    PyErr_Clear();
    return false;
  } catch (const py::value_error&) { return false; }
  out->kind = TensorKind::kTorch;
  return true;
}

bool ReadInts(py::handle x, IntRows* out) {
  out->owned.clear();
  if (PyLong_CheckExact(x.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(x.ptr(), &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    out->owned.assign(1, v);
    out->data = out->owned.data();
    out->shape.clear();
    return true;
  }
  if (IsNumpy(x)) {
    const auto* p = py::detail::array_proxy(x.ptr());
    const int tn = TypeNum(x);
    const bool i64 = tn == kNpyLong || tn == kNpyLongLong, i32 = tn == kNpyInt;
    if (!(i64 || i32) || !NativeOrder(x) || !(p->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) || p->nd > 2)
      return false;
    out->shape.assign(p->dimensions, p->dimensions + p->nd);
    int64_t n = 1;
    for (int64_t d : out->shape) n *= d;
    if (i64) {
      out->data = reinterpret_cast<const int64_t*>(p->data);
    } else {
      const auto* s = reinterpret_cast<const int32_t*>(p->data);
      out->owned.assign(s, s + n);
      out->data = out->owned.data();
    }
    return true;
  }
  const TorchTypes& td = Torch();
  if (!IsTorch(x)) return false;
  static PyObject* const is_cpu = Name("is_cpu");
  static PyObject* const dtype = Name("dtype");
  static PyObject* const data_ptr = Name("data_ptr");
  static PyObject* const shape = Name("shape");
  static PyObject* const stride = Name("stride");
  if (Get(x, is_cpu).ptr() != Py_True || Get(x, dtype).ptr() != td.i64) return false;
  std::vector<int64_t> st;
  try {
    out->shape = IntTuple(Get(x, shape).ptr(), "positions", "shape");
    st = IntTuple(Call(x, stride).ptr(), "positions", "stride()");
  } catch (const py::error_already_set&) {
    PyErr_Clear();
    return false;
  }
  if (out->shape.size() > 2) return false;
  int64_t expect = 1;  // C-contiguous
  for (size_t i = out->shape.size(); i-- > 0;) {
    if (out->shape[i] > 1 && st[i] != expect) return false;
    expect *= out->shape[i];
  }
  const py::object ptr = Call(x, data_ptr);
  out->data = reinterpret_cast<const int64_t*>(static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(ptr.ptr())));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool ReadCache(py::handle x, CacheMemory* out) {
  if (IsNumpy(x)) {
    const auto* p = py::detail::array_proxy(x.ptr());
    const int tn = TypeNum(x);
    if (!(p->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) ||
        !(p->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) || !NativeOrder(x))
      return false;
    if (tn == kNpyFloat)
      out->type = "float32";
    else if (tn == kNpyHalf)
      out->type = "float16";
    else if (tn == kNpyUByte || tn == kNpyByte)
      out->type = "q8_0";
    else
      return false;
    out->shape.assign(p->dimensions, p->dimensions + p->nd);
    out->data = reinterpret_cast<std::byte*>(p->data);
    out->nbytes = tn == kNpyFloat ? 4 : tn == kNpyHalf ? 2 : 1;
    for (int64_t d : out->shape) out->nbytes *= d;
    return InOwner(x, {out->data, DType::kU8, {out->nbytes}, {1}});
  }
  if (!IsTorch(x)) return false;
  const TorchTypes& td = Torch();
  static PyObject* const is_cpu = Name("is_cpu");
  static PyObject* const dtype = Name("dtype");
  static PyObject* const requires_grad = Name("requires_grad");
  static PyObject* const is_contiguous = Name("is_contiguous");
  static PyObject* const data_ptr = Name("data_ptr");
  static PyObject* const shape = Name("shape");
  if (Get(x, is_cpu).ptr() != Py_True || Get(x, requires_grad).ptr() != Py_False ||
      Call(x, is_contiguous).ptr() != Py_True)
    return false;
  const py::object dt = Get(x, dtype);
  size_t item = 0;
  if (dt.ptr() == td.f32)
    out->type = "float32", item = 4;
  else if (dt.ptr() == td.f16)
    out->type = "float16", item = 2;
  else if (dt.ptr() == td.bf16)
    out->type = "bfloat16", item = 2;
  else if (dt.ptr() == td.u8 || dt.ptr() == td.i8)
    out->type = "q8_0", item = 1;
  else
    return false;
  out->shape = IntTuple(Get(x, shape).ptr(), "cache", "shape");
  out->nbytes = static_cast<int64_t>(item);
  for (int64_t d : out->shape) out->nbytes *= d;
  const py::object ptr = Call(x, data_ptr);
  out->data = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(ptr.ptr())));
  return true;
}

py::object EmptyLike(py::handle x, const ForeignTensor& like) {
  if (like.kind == TensorKind::kNumpy) {
    static py::object* const empty_like = new py::object(py::module_::import("numpy").attr("empty_like"));
    return (*empty_like)(x);
  }
  static PyObject* const new_empty = Name("new_empty");
  static PyObject* const shape = Name("shape");
  const py::object s = Get(x, shape);
  PyObject* r = PyObject_CallMethodOneArg(x.ptr(), new_empty, s.ptr());
  if (r == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

void RegisterTensors(py::module_& m) {
  m.def("register_torch_types", &RegisterTorchTypes, py::arg("float32"), py::arg("float16"), py::arg("bfloat16"),
        py::arg("int64"), py::arg("int32"), py::arg("uint8"), py::arg("int8"), py::arg("tensor"));
  m.def("torch_registered", [] { return Torch().tensor != nullptr; });
  m.def(
      "descs_apart",
      [](const py::tuple& a, const py::tuple& b) { return StridedApart(DescOf(a, "a"), DescOf(b, "b")); }, py::arg("a"),
      py::arg("b"),
      "Whether two tensor descriptors (data pointer, dtype, shape, element strides) share no element: "
      "apart in memory, or disjoint slices of the same rows (posenc::StridedApart)");
  m.def(
      "plan_heads",
      [](const py::tuple& desc, const std::string& order, const std::string& name, bool fold) {
        HeadsPlan p = Take(PlanHeads(DescOf(desc, name.c_str()), order, name.c_str(), fold));
        py::list views;
        for (const HeadsView& v : p.views)
          views.append(py::make_tuple(reinterpret_cast<uintptr_t>(v.data), std::string(ToString(v.dtype)), v.tokens,
                                      v.heads, v.head_dim, v.token_stride, v.head_stride));
        return py::make_tuple(views, p.tokens, p.head_dim, p.batch);
      },
      py::arg("desc"), py::arg("order"), py::arg("name"), py::arg("fold") = true,
      "(views, tokens, head_dim, batch) of a [T, H, D] / [B, H, S, D] tensor (posenc::PlanHeads)");
}

}  // namespace posenc::python
