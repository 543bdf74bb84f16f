// _posenc: RopeCall, the decode-speed half of a python/posenc Rope whose table is fixed. Rope.apply,
// apply_qk and apply_kv_cache hand it the caller's objects as they are; one C++ entry per call reads
// the tensors' descriptors (tensors.cpp), plans the views (posenc::PlanHeads), checks overlaps
// (posenc::StridedApart), validates and runs the kernel, with no Python-level work in between.
//
// A call returns None, having written nothing, when anything is out of the ordinary (an object the
// readers do not take, a shape, position or overlap the library refuses): Rope then runs its general
// path (python/posenc/_rope.py), which handles the case or raises the one worded error. So every
// message keeps one source, and nothing is refused here that the general path would accept.
// time_* run the same prepared call `reps` times inside C++, each timed there: python/bench's
// baseline for what the Python call adds.
#include "binding.hpp"

#include <chrono>
#include <string_view>

namespace posenc::python {
namespace {

bool SameView(const HeadsView& a, const HeadsView& b) {
  return a.data == b.data && a.dtype == b.dtype && a.tokens == b.tokens && a.heads == b.heads &&
         a.head_dim == b.head_dim && a.token_stride == b.token_stride && a.head_stride == b.head_stride;
}
// [first byte, one past the last) of a planned view (non-negative strides: PlanHeads refuses others).
std::pair<uintptr_t, uintptr_t> Bytes(const HeadsView& v) {
  const auto p = reinterpret_cast<uintptr_t>(v.data);
  if (v.tokens <= 0 || v.heads <= 0 || v.head_dim <= 0) return {p, p};
  const auto last =
      static_cast<uintptr_t>((v.tokens - 1) * v.token_stride + (v.heads - 1) * v.head_stride + v.head_dim);
  return {p, p + last * SizeOf(v.dtype)};
}
bool Meet(std::pair<uintptr_t, uintptr_t> a, std::pair<uintptr_t, uintptr_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}
// Whether two views share no element (the library's rule; byte spans apart answer without it).
bool Apart(const HeadsView& a, const HeadsView& b) {
  return !Meet(Bytes(a), Bytes(b)) || StridedApart(StridedOf(a), StridedOf(b));
}

// Two tensors' planned views, one per element of each: where one folded its batch into one view and
// the other did not, both are planned again unfolded. False where that plan fails.
bool SameFolding(const StridedTensor& at, const char* a_name, const StridedTensor& bt, const char* b_name,
                 std::string_view ord, std::vector<HeadsView>* a, std::vector<HeadsView>* b) {
  if (a->size() == b->size()) return true;
  Result<HeadsPlan> pa = PlanHeads(at, ord, a_name, false), pb = PlanHeads(bt, ord, b_name, false);
  if (!pa.ok() || !pb.ok()) return false;
  *a = std::move(pa->views);
  *b = std::move(pb->views);
  return true;
}

// None: the rank's default; a str: that order; anything else: not here.
bool OrderOf(py::handle order, std::string_view* out) {
  if (order.is_none()) {
    *out = {};
    return true;
  }
  if (!PyUnicode_Check(order.ptr())) return false;
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(order.ptr(), &n);
  if (s == nullptr) {
    PyErr_Clear();
    return false;
  }
  *out = {s, static_cast<size_t>(n)};
  return true;
}

// "forward" / "backward", reversed where the site rotates backwards (rotation_sign < 0).
bool DirectionOf(py::handle direction, int rotation_sign, RopeDirection* out) {
  std::string_view d;
  if (direction.is_none() || !OrderOf(direction, &d)) return false;
  if (d != "forward" && d != "backward") return false;
  const bool forward = (d == "forward") == (rotation_sign >= 0);
  *out = forward ? RopeDirection::kForward : RopeDirection::kBackward;
  return true;
}

// Position rows as python/posenc/_tensors.py's position_rows makes them: [tokens] shared by every
// batch element (a scalar is one position), or [1 or batch, tokens]; one row of batch * tokens when
// the batch was folded into one view.
struct Rows {
  IntRows ints;
  std::vector<int64_t> joined;
  std::vector<std::span<const int64_t>> rows;
};
bool RowsOf(py::handle positions, int64_t batch, int64_t tokens, size_t views, Rows* r) {
  if (!ReadInts(positions, &r->ints)) return false;
  const IntRows& p = r->ints;
  const size_t rank = p.shape.size();
  int64_t per_row = rank == 0 ? 1 : p.shape.back();
  bool batched = false;  // one row per batch element
  if (rank == 2) {
    if (p.shape[0] != 1 && p.shape[0] != batch) return false;
    batched = p.shape[0] == batch && batch != 1;
  }
  if (per_row != tokens) return false;
  r->rows.clear();
  const auto row = [&](int64_t b) { return std::span<const int64_t>(p.data + (batched ? b * tokens : 0), tokens); };
  if (views == 1 && batch > 1) {
    if (batched) {
      r->rows.emplace_back(p.data, static_cast<size_t>(batch * tokens));  // (contiguous already)
    } else {
      r->joined.clear();
      for (int64_t b = 0; b < batch; ++b) r->joined.insert(r->joined.end(), p.data, p.data + tokens);
      r->rows.emplace_back(r->joined);
    }
    return true;
  }
  for (int64_t b = 0; b < batch; ++b) r->rows.push_back(row(b));
  return r->rows.size() == views;
}

class RopeCall {
 public:
  RopeCall(std::shared_ptr<RopeTable> table, const std::string& pairing, int64_t head_dim, int64_t rotary_start,
           int64_t rotary_dim, int rotation_sign)
      : table_(std::move(table)),
        layout_{Pairing(pairing), head_dim, rotary_start, rotary_dim},
        rotation_sign_(rotation_sign) {}

  // Rope.apply / apply_reference: x rotated in place or into out; returns x or out, or None (not here).
  py::object Apply(py::handle x, py::handle positions, py::handle out, py::handle order, py::handle direction,
                   bool reference) {
    ApplyJob j;
    if (!PrepareApply(x, positions, out, order, direction, &j)) return py::none();
    Check(RunWithoutGil([&] { return RunApply(j, reference); }));
    return py::reinterpret_borrow<py::object>(out.is_none() ? x : out);
  }
  std::vector<double> TimeApply(py::handle x, py::handle positions, py::handle out, py::handle order,
                                py::handle direction, int reps) {
    ApplyJob j;
    if (!PrepareApply(x, positions, out, order, direction, &j)) throw py::value_error("time_apply: not a fast call");
    return Time(reps, [&] { return RunApply(j, false); });
  }

  // Rope.apply_qk: q and k rotated in place; returns (q, k), or None.
  py::object ApplyQK(py::handle q, py::handle k, py::handle positions, py::handle order, py::handle direction) {
    QKJob j;
    if (!PrepareQK(q, k, positions, order, direction, &j)) return py::none();
    Check(RunWithoutGil([&] { return RunQK(j); }));
    return py::make_tuple(q, k);
  }
  std::vector<double> TimeQK(py::handle q, py::handle k, py::handle positions, int reps) {
    QKJob j;
    if (!PrepareQK(q, k, positions, py::none(), py::str("forward"), &j))
      throw py::value_error("time_qk: not a fast call");
    return Time(reps, [&] { return RunQK(j); });
  }

  // Rope.apply_kv_cache: returns q_out (allocated like q when None), or None.
  // With QK-norm: q_norm / k_norm weights (None, or 1-D contiguous float tensors), norm_eps (a float or
  // int) and norm (the convention's name, resolved by the caller). float8 caches: uint8 caches with
  // cache_type "float8_e4m3fn" / "float8_e5m2", k_scale / v_scale None, a number or a 1-D float32 tensor.
  py::object ApplyKvCache(py::handle q, py::handle k, py::handle v, py::handle positions, py::handle slots,
                          py::handle k_cache, py::handle v_cache, py::handle q_out, py::handle layer,
                          py::handle reference, py::handle q_norm, py::handle k_norm, py::handle norm_eps,
                          py::handle norm, py::handle cache_type, py::handle k_scale, py::handle v_scale) {
    KvJob j;
    if (!ReadScales(cache_type, k_scale, v_scale, &j.scales) || !ReadNorms(q_norm, k_norm, norm_eps, norm, &j.norms) ||
        !PrepareKv(q, k, v, positions, slots, k_cache, v_cache, q_out, layer, reference, &j))
      return py::none();
    Status s = RunWithoutGil([&] { return RunKv(j); });
    if (!s.ok()) return py::none();  // (validated first, nothing written: the general path words it)
    return j.q_out;
  }
  std::vector<double> TimeKvCache(py::handle q, py::handle k, py::handle v, py::handle positions, py::handle slots,
                                  py::handle k_cache, py::handle v_cache, py::handle q_out, int reps,
                                  py::handle q_norm, py::handle k_norm, py::handle norm_eps, py::handle norm,
                                  py::handle cache_type, py::handle k_scale, py::handle v_scale) {
    KvJob j;
    if (!ReadScales(cache_type, k_scale, v_scale, &j.scales) || !ReadNorms(q_norm, k_norm, norm_eps, norm, &j.norms) ||
        !PrepareKv(q, k, v, positions, slots, k_cache, v_cache, q_out, py::int_(0), py::bool_(false), &j))
      throw py::value_error("time_kv_cache: not a fast call");
    return Time(reps, [&] { return RunKv(j); });
  }

  // Rope.apply_mla_cache: (q_out,) — q_out None without q — or None where the general path takes over
  // (unusual objects, anything it words as an error: nothing was written then).
  py::object ApplyMla(py::handle kv_c, py::handle k_pe, py::handle positions, py::handle slots, py::handle cache,
                      py::handle q, py::handle q_out, py::handle layer, py::handle reference, py::handle kv_norm,
                      py::handle norm_eps, py::handle norm, py::handle cache_type, py::handle scale) {
    MlaJob j;
    if (!ReadScales(cache_type, scale, py::none(), &j.scales) ||
        !ReadNorms(kv_norm, py::none(), norm_eps, norm, &j.norms) ||
        !PrepareMla(kv_c, k_pe, positions, slots, cache, q, q_out, layer, reference, &j))
      return py::none();
    if (!RunWithoutGil([&] { return RunMla(j); }).ok()) return py::none();
    return py::make_tuple(j.q_out);
  }
  std::vector<double> TimeMla(py::handle kv_c, py::handle k_pe, py::handle positions, py::handle slots,
                              py::handle cache, py::handle q, py::handle q_out, py::handle kv_norm, py::handle norm_eps,
                              py::handle norm, int reps) {
    MlaJob j;
    if (!ReadNorms(kv_norm, py::none(), norm_eps, norm, &j.norms) ||
        !PrepareMla(kv_c, k_pe, positions, slots, cache, q, q_out, py::int_(0), py::bool_(false), &j))
      throw py::value_error("time_mla_cache: not a fast call");
    return Time(reps, [&] { return RunMla(j); });
  }

 private:
  struct MlaJob {
    CallNorms norms;    // kv_norm's weight (first)
    CallScales scales;  // a float8 cache's type and scale (first)
    HeadsView kv_c, k_pe, q, q_out_view;
    py::object q_out = py::none();
    IntRows pos, slots;
    MlaCacheView cache;
    MlaRopeArgs args;
    bool reference = false;
    std::shared_ptr<ThreadPool> pool;
  };
  static Status RunMla(const MlaJob& j) {
    return j.reference ? ApplyMlaRopeCacheReference(j.args, j.kv_c, j.k_pe, j.q, j.q_out_view, j.cache)
                       : ApplyMlaRopeCache(j.args, j.kv_c, j.k_pe, j.q, j.q_out_view, j.cache);
  }
  bool PrepareMla(py::handle kv_c, py::handle k_pe, py::handle positions, py::handle slots, py::handle cache,
                  py::handle q, py::handle q_out, py::handle layer, py::handle reference, MlaJob* j) const {
    ForeignTensor ct, pt;
    if (!ReadTensor(kv_c, false, &ct) || !ReadTensor(k_pe, false, &pt) || !RowView(ct, &j->kv_c) ||
        !RowView(pt, &j->k_pe))
      return false;
    if (!PyBool_Check(reference.ptr())) return false;  // (layer: LayerOf)
    const int64_t tokens = j->kv_c.tokens;
    j->q = j->q_out_view = HeadsView{nullptr, j->kv_c.dtype, tokens, 0, layout_.head_dim, 0, layout_.head_dim};
    if (!q.is_none()) {
      ForeignTensor qt, ot;
      if (!ReadTensor(q, false, &qt) || !View3(qt, "q", &j->q)) return false;
      j->q_out = q_out.is_none() ? EmptyLike(q, qt) : py::reinterpret_borrow<py::object>(q_out);
      if (!ReadTensor(j->q_out, true, &ot) || !View3(ot, "q_out", &j->q_out_view)) return false;
      const HeadsView& qo = j->q_out_view;
      if (!Apart(j->kv_c, qo) || !Apart(j->k_pe, qo) || (!SameView(qo, j->q) && !Apart(j->q, qo))) return false;
    } else if (!q_out.is_none()) {
      return false;
    }
    if (!TokenInts(positions, tokens, &j->pos) || !TokenInts(slots, tokens, &j->slots)) return false;
    CacheMemory cm;
    if (!ReadCache(cache, &cm) || !HoldsFloat8(j->scales.float8, &cm)) return false;
    MlaCacheView& c = j->cache;
    c.scale = j->scales.first;
    if (!ParseKvCacheType(cm.type, &c.type)) return false;
    c.kv_lora_rank = j->kv_c.head_dim;
    c.rope_dim = layout_.rotary_dim;
    const int64_t row = cm.type == "q8_0" ? c.row_values() / 32 * 34 : c.row_values();  // (Validate: R % 32)
    if ((cm.shape.size() != 2 && cm.shape.size() != 3) || cm.shape.back() != row) return false;
    c.layers = cm.shape.size() == 3 ? cm.shape[0] : 1;
    c.slots = cm.shape.size() == 3 ? cm.shape[1] : cm.shape[0];
    c.data = cm.data;
    if (!c.Validate().ok() || cm.nbytes != c.bytes()) return false;
    const auto p = reinterpret_cast<uintptr_t>(cm.data);
    for (const HeadsView& w : {j->kv_c, j->k_pe, j->q, j->q_out_view})
      if (w.heads > 0 && Meet({p, p + static_cast<uintptr_t>(cm.nbytes)}, Bytes(w))) return false;
    int64_t layer_index = 0;
    if (!LayerOf(layer, &layer_index)) return false;
    j->pool = CurrentPool();
    j->args = MlaRopeArgs{Args(RopeDirection::kForward, j->pool.get()),
                          std::span<const int64_t>(j->slots.data, static_cast<size_t>(tokens)), layer_index,
                          j->norms.Of(j->norms.first)};
    j->args.rope.positions = std::span<const int64_t>(j->pos.data, static_cast<size_t>(tokens));
    j->reference = reference.ptr() == Py_True;
    return true;
  }
  struct ApplyJob {
    std::vector<HeadsView> x, out;
    Rows rows;
    RopeArgs args;
    std::shared_ptr<ThreadPool> pool;
  };
  struct QKJob {
    std::vector<HeadsView> q, k;
    Rows rows;
    RopeArgs args;
    std::shared_ptr<ThreadPool> pool;
  };
  struct KvJob {
    CallNorms norms;    // q_norm, k_norm (first, second)
    CallScales scales;  // float8 caches: type, k_scale, v_scale (first, second)
    QkvViews x;
    HeadsView q_out_view_;
    py::object q_out;  // the object returned
    IntRows pos, slots;
    KvCacheView cache;
    FusedRopeArgs args;
    bool reference = false;
    std::shared_ptr<ThreadPool> pool;
  };

  template <typename F>
  static Status RunWithoutGil(F&& f) {
    py::gil_scoped_release release;
    return f();
  }
  template <typename F>
  static std::vector<double> Time(int reps, F&& f) {
    std::vector<double> t;
    Status s;
    {
      py::gil_scoped_release release;
      for (int r = 0; r < reps && s.ok(); ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        s = f();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    Check(s);
    return t;
  }

  RopeArgs Args(RopeDirection d, ParallelRunner* pool) const {
    RopeArgs a;
    a.layout = layout_;
    a.table = table_.get();
    a.direction = d;
    a.parallel = pool;
    return a;
  }

  bool PrepareApply(py::handle x, py::handle positions, py::handle out, py::handle order, py::handle direction,
                    ApplyJob* j) const {
    ForeignTensor xt, ot;
    std::string_view ord;
    RopeDirection dir;
    if (!ReadTensor(x, true, &xt) || !OrderOf(order, &ord) || !DirectionOf(direction, rotation_sign_, &dir))
      return false;
    Result<HeadsPlan> plan = PlanHeads(xt.t, ord, "x");
    if (!plan.ok()) return false;
    j->x = std::move(plan->views);
    j->out.clear();
    if (!out.is_none()) {
      if (!ReadTensor(out, true, &ot) || ot.kind != xt.kind || ot.t.shape != xt.t.shape || ot.t.dtype != xt.t.dtype)
        return false;
      Result<HeadsPlan> op = PlanHeads(ot.t, ord, "out");
      if (!op.ok()) return false;
      j->out = std::move(op->views);
      if (!SameFolding(xt.t, "x", ot.t, "out", ord, &j->x, &j->out)) return false;
      for (const HeadsView& a : j->x)
        for (const HeadsView& b : j->out)
          if (!SameView(a, b) && !Apart(a, b)) return false;
    }
    if (!RowsOf(positions, plan->batch, plan->tokens, j->x.size(), &j->rows)) return false;
    j->pool = CurrentPool();
    j->args = Args(dir, j->pool.get());
    for (size_t b = 0; b < j->x.size(); ++b) {
      j->args.positions = j->rows.rows[b];
      if (!ValidateRope(j->args, j->x[b], "x").ok()) return false;
      if (!j->out.empty() && !ValidateRope(j->args, j->out[b], "out").ok()) return false;
    }
    return true;
  }
  static Status RunApply(ApplyJob& j, bool reference) {
    for (size_t b = 0; b < j.x.size(); ++b) {
      j.args.positions = j.rows.rows[b];
      const HeadsView dst = j.out.empty() ? j.x[b] : j.out[b];
      POSENC_RETURN_IF_ERROR(reference ? ApplyRopeReference(j.args, j.x[b], dst) : ApplyRope(j.args, j.x[b], dst));
    }
    return OkStatus();
  }

  bool PrepareQK(py::handle q, py::handle k, py::handle positions, py::handle order, py::handle direction,
                 QKJob* j) const {
    ForeignTensor qt, kt;
    std::string_view ord;
    RopeDirection dir;
    if (!ReadTensor(q, true, &qt) || !ReadTensor(k, true, &kt) || !OrderOf(order, &ord) ||
        !DirectionOf(direction, rotation_sign_, &dir))
      return false;
    Result<HeadsPlan> qp = PlanHeads(qt.t, ord, "q"), kp = PlanHeads(kt.t, ord, "k");
    if (!qp.ok() || !kp.ok() || kp->tokens != qp->tokens || kp->batch != qp->batch ||
        kt.t.shape.size() != qt.t.shape.size())
      return false;
    j->q = std::move(qp->views);
    j->k = std::move(kp->views);
    if (!SameFolding(qt.t, "q", kt.t, "k", ord, &j->q, &j->k)) return false;
    for (const HeadsView& a : j->q)
      for (const HeadsView& b : j->k)
        if (!Apart(a, b)) return false;
    if (!RowsOf(positions, qp->batch, qp->tokens, j->q.size(), &j->rows)) return false;
    j->pool = CurrentPool();
    j->args = Args(dir, j->pool.get());
    for (size_t b = 0; b < j->q.size(); ++b) {
      j->args.positions = j->rows.rows[b];
      if (!ValidateRope(j->args, j->q[b], "q").ok() || !ValidateRope(j->args, j->k[b], "k").ok()) return false;
    }
    return true;
  }
  static Status RunQK(QKJob& j) {
    for (size_t b = 0; b < j.q.size(); ++b) {
      j.args.positions = j.rows.rows[b];
      POSENC_RETURN_IF_ERROR(ApplyRopeQK(j.args, j.q[b], j.k[b]));
    }
    return OkStatus();
  }

  // One [tokens, heads, head_dim] view of a rank-3 tensor.
  static bool View3(const ForeignTensor& t, const char* what, HeadsView* v) {
    if (t.t.shape.size() != 3) return false;
    Result<HeadsPlan> p = PlanHeads(t.t, "thd", what);
    if (!p.ok() || p->views.size() != 1) return false;
    *v = p->views[0];
    return true;
  }
  // (layers, slots) of a cache tensor holding rows of kv_heads x head_dim (python/posenc/_tensors.py's
  // cache_memory: [layers, slots, H, D] or [slots, H, D]; Q8_0: [layers, slots, row bytes] or [slots, row bytes]).
  static bool CacheGeometry(const CacheMemory& c, int64_t kv_heads, int64_t head_dim, int64_t* layers, int64_t* slots) {
    const std::vector<int64_t>& s = c.shape;
    const size_t lead = c.type == "q8_0" ? 2 : 3;  // the rank without layers
    if (c.type == "q8_0") {
      if ((kv_heads * head_dim) % 32 != 0 || s.empty() || s.back() != kv_heads * head_dim / 32 * 34) return false;
    } else if (s.size() < 2 || s[s.size() - 2] != kv_heads || s.back() != head_dim) {
      return false;
    }
    if (s.size() != lead && s.size() != lead + 1) return false;
    *layers = s.size() == lead + 1 ? s[0] : 1;
    *slots = s.size() == lead + 1 ? s[1] : s[0];
    return true;
  }

  bool PrepareKv(py::handle q, py::handle k, py::handle v, py::handle positions, py::handle slots, py::handle k_cache,
                 py::handle v_cache, py::handle q_out, py::handle layer, py::handle reference, KvJob* j) const {
    ForeignTensor qt, kt, vt, ot;
    if (!ReadTensor(q, false, &qt) || !ReadTensor(k, false, &kt) || !ReadTensor(v, false, &vt)) return false;
    if (!PyBool_Check(reference.ptr())) return false;  // (layer: LayerOf)
    if (!View3(qt, "q", &j->x.q) || !View3(kt, "k", &j->x.k) || !View3(vt, "v", &j->x.v)) return false;
    j->q_out = q_out.is_none() ? EmptyLike(q, qt) : py::reinterpret_borrow<py::object>(q_out);
    if (!ReadTensor(j->q_out, true, &ot) || !View3(ot, "q_out", &j->q_out_view_)) return false;
    const int64_t tokens = qt.t.shape[0], kv_heads = kt.t.shape[1], head_dim = kt.t.shape[2];
    if (!TokenInts(positions, tokens, &j->pos) || !TokenInts(slots, tokens, &j->slots)) return false;
    CacheMemory kc, vc;
    int64_t kl = 0, ks = 0, vl = 0, vs = 0;
    if (!ReadCache(k_cache, &kc) || !ReadCache(v_cache, &vc) || !HoldsFloat8(j->scales.float8, &kc) ||
        !HoldsFloat8(j->scales.float8, &vc))
      return false;
    if (!CacheGeometry(kc, kv_heads, head_dim, &kl, &ks) ||
        !CacheGeometry(vc, kv_heads, head_dim, &vl, &vs) || vc.type != kc.type || vl != kl || vs != ks)
      return false;
    int64_t layer_index = 0;
    if (!LayerOf(layer, &layer_index)) return false;
    // What is written (q_out, the caches) shares no memory with what is read (q, k, v) or with each
    // other; q_out may be q itself.
    const HeadsView& qo = j->q_out_view_;
    if (!Apart(j->x.k, qo) || !Apart(j->x.v, qo) || (!SameView(qo, j->x.q) && !Apart(j->x.q, qo))) return false;
    for (const CacheMemory* c : {&kc, &vc}) {
      const auto p = reinterpret_cast<uintptr_t>(c->data);
      for (const HeadsView w : {j->x.q, j->x.k, j->x.v, qo})
        if (Meet({p, p + static_cast<uintptr_t>(c->nbytes)}, Bytes(w))) return false;
    }
    KvCacheView& cache = j->cache;
    if (!ParseKvCacheType(kc.type, &cache.type)) return false;
    cache.k = kc.data;
    cache.v = vc.data;
    cache.layers = kl;
    cache.slots = ks;
    cache.kv_heads = kv_heads;
    cache.head_dim = head_dim;
    cache.k_scale = j->scales.first;
    cache.v_scale = j->scales.second;
    if (!cache.Validate().ok() || kc.nbytes != cache.bytes() || vc.nbytes != cache.bytes()) return false;
    j->pool = CurrentPool();
    j->args = FusedRopeArgs{Args(RopeDirection::kForward, j->pool.get()),
                            std::span<const int64_t>(j->slots.data, static_cast<size_t>(tokens)),
                            layer_index,
                            {},
                            j->norms.Of(j->norms.first),
                            j->norms.Of(j->norms.second)};
    j->args.rope.positions = std::span<const int64_t>(j->pos.data, static_cast<size_t>(tokens));
    j->reference = reference.ptr() == Py_True;
    return true;
  }
  Status RunKv(KvJob& j) const {
    return j.reference ? ApplyRopeKvCacheReference(j.args, j.x, j.q_out_view_, j.cache)
                       : ApplyRopeKvCache(j.args, j.x, j.q_out_view_, j.cache);
  }

  std::shared_ptr<RopeTable> table_;
  RotaryLayout layout_;
  int rotation_sign_ = 1;
};

}  // namespace

void RegisterRopeCall(py::module_& m) {
  py::class_<RopeCall>(m, "RopeCall")
      .def(py::init<std::shared_ptr<RopeTable>, const std::string&, int64_t, int64_t, int64_t, int>(), py::arg("table"),
           py::arg("pairing"), py::arg("head_dim"), py::arg("rotary_start"), py::arg("rotary_dim"),
           py::arg("rotation_sign"))
      // (positional handles: pybind11's keyword parsing would cost more than the kernel at decode)
      .def("apply", &RopeCall::Apply)
      .def("apply_qk", &RopeCall::ApplyQK)
      .def("apply_kv_cache", &RopeCall::ApplyKvCache, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("positions"),
           py::arg("slots"), py::arg("k_cache"), py::arg("v_cache"), py::arg("q_out"), py::arg("layer"),
           py::arg("reference"), py::arg("q_norm") = py::none(), py::arg("k_norm") = py::none(),
           py::arg("norm_eps") = py::none(), py::arg("norm") = py::none(), py::arg("cache_type") = py::none(),
           py::arg("k_scale") = py::none(), py::arg("v_scale") = py::none())
      .def("apply_mla_cache", &RopeCall::ApplyMla, py::arg("kv_c"), py::arg("k_pe"), py::arg("positions"),
           py::arg("slots"), py::arg("cache"), py::arg("q"), py::arg("q_out"), py::arg("layer"), py::arg("reference"),
           py::arg("kv_norm"), py::arg("norm_eps"), py::arg("norm"), py::arg("cache_type") = py::none(),
           py::arg("scale") = py::none())
      .def("time_mla_cache", &RopeCall::TimeMla)
      .def("time_apply", &RopeCall::TimeApply)
      .def("time_qk", &RopeCall::TimeQK)
      .def("time_kv_cache", &RopeCall::TimeKvCache, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("positions"),
           py::arg("slots"), py::arg("k_cache"), py::arg("v_cache"), py::arg("q_out"), py::arg("reps"),
           py::arg("q_norm") = py::none(), py::arg("k_norm") = py::none(), py::arg("norm_eps") = py::none(),
           py::arg("norm") = py::none(), py::arg("cache_type") = py::none(), py::arg("k_scale") = py::none(),
           py::arg("v_scale") = py::none());
}

}  // namespace posenc::python
