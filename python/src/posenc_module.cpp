// _posenc: the pybind11 translation of posenc's public C++ API (include/posenc/posenc.hpp) for the
// Python package python/posenc. No scheme logic lives here: every function converts its arguments,
// calls one library entry point and converts the result or the Status back.
//
// Tensors arrive as plain descriptors built by python/posenc/_tensors.py (data pointer, dtype name,
// [tokens, heads, head_dim] extents and element strides), so numpy arrays and torch CPU tensors of
// any dtype posenc stores (float32, float16, bfloat16) are used in place, never copied. The GIL is
// released while kernels run. Errors: a non-ok Status becomes ValueError (invalid argument, out of
// range), OSError (not found, data loss), NotImplementedError (unimplemented) or RuntimeError
// (internal), with the Status's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "posenc/kernels/multi_axis_rope.hpp"   // not in the umbrella (yet)
#include "posenc/model/model_scheme.hpp"        // likewise
#include "posenc/config/layer_schedule.hpp"     // likewise
#include "posenc/kernels/attn_temperature.hpp"  // likewise
#include "posenc/kernels/rope_cos_sin.hpp"      // likewise
#include "posenc/io/json_guard.hpp"
#include "posenc/math/rope_scaling_facts.hpp"
#include "posenc/posenc.hpp"

namespace py = pybind11;

namespace posenc::python {
namespace {

// ---- errors ------------------------------------------------------------------------------------

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
void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}

// ---- enums as strings --------------------------------------------------------------------------

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

// ---- threads -----------------------------------------------------------------------------------

// The pool every kernel call of this module runs on: nullptr = posenc's process-wide default pool.
std::mutex g_pool_mutex;
std::shared_ptr<ThreadPool> g_pool;

std::shared_ptr<ThreadPool> CurrentPool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  return g_pool;
}
void SetNumThreads(int n) {
  std::shared_ptr<ThreadPool> pool = n > 0 ? std::make_shared<ThreadPool>(n) : nullptr;
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool = std::move(pool);
}
int NumThreads() {
  auto pool = CurrentPool();
  return pool ? pool->num_threads() : DefaultRunner().num_threads();
}

// ---- numpy results -----------------------------------------------------------------------------

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

std::span<const int64_t> Span(const py::array_t<int64_t, py::array::c_style>& a) {
  return {a.data(), static_cast<size_t>(a.size())};
}

// ---- schemes -----------------------------------------------------------------------------------

py::dict ScalingDict(const RopeScaling& s) {
  py::dict d;
  d["type"] = std::string(ToString(s.type));
  d["factor"] = s.factor;
  d["original_max_position_embeddings"] = s.original_max_position_embeddings;
  d["beta_fast"] = s.beta_fast;
  d["beta_slow"] = s.beta_slow;
  d["attention_factor"] = s.attention_factor ? py::cast(*s.attention_factor) : py::none();
  d["mscale"] = s.mscale ? py::cast(*s.mscale) : py::none();
  d["mscale_all_dim"] = s.mscale_all_dim ? py::cast(*s.mscale_all_dim) : py::none();
  d["truncate"] = s.truncate;
  d["low_freq_factor"] = s.low_freq_factor;
  d["high_freq_factor"] = s.high_freq_factor;
  d["short_factor"] = s.short_factor;
  d["long_factor"] = s.long_factor;
  d["freq_scale"] = s.freq_scale;
  d["ext_factor"] = s.ext_factor;
  d["attn_factor"] = s.attn_factor;
  d["freq_factors"] = s.freq_factors;
  d["partial_rotary_factor"] = s.partial_rotary_factor;
  return d;
}

// (name, value) of each parameter the scaling uses, from its row (ScalingParamsOf): what inspect lists.
py::list ScalingParamsList(const RopeConfig& rc) {
  py::list out;
  for (const ScalingParam& p : ScalingParamsOf(rc)) {
    py::object v;
    switch (p.kind) {
      case ScalingKeyKind::kNumber:
      case ScalingKeyKind::kOptionalNumber: v = py::float_(p.number); break;
      case ScalingKeyKind::kInteger: v = py::int_(p.integer); break;
      case ScalingKeyKind::kBoolean: v = py::bool_(p.boolean); break;
      case ScalingKeyKind::kNumberList: v = py::cast(p.list); break;
    }
    out.append(py::make_tuple(std::string(p.name), v));
  }
  return out;
}

py::object MultiAxisDict(const RopeConfig& rc) {
  if (!rc.multi_axis) return py::none();
  py::dict d;
  d["section_layout"] = std::string(ToString(rc.multi_axis->layout));
  d["rules"] = std::string(ToString(rc.multi_axis->rules));
  d["sections"] = rc.multi_axis->sections;
  d["num_components"] = rc.multi_axis->num_components;
  return d;
}

PositionScheme SchemeOfRopeConfig(RopeConfig rc) {
  PositionScheme s;
  s.kind = PositionKind::kRope;
  s.rope = std::move(rc);
  s.rope_spelling = "ggml params";
  return s;
}

// A model file or folder's scheme, as ModelScheme reads it from what OpenModel found (GGUF metadata,
// the config.json beside the weights, a llama2.c header).
// assume_layout: "" (none), or "half" / "interleaved" for a config.json of a model_type posenc does not
// know (HfConfigOptions::assume_layout); anything else is a ValueError naming it.
std::optional<RopePairing> AssumedLayout(const std::string& text) {
  if (text.empty()) return std::nullopt;
  RopePairing p;
  if (!ParseRopePairing(text, &p))
    throw py::value_error("assume_layout '" + text + "': expected 'half' or 'interleaved'");
  return p;
}

PositionScheme SchemeOfModel(const std::string& path, bool allow_default_freq_base, const std::string& layer_type,
                             const std::string& assume_layout) {
  ModelFile model = Take(OpenModel(path));
  ModelSchemeOptions o;
  o.allow_default_freq_base = allow_default_freq_base;
  o.layer_type = layer_type;
  o.assume_layout = AssumedLayout(assume_layout);
  return Take(ModelScheme(model, o));
}

// ---- tensors -----------------------------------------------------------------------------------

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
using Positions = py::array_t<int64_t, py::array::c_style>;
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

RopeArgs Args(const RopeTable& table, const RotaryLayout& layout, const std::string& direction, ParallelRunner* pool) {
  RopeArgs a;
  a.layout = layout;
  a.table = &table;
  a.direction = Direction(direction);
  a.parallel = pool;
  return a;
}

// Rotates batch element b of x (in place, or into out) at positions[b]. Every element is validated
// before any is written, so an error leaves every tensor as it was.
// reps > 0 (the benchmark's C++ baseline, python/bench): the validated call run `reps` more times
// back to back, each timed in C++ (ApplyRope validates again per call, as any C++ caller's does).
std::vector<double> ApplyRopeBatch(const RopeTable& table, const RotaryLayout& layout, const py::list& x_views,
                                   const py::list& out_views, const py::list& positions, const std::string& direction,
                                   const std::string& what, bool reference, int reps = 0) {
  std::vector<HeadsView> x = Views(x_views, what.c_str());
  std::vector<HeadsView> out = Views(out_views, "out");
  std::vector<Positions> pos = PositionRows(positions);
  if (!out.empty() && out.size() != x.size()) throw py::value_error("out: batch size differs from " + what);
  if (pos.size() != x.size()) throw py::value_error("positions: batch size differs from " + what);
  auto pool = CurrentPool();
  RopeArgs args = Args(table, layout, direction, pool.get());
  for (size_t b = 0; b < x.size(); ++b) {
    args.positions = Span(pos[b]);
    Check(ValidateRope(args, x[b], what.c_str()));
    if (!out.empty()) Check(ValidateRope(args, out[b], "out"));
  }
  Status s;
  std::vector<double> times;
  {
    py::gil_scoped_release release;
    for (int r = 0; r <= reps && s.ok(); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (size_t b = 0; b < x.size() && s.ok(); ++b) {
        args.positions = Span(pos[b]);
        HeadsView dst = out.empty() ? x[b] : out[b];
        s = reference ? ApplyRopeReference(args, x[b], dst) : ApplyRope(args, x[b], dst);
      }
      if (r > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  Check(s);
  return times;
}

void ApplyRopeQKBatch(const RopeTable& table, const RotaryLayout& layout, const py::list& q_views,
                      const py::list& k_views, const py::list& positions, const std::string& direction) {
  std::vector<HeadsView> q = Views(q_views, "q"), k = Views(k_views, "k");
  std::vector<Positions> pos = PositionRows(positions);
  if (k.size() != q.size()) throw py::value_error("k: batch size differs from q");
  if (pos.size() != q.size()) throw py::value_error("positions: batch size differs from q");
  auto pool = CurrentPool();
  RopeArgs args = Args(table, layout, direction, pool.get());
  for (size_t b = 0; b < q.size(); ++b) {
    args.positions = Span(pos[b]);
    Check(ValidateRope(args, q[b], "q"));
    Check(ValidateRope(args, k[b], "k"));
  }
  Status s;
  {
    py::gil_scoped_release release;
    for (size_t b = 0; b < q.size() && s.ok(); ++b) {
      args.positions = Span(pos[b]);
      s = ApplyRopeQK(args, q[b], k[b]);
    }
  }
  Check(s);
}

// RoPE fused with the KV-cache write (ApplyRopeKvCache): the caches are caller memory whose byte
// sizes the Python side read from the tensors; they must be the cache's exact size.
void ApplyRopeKvCacheBinding(const RopeTable& table, const RotaryLayout& layout, const py::tuple& q_t,
                             const py::tuple& k_t, const py::tuple& v_t, const py::tuple& q_out_t,
                             const Positions& positions, const Positions& slots, uintptr_t k_cache, int64_t k_nbytes,
                             uintptr_t v_cache, int64_t v_nbytes, const std::string& cache_type, int64_t layers,
                             int64_t cache_slots, int64_t layer, bool reference, int reps = 0,
                             std::vector<double>* times = nullptr) {
  QkvViews x{View(q_t, "q"), View(k_t, "k"), View(v_t, "v")};
  const HeadsView q_out = View(q_out_t, "q_out");
  KvCacheView cache;
  if (!ParseKvCacheType(cache_type, &cache.type))
    throw py::value_error("cache_type: '" + cache_type + "' (expected float32, float16, bfloat16 or q8_0)");
  cache.k = reinterpret_cast<void*>(k_cache);
  cache.v = reinterpret_cast<void*>(v_cache);
  cache.layers = layers;
  cache.slots = cache_slots;
  cache.kv_heads = x.k.heads;
  cache.head_dim = x.k.head_dim;
  Check(cache.Validate());
  if (k_nbytes != cache.bytes() || v_nbytes != cache.bytes())
    throw py::value_error("k_cache / v_cache: " + std::to_string(k_nbytes) + " / " + std::to_string(v_nbytes) +
                          " bytes, a " + cache_type + " cache of " + std::to_string(layers) + " x " +
                          std::to_string(cache_slots) + " x " + std::to_string(cache.kv_heads) + " x " +
                          std::to_string(cache.head_dim) + " is " + std::to_string(cache.bytes()));
  auto pool = CurrentPool();
  FusedRopeArgs args{Args(table, layout, "forward", pool.get()), Span(slots), layer, {}};
  args.rope.positions = Span(positions);
  Status st;
  {
    py::gil_scoped_release release;
    for (int r = 0; r <= reps && st.ok(); ++r) {  // (reps > 0: timed repeats, as ApplyRopeBatch)
      const auto t0 = std::chrono::steady_clock::now();
      st = reference ? ApplyRopeKvCacheReference(args, x, q_out, cache) : ApplyRopeKvCache(args, x, q_out, cache);
      if (r > 0 && times) times->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  Check(st);
}

void ApplyMultiAxisBatch(const RopeConfig& rc, int64_t seq_len, const py::list& x_views, const py::list& positions,
                         const std::string& precision, const std::string& what) {
  std::vector<HeadsView> x = Views(x_views, what.c_str());
  std::vector<Positions> pos = PositionRows(positions);
  if (pos.size() != x.size()) throw py::value_error("positions: batch size differs from " + what);
  MultiAxisPlan plan = Take(ComputeMultiAxisRope(rc, seq_len));
  auto pool = CurrentPool();
  MultiAxisRopeArgs args{rc.layout, &plan.freqs,          plan.pair_component,     plan.num_components,
                         {},        Precision(precision), RopeDirection::kForward, pool.get()};
  for (size_t b = 0; b < x.size(); ++b) {
    args.positions = Span(pos[b]);
    Check(ValidateMultiAxisRopeArgs(args, x[b], what.c_str()));
  }
  Status s;
  {
    py::gil_scoped_release release;
    for (size_t b = 0; b < x.size() && s.ok(); ++b) {
      args.positions = Span(pos[b]);
      s = ApplyMultiAxisRope(args, x[b]);
    }
  }
  Check(s);
}

// Multiplies the queries of every batch element by scales[t] (Llama 4's NoPE-layer temperature).
void ApplyTemperatureBatch(const py::list& q_views, const std::vector<py::array_t<float, py::array::c_style>>& scales) {
  std::vector<HeadsView> q = Views(q_views, "q");
  if (scales.size() != q.size()) throw py::value_error("scales: batch size differs from q");
  for (size_t b = 0; b < q.size(); ++b) {
    Check(q[b].Validate("q"));
    if (scales[b].size() != q[b].tokens)
      throw py::value_error("scales: " + std::to_string(scales[b].size()) + " scales for " +
                            std::to_string(q[b].tokens) + " tokens");
  }
  Status s;
  {
    py::gil_scoped_release release;
    for (size_t b = 0; b < q.size() && s.ok(); ++b)
      s = ApplyQueryTemperature(q[b], std::span<const float>(scales[b].data(), static_cast<size_t>(scales[b].size())));
  }
  Check(s);
}

// ---- RoPE from the caller's cos/sin (the Hugging Face drop-in) --------------------------------

// A tensor as python/posenc/_tensors.py's raw_desc gives it: (data pointer, dtype, shape, element strides).
struct Desc {
  std::byte* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape, stride;
};
Desc DescOf(const py::tuple& t, const char* what) {
  if (t.size() != 4) throw py::value_error(std::string(what) + ": internal tensor descriptor is malformed");
  Desc d;
  d.data = reinterpret_cast<std::byte*>(t[0].cast<uintptr_t>());
  d.dtype = StorageType(t[1].cast<std::string>(), what);
  d.shape = t[2].cast<std::vector<int64_t>>();
  d.stride = t[3].cast<std::vector<int64_t>>();
  if (d.shape.size() != d.stride.size())
    throw py::value_error(std::string(what) + ": shape and strides differ in rank");
  return d;
}
std::string ShapeText(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// HF's apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim) into q_out / k_out: q, k [B, H, S, D]
// (unsqueeze_dim 1) or [B, S, H, D] (2), any strides with a contiguous head_dim; cos, sin [S, R] or
// [1 or B, S, R] with a contiguous last axis; R <= D (partial rotary: dims R.. pass through). All
// views are checked before the GIL is released and any element is written.
struct CosSinJob {
  RopeCosSinArgs args;
  HeadsView in, out;
};

// [first byte, one past the last) that a strided tensor touches; empty (lo == hi) without elements.
// In 128 bits: a hostile stride cannot wrap it (Validate refuses such views after this names them).
struct OutSpan {
  __int128 lo = 0, hi = 0;
};
OutSpan OutSpanOf(const Desc& d) {
  const __int128 base = static_cast<__int128>(reinterpret_cast<uintptr_t>(d.data));
  __int128 lo = 0, hi = 0;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] == 0) return {base, base};
    const __int128 reach = static_cast<__int128>(d.shape[i] - 1) * d.stride[i];
    (reach < 0 ? lo : hi) += reach;
  }
  const __int128 es = static_cast<__int128>(SizeOf(d.dtype));
  return {base + lo * es, base + (hi + 1) * es};
}
bool Meet(const OutSpan& a, const OutSpan& b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

// Where a tensor's elements sit inside rows of `row` elements: every axis steps by a multiple of the
// row or stays inside one (with non-negative strides), so each element is at offset [0, width) of a
// row counted from data. false when the tensor does not decompose that way.
// (In 128 bits, as OutSpanOf: hostile extents are checked only after this.)
bool InRowWidth(const Desc& d, int64_t row, int64_t* width) {
  __int128 w = 1;
  for (size_t i = 0; i < d.shape.size(); ++i) {
    if (d.shape[i] <= 1) continue;
    if (d.stride[i] < 0) return false;
    if (d.stride[i] % row == 0) continue;
    if (d.stride[i] > row) return false;
    w += static_cast<__int128>(d.shape[i] - 1) * d.stride[i];
    if (w > row) return false;
  }
  *width = static_cast<int64_t>(w);
  return true;
}

// Whether two tensors share no element: their byte spans are apart, or both are slices of the same
// rows (views of one fused projection output, as split_qkv and HF's fused-QKV models cut it) whose
// offsets within a row do not meet. Sound for any row length (a's element at a0 + mR + u, u < wa, and
// b's at b0 + m'R + u', u' < wb, coincide only if u - u' = r or r - R, r = (b0 - a0) mod R, which
// r >= wa and r + wb <= R exclude); the strides of both are the lengths tried. python/posenc's
// views_apart asks this one too.
bool DescsApart(const Desc& a, const Desc& b) {
  if (!Meet(OutSpanOf(a), OutSpanOf(b))) return true;
  const int64_t es = static_cast<int64_t>(SizeOf(a.dtype));
  if (SizeOf(b.dtype) != SizeOf(a.dtype)) return false;
  const __int128 gap = static_cast<__int128>(reinterpret_cast<uintptr_t>(b.data)) -
                       static_cast<__int128>(reinterpret_cast<uintptr_t>(a.data));
  if (gap % es != 0) return false;
  for (const Desc* d : {&a, &b})
    for (const int64_t row : d->stride) {
      int64_t wa = 0, wb = 0;
      if (row <= 1 || !InRowWidth(a, row, &wa) || !InRowWidth(b, row, &wb)) continue;
      const int64_t r = static_cast<int64_t>(((gap / es) % row + row) % row);  // where b's rows start in a's
      if (r >= wa && static_cast<__int128>(r) + wb <= row) return true;
    }
  return false;
}
bool SameView(const Desc& a, const Desc& b) {
  return a.data == b.data && a.dtype == b.dtype && a.shape == b.shape && a.stride == b.stride;
}

// The outputs apart from each other, from cos and sin, and from q and k, except that each may be its
// own input exactly (in place; then q and k are only each other's concern). Apart means no shared
// element (DescsApart): in-place q and k cut from one fused QKV output pass. Fresh outputs pass.
void CheckCosSinOutputs(const Desc& q, const Desc& k, const Desc& qo, const Desc& ko, const Desc& c, const Desc& s) {
  const auto apart = [](const Desc& a, const Desc& b, const char* name, const char* other,
                        const char* verb = "overlaps") {
    if (!DescsApart(a, b)) throw py::value_error(std::string(name) + ": " + verb + " " + other);
  };
  const bool q_in_place = SameView(qo, q), k_in_place = SameView(ko, k);
  apart(ko, qo, "k_out", "q_out");
  apart(qo, c, "q_out", "cos");
  apart(qo, s, "q_out", "sin");
  apart(ko, c, "k_out", "cos");
  apart(ko, s, "k_out", "sin");
  if (!q_in_place) apart(qo, q, "q_out", "q (without being it)", "partly overlaps");
  if (!k_in_place) apart(ko, k, "k_out", "k (without being it)", "partly overlaps");
  if (!(q_in_place && k_in_place)) {
    apart(qo, k, "q_out", "k");
    apart(ko, q, "k_out", "q");
  }
}

std::vector<CosSinJob> CosSinJobs(const std::string& pairing, const Desc& q, const Desc& k, const Desc& qo,
                                  const Desc& ko, const Desc& c, const Desc& s, int unsqueeze_dim,
                                  ParallelRunner* pool) {
  CheckCosSinOutputs(q, k, qo, ko, c, s);
  const int h_ax = unsqueeze_dim == 1 ? 1 : 2, s_ax = unsqueeze_dim == 1 ? 2 : 1;
  if (c.shape != s.shape)
    throw py::value_error("sin: shape " + ShapeText(s.shape) + " differs from cos's " + ShapeText(c.shape));
  if (c.dtype != s.dtype) throw py::value_error("sin: dtype differs from cos's");
  if (c.shape.size() != 2 && c.shape.size() != 3)
    throw py::value_error("cos: shape " + ShapeText(c.shape) + " is not [seq, rotary_dim] or [batch, seq, rotary_dim]");
  const size_t cr = c.shape.size();
  const int64_t R = c.shape[cr - 1], Sc = c.shape[cr - 2], Bc = cr == 3 ? c.shape[0] : 1;
  for (const Desc* t : {&c, &s})
    if (R > 1 && t->stride[cr - 1] != 1)
      throw py::value_error(std::string(t == &c ? "cos" : "sin") + ": last axis has stride " +
                            std::to_string(t->stride[cr - 1]) + "; it must be contiguous (stride 1)");
  std::vector<CosSinJob> jobs;
  for (auto [x, o, what] : {std::tuple{&q, &qo, "q"}, std::tuple{&k, &ko, "k"}}) {
    if (x->shape.size() != 4)
      throw py::value_error(std::string(what) + ": shape " + ShapeText(x->shape) + " is not 4-d");
    if (o->shape != x->shape || o->dtype != x->dtype)
      throw py::value_error(std::string(what) + "_out: shape or dtype differs from " + what + "'s");
    const int64_t B = x->shape[0], H = x->shape[h_ax], S = x->shape[s_ax], D = x->shape[3];
    if (x->dtype != c.dtype)
      throw py::value_error(std::string("cos: dtype ") + std::string(ToString(c.dtype)) + " differs from " + what +
                            "'s " + std::string(ToString(x->dtype)) +
                            " (torch would promote the result; Hugging Face casts cos/sin to q's dtype)");
    if (Sc != S)
      throw py::value_error("cos: shape " + ShapeText(c.shape) + " has " + std::to_string(Sc) + " positions for " +
                            what + "'s " + std::to_string(S) + " tokens " + ShapeText(x->shape));
    if (Bc != 1 && Bc != B)
      throw py::value_error("cos: batch " + std::to_string(Bc) + " is neither 1 nor " + what + "'s " +
                            std::to_string(B));
    if (R > D || R % 2 != 0 || R <= 0)
      throw py::value_error("cos: width " + std::to_string(R) + " does not fit " + what + "'s head_dim " +
                            std::to_string(D) + " (even, at most head_dim)");
    const size_t es = SizeOf(x->dtype);
    for (int64_t b = 0; b < B; ++b) {
      CosSinJob j;
      j.args.layout = {Pairing(pairing), D, 0, R};
      j.args.parallel = pool;
      const int64_t cb = cr == 3 && Bc != 1 ? b : 0;
      j.args.rows = {c.data + (cr == 3 ? cb * c.stride[0] : 0) * es,
                     s.data + (cr == 3 ? cb * s.stride[0] : 0) * es,
                     c.dtype,
                     S,
                     R,
                     c.stride[cr - 2],
                     s.stride[cr - 2]};
      j.in = {x->data + b * x->stride[0] * es, x->dtype, S, H, D, x->stride[s_ax], x->stride[h_ax]};
      j.out = {o->data + b * o->stride[0] * es, o->dtype, S, H, D, o->stride[s_ax], o->stride[h_ax]};
      if (D > 1 && (x->stride[3] != 1 || o->stride[3] != 1))
        throw py::value_error(std::string(what) + ": head_dim axis is not contiguous (stride 1)");
      Check(j.in.Validate(what));  // (by the argument's name; the kernel's own check says "input")
      Check(j.out.Validate(o == &qo ? "q_out" : "k_out"));
      Check(ValidateRopeCosSin(j.args, j.in, j.out));
      jobs.push_back(j);
    }
  }
  return jobs;
}

Status RunCosSinJobs(const std::vector<CosSinJob>& jobs) {
  for (const CosSinJob& j : jobs) POSENC_RETURN_IF_ERROR(ApplyRopeCosSin(j.args, j.in, j.out));
  return OkStatus();
}

std::vector<CosSinJob> CosSinJobs(const std::string& pairing, const py::tuple& q, const py::tuple& k,
                                  const py::tuple& qo, const py::tuple& ko, const py::tuple& c, const py::tuple& s,
                                  int unsqueeze_dim, ParallelRunner* pool) {
  // Named in order: the first bad tensor is the one named (argument evaluation order is unspecified).
  const Desc qd = DescOf(q, "q"), kd = DescOf(k, "k"), qod = DescOf(qo, "q_out"), kod = DescOf(ko, "k_out");
  const Desc cd = DescOf(c, "cos"), sd = DescOf(s, "sin");
  return CosSinJobs(pairing, qd, kd, qod, kod, cd, sd, unsqueeze_dim, pool);
}

void RunCosSinJobsWithoutGil(const std::vector<CosSinJob>& jobs) {
  Status st;
  {
    py::gil_scoped_release release;
    st = RunCosSinJobs(jobs);
  }
  Check(st);
}

void ApplyCosSinQK(const std::string& pairing, const py::tuple& q, const py::tuple& k, const py::tuple& qo,
                   const py::tuple& ko, const py::tuple& c, const py::tuple& s, int unsqueeze_dim) {
  auto pool = CurrentPool();
  RunCosSinJobsWithoutGil(CosSinJobs(pairing, q, k, qo, ko, c, s, unsqueeze_dim, pool.get()));
}

// torch's float dtypes, registered once by python/posenc/hf.py (compared by identity; held for the
// life of the process, as torch holds them).
struct TorchDtypes {
  PyObject *f32 = nullptr, *f16 = nullptr, *bf16 = nullptr;
};
TorchDtypes& TheTorchDtypes() {
  static TorchDtypes d;
  return d;
}
void RegisterTorchDtypes(py::handle f32, py::handle f16, py::handle bf16) {
  TorchDtypes& d = TheTorchDtypes();
  d = {f32.inc_ref().ptr(), f16.inc_ref().ptr(), bf16.inc_ref().ptr()};
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

// A torch CPU tensor's descriptor read in C++: the same checks and messages as hf.py's _desc, with
// interned attribute names and the CPython tuple API (pybind11's attr() and list casts cost more than
// hf.py's own Python reads on a decode-sized call).
Desc DescOfTorch(py::handle x, const char* what) {
  const TorchDtypes& td = TheTorchDtypes();
  if (td.f32 == nullptr) throw py::value_error("internal: torch dtypes are not registered");
  static PyObject* const is_cpu = PyUnicode_InternFromString("is_cpu");
  static PyObject* const dtype = PyUnicode_InternFromString("dtype");
  static PyObject* const data_ptr = PyUnicode_InternFromString("data_ptr");
  static PyObject* const shape = PyUnicode_InternFromString("shape");
  static PyObject* const stride = PyUnicode_InternFromString("stride");
  const auto get = [&](PyObject* name) {
    PyObject* r = PyObject_GetAttr(x.ptr(), name);
    if (r == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(r);
  };
  const auto call = [&](PyObject* name) {
    PyObject* r = PyObject_CallMethodNoArgs(x.ptr(), name);
    if (r == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(r);
  };
  if (get(is_cpu).ptr() != Py_True)
    throw py::value_error(std::string(what) + ": tensor is on device " + py::str(x.attr("device")).cast<std::string>() +
                          "; posenc runs on CPU tensors only");
  const py::object dt = get(dtype);
  Desc d;
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
  d.shape = IntTuple(get(shape).ptr(), what, "shape");
  d.stride = IntTuple(call(stride).ptr(), what, "stride()");
  if (d.shape.size() != d.stride.size())
    throw py::value_error(std::string(what) + ": shape and strides differ in rank");
  return d;
}

// apply_cos_sin_qk on torch CPU tensors themselves (hf.apply_cos_sin's path when all six are tensors).
void ApplyCosSinTorch(const std::string& pairing, py::handle q, py::handle k, py::handle qo, py::handle ko,
                      py::handle c, py::handle s, int unsqueeze_dim) {
  auto pool = CurrentPool();
  const Desc qd = DescOfTorch(q, "q"), kd = DescOfTorch(k, "k"), cd = DescOfTorch(c, "cos"), sd = DescOfTorch(s, "sin");
  const Desc qod = DescOfTorch(qo, "q_out"), kod = DescOfTorch(ko, "k_out");  // in hf.py's order
  RunCosSinJobsWithoutGil(CosSinJobs(pairing, qd, kd, qod, kod, cd, sd, unsqueeze_dim, pool.get()));
}

// The same call timed in C++ (the benchmark's baseline for the Python call): seconds of each of
// `reps` back-to-back ApplyRopeCosSin calls (which validate, as any C++ caller's call does) on the
// views built once, on this module's threads.
std::vector<double> TimeCosSinQK(const std::string& pairing, const py::tuple& q, const py::tuple& k,
                                 const py::tuple& qo, const py::tuple& ko, const py::tuple& c, const py::tuple& s,
                                 int unsqueeze_dim, int reps) {
  auto pool = CurrentPool();
  const std::vector<CosSinJob> jobs = CosSinJobs(pairing, q, k, qo, ko, c, s, unsqueeze_dim, pool.get());
  std::vector<double> t;
  Status st;
  {
    py::gil_scoped_release release;
    for (int r = 0; r < reps && st.ok(); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      st = RunCosSinJobs(jobs);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  Check(st);
  return t;
}

// ---- reused output buffers (the drop-in's fresh outputs) -----------------------------------------

// A fresh large tensor costs a page fault per 4 KiB page on its first write (glibc serves it from a new
// mmap and unmaps it on free): for a 4096-token prefill's q and k, more than the rotation itself. The
// drop-in's outputs of 1 MiB and more come from here instead: a freed buffer goes back to a small cache
// (exact sizes, at most kMaxCached buffers and kMaxCachedBytes) and the next call of that size reuses
// its already-mapped pages. Buffers are uninitialized, as torch.empty_like's are.
class OutputCache {
 public:
  static constexpr size_t kMaxCached = 16;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;
  void* Get(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].second == n) {
          void* p = free_[i].first;
          free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
          bytes_ -= n;
          return p;
        }
    }
    void* p = std::aligned_alloc(4096, n);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void Put(void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    while (!free_.empty() && (free_.size() >= kMaxCached || bytes_ + n > kMaxCachedBytes)) {
      std::free(free_.front().first);  // the oldest goes first
      bytes_ -= free_.front().second;
      free_.erase(free_.begin());
    }
    if (n > kMaxCachedBytes) {
      std::free(p);
      return;
    }
    free_.emplace_back(p, n);
    bytes_ += n;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, n] : free_) std::free(p);
    free_.clear();
    bytes_ = 0;
  }
  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> free_;
  size_t bytes_ = 0;
};
OutputCache& TheOutputCache() {
  static auto* cache = new OutputCache;  // never destroyed: capsules may outlive module teardown
  return *cache;
}
// A uint8 numpy array of `nbytes` (rounded up to 4 KiB) whose memory returns to the cache when freed.
py::array OutputBuffer(int64_t nbytes) {
  if (nbytes < 0) throw py::value_error("nbytes: negative");
  const size_t n = (static_cast<size_t>(nbytes) + 4095) & ~size_t{4095};
  struct Block {
    void* p;
    size_t n;
  };
  auto* b = new Block{TheOutputCache().Get(n == 0 ? 4096 : n), n == 0 ? 4096 : n};
  py::capsule keep(b, [](void* v) {
    auto* blk = static_cast<Block*>(v);
    TheOutputCache().Put(blk->p, blk->n);
    delete blk;
  });
  return py::array(py::dtype("uint8"), {static_cast<py::ssize_t>(nbytes)}, {}, b->p, keep);
}

// ---- model files -------------------------------------------------------------------------------

struct PyModel {
  std::shared_ptr<const ModelFile> file;
};

// A zero-copy numpy view of a float tensor stored in the model (the array keeps the model mapped).
py::array TensorArray(const PyModel& m, const ModelTensor& t) {
  std::string dt;
  size_t size = 0;
  if (t.dtype == DType::kF32)
    dt = "float32", size = 4;
  else if (t.dtype == DType::kF16)
    dt = "float16", size = 2;
  else if (t.dtype == DType::kBF16)
    dt = "uint16", size = 2;  // bfloat16 bits: numpy has no bfloat16
  else
    Throw(UnimplementedError("tensor " + t.name + " in " + t.file + ": type " + t.type_name +
                             " has no numpy dtype (use lookup() to dequantize rows)"));
  if (reinterpret_cast<uintptr_t>(t.data.data()) % size != 0)
    Throw(UnimplementedError("tensor " + t.name + " in " + t.file + ": stored at an unaligned offset"));
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  auto* keep = new std::shared_ptr<const ModelFile>(m.file);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<const ModelFile>*>(p); });
  py::array a(py::dtype(dt), shape, {}, const_cast<std::byte*>(t.data.data()), owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

py::array Lookup(const PyModel& m, const Positions& ids, bool positions, float multiplier,
                 const std::string& out_dtype) {
  QuantizedTable table = Take(positions ? m.file->PositionTable() : m.file->TokenEmbeddingTable());
  LookupOptions o;
  o.multiplier = multiplier;
  o.out_dtype = StorageType(out_dtype, "out_dtype");
  auto pool = CurrentPool();
  o.parallel = pool.get();
  Result<Array> r = Status();
  {
    py::gil_scoped_release release;
    r = LookupRows(table, Span(ids), o);
  }
  return ToNumpy(Take(std::move(r)));
}

}  // namespace
}  // namespace posenc::python

using namespace posenc;          // NOLINT
using namespace posenc::python;  // NOLINT

PYBIND11_MODULE(_posenc, m) {
  m.doc() = "posenc's C++ API, translated (use the `posenc` package, not this module)";
  m.attr("__version__") = POSENC_VERSION;             // the project's version (CMakeLists.txt)
  m.attr("MAX_JSON_NESTING") = kMaxJsonNesting;      // the bound every JSON reader applies
  m.def("scaling_rows", [] {  // (name, [key names]) of each row of RopeScalings(): the library's list
    py::list rows;
    for (const RopeScalingSpec& r : RopeScalings()) {
      py::list keys;
      for (const RopeScalingKey& k : r.keys) keys.append(std::string(k.name));
      rows.append(py::make_tuple(std::string(r.name), keys));
    }
    return rows;
  });

  m.def("set_num_threads", &SetNumThreads, py::arg("n"));
  m.def("num_threads", &NumThreads);
  m.def("simd_target", [] { return ChosenSimdTarget(); });

  // schemes
  py::class_<PositionScheme>(m, "Scheme")
      .def_static(
          "from_hf_json",
          [](const std::string& text, const std::string& source, const std::string& layer_type,
             const std::string& assume_layout, int64_t layer, const std::string& site) {
            HfConfigOptions o;
            o.layer_type = layer_type;
            o.assume_layout = AssumedLayout(assume_layout);
            o.layer = layer;
            o.site = site;
            return Take(ParseHfConfig(text, source, o));
          },
          py::arg("text"), py::arg("source"), py::arg("layer_type") = "", py::arg("assume_layout") = "",
          py::arg("layer") = -1, py::arg("site") = "")
      .def_static(
          "from_hf_config",
          [](const std::string& path, const std::string& layer_type, const std::string& assume_layout, int64_t layer,
             const std::string& site) {
            ModelSchemeOptions o;
            o.layer_type = layer_type;
            o.assume_layout = AssumedLayout(assume_layout);
            o.layer = layer;
            o.site = site;
            return Take(ConfigFileScheme(path, o));
          },
          py::arg("path"), py::arg("layer_type") = "", py::arg("assume_layout") = "", py::arg("layer") = -1,
          py::arg("site") = "")
      .def_static(
          "from_gguf",
          [](const std::string& path, bool allow_default) {
            GgufConfigOptions o;
            o.allow_default_freq_base = allow_default;
            return Take(LoadGgufConfig(path, o));
          },
          py::arg("path"), py::arg("allow_default_freq_base") = true)
      .def_static(
          "from_rope_json",
          [](const std::string& text, int64_t head_dim, const std::string& source) {
            return SchemeOfRopeConfig(Take(ParseRopeConfigJson(text, head_dim, source)));
          },
          py::arg("text"), py::arg("head_dim"), py::arg("source"))
      .def_static("from_model", &SchemeOfModel, py::arg("path"), py::arg("allow_default_freq_base") = true,
                  py::arg("layer_type") = "", py::arg("assume_layout") = "")
      .def_property_readonly("kind", [](const PositionScheme& s) { return std::string(ToString(s.kind)); })
      .def_readonly("model_type", &PositionScheme::model_type)
      .def_property_readonly("site", [](const PositionScheme& s) { return std::string(ToString(s.site)); })
      .def_property_readonly("sites",
                             [](const PositionScheme& s) {
                               std::vector<std::string> out;
                               for (RotarySite site : s.sites) out.emplace_back(ToString(site));
                               return out;
                             })
      .def_readonly("rotation_sign", &PositionScheme::rotation_sign)
      .def_readonly("rope_keys", &PositionScheme::rope_keys)
      .def_readonly("rope_key", &PositionScheme::rope_key)
      .def_readonly("num_heads", &PositionScheme::num_heads)
      .def_readonly("num_kv_heads", &PositionScheme::num_kv_heads)
      .def_readonly("hidden_size", &PositionScheme::hidden_size)
      .def_readonly("max_position_embeddings", &PositionScheme::max_position_embeddings)
      .def_readonly("alibi_variant", &PositionScheme::alibi_variant)
      .def_readonly("alibi_bias_max", &PositionScheme::alibi_bias_max)
      .def_readonly("t5_num_buckets", &PositionScheme::t5_num_buckets)
      .def_readonly("t5_max_distance", &PositionScheme::t5_max_distance)
      .def_readonly("t5_bidirectional", &PositionScheme::t5_bidirectional)
      .def_readonly("sinusoidal_layout", &PositionScheme::sinusoidal_layout)
      .def_readonly("rope_spelling", &PositionScheme::rope_spelling)
      .def_readonly("num_layers", &PositionScheme::num_layers)
      .def_readonly("notes", &PositionScheme::notes)
      .def_property_readonly("pairing",
                             [](const PositionScheme& s) { return std::string(ToString(s.rope.layout.pairing)); })
      .def_property_readonly("head_dim", [](const PositionScheme& s) { return s.rope.layout.head_dim; })
      .def_property_readonly("rotary_start", [](const PositionScheme& s) { return s.rope.layout.rotary_start; })
      .def_property_readonly("rotary_dim", [](const PositionScheme& s) { return s.rope.layout.rotary_dim; })
      .def_property_readonly("base", [](const PositionScheme& s) { return s.rope.base; })
      .def_property_readonly("rope_max_position_embeddings",
                             [](const PositionScheme& s) { return s.rope.max_position_embeddings; })
      .def_property_readonly("scaling", [](const PositionScheme& s) { return ScalingDict(s.rope.scaling); })
      .def_property_readonly("scaling_params", [](const PositionScheme& s) { return ScalingParamsList(s.rope); })
      .def_property_readonly("frequencies_depend_on_seq_len",
                             [](const PositionScheme& s) { return FrequenciesDependOnSeqLen(s.rope); })
      .def_property_readonly("multi_axis", [](const PositionScheme& s) { return MultiAxisDict(s.rope); })
      .def_property_readonly("rope_notes", [](const PositionScheme& s) { return s.rope.notes; })
      .def_property_readonly("source", [](const PositionScheme& s) { return s.rope.source; })
      .def(
          "with_pairing",
          [](const PositionScheme& s, const std::string& p) {
            PositionScheme c = s;
            c.rope.layout.pairing = Pairing(p);
            return c;
          },
          py::arg("pairing"))
      .def("validate", [](const PositionScheme& s) { Check(ValidateRopeConfig(s.rope)); })
      .def("layer_schedule",
           [](const PositionScheme& s) {
             LayerSchedule l = Take(LayerRopeSchedule(s));
             std::vector<bool> rope(l.rope.begin(), l.rope.end());
             std::vector<bool> temp;
             for (int64_t i = 0; i < l.num_layers(); ++i) temp.push_back(QueryTemperatureApplies(s, l, i));
             return py::make_tuple(rope, l.rule, temp);
           })
      .def_property_readonly("attn_temperature",
                             [](const PositionScheme& s) {
                               py::dict d;
                               d["tuning"] = s.attn_temperature.tuning;
                               d["floor_scale"] = s.attn_temperature.floor_scale;
                               d["attn_scale"] = s.attn_temperature.attn_scale;
                               d["offset"] = s.attn_temperature.offset;
                               d["every_layer"] = s.attn_temperature.every_layer;
                               return d;
                             })
      .def(
          "attn_temperature_scales",
          [](const PositionScheme& s, const Positions& positions, bool exact) -> py::object {
            if (exact) return F64(Take(AttnTemperatureScalesExact(s.attn_temperature, Span(positions))));
            std::vector<float> v = Take(AttnTemperatureScales(s.attn_temperature, Span(positions)));
            py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
            if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
            return a;
          },
          py::arg("positions"), py::arg("exact") = false)
      .def(
          "frequencies",
          [](const PositionScheme& s, int64_t seq_len) {
            RopeFrequencies f = Take(ComputeRopeFrequencies(s.rope, seq_len));
            return py::make_tuple(F64(f.inv_freq), f.attention_scaling);
          },
          py::arg("seq_len"))
      .def("unscaled_frequencies", [](const PositionScheme& s) { return F64(UnscaledFrequencies(s.rope)); })
      .def("nominal_factor", [](const PositionScheme& s) { return NominalScalingFactor(s.rope); })
      .def(
          "pair_regimes",
          [](const PositionScheme& s, int64_t seq_len) {
            RopeFrequencies f = Take(ComputeRopeFrequencies(s.rope, seq_len));
            std::vector<std::string> out;
            for (PairRegime r : ClassifyPairs(s.rope, f)) out.emplace_back(ToString(r));
            return out;
          },
          py::arg("seq_len"))
      .def(
          "multi_axis_plan",
          [](const PositionScheme& s, int64_t seq_len) {
            MultiAxisPlan p = Take(ComputeMultiAxisRope(s.rope, seq_len));
            return py::make_tuple(F64(p.freqs.inv_freq), p.freqs.attention_scaling, I64(p.pair_component),
                                  p.num_components);
          },
          py::arg("seq_len"))
      .def(
          "apply_multi_axis",
          [](const PositionScheme& s, int64_t seq_len, const py::list& x, const py::list& positions,
             const std::string& precision,
             const std::string& what) { ApplyMultiAxisBatch(s.rope, seq_len, x, positions, precision, what); },
          py::arg("seq_len"), py::arg("views"), py::arg("positions"), py::arg("precision"), py::arg("what"));

  // RoPE tables and kernels
  py::class_<RopeTable, std::shared_ptr<RopeTable>>(m, "RopeTable")
      .def_static(
          "build",
          [](const std::vector<double>& inv_freq, double attention_scaling, int64_t num_positions,
             const std::string& precision) {
            RopeFrequencies f{inv_freq, attention_scaling};
            return std::make_shared<RopeTable>(
                Take(RopeTable::Build(std::move(f), num_positions, Precision(precision))));
          },
          py::arg("inv_freq"), py::arg("attention_scaling"), py::arg("num_positions"), py::arg("precision"))
      .def_property_readonly("num_pairs", &RopeTable::num_pairs)
      .def_property_readonly("num_positions", &RopeTable::num_positions)
      .def_property_readonly("precision", [](const RopeTable& t) { return std::string(ToString(t.precision())); })
      .def_property_readonly("inv_freq", [](const RopeTable& t) { return F64(t.frequencies().inv_freq); })
      .def_property_readonly("attention_scaling", [](const RopeTable& t) { return t.frequencies().attention_scaling; })
      .def(
          "cos_sin",
          [](const RopeTable& t, const Positions& positions) {
            const auto n = static_cast<py::ssize_t>(positions.size()), p = static_cast<py::ssize_t>(t.num_pairs());
            for (py::ssize_t i = 0; i < n; ++i)
              if (positions.data()[i] < 0 || positions.data()[i] >= kMaxRopePosition)
                throw py::value_error("positions: position " + std::to_string(positions.data()[i]) + " at index " +
                                      std::to_string(i) + " is outside [0, 2^31)");
            py::array_t<float> c({n, p}), s({n, p});
            for (py::ssize_t i = 0; i < n; ++i)
              t.CosSin(positions.data()[i], c.mutable_data(i, 0), s.mutable_data(i, 0));
            return py::make_tuple(c, s);
          },
          py::arg("positions"));

  m.def(
      "apply_rope",
      [](const RopeTable& table, const std::string& pairing, int64_t head_dim, int64_t rotary_start, int64_t rotary_dim,
         const py::list& x, const py::list& out, const py::list& positions, const std::string& direction,
         const std::string& what, bool reference, int reps) {
        RotaryLayout layout{Pairing(pairing), head_dim, rotary_start, rotary_dim};
        return ApplyRopeBatch(table, layout, x, out, positions, direction, what, reference, reps);
      },
      py::arg("table"), py::arg("pairing"), py::arg("head_dim"), py::arg("rotary_start"), py::arg("rotary_dim"),
      py::arg("views"), py::arg("out_views"), py::arg("positions"), py::arg("direction"), py::arg("what"),
      py::arg("reference") = false, py::arg("reps") = 0);
  m.def(
      "apply_rope_qk",
      [](const RopeTable& table, const std::string& pairing, int64_t head_dim, int64_t rotary_start, int64_t rotary_dim,
         const py::list& q, const py::list& k, const py::list& positions, const std::string& direction) {
        RotaryLayout layout{Pairing(pairing), head_dim, rotary_start, rotary_dim};
        ApplyRopeQKBatch(table, layout, q, k, positions, direction);
      },
      py::arg("table"), py::arg("pairing"), py::arg("head_dim"), py::arg("rotary_start"), py::arg("rotary_dim"),
      py::arg("q_views"), py::arg("k_views"), py::arg("positions"), py::arg("direction"));

  m.def(
      "apply_rope_kv_cache",
      [](const RopeTable& table, const std::string& pairing, int64_t head_dim, int64_t rotary_start, int64_t rotary_dim,
         const py::tuple& q, const py::tuple& k, const py::tuple& v, const py::tuple& q_out, const Positions& positions,
         const Positions& slots, uintptr_t k_cache, int64_t k_nbytes, uintptr_t v_cache, int64_t v_nbytes,
         const std::string& cache_type, int64_t layers, int64_t cache_slots, int64_t layer, bool reference, int reps) {
        std::vector<double> times;
        ApplyRopeKvCacheBinding(table, RotaryLayout{Pairing(pairing), head_dim, rotary_start, rotary_dim}, q, k, v,
                                q_out, positions, slots, k_cache, k_nbytes, v_cache, v_nbytes, cache_type, layers,
                                cache_slots, layer, reference, reps, &times);
        return times;
      },
      py::arg("table"), py::arg("pairing"), py::arg("head_dim"), py::arg("rotary_start"), py::arg("rotary_dim"),
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("q_out"), py::arg("positions"), py::arg("slots"),
      py::arg("k_cache"), py::arg("k_nbytes"), py::arg("v_cache"), py::arg("v_nbytes"), py::arg("cache_type"),
      py::arg("layers"), py::arg("cache_slots"), py::arg("layer"), py::arg("reference"), py::arg("reps") = 0);
  m.def("apply_query_temperature", &ApplyTemperatureBatch, py::arg("q_views"), py::arg("scales"));
  m.def(
      "descs_apart",
      [](const py::tuple& a, const py::tuple& b) { return DescsApart(DescOf(a, "a"), DescOf(b, "b")); },
      py::arg("a"), py::arg("b"),
      "Whether two tensor descriptors (data pointer, dtype, shape, element strides) share no element: "
      "apart in memory, or disjoint slices of the same rows");
  m.def("apply_cos_sin_qk", &ApplyCosSinQK, py::arg("pairing"), py::arg("q"), py::arg("k"), py::arg("q_out"),
        py::arg("k_out"), py::arg("cos"), py::arg("sin"), py::arg("unsqueeze_dim"));
  m.def("apply_cos_sin_torch", &ApplyCosSinTorch, py::arg("pairing"), py::arg("q"), py::arg("k"), py::arg("q_out"),
        py::arg("k_out"), py::arg("cos"), py::arg("sin"), py::arg("unsqueeze_dim"));
  m.def("register_torch_dtypes", &RegisterTorchDtypes, py::arg("float32"), py::arg("float16"), py::arg("bfloat16"));
  m.def("output_buffer", &OutputBuffer, py::arg("nbytes"));
  m.def("output_cache_clear", [] { TheOutputCache().Clear(); });
  m.def("output_cache_bytes", [] { return TheOutputCache().cached_bytes(); });
  m.def("time_cos_sin_qk", &TimeCosSinQK, py::arg("pairing"), py::arg("q"), py::arg("k"), py::arg("q_out"),
        py::arg("k_out"), py::arg("cos"), py::arg("sin"), py::arg("unsqueeze_dim"), py::arg("reps"));

  // model files and embeddings
  py::class_<PyModel>(m, "Model")
      .def_static(
          "open",
          [](const std::string& path) { return PyModel{std::make_shared<const ModelFile>(Take(OpenModel(path)))}; },
          py::arg("path"))
      .def_property_readonly("path", [](const PyModel& x) { return x.file->path(); })
      .def_property_readonly("format", [](const PyModel& x) { return std::string(ToString(x.file->format())); })
      .def_property_readonly("architecture", [](const PyModel& x) { return x.file->architecture(); })
      .def_property_readonly("vocab_size", [](const PyModel& x) { return x.file->vocab_size(); })
      .def_property_readonly("d_model", [](const PyModel& x) { return x.file->d_model(); })
      .def_property_readonly("n_layers", [](const PyModel& x) { return x.file->n_layers(); })
      .def_property_readonly("n_heads", [](const PyModel& x) { return x.file->n_heads(); })
      .def_property_readonly("n_kv_heads", [](const PyModel& x) { return x.file->n_kv_heads(); })
      .def_property_readonly("context_length", [](const PyModel& x) { return x.file->context_length(); })
      .def_property_readonly("config_path", [](const PyModel& x) { return x.file->config_path(); })
      .def_property_readonly("tensors",
                             [](const PyModel& x) {
                               py::list l;
                               for (const ModelTensor& t : x.file->tensors())
                                 l.append(py::make_tuple(t.name, t.shape, t.type_name));
                               return l;
                             })
      .def(
          "tensor_array",
          [](const PyModel& x, const std::string& name) {
            const ModelTensor* t = x.file->Find(name);
            if (t == nullptr) Throw(NotFoundError("model " + x.file->path() + ": no tensor named '" + name + "'"));
            return TensorArray(x, *t);
          },
          py::arg("name"))
      .def("token_embedding_name",
           [](const PyModel& x) {
             return x.file->token_embedding() ? py::cast(x.file->token_embedding()->name) : py::none();
           })
      .def("position_embedding_name",
           [](const PyModel& x) {
             return x.file->position_embedding() ? py::cast(x.file->position_embedding()->name) : py::none();
           })
      .def("lookup", &Lookup, py::arg("ids"), py::arg("positions"), py::arg("multiplier"), py::arg("out_dtype"));

  // absolute and relative schemes
  m.def(
      "sinusoidal_table",
      [](const Positions& positions, int64_t d_model, const std::string& layout, double base) {
        SinusoidalLayout l;
        if (!ParseSinusoidalLayout(layout, &l))
          throw py::value_error("layout '" + layout + "' (expected interleaved or concat)");
        return ToNumpy(Take(SinusoidalTable(Span(positions), d_model, l, base)));
      },
      py::arg("positions"), py::arg("d_model"), py::arg("layout"), py::arg("base"));
  m.def(
      "alibi_slopes",
      [](int64_t num_heads, const std::string& variant, double bias_max) {
        AlibiVariant v;
        if (!ParseAlibiVariant(variant, &v)) throw py::value_error("variant '" + variant + "' (expected bloom or mpt)");
        return F64(Take(AlibiSlopes(num_heads, v, bias_max)));
      },
      py::arg("num_heads"), py::arg("variant"), py::arg("bias_max"));
  m.def(
      "alibi_bias",
      [](const std::vector<double>& slopes, int64_t q_len, int64_t k_len, int64_t q_offset) {
        return ToNumpy(Take(AlibiBias(slopes, q_len, k_len, q_offset)));
      },
      py::arg("slopes"), py::arg("query_length"), py::arg("key_length"), py::arg("query_offset"));
  m.def(
      "t5_buckets",
      [](const Positions& rel, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
        return I64(Take(T5RelativeBuckets(Span(rel), T5BucketParams{bidirectional, num_buckets, max_distance})));
      },
      py::arg("relative_positions"), py::arg("bidirectional"), py::arg("num_buckets"), py::arg("max_distance"));
  m.def(
      "t5_bias",
      [](py::array_t<float, py::array::c_style> table, int64_t q_len, int64_t k_len, int64_t q_offset,
         bool bidirectional, int64_t num_buckets, int64_t max_distance) {
        T5RelativeBias bias;
        bias.params = {bidirectional, num_buckets, max_distance};
        if (table.ndim() != 2) throw py::value_error("table: shape is not [num_buckets, heads]");
        bias.table = Take(Array::Zeros(DType::kF32, {table.shape(0), table.shape(1)}));
        std::memcpy(bias.table.bytes(), table.data(), bias.table.nbytes());
        Check(bias.Validate());
        if (q_len < 0 || k_len < 0) throw py::value_error("query_length and key_length must be >= 0");
        const int64_t h = bias.num_heads();
        py::array_t<float> out({h, q_len, k_len});
        float* o = out.mutable_data();
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t i = 0; i < q_len; ++i)
            for (int64_t j = 0; j < k_len; ++j) *o++ = bias.BiasAt(hh, q_offset + i, j);
        return out;
      },
      py::arg("table"), py::arg("query_length"), py::arg("key_length"), py::arg("query_offset"),
      py::arg("bidirectional"), py::arg("num_buckets"), py::arg("max_distance"));
  // vision-language position rows
  m.def(
      "text_vision_positions",
      [](const std::vector<std::tuple<bool, int64_t, int64_t, int64_t, int64_t, float, float>>& spans,
         int64_t merge, int64_t start) {
        std::vector<PositionSpan> v;
        v.reserve(spans.size());
        for (const auto& [vision, n, t, h, w, spt, tps] : spans)
          v.push_back(vision ? PositionSpan::Vision(t, h, w, spt, tps) : PositionSpan::Text(n));
        TextVisionPositions r = Take(BuildTextVisionPositions(v, merge, start));
        py::array_t<int64_t> out({int64_t{3}, r.tokens});
        if (!r.positions.empty()) std::memcpy(out.mutable_data(), r.positions.data(), r.positions.size() * 8);
        return py::make_tuple(out, r.next_position);
      },
      py::arg("spans"), py::arg("spatial_merge_size"), py::arg("start"));
  m.def(
      "vision_patch_positions",
      [](int64_t t, int64_t h, int64_t w, int64_t merge) {
        std::vector<int64_t> p = Take(BuildVisionPatchPositions(t, h, w, merge));
        py::array_t<int64_t> out({int64_t{2}, static_cast<int64_t>(p.size() / 2)});
        if (!p.empty()) std::memcpy(out.mutable_data(), p.data(), p.size() * 8);
        return out;
      },
      py::arg("grid_t"), py::arg("grid_h"), py::arg("grid_w"), py::arg("spatial_merge_size"));
  m.def(
      "shaw_indices",
      [](int64_t q_len, int64_t k_len, int64_t q_offset, int64_t max_relative_position) {
        if (q_len < 0 || k_len < 0) throw py::value_error("query_length and key_length must be >= 0");
        if (max_relative_position < 0)
          throw py::value_error("max_relative_position " + std::to_string(max_relative_position) + " is negative");
        ShawRelativeEmbeddings s;
        s.max_relative_position = max_relative_position;
        py::array_t<int64_t> out({q_len, k_len});
        int64_t* o = out.mutable_data();
        for (int64_t i = 0; i < q_len; ++i)
          for (int64_t j = 0; j < k_len; ++j) *o++ = s.Index(q_offset + i, j);
        return out;
      },
      py::arg("query_length"), py::arg("key_length"), py::arg("query_offset"), py::arg("max_relative_position"));
}
