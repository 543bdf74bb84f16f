// _posenc: model files (GGUF, safetensors, llama2.c, folders) and embedding lookups.
#include "binding.hpp"

namespace posenc::python {
namespace {

struct PyModel {
  std::shared_ptr<const ModelFile> file;
};

// A zero-copy numpy view of a float tensor stored in the model (the array keeps the model mapped).
py::array TensorArray(const PyModel& m, const ModelTensor& t) {
  std::string dt;
  size_t size = 0;
  if (t.ggml_type == 0)
    dt = "float32", size = 4;
  else if (t.ggml_type == 1)
    dt = "float16", size = 2;
  else if (t.ggml_type == 30)
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

void RegisterModel(py::module_& m) {
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
}

}  // namespace posenc::python
