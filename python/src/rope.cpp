// _posenc: RopeTable and the RoPE kernels on views that python/posenc/_tensors.py described
// (Rope's general path: any tensor it can describe), the fused KV-cache write, the query temperature.
#include "binding.hpp"

#include <chrono>

namespace posenc::python {
namespace {

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

// The RMSNorm of a QK-norm convention (QkNorm's names: per_head, per_head_float32, ...) over `weight`
// with `eps`; none for an empty weight. The weight's length and values and eps are the kernel's checks.
HeadRmsNorm NormOf(const std::vector<float>& weight, double eps, const std::string& convention, const char* what) {
  if (weight.empty()) return {};
  QkNorm q = QkNorm::kNone;
  if (!ParseQkNorm(convention, &q))
    throw py::value_error(std::string(what) + ": norm '" + convention + "' (expected one of " +
                          QkNormRmsNormNames() + ")");
  HeadRmsNorm n;
  if (!QkNormAsRmsNorm(q, &n.style, &n.scope))
    throw py::value_error(std::string(what) + ": norm '" + convention + "' is not an RMSNorm posenc runs");
  n.weight = weight;
  n.eps = static_cast<float>(eps);
  return n;
}

// The byte size a cache tensor must have, or a ValueError naming both sizes.
void CheckCacheBytes(const char* what, int64_t nbytes, int64_t want, const std::string& shape) {
  if (nbytes != want)
    throw py::value_error(std::string(what) + ": " + std::to_string(nbytes) + " bytes, a " + shape + " is " +
                          std::to_string(want));
}

// RoPE fused with the KV-cache write (ApplyRopeKvCache): the caches are caller memory whose byte
// sizes the Python side read from the tensors; they must be the cache's exact size.
void ApplyRopeKvCacheBinding(const RopeTable& table, const RotaryLayout& layout, const py::tuple& q_t,
                             const py::tuple& k_t, const py::tuple& v_t, const py::tuple& q_out_t,
                             const Positions& positions, const Positions& slots, uintptr_t k_cache, int64_t k_nbytes,
                             uintptr_t v_cache, int64_t v_nbytes, const std::string& cache_type, int64_t layers,
                             int64_t cache_slots, int64_t layer, bool reference, const std::vector<float>& k_scale,
                             const std::vector<float>& v_scale, const HeadRmsNorm& q_norm, const HeadRmsNorm& k_norm,
                             int reps = 0, std::vector<double>* times = nullptr) {
  QkvViews x{View(q_t, "q"), View(k_t, "k"), View(v_t, "v")};
  const HeadsView q_out = View(q_out_t, "q_out");
  KvCacheView cache;
  if (!ParseKvCacheType(cache_type, &cache.type))
    throw py::value_error("cache_type: '" + cache_type +
                          "' (expected float32, float16, bfloat16, q8_0, float8_e4m3fn or float8_e5m2)");
  cache.k = reinterpret_cast<void*>(k_cache);
  cache.v = reinterpret_cast<void*>(v_cache);
  cache.layers = layers;
  cache.slots = cache_slots;
  cache.kv_heads = x.k.heads;
  cache.head_dim = x.k.head_dim;
  cache.k_scale = k_scale;  // float8: per tensor (1 value) or per head; the view's Validate names a bad one
  cache.v_scale = v_scale;
  Check(cache.Validate());
  if (k_nbytes != cache.bytes() || v_nbytes != cache.bytes())
    throw py::value_error("k_cache / v_cache: " + std::to_string(k_nbytes) + " / " + std::to_string(v_nbytes) +
                          " bytes, a " + cache_type + " cache of " + std::to_string(layers) + " x " +
                          std::to_string(cache_slots) + " x " + std::to_string(cache.kv_heads) + " x " +
                          std::to_string(cache.head_dim) + " is " + std::to_string(cache.bytes()));
  auto pool = CurrentPool();
  FusedRopeArgs args{Args(table, layout, "forward", pool.get()), Span(slots), layer, {}, q_norm, k_norm};
  args.rope.positions = Span(positions);
  Status st;
  {
    py::gil_scoped_release release;
    for (int r = 0; r <= reps && st.ok(); ++r) {  // (reps > 0: timed repeats, as ApplyRopeBatch)
      const auto t0 = std::chrono::steady_clock::now();
      st = reference ? ApplyRopeKvCacheReference(args, x, q_out, cache) : ApplyRopeKvCache(args, x, q_out, cache);
      if (r > 0 && times)
        times->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  Check(st);
}

// The MLA cache row (ApplyMlaRopeCache): [kv_norm(kv_c) | RoPE(k_pe)] into the cache at each slot, the q
// heads' rope windows rotated into q_out (no q: q_t empty, the cache rows only).
void ApplyMlaCacheBinding(const RopeTable& table, const RotaryLayout& layout, const py::tuple& kv_c_t,
                          const py::tuple& k_pe_t, const py::tuple& q_t, const py::tuple& q_out_t,
                          const Positions& positions, const Positions& slots, uintptr_t data, int64_t nbytes,
                          const std::string& cache_type, int64_t layers, int64_t cache_slots, int64_t layer,
                          bool reference, const HeadRmsNorm& kv_norm, const std::vector<float>& scale) {
  const HeadsView kv_c = View(kv_c_t, "kv_c"), k_pe = View(k_pe_t, "k_pe");
  const HeadsView none{nullptr, kv_c.dtype, kv_c.tokens, 0, layout.head_dim, 0, layout.head_dim};
  const HeadsView q = q_t.empty() ? none : View(q_t, "q"), q_out = q_out_t.empty() ? none : View(q_out_t, "q_out");
  MlaCacheView cache;
  if (!ParseKvCacheType(cache_type, &cache.type))
    throw py::value_error("cache_type: '" + cache_type +
                          "' (expected float32, float16, bfloat16, q8_0, float8_e4m3fn or float8_e5m2)");
  cache.data = reinterpret_cast<void*>(data);
  cache.layers = layers;
  cache.slots = cache_slots;
  cache.kv_lora_rank = kv_c.head_dim;
  cache.rope_dim = layout.rotary_dim;  // the scheme's; a k_pe of another width is refused naming it
  cache.scale = scale;
  Check(cache.Validate());
  CheckCacheBytes("cache", nbytes, cache.bytes(),
                  cache_type + " cache of " + std::to_string(layers) + " x " + std::to_string(cache_slots) + " x " +
                      std::to_string(cache.row_values()));
  auto pool = CurrentPool();
  MlaRopeArgs args{Args(table, layout, "forward", pool.get()), Span(slots), layer, kv_norm};
  args.rope.positions = Span(positions);
  Status st;
  {
    py::gil_scoped_release release;
    st = reference ? ApplyMlaRopeCacheReference(args, kv_c, k_pe, q, q_out, cache)
                   : ApplyMlaRopeCache(args, kv_c, k_pe, q, q_out, cache);
  }
  Check(st);
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

}  // namespace

void RegisterRope(py::module_& m) {
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
         const std::string& cache_type, int64_t layers, int64_t cache_slots, int64_t layer, bool reference, int reps,
         const std::vector<float>& k_scale, const std::vector<float>& v_scale, const std::vector<float>& q_norm,
         const std::vector<float>& k_norm, double norm_eps, const std::string& norm) {
        std::vector<double> times;
        ApplyRopeKvCacheBinding(table, RotaryLayout{Pairing(pairing), head_dim, rotary_start, rotary_dim}, q, k, v,
                                q_out, positions, slots, k_cache, k_nbytes, v_cache, v_nbytes, cache_type, layers,
                                cache_slots, layer, reference, k_scale, v_scale, NormOf(q_norm, norm_eps, norm, "q_norm"),
                                NormOf(k_norm, norm_eps, norm, "k_norm"), reps, &times);
        return times;
      },
      py::arg("table"), py::arg("pairing"), py::arg("head_dim"), py::arg("rotary_start"), py::arg("rotary_dim"),
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("q_out"), py::arg("positions"), py::arg("slots"),
      py::arg("k_cache"), py::arg("k_nbytes"), py::arg("v_cache"), py::arg("v_nbytes"), py::arg("cache_type"),
      py::arg("layers"), py::arg("cache_slots"), py::arg("layer"), py::arg("reference"), py::arg("reps") = 0,
      py::arg("k_scale") = std::vector<float>{}, py::arg("v_scale") = std::vector<float>{},
      py::arg("q_norm") = std::vector<float>{}, py::arg("k_norm") = std::vector<float>{}, py::arg("norm_eps") = 1e-6,
      py::arg("norm") = "none");
  m.def(
      "apply_mla_rope_cache",
      [](const RopeTable& table, const std::string& pairing, int64_t head_dim, int64_t rotary_start, int64_t rotary_dim,
         const py::tuple& kv_c, const py::tuple& k_pe, const py::tuple& q, const py::tuple& q_out,
         const Positions& positions, const Positions& slots, uintptr_t cache, int64_t nbytes,
         const std::string& cache_type, int64_t layers, int64_t cache_slots, int64_t layer, bool reference,
         const std::vector<float>& kv_norm, double norm_eps, const std::string& norm, const std::vector<float>& scale) {
        ApplyMlaCacheBinding(table, RotaryLayout{Pairing(pairing), head_dim, rotary_start, rotary_dim}, kv_c, k_pe, q,
                             q_out, positions, slots, cache, nbytes, cache_type, layers, cache_slots, layer, reference,
                             NormOf(kv_norm, norm_eps, norm, "kv_norm"), scale);
      },
      py::arg("table"), py::arg("pairing"), py::arg("head_dim"), py::arg("rotary_start"), py::arg("rotary_dim"),
      py::arg("kv_c"), py::arg("k_pe"), py::arg("q"), py::arg("q_out"), py::arg("positions"), py::arg("slots"),
      py::arg("cache"), py::arg("nbytes"), py::arg("cache_type"), py::arg("layers"), py::arg("cache_slots"),
      py::arg("layer"), py::arg("reference"), py::arg("kv_norm"), py::arg("norm_eps"), py::arg("norm"),
      py::arg("scale"));
  m.def("apply_query_temperature", &ApplyTemperatureBatch, py::arg("q_views"), py::arg("scales"));
}

}  // namespace posenc::python
