// libFuzzer target for the llama2c reader (built with clang when POSENC_BUILD_FUZZERS=ON).
#include "fuzz_parsers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const posenc::Status s = posenc::fuzz::FuzzLlama2c({reinterpret_cast<const std::byte*>(data), size});
  if (s.code() == posenc::StatusCode::kInternal) __builtin_trap();  // a reader contradicted itself
  return 0;
}
