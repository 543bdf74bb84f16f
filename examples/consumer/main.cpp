// Rotates one query head with posenc and prints its norm before and after: RoPE keeps it.
#include <cmath>
#include <cstdio>
#include <vector>

#include "posenc/posenc.hpp"

int main() {
  using namespace posenc;
  const int64_t head_dim = 8;
  RopeFrequencies freqs = DefaultRopeFrequencies(head_dim, 10000.0).value();
  RopeTable table = RopeTable::Build(freqs, 16, RopePrecision::kExact).value();
  std::vector<float> q = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int64_t> positions = {5};
  auto norm = [&] {
    double s = 0;
    for (float v : q) s += v * v;
    return std::sqrt(s);
  };
  const double before = norm();
  Status s = ApplyRope({{RopePairing::kHalf, head_dim, 0, head_dim}, &table, positions},
                       HeadsView::Dense(q.data(), DType::kF32, 1, 1, head_dim));
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  std::printf("norm before %.6f after %.6f\n", before, norm());
  return std::fabs(before - norm()) < 1e-5 ? 0 : 1;
}
