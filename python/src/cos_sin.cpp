// _posenc: RoPE from the caller's cos/sin (the Hugging Face drop-in, python/posenc/hf.py): HF's
// apply_rotary_pos_emb on [B, H, S, D] / [B, S, H, D] q and k, bit for bit, through ApplyRopeCosSin.
#include "binding.hpp"

#include <chrono>
#include <tuple>

namespace posenc::python {
namespace {

// HF's apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim) into q_out / k_out: q, k [B, H, S, D]
// (unsqueeze_dim 1) or [B, S, H, D] (2), any strides with a contiguous head_dim; cos, sin [S, R] or
// [1 or B, S, R] with a contiguous last axis; R <= D (partial rotary: dims R.. pass through). All
// views are checked before the GIL is released and any element is written.
struct CosSinJob {
  RopeCosSinArgs args;
  HeadsView in, out;
};

// The outputs apart from each other, from cos and sin, and from q and k, except that each may be its
// own input exactly (in place; then q and k are only each other's concern). Apart means no shared
// element (DescsApart): in-place q and k cut from one fused QKV output pass. Fresh outputs pass.
void CheckCosSinOutputs(const StridedTensor& q, const StridedTensor& k, const StridedTensor& qo,
                        const StridedTensor& ko, const StridedTensor& c, const StridedTensor& s) {
  const auto apart = [](const StridedTensor& a, const StridedTensor& b, const char* name, const char* other,
                        const char* verb = "overlaps") {
    if (!StridedApart(a, b)) throw py::value_error(std::string(name) + ": " + verb + " " + other);
  };
  const bool q_in_place = SameStrided(qo, q), k_in_place = SameStrided(ko, k);
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

std::vector<CosSinJob> CosSinJobs(const std::string& pairing, const StridedTensor& q, const StridedTensor& k,
                                  const StridedTensor& qo, const StridedTensor& ko, const StridedTensor& c,
                                  const StridedTensor& s, int unsqueeze_dim, ParallelRunner* pool) {
  CheckCosSinOutputs(q, k, qo, ko, c, s);
  const int h_ax = unsqueeze_dim == 1 ? 1 : 2, s_ax = unsqueeze_dim == 1 ? 2 : 1;
  if (c.shape != s.shape)
    throw py::value_error("sin: shape " + ShapeText(s.shape) + " differs from cos's " + ShapeText(c.shape));
  if (c.dtype != s.dtype) throw py::value_error("sin: dtype differs from cos's");
  if (c.shape.size() != 2 && c.shape.size() != 3)
    throw py::value_error("cos: shape " + ShapeText(c.shape) + " is not [seq, rotary_dim] or [batch, seq, rotary_dim]");
  const size_t cr = c.shape.size();
  const int64_t R = c.shape[cr - 1], Sc = c.shape[cr - 2], Bc = cr == 3 ? c.shape[0] : 1;
  for (const StridedTensor* t : {&c, &s})
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
  const StridedTensor qd = DescOf(q, "q"), kd = DescOf(k, "k"), qod = DescOf(qo, "q_out"), kod = DescOf(ko, "k_out");
  const StridedTensor cd = DescOf(c, "cos"), sd = DescOf(s, "sin");
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

// apply_cos_sin_qk on torch CPU tensors themselves (hf.apply_cos_sin's path when all six are tensors).
void ApplyCosSinTorch(const std::string& pairing, py::handle q, py::handle k, py::handle qo, py::handle ko,
                      py::handle c, py::handle s, int unsqueeze_dim) {
  auto pool = CurrentPool();
  const StridedTensor qd = DescOfTorch(q, "q"), kd = DescOfTorch(k, "k"), cd = DescOfTorch(c, "cos"),
                      sd = DescOfTorch(s, "sin");
  const StridedTensor qod = DescOfTorch(qo, "q_out"), kod = DescOfTorch(ko, "k_out");  // in hf.py's order
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

}  // namespace

void RegisterCosSin(py::module_& m) {
  m.def("apply_cos_sin_qk", &ApplyCosSinQK, py::arg("pairing"), py::arg("q"), py::arg("k"), py::arg("q_out"),
        py::arg("k_out"), py::arg("cos"), py::arg("sin"), py::arg("unsqueeze_dim"));
  m.def("apply_cos_sin_torch", &ApplyCosSinTorch, py::arg("pairing"), py::arg("q"), py::arg("k"), py::arg("q_out"),
        py::arg("k_out"), py::arg("cos"), py::arg("sin"), py::arg("unsqueeze_dim"));
  m.def("time_cos_sin_qk", &TimeCosSinQK, py::arg("pairing"), py::arg("q"), py::arg("k"), py::arg("q_out"),
        py::arg("k_out"), py::arg("cos"), py::arg("sin"), py::arg("unsqueeze_dim"), py::arg("reps"));
}

}  // namespace posenc::python
