// Side by side with the CPU engines (bench/peers/README.md): the case every row computes and the row
// interface each peer's file implements. Not part of the library or of CI; bench/peers/build.sh
// compiles this harness against snapshots of the peers' sources.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace posenc {
class ParallelRunner;
}

namespace sbs {

// One Llama-3-8B attention layer's RoPE + KV-cache write: the fused QKV projection output (float32,
// row t = 32 q heads, 8 k heads, 8 v heads of 128) for T tokens at positions pos, written into cache
// rows slots of a cache of cache_slots rows (float32 or float16), NeoX (half) pairing, theta 500000.
// With qk_norm, Qwen3-8B's layer (the same head counts, theta 1e6): each q and k head RMS-normalised
// with its weight (D values) and eps before the rotation, as Qwen3Attention's q_norm / k_norm.
struct CaseData {
  std::string name;
  int64_t T = 0, Hq = 32, Hkv = 8, D = 128;
  double theta = 500000.0;
  bool qk_norm = false;
  float eps = 1e-6f;
  std::vector<float> q_norm_w, k_norm_w;
  // DeepSeek-V3's MLA layer (mla): qkv holds the latent projection output [T, kv_lora + D] (kv_c, then
  // k_pe), q_mla the queries [T, Hq, nope + D]; every row writes the cache row [RMSNorm(kv_c) * w |
  // RoPE(k_pe)] and rotates the q heads' last D values (interleaved pairs, theta 10000). Rows report
  // the rotated q windows as [T, Hq, D] and the cache rows' row_values values.
  bool mla = false;
  int64_t kv_lora = 512, nope = 128, row_values = 0;
  std::vector<float> kv_norm_w;
  std::shared_ptr<float[]> q_mla;
  int64_t max_positions = 8192;
  bool f16_cache = false, bf16_cache = false;  // the cache type: float16, bfloat16, else float32
  int64_t cache_slots = 0;
  std::vector<int64_t> pos, slots;
  std::shared_ptr<float[]> qkv;  // [T, W] float32, read only: rows that rotate in place copy it
  int64_t W() const { return (Hq + 2 * Hkv) * D; }
  int64_t kv_row() const { return row_values > 0 ? row_values : Hkv * D; }
};

// Runs fn(ith, nth) once on each of the row's own threads (ith in [0, nth)): the cold-cache pass runs
// through it so that the threads the timed call uses are the ones awake when it starts.
using OnThreads = std::function<void(const std::function<void(int, int)>& fn)>;

struct Row {
  std::string name;    // "posenc.fused", "ggml", ...
  std::string versus;  // the posenc row it is compared with ("posenc.fused", "posenc.fused_inplace")
  std::function<void()> run;
  OnThreads on_threads;
  // The results after a run from fresh inputs (q_out empty: a row that is not checked): q rotated,
  // [T, Hq, D] float32; cache row values of token t (index i in [0, Hkv * D)) read back as float.
  std::function<void()> reset;  // restores the inputs a row rotates in place (before the check run)
  std::function<const float*()> q_out;
  int64_t q_stride = 0;  // floats between tokens of q_out (0: Hq * D, dense)
  std::function<float(int64_t t, int64_t i)> k_at, v_at;
  std::shared_ptr<void> keep;
};

// Defined by each peer's file when bench/peers/build.sh compiles it (SBS_WITH_<PEER>).
std::vector<Row> GgmlRows(const CaseData& c, int threads);
std::vector<Row> GgmlMlaRows(const CaseData& c, int threads);  // mla cases
std::string GgmlInfo();
std::vector<Row> VllmRows(const CaseData& c, int threads, posenc::ParallelRunner* pool);
std::string VllmInfo();
std::vector<Row> SglangRows(const CaseData& c, int threads);  // cache_f16 cases only (float16 activations)
std::string SglangInfo();

// 64-byte aligned, zeroed (so pages are committed before anything is timed).
std::shared_ptr<void> AlignedZeroed(size_t bytes);

}  // namespace sbs
