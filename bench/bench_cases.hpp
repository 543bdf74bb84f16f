// The benchmark cases shared by `posenc bench` and the Google Benchmark suite (bench/posenc_bench.cpp):
// the model cases of the kernel case list (cases/kernel_cases.hpp, which states their shapes), each with
// the roofline pass over the same bytes it is compared with; prepared in bench_cases.cpp. A "copy"
// roofline is RooflineCopy: memcpy, or a streaming-store copy from StreamStoreMinBytes() on (as the kernels).
//
//   rope_prefill_q   [4096, 32, 128] positions 0..4095, in place     roofline: in-place RMW pass
//   rope_prefill_k   [4096,  8, 128]                                  (same)
//   rope_prefill_qk  q and k in one ApplyRopeQK call                  (same, q+k bytes)
//   rope_prefill_q_oop  [4096, 32, 128] out of place                  roofline: copy
//   rope_decode      [64 sequences x 1 token, 32, 128], scattered positions < 8192, in place
//   gather           4096 ids (random, distinct) from a [128256, 4096] table -> float32 (bfloat16 for
//                    a bfloat16 table: gather_bf16out)                roofline: copy of the output
//   mrope_prefill_q  Qwen2.5-VL-7B text queries [4096, 28, 128], mrope_section [16, 24, 24] (chunked), theta 1e6,
//                    (t, h, w) positions of 1024 text tokens, a 32 x 64 image grid, 1024 text tokens (as
//                    get_rope_index gives them), in place, through the per-token table an engine builds once
//                    per forward pass (RopeTable::BuildPerToken: every layer shares the positions) and ApplyRope
//   imrope_prefill_q Qwen3-VL-8B [4096, 32, 128], sections [24, 20, 20] interleaved, theta 5e6, the same positions
//   mrope_decode     [64x1, 28, 128]: 64 sequences decoding one text token each at scattered positions < 8192
//   mrope_prefill_q_build  ApplyMultiAxisRope, which builds the per-token table inside the call (the one-layer
//                    cost; bytes as mrope_prefill_q)                  roofline: in-place RMW pass
//   fused_prefill    ApplyRopeKvCache from the fused QKV projection [4096, (32 + 2 x 8) x 128], q out of
//                    place, k and v into slots 0..4095 of an 8192-slot cache of each cache type
//   fused_decode     the same for 64 sequences x 1 token at scattered positions < 8192, into scattered
//                    slots of a paged cache (16-row pages, 16384 slots)
//                    roofline: copy of bytes_all / 2 (so it moves bytes_all bytes, half read, half
//                    written); `unfused` times the same work as posenc's separate calls: ApplyRope of q
//                    out of place, ApplyRope of k out of place into a scratch tensor, StoreKvCache.
//   qknorm_prefill   Qwen3-8B: ApplyRopeKvCache with q_norm and k_norm (per-head RMSNorm, weight * x.to(dtype))
//                    from the fused QKV projection [4096, (32 + 2 x 8) x 128], theta 1e6, as fused_prefill;
//                    `unfused` times ApplyHeadRmsNorm of q (into q_out) and of k (into a scratch tensor),
//                    ApplyRope of both in place, StoreKvCache
//   qknorm_decode    the same for 64 sequences x 1 token into scattered slots of a paged cache
//   mla_prefill      DeepSeek-V3: ApplyMlaRopeCache, 4096 tokens of kv_a_proj_with_mqa output [4096, 512 + 64]
//                    (kv_c RMSNormed with kv_a_layernorm's weight, k_pe rotated, interleaved pairs) into slots
//                    0..4095 of an 8192-slot latent cache, and the q_pe windows of q [4096, 128, 192] rotated
//                    in place; `unfused` times ApplyHeadRmsNorm, ApplyRope of k_pe, ApplyRope of q,
//                    StoreKvCache; roofline: copy of bytes_all / 2 (bytes: the latent input, the cache
//                    rows, q's rope window of each head read and written)
//   mla_decode       the same for 64 sequences x 1 token into scattered slots of a paged cache (64-row pages)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cases/kernel_cases.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc::bench {

// One benchmark row: a model case of the kernel case list and the words its row name and report use.
struct CaseSpec {
  std::string op;     // rope_prefill_q, rope_decode, gather, ...
  std::string shape;  // "[4096, 32, 128]"
  DType dtype = DType::kF32;
  RopePairing layout = RopePairing::kHalf;
  bool inplace = true;
  bool fused = false;                          // fused_*, qknorm_*, mla_*
  KvCacheType cache_type = KvCacheType::kF32;  // fused rows only
  cases::KernelCase kernel;                    // the case: shapes, theta, prefill or decode
  std::string Name() const;
};

// A prepared case: buffers allocated and filled, `run` times the kernel, `roofline` the matching pass.
// `core` runs the same kernel on one thread over a slice of the same case small enough to stay in L1
// (about 16 KiB of tensor: the first tokens, or the first ids of a gather) and touches `core_bytes`:
// its rate is what one core can compute with no memory stall, which bounds `run`'s rate per thread
// whatever the cache state, except that a slice of one token (float32 queries, decode) also pays the
// ~0.1 us call overhead on a fifth of its time and so reads low.
struct Prepared {
  std::function<void()> run, roofline, core;
  std::function<void()> unfused;  // fused rows: the same work as separate calls
  // Fused rows: the same bytes in the same order with no arithmetic (FusedPattern), what the access
  // pattern alone costs.
  std::function<void()> pattern;
  double bytes = 0, roofline_bytes = 0, core_bytes = 0;
  double bytes_all = 0;  // 0: not reported (gather rows)
  const char* roofline_kind = "rmw";
  std::vector<std::shared_ptr<void>> keep;  // owned buffers
};

// Every benchmark row, in the order `posenc bench` prints them: cases::ModelCases() as rows.
std::vector<CaseSpec> AllCases();

// Cold-cache mode: reads (never writes) EvictBytes() bytes, so that the kernel or roofline pass timed
// next finds none of its bytes in any cache level, and no dirty lines of the eviction buffer itself
// wait to be written back during the timed pass. Not timed; called before every timed kernel run and
// every timed roofline run alike. The reads run on `pool`, the runner the timed pass uses, so its
// workers are awake (polling) when the timed pass starts, as in an engine that calls kernels back to
// back, rather than paying a sleeping thread's wake-up inside the timing.
void EvictCaches(ParallelRunner& pool);

// What EvictCaches reads: twice the largest cache the machine reports (sysconf), at least 256 MiB,
// at most 4 GiB, or what SetEvictBytes set (before the first EvictCaches). A fixed 256 MiB left a
// host with a 480 MiB L3 (xeon, 2026-12-07) partly warm: a bare walk of 201 MB took 7.3-7.5 ms after
// 256 MiB was read, 8.0-9.4 after 1 GiB.
size_t EvictBytes();
void SetEvictBytes(size_t bytes);

// Allocates, fills and binds the case's buffers; `runner` is the pool the timed passes use.
std::unique_ptr<Prepared> Prepare(const CaseSpec& c, ParallelRunner* runner);

}  // namespace posenc::bench
