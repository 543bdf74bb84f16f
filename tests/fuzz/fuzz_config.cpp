// libFuzzer target for the config entry point in fuzz_parsers.hpp (clang, POSENC_BUILD_FUZZERS=ON).
#include "fuzz_parsers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const posenc::Status s = posenc::fuzz::FuzzConfig({reinterpret_cast<const std::byte*>(data), size});
  if (s.code() == posenc::StatusCode::kInternal) __builtin_trap();  // parsed, then contradicted itself
  return 0;
}
