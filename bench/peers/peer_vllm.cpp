// vLLM's CPU kernels (csrc/cpu/pos_encoding.cpp's rotary_embedding, csrc/cpu/cache.cpp's
// reshape_and_cache), compiled from a snapshot of those files (bench/peers/snapshot.sh vllm) against
// PyTorch's C++ API by bench/peers/build.sh, and called as vLLM's Python layer calls them.
//
// The layer is vLLM's Llama attention with the fused QKV projection output: q, k and v are views of the
// [T, 6144] output; rotary_embedding(positions, q, k, 128, cos_sin_cache, is_neox=true) rotates q and k
// in place (vLLM's RotaryEmbedding.forward_cpu); reshape_and_cache(k, v, key_cache, value_cache,
// slot_mapping, "auto", 1.0, 1.0) writes them into vLLM's paged layout (key [blocks, 8, 128 / x, 16, x]
// with x = 16 bytes / element, value [blocks, 8, 128, 16]; 16-row blocks). vLLM keeps activations, the
// cos/sin table and the cache in the model's dtype, so the cache_f16 cases run it on a float16 copy of
// the projection output, compared with posenc.inplace_f16in (side_by_side.cpp: the same float16 input, in place).
// cos_sin_cache is built as vLLM's RotaryEmbedding._compute_cos_sin_cache builds it (float32
// inv_freq = 1 / base^(arange(0, 128, 2) / 128), outer with arange(8192), cos and sin concatenated),
// cast to the model's dtype. Threads: OpenMP, the team size set as torch.set_num_threads sets it.
#include <omp.h>

#include <torch/all.h>  // PyTorch's C++ API (build.sh passes the include paths): a third-party header

#include <cstdio>
#include <cstring>
#include <string>

#include "omp_threads.hpp"
#include "peers.hpp"
#include "torch_layer.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/parallel.hpp"

// vLLM's functions, as declared in its csrc/cpu/torch_bindings.cpp / ops.h.
void rotary_embedding(torch::Tensor& positions, torch::Tensor& query, torch::Tensor& key, int64_t head_size,
                      torch::Tensor& cos_sin_cache, bool is_neox);
void reshape_and_cache(torch::Tensor& key, torch::Tensor& value, torch::Tensor& key_cache,
                       torch::Tensor& value_cache, torch::Tensor& slot_mapping, const std::string& kv_cache_dtype,
                       double k_scale, double v_scale);

namespace sbs {

std::string VllmInfo() {
  return "vllm: csrc/cpu rotary_embedding + reshape_and_cache (snapshot: bench/peers/snapshot.sh vllm), "
         "libtorch " TORCH_VERSION ", OpenMP";
}

namespace {

// vLLM's tensors: the layer in the cache's dtype and its paged caches (16-row blocks; keys
// [blocks, kv heads, D/x, block, x] with x 16 bytes of elements, values [blocks, kv heads, D, block]).
struct VllmState : TorchLayer {
  int64_t x = 0;
  torch::Tensor key_cache, value_cache;
};

std::shared_ptr<VllmState> MakeVllm(const CaseData& c, int threads) {
  auto s = std::make_shared<VllmState>();
  s->Fill(c, threads, /*half=*/c.f16_cache);
  const int64_t D = c.D, block = 16;
  const size_t es = c.f16_cache ? 2 : 4;
  s->x = 16 / static_cast<int64_t>(es);
  const int64_t blocks = (c.cache_slots + block - 1) / block;
  s->AllocateCaches(static_cast<size_t>(blocks * block * c.kv_row()) * es);
  const auto opt = torch::TensorOptions().dtype(s->dtype());
  s->key_cache = torch::from_blob(s->kc.get(), {blocks, c.Hkv, D / s->x, block, s->x}, opt);
  s->value_cache = torch::from_blob(s->vc.get(), {blocks, c.Hkv, D, block}, opt);
  return s;
}

}  // namespace

std::vector<Row> VllmRows(const CaseData& c, int threads, posenc::ParallelRunner* pool) {
  auto s = MakeVllm(c, threads);

  Row r;
  r.name = "vllm";
  r.versus = c.f16_cache ? "posenc.inplace_f16in" : "posenc.fused_inplace";
  r.run = [s] {
    omp_set_num_threads(s->threads);
    rotary_embedding(s->positions, s->query, s->key, s->D, s->cos_sin_cache, true);
    reshape_and_cache(s->k3, s->v3, s->key_cache, s->value_cache, s->slot_t, "auto", 1.0, 1.0);
  };
  r.on_threads = OnOmpThreads(threads);
  r.reset = [s] { s->Reset(); };
  r.q_out = [s] { return s->QueryAsF32(); };
  // vLLM's layout: key [block, head, d / x, offset, d % x], value [block, head, d, offset].
  auto at = [s](bool k) {
    return [s, k](int64_t t, int64_t i) -> float {
      const int64_t slot = s->slots[static_cast<size_t>(t)], b = slot / 16, off = slot % 16;
      const int64_t h = i / s->D, d = i % s->D;
      const int64_t e = k ? (((b * s->Hkv + h) * (s->D / s->x) + d / s->x) * 16 + off) * s->x + d % s->x
                          : ((b * s->Hkv + h) * s->D + d) * 16 + off;
      return s->CacheAt(k, e);
    };
  };
  r.k_at = at(true);
  r.v_at = at(false);
  r.keep = s;

  // rotary_embedding alone (no cache write; its own buffers): not compared, it shows the rotations' share.
  Row rope;
  rope.name = "vllm.rope_only";
  rope.run = [s = MakeVllm(c, threads)] {
    omp_set_num_threads(s->threads);
    rotary_embedding(s->positions, s->query, s->key, s->D, s->cos_sin_cache, true);
  };
  rope.on_threads = r.on_threads;

  (void)pool;
  std::vector<Row> rows;
  rows.push_back(std::move(r));
  rows.push_back(std::move(rope));
  return rows;
}

}  // namespace sbs
