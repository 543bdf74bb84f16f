// _posenc, the pybind11 translation of posenc's public C++ API (include/posenc/posenc.hpp) for the
// Python package python/posenc: what the area files (one Register<Area> each, called by module.cpp)
// share. No scheme logic lives in the binding: every function converts its arguments, calls one
// library entry point and converts the result or the Status back.
//
// Errors: a non-ok Status becomes ValueError (invalid argument, out of range), OSError (not found,
// data loss), NotImplementedError (unimplemented) or RuntimeError (internal), with the Status's
// message. The GIL is released while kernels run.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "posenc/posenc.hpp"

namespace posenc::python {

namespace py = pybind11;

// ---- errors (binding.cpp)
[[noreturn]] void Throw(const Status& s);
inline void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}

// ---- enums as strings: ValueError naming the text otherwise
RopePairing Pairing(const std::string& s);
RopePrecision Precision(const std::string& s);
RopeDirection Direction(const std::string& s);
DType StorageType(const std::string& s, const std::string& what);

// ---- threads: the pool every kernel call of this module runs on (nullptr: posenc's default pool)
std::shared_ptr<ThreadPool> CurrentPool();

// ---- numpy results
py::array_t<double> F64(const std::vector<double>& v);
py::array_t<int64_t> I64(const std::vector<int64_t>& v);
py::array ToNumpy(Array a);  // an owning posenc Array handed to numpy without a copy

using Positions = py::array_t<int64_t, py::array::c_style>;
inline std::span<const int64_t> Span(const Positions& a) { return {a.data(), static_cast<size_t>(a.size())}; }

// ---- tensors as python/posenc/_tensors.py describes them
// A [tokens, heads, head_dim] view (data pointer, dtype, tokens, heads, head_dim, token and head strides).
HeadsView View(const py::tuple& t, const char* what);
std::vector<HeadsView> Views(const py::list& l, const char* what);
std::vector<Positions> PositionRows(const py::list& l);  // contiguous int64 rows
// (data pointer, dtype, shape, element strides) of any rank.
StridedTensor DescOf(const py::tuple& t, const char* what);
std::string ShapeText(const std::vector<int64_t>& v);

// ---- tensors read from the objects themselves (tensors.cpp)
// A torch CPU tensor's descriptor; ValueError naming `what` for another device, dtype or layout.
StridedTensor DescOfTorch(py::handle x, const char* what);
// The fast readers below return false for anything they do not take as it is; the caller then goes
// through python/posenc/_tensors.py, which words the error or handles the case.
enum class TensorKind { kNumpy, kTorch };
struct ForeignTensor {
  StridedTensor t;
  TensorKind kind = TensorKind::kNumpy;
};
// A float32 / float16 numpy array (native order, inside its owner's memory; writable if asked) or a
// float32 / float16 / bfloat16 torch CPU tensor (not requiring grad if writable).
bool ReadTensor(py::handle x, bool writable, ForeignTensor* out);
// Integers of rank <= 2: a Python int, a C-contiguous int64 (or int32, converted) numpy array, a
// contiguous int64 torch CPU tensor. data points into the object or into owned.
struct IntRows {
  const int64_t* data = nullptr;
  std::vector<int64_t> shape, owned;
};
bool ReadInts(py::handle x, IntRows* out);
// A KV cache's memory: C-contiguous, writable; type float32 / float16 / bfloat16, or q8_0 for uint8/int8.
struct CacheMemory {
  std::byte* data = nullptr;
  int64_t nbytes = 0;
  std::string type;
  std::vector<int64_t> shape;
};
bool ReadCache(py::handle x, CacheMemory* out);
// A new uninitialized tensor like x (numpy.empty_like, tensor.new_empty).
py::object EmptyLike(py::handle x, const ForeignTensor& like);

// ---- a one-call entry's arguments read from Python objects (call_args.cpp); false for anything the
// general path (python/posenc) converts or words as an error
bool TokenInts(py::handle x, int64_t tokens, IntRows* r);  // one integer per token, in any shape
bool LayerOf(py::handle layer, int64_t* out);               // a Python int that fits int64
bool RowView(const ForeignTensor& t, HeadsView* v);         // [T, n] or [T, 1, n], unit stride along n
// Two norm weights (None, or 1-D contiguous float tensors, widened), eps (a float or int) and the
// convention's name (QkNorm's names, an RMSNorm); all None: no norm.
struct CallNorms {
  std::vector<float> first, second;
  HeadRmsNorm settings;  // eps, style, scope (no weight)
  HeadRmsNorm Of(const std::vector<float>& weight) const;  // none for an empty weight
};
bool ReadNorms(py::handle first, py::handle second, py::handle eps, py::handle norm, CallNorms* out);
// A float8 cache type held in uint8 caches ("" for none: cache_type None) and two scales (None, a
// number, or a 1-D contiguous float32 tensor).
struct CallScales {
  std::string float8;
  std::vector<float> first, second;
};
bool ReadScales(py::handle cache_type, py::handle first, py::handle second, CallScales* out);
// With a float8 type asked for, the cache must be uint8 (read as q8_0); it then holds that type.
bool HoldsFloat8(const std::string& float8, CacheMemory* c);

// ---- one registration per area
void RegisterRuntime(py::module_& m);   // binding.cpp: version, limits, threads, SIMD target
void RegisterScheme(py::module_& m);    // scheme.cpp: Scheme (config.json, GGUF, model folders)
void RegisterRope(py::module_& m);      // rope.cpp: RopeTable and the kernels on described views
void RegisterRopeCall(py::module_& m);  // rope_call.cpp: Rope's decode-speed calls on the tensors themselves
void RegisterCosSin(py::module_& m);    // cos_sin.cpp: the Hugging Face drop-in (the caller's cos/sin)
void RegisterTensors(py::module_& m);   // tensors.cpp: torch dtypes, overlap rule, [B,H,S,D] planning, buffers
void RegisterBuffers(py::module_& m);   // buffers.cpp: the drop-in's reused output buffers
void RegisterModel(py::module_& m);     // model.cpp: model files and embedding lookups
void RegisterBias(py::module_& m);      // bias.cpp: absolute and relative schemes, vision position rows
void RegisterCheck(py::module_& m);     // check.cpp: posenc.check / posenc.diff (the CLI's reports)

}  // namespace posenc::python
