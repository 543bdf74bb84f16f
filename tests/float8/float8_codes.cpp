// For the ml_dtypes cross-check (ml_dtypes_check.py): reads little-endian float32 values from stdin and
// writes, per value, its float8_e4m3fn code then its float8_e5m2 code (posenc's F32ToF8E4M3 /
// F32ToF8E5M2); with --decode, writes the float32 bits of each of the 256 codes of both formats.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "posenc/core/dtype.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--decode") == 0) {
    for (int c = 0; c < 256; ++c) {
      const float f[2] = {posenc::F8E4M3ToF32({static_cast<uint8_t>(c)}),
                          posenc::F8E5M2ToF32({static_cast<uint8_t>(c)})};
      std::fwrite(f, sizeof(float), 2, stdout);
    }
    return 0;
  }
  std::vector<float> buf(1 << 16);
  std::vector<uint8_t> out;
  size_t got;
  while ((got = std::fread(buf.data(), sizeof(float), buf.size(), stdin)) > 0) {
    out.clear();
    for (size_t i = 0; i < got; ++i) {
      out.push_back(posenc::F32ToF8E4M3(buf[i]).bits);
      out.push_back(posenc::F32ToF8E5M2(buf[i]).bits);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}
