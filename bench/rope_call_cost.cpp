// Per-call cost of ApplyRope on a small call, for instruction counts under callgrind (the figure in
// docs/PERFORMANCE.md, "per-call scratch on the stack"): one in-place float16 half-layout call of
// [tokens, heads, 128] repeated `calls` times on one thread.
//   valgrind --tool=callgrind --callgrind-out-file=cg.out build/bench/rope_call_cost 100 1 1
//   callgrind_annotate --inclusive=yes cg.out | grep -E 'ApplyRope\(|RopeTokensT'
// Inclusive instructions of ApplyRope / calls = the cost of one call (validation, job set-up,
// dispatch and the rotation). Valgrind runs the AVX2 target at most.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "posenc/posenc.hpp"

int main(int argc, char** argv) {
  using namespace posenc;
  const int calls = argc > 1 ? std::atoi(argv[1]) : 100;
  const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 1, heads = argc > 3 ? std::atoll(argv[3]) : 1, dim = 128;
  if (calls < 1 || tokens < 1 || heads < 1) {
    std::fprintf(stderr, "usage: rope_call_cost [calls >= 1] [tokens >= 1] [heads >= 1]\n");
    return 2;
  }
  std::vector<f16_t> x(static_cast<size_t>(tokens * heads * dim), F32ToF16(1.0f));
  const RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(dim, 500000.0).value(), tokens, RopePrecision::kReference).value();
  std::vector<int64_t> positions(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) positions[static_cast<size_t>(t)] = t;
  RopeArgs args{RotaryLayout{RopePairing::kHalf, dim, 0, dim}, &table, positions};
  args.parallel = &SerialRunner();
  const HeadsView view = HeadsView::Dense(x.data(), DType::kF16, tokens, heads, dim);
  for (int c = 0; c < calls; ++c) {
    const Status s = ApplyRope(args, view);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("%d calls of [%lld, %lld, %lld] float16 on %s\n", calls, static_cast<long long>(tokens),
              static_cast<long long>(heads), static_cast<long long>(dim), ChosenSimdTarget().c_str());
  return 0;
}
