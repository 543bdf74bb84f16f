// Per-call cost of a small RoPE call, for instruction counts under callgrind: `rope` is one in-place
// float16 half-layout ApplyRope call of [tokens, heads, 128]; `fused` is one ApplyRopeKvCache call of
// a decode step, [tokens, heads + 2 * kv_heads, 128] bfloat16 from the fused QKV projection into a
// bfloat16 cache at scattered slots (Llama-3-8B's 32 / 8 heads by default); `qknorm` is `fused` with
// Qwen3's per-head RMSNorm of q and k (unit weights) before the rotation. Each is repeated `calls`
// times on one thread.
//   valgrind --tool=callgrind --callgrind-out-file=cg.out build/bench/rope_call_cost rope 100 1 1
//   valgrind --tool=callgrind --callgrind-out-file=cg.out build/bench/rope_call_cost fused 100 1 32 8
//   callgrind_annotate --inclusive=yes cg.out | grep -E 'ApplyRope(KvCache)?\(|TokensT'
// Inclusive instructions of the entry / calls = the cost of one call (validation, job set-up,
// dispatch and the work). Valgrind runs the AVX2 target at most.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "posenc/posenc.hpp"

namespace {
using namespace posenc;
constexpr int64_t kDim = 128;

struct Shape {
  int calls = 100;
  int64_t tokens = 1, heads = 1, kv_heads = 1;
};

Status RopeCalls(const Shape& s, const RopeTable& table, std::span<const int64_t> positions) {
  std::vector<f16_t> x(static_cast<size_t>(s.tokens * s.heads * kDim), F32ToF16(1.0f));
  RopeArgs args{RotaryLayout{RopePairing::kHalf, kDim, 0, kDim}, &table, positions};
  args.parallel = &SerialRunner();
  const HeadsView view = HeadsView::Dense(x.data(), DType::kF16, s.tokens, s.heads, kDim);
  for (int c = 0; c < s.calls; ++c) POSENC_RETURN_IF_ERROR(ApplyRope(args, view));
  return OkStatus();
}

Status FusedCalls(const Shape& s, const RopeTable& table, std::span<const int64_t> positions, bool qk_norm) {
  const int64_t width = (s.heads + 2 * s.kv_heads) * kDim, slots = 64 * s.tokens;
  std::vector<bf16_t> qkv(static_cast<size_t>(s.tokens * width), F32ToBF16(1.0f));
  std::vector<bf16_t> q_out(static_cast<size_t>(s.tokens * s.heads * kDim));
  std::vector<bf16_t> k(static_cast<size_t>(slots * s.kv_heads * kDim)), v(k.size());
  POSENC_ASSIGN_OR_RETURN(const QkvViews views,
                          SplitFusedQkv(qkv.data(), DType::kBF16, s.tokens, s.heads, s.kv_heads, kDim));
  const KvCacheView cache{k.data(), v.data(), KvCacheType::kBF16, 1, slots, s.kv_heads, kDim};
  std::vector<int64_t> slot(static_cast<size_t>(s.tokens));
  for (int64_t t = 0; t < s.tokens; ++t) slot[static_cast<size_t>(t)] = 64 * t + 37;  // scattered rows
  FusedRopeArgs args;
  args.rope = RopeArgs{RotaryLayout{RopePairing::kHalf, kDim, 0, kDim}, &table, positions};
  args.slots = slot;
  args.rope.parallel = &SerialRunner();
  const std::vector<float> weight(static_cast<size_t>(kDim), 1.0f);
  if (qk_norm) args.q_norm = args.k_norm = HeadRmsNorm{weight, 1e-6f};
  const HeadsView out = HeadsView::Dense(q_out.data(), DType::kBF16, s.tokens, s.heads, kDim);
  for (int c = 0; c < s.calls; ++c) POSENC_RETURN_IF_ERROR(ApplyRopeKvCache(args, views, out, cache));
  return OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const bool qk_norm = argc > 1 && std::strcmp(argv[1], "qknorm") == 0;
  const bool fused = qk_norm || (argc > 1 && std::strcmp(argv[1], "fused") == 0);
  Shape s;
  s.calls = argc > 2 ? std::atoi(argv[2]) : 100;
  s.tokens = argc > 3 ? std::atoll(argv[3]) : 1;
  s.heads = argc > 4 ? std::atoll(argv[4]) : (fused ? 32 : 1);
  s.kv_heads = argc > 5 ? std::atoll(argv[5]) : 8;
  if (argc < 2 || (!fused && std::strcmp(argv[1], "rope") != 0) || s.calls < 1 || s.tokens < 1 || s.heads < 1 ||
      (fused && (s.kv_heads < 1 || s.heads % s.kv_heads != 0))) {
    std::fprintf(stderr, "usage: rope_call_cost rope|fused|qknorm [calls >= 1] [tokens >= 1] [heads >= 1] [kv_heads]\n");
    return 2;
  }
  const RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(kDim, 500000.0).value(), s.tokens, RopePrecision::kReference).value();
  std::vector<int64_t> positions(static_cast<size_t>(s.tokens));
  for (int64_t t = 0; t < s.tokens; ++t) positions[static_cast<size_t>(t)] = t;
  const Status st = fused ? FusedCalls(s, table, positions, qk_norm) : RopeCalls(s, table, positions);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  std::printf("%d %s calls of %lld tokens x %lld heads x %lld on %s\n", s.calls, argv[1],
              static_cast<long long>(s.tokens), static_cast<long long>(s.heads), static_cast<long long>(kDim),
              ChosenSimdTarget().c_str());
  return 0;
}
