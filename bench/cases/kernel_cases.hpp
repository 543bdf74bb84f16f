// The one list of kernel cases: what the per-target tests compare with the scalar references and what
// the benchmarks time (bench/bench_cases.hpp). Model shapes (Llama-3-8B, Qwen3-8B, DeepSeek-V3,
// Qwen2.5-VL, Qwen3-VL) and the odd sizes (rotary dims not a multiple of the vector width, 1 and 0
// tokens, partial windows) are stated here once; tests scale a case down (ScaledDown), the benchmark
// rows are the model cases at full size. As ggml's test-backend-ops: one list, every backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc::cases {

// The kernel a case runs, with its reference:
//   kRope          ApplyRope / ApplyRopeQK                 vs ApplyRopeReference
//   kMultiAxisRope ApplyRope over a per-token table, ApplyMultiAxisRope (Qwen2.5-VL / Qwen3-VL sections)
//   kFusedRopeKv   ApplyRopeKvCache, float32/16-bit/Q8_0 caches   vs the unfused calls and the reference
//   kFloat8Kv      ApplyRopeKvCache into a float8 cache with per-head k and per-tensor v scales
//   kQkNormFused   ApplyRopeKvCache with q_norm / k_norm (Qwen3's per-head RMSNorm)
//   kMla           ApplyMlaRopeCache, the [RMSNorm(kv_c) | RoPE(k_pe)] latent row and q's rope windows
//   kGather        LookupEmbeddingsInto                    vs LookupEmbeddingsReference
enum class KernelFamily { kRope, kMultiAxisRope, kFusedRopeKv, kFloat8Kv, kQkNormFused, kMla, kGather };
const char* ToString(KernelFamily f);

// One case. Shapes in the kernels' words: q `heads` and `kv_heads` of `head_dim`, RoPE on the window
// [rotary_start, rotary_start + rotary_dim) of each head. MLA: head_dim = qk_nope + qk_rope (q heads,
// rotary window the rope part), kv_lora_rank the latent. Gather: `tokens` ids of a [vocab, head_dim]
// table. A model case's `op` is its benchmark row's first word (rope_prefill_q, fused_decode, ...).
struct KernelCase {
  KernelFamily family = KernelFamily::kRope;
  std::string op;     // the benchmark row (model cases) or a short label (odd sizes)
  std::string model;  // "Llama-3-8B", ...; empty for the odd sizes
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0, rotary_start = 0, rotary_dim = 0;
  int64_t kv_lora_rank = 0;             // MLA
  int64_t vocab = 0;                    // gather
  std::vector<int64_t> mrope_sections;  // multi-axis: pairs per (t, h, w) component
  bool mrope_interleaved = false;       // multi-axis: Qwen3-VL's interleaved sections (else chunked)
  RopePairing pairing = RopePairing::kHalf;
  DType dtype = DType::kF32;
  KvCacheType cache_type = KvCacheType::kF32;  // fused, float8 and MLA cases
  bool decode = false;                         // one token per sequence at scattered positions
  bool in_place = true;                        // RoPE cases: q rotated in place
  double rope_theta = 10000.0;

  // The same case with at most `max_tokens` tokens (the shape otherwise kept), for the tests.
  KernelCase ScaledDown(int64_t max_tokens) const;
  // "fused_decode Llama-3-8B T64 H32/8 D128 rot[0,+128) half bfloat16 cache q8_0 decode": for traces.
  std::string Label() const;
};

// Every case, model cases first (in the benchmark's row order), then the odd sizes.
const std::vector<KernelCase>& KernelCases();
// The cases of one family, in list order.
std::vector<KernelCase> KernelCases(KernelFamily family);
// The model cases only (the benchmark rows).
std::vector<KernelCase> ModelCases();

}  // namespace posenc::cases
