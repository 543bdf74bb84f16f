// _posenc: the module, one registration per area (binding.hpp lists them; each file holds one area).
#include "binding.hpp"

PYBIND11_MODULE(_posenc, m) {
  using namespace posenc::python;  // NOLINT
  m.doc() = "posenc's C++ API, translated (use the `posenc` package, not this module)";
  RegisterRuntime(m);
  RegisterScheme(m);
  RegisterRope(m);
  RegisterRopeCall(m);
  RegisterCosSin(m);
  RegisterTensors(m);
  RegisterBuffers(m);
  RegisterModel(m);
  RegisterBias(m);
  RegisterCheck(m);
}
