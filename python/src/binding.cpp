// _posenc: errors, enums, threads and numpy results every area shares, and the runtime entries
// (version, limits, thread count, SIMD target).
#include "binding.hpp"

#include <cstring>
#include <mutex>

#include "posenc/io/json_guard.hpp"
#include "posenc/math/rope_scaling_facts.hpp"

namespace posenc::python {

[[noreturn]] void Throw(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: throw py::value_error(s.message());
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss: PyErr_SetString(PyExc_OSError, s.message().c_str()); throw py::error_already_set();
    case StatusCode::kUnimplemented:
      PyErr_SetString(PyExc_NotImplementedError, s.message().c_str());
      throw py::error_already_set();
    default: throw std::runtime_error(s.ToString());
  }
}

RopePairing Pairing(const std::string& s) {
  RopePairing p;
  if (!ParseRopePairing(s, &p)) throw py::value_error("pairing '" + s + "' (expected half or interleaved)");
  return p;
}
RopePrecision Precision(const std::string& s) {
  RopePrecision p;
  if (!ParseRopePrecision(s, &p)) throw py::value_error("precision '" + s + "' (expected reference or exact)");
  return p;
}
RopeDirection Direction(const std::string& s) {
  if (s == "forward") return RopeDirection::kForward;
  if (s == "backward") return RopeDirection::kBackward;
  throw py::value_error("direction '" + s + "' (expected forward or backward)");
}
DType StorageType(const std::string& s, const std::string& what) {
  DType d;
  if (!ParseDType(s, &d)) throw py::value_error(what + ": dtype '" + s + "' is not a posenc type");
  return d;
}

// The pool every kernel call of this module runs on: nullptr = posenc's process-wide default pool.
namespace {
std::mutex g_pool_mutex;
std::shared_ptr<ThreadPool> g_pool;
}  // namespace

std::shared_ptr<ThreadPool> CurrentPool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  return g_pool;
}

namespace {

// n > 0: a pool of n threads, started now; n <= 0: posenc's default pool. Returns (threads running,
// why fewer than asked started: ThreadPool::start_error(), "" when all did); the previous pool stays
// in use until the new one is running.
py::tuple SetNumThreads(int n) {
  std::shared_ptr<ThreadPool> pool = n > 0 ? std::make_shared<ThreadPool>(n) : nullptr;
  const int running = pool ? pool->num_threads() : DefaultRunner().num_threads();
  const std::string why = pool ? pool->start_error() : std::string();
  {
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    g_pool = std::move(pool);
  }
  return py::make_tuple(running, why);
}
int NumThreads() {
  auto pool = CurrentPool();
  return pool ? pool->num_threads() : DefaultRunner().num_threads();
}

}  // namespace

py::array_t<double> F64(const std::vector<double>& v) {
  py::array_t<double> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(double));
  return a;
}
py::array_t<int64_t> I64(const std::vector<int64_t>& v) {
  py::array_t<int64_t> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(int64_t));
  return a;
}
// An owning posenc Array handed to numpy without a copy (the capsule owns it).
py::array ToNumpy(Array a) {
  auto* owned = new Array(std::move(a));
  py::capsule keep(owned, [](void* p) { delete static_cast<Array*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  switch (owned->dtype()) {
    case DType::kF32: return py::array_t<float>(shape, owned->data<float>(), keep);
    case DType::kF64: return py::array_t<double>(shape, owned->data<double>(), keep);
    case DType::kI64: return py::array_t<int64_t>(shape, owned->data<int64_t>(), keep);
    case DType::kI32: return py::array_t<int32_t>(shape, owned->data<int32_t>(), keep);
    case DType::kF16: return py::array(py::dtype("float16"), shape, {}, owned->bytes(), keep);
    case DType::kBF16:  // numpy has no bfloat16: the raw 16-bit patterns
      return py::array(py::dtype("uint16"), shape, {}, owned->bytes(), keep);
    default: throw std::runtime_error("posenc array of an unexpected dtype");
  }
}

// A [tokens, heads, head_dim] view as python/posenc/_tensors.py describes it.
HeadsView View(const py::tuple& t, const char* what) {
  if (t.size() != 7) throw py::value_error(std::string(what) + ": internal view descriptor is malformed");
  HeadsView v;
  v.data = reinterpret_cast<void*>(t[0].cast<uintptr_t>());
  v.dtype = StorageType(t[1].cast<std::string>(), what);
  v.tokens = t[2].cast<int64_t>();
  v.heads = t[3].cast<int64_t>();
  v.head_dim = t[4].cast<int64_t>();
  v.token_stride = t[5].cast<int64_t>();
  v.head_stride = t[6].cast<int64_t>();
  return v;
}
std::vector<HeadsView> Views(const py::list& l, const char* what) {
  std::vector<HeadsView> v;
  for (const auto& t : l) v.push_back(View(t.cast<py::tuple>(), what));
  return v;
}
std::vector<Positions> PositionRows(const py::list& l) {
  std::vector<Positions> v;
  for (const auto& p : l) {
    if (!py::isinstance<Positions>(p) || p.cast<py::array>().dtype().kind() != 'i' ||
        p.cast<py::array>().itemsize() != 8 || !(p.cast<py::array>().flags() & py::array::c_style))
      throw py::value_error("positions: internal rows must be contiguous int64 arrays");
    v.push_back(p.cast<Positions>());
  }
  return v;
}

StridedTensor DescOf(const py::tuple& t, const char* what) {
  if (t.size() != 4) throw py::value_error(std::string(what) + ": internal tensor descriptor is malformed");
  StridedTensor d;
  d.data = reinterpret_cast<std::byte*>(t[0].cast<uintptr_t>());
  d.dtype = StorageType(t[1].cast<std::string>(), what);
  d.shape = t[2].cast<std::vector<int64_t>>();
  d.stride = t[3].cast<std::vector<int64_t>>();
  if (d.shape.size() != d.stride.size())
    throw py::value_error(std::string(what) + ": shape and strides differ in rank");
  return d;
}
std::string ShapeText(const std::vector<int64_t>& v) { return ShapeToString(v); }

void RegisterRuntime(py::module_& m) {
  m.attr("__version__") = POSENC_VERSION;        // the project's version (CMakeLists.txt)
  m.attr("MAX_JSON_NESTING") = kMaxJsonNesting;  // the bound every JSON reader applies
  m.attr("MAX_THREADS") = kMaxThreads;           // the most threads a pool starts
  m.def("scaling_rows", [] {  // (name, [key names]) of each row of RopeScalings(): the library's list
    py::list rows;
    for (const RopeScalingSpec& r : RopeScalings()) {
      py::list keys;
      for (const RopeScalingKey& k : r.keys) keys.append(std::string(k.name));
      rows.append(py::make_tuple(std::string(r.name), keys));
    }
    return rows;
  });

  m.def("set_num_threads", &SetNumThreads, py::arg("n"), "(threads running, why fewer than n started or \"\")");
  m.def("num_threads", &NumThreads);
  m.def("simd_target", [] { return ChosenSimdTarget(); });
}

}  // namespace posenc::python
