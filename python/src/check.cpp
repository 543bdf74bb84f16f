// _posenc's checking area: `posenc check` and `posenc diff` for Python (python/posenc/_check.py). The
// dump is the caller's numpy arrays or torch CPU tensors, read in place through the descriptors
// python/posenc/_tensors.py's describe gives (data pointer, dtype, shape, element strides): the one
// conversion is the library's, MakeRopeDump, into the float32 values CheckRope compares. The report
// comes back as the CLI prints it, RopeCheckReportJson / RopeCheckReportText (and the diff's), so the
// CLI's --json and Python's objects are one truth. The GIL is released while a check or a diff runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/dtype.hpp"
#include "posenc/model/rope_check.hpp"
#include "posenc/model/rope_diff.hpp"
#include "binding.hpp"

namespace posenc::python {
namespace {

// (data pointer, dtype name, shape, element strides) or None, as a dump tensor named `name`.
RopeDumpTensor TensorOf(const py::object& desc, const char* name) {
  RopeDumpTensor t;
  t.name = name;
  if (desc.is_none()) return t;
  const py::tuple d = desc.cast<py::tuple>();
  if (d.size() != 4) throw py::value_error(std::string(name) + ": internal tensor descriptor is malformed");
  t.data = reinterpret_cast<const void*>(d[0].cast<uintptr_t>());
  const std::string dtype = d[1].cast<std::string>();
  if (!ParseDType(dtype, &t.dtype)) throw py::value_error(std::string(name) + ": dtype '" + dtype + "' is not a posenc type");
  t.shape = d[2].cast<std::vector<int64_t>>();
  t.strides = d[3].cast<std::vector<int64_t>>();
  if (t.shape.empty()) throw py::value_error(std::string(name) + ": a 0-d tensor is not a dump");
  return t;
}

// A model description: a config.json's text (named `source` in messages) or a path OpenRopeDescription opens.
RopeDescription Describe(const std::string& path, const std::string& text, const std::string& assume_layout) {
  ModelSchemeOptions o;
  if (!assume_layout.empty()) {
    RopePairing p;
    if (!ParseRopePairing(assume_layout, &p))
      throw py::value_error("assume_layout '" + assume_layout + "' (expected half or interleaved)");
    o.assume_layout = p;
  }
  return Take(text.empty() ? OpenRopeDescription(path, o) : RopeDescriptionFromConfigText(text, path, o));
}

// check_rope(...) -> (json, text): the report of CheckRope on the described dump.
std::pair<std::string, std::string> CheckRopeBinding(const std::string& model, const std::string& model_text,
                                                     const std::string& assume_layout, int64_t layer,
                                                     const std::string& layer_type, const std::string& site,
                                                     const py::object& before, const py::object& after,
                                                     const py::object& positions, const py::object& cos,
                                                     const py::object& sin, const py::object& inv_freq,
                                                     bool heads_first, const std::string& dtype, int64_t seq_len) {
  RopeDumpTensors t;
  t.before = TensorOf(before, "before");
  t.after = TensorOf(after, "after");
  t.positions = TensorOf(positions, "positions");
  t.cos = TensorOf(cos, "cos");
  t.sin = TensorOf(sin, "sin");
  t.inv_freq = TensorOf(inv_freq, "inv_freq");
  t.heads_first = heads_first;
  t.seq_len = seq_len;
  if (!dtype.empty()) {
    DType d;
    if (!ParseDType(dtype, &d)) throw py::value_error("dtype '" + dtype + "' (expected float32, float16 or bfloat16)");
    t.dtype = d;
  }
  const RopeDescription desc = Describe(model, model_text, assume_layout);
  Result<RopeCheckTarget> selected =
      RopeCheckTargetOf(desc, RopeCheckSelect{.layer = layer, .layer_type = layer_type, .site = site});
  // A layer type or site the model lacks is the caller's bad argument here, not a missing file.
  if (!selected.ok() && selected.status().code() == StatusCode::kNotFound)
    throw py::value_error(selected.status().message());
  const RopeCheckTarget target = Take(std::move(selected));
  Result<RopeCheckReport> r = RopeCheckReport{};
  {
    py::gil_scoped_release release;  // the caller's tensors stay referenced by its frame
    Result<RopeDump> dump = MakeRopeDump(t);
    r = dump.ok() ? CheckRope(target, *dump) : Result<RopeCheckReport>(dump.status());
  }
  const RopeCheckReport report = Take(std::move(r));
  return {RopeCheckReportJson(report), RopeCheckReportText(report)};
}

// diff_rope(...) -> (json, text): DiffRope of two descriptions.
std::pair<std::string, std::string> DiffRopeBinding(const std::string& a, const std::string& a_text,
                                                    const std::string& b, const std::string& b_text, int64_t seq_len,
                                                    bool strict_pairing, const std::string& assume_layout) {
  const RopeDescription da = Describe(a, a_text, assume_layout);
  const RopeDescription db = Describe(b, b_text, assume_layout);
  Result<RopeDiffReport> r = RopeDiffReport{};
  {
    py::gil_scoped_release release;
    r = DiffRope(da, db, RopeDiffOptions{.seq_len = seq_len, .strict_pairing = strict_pairing});
  }
  const RopeDiffReport report = Take(std::move(r));
  return {RopeDiffReportJson(report), RopeDiffReportText(report)};
}

}  // namespace

void RegisterCheck(py::module_& m) {
  m.def("check_rope", &CheckRopeBinding, py::arg("model"), py::arg("model_text"), py::arg("assume_layout"),
        py::arg("layer"), py::arg("layer_type"), py::arg("site"), py::arg("before"), py::arg("after"),
        py::arg("positions"), py::arg("cos"), py::arg("sin"), py::arg("inv_freq"), py::arg("heads_first"),
        py::arg("dtype"), py::arg("seq_len"));
  m.def("diff_rope", &DiffRopeBinding, py::arg("a"), py::arg("a_text"), py::arg("b"), py::arg("b_text"),
        py::arg("seq_len"), py::arg("strict_pairing"), py::arg("assume_layout"));
  m.def("rope_cause_ids", &RopeCauseIds);
}

}  // namespace posenc::python
