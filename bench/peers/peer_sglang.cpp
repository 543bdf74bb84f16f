// SGLang's CPU rope (sgl-kernel/csrc/cpu/rope.cpp's rotary_embedding_cpu), compiled from a snapshot
// (bench/peers/snapshot.sh sglang) against PyTorch's C++ API by bench/peers/build.sh, with SGLang's KV
// write: MHATokenToKVPool.set_kv_buffer's `k_buffer[loc] = k; v_buffer[loc] = v` (ATen index_put_).
//
// SGLang's rope takes bf16/f16 only (AT_DISPATCH_REDUCED_FLOATING_TYPES), so these rows exist in the
// cache_f16 cases: the float16 copy of the projection output (as vLLM's rows), q and k views rotated in
// place (rotary_embedding_cpu(positions, q, k, 128, cos_sin_cache, is_neox=true), 2-D [T, heads x 128]
// views as SGLang's RotaryEmbedding.forward_cpu passes them), then k and v ([T, 8, 128] views) stored at
// rows loc of [slots, 8, 128] float16 buffers. cos_sin_cache: float32 as SGLang/vLLM compute it, cast
// to float16. Compared with posenc.inplace_f16in (side_by_side.cpp).
#include <omp.h>

#include <torch/all.h>  // PyTorch's C++ API (build.sh passes the include paths): a third-party header

#include <cstring>
#include <string>
#include <tuple>

#include "omp_threads.hpp"
#include "peers.hpp"
#include "torch_layer.hpp"
#include "posenc/core/dtype.hpp"

// SGLang's function (sgl-kernel/csrc/cpu/rope.cpp).
std::tuple<at::Tensor, at::Tensor> rotary_embedding_cpu(at::Tensor& positions, at::Tensor& query, at::Tensor& key,
                                                        int64_t head_size, at::Tensor& cos_sin_cache, bool is_neox);

namespace sbs {

std::string SglangInfo() {
  return "sglang: sgl-kernel/csrc/cpu rotary_embedding_cpu + index_put_ KV store (snapshot: "
         "bench/peers/snapshot.sh sglang), libtorch " TORCH_VERSION ", OpenMP";
}

namespace {

// SGLang's tensors: the layer in float16 (its rope takes 16-bit types) and its KV buffers
// [slots, kv heads, head_dim], written with index_put_ as its memory pool does.
struct SglState : TorchLayer {
  at::Tensor k_buffer, v_buffer;
};

std::shared_ptr<SglState> MakeSgl(const CaseData& c, int threads) {
  auto s = std::make_shared<SglState>();
  s->Fill(c, threads, torch::kHalf);
  s->AllocateCaches(static_cast<size_t>(c.cache_slots * c.kv_row()) * 2);
  const auto f16 = at::TensorOptions().dtype(at::kHalf);
  s->k_buffer = at::from_blob(s->kc.get(), {c.cache_slots, c.Hkv, c.D}, f16);
  s->v_buffer = at::from_blob(s->vc.get(), {c.cache_slots, c.Hkv, c.D}, f16);
  return s;
}

}  // namespace

std::vector<Row> SglangRows(const CaseData& c, int threads) {
  if (!c.f16_cache) return {};
  auto s = MakeSgl(c, threads);
  const OnThreads on = OnOmpThreads(threads);
  Row r;
  r.name = "sglang";
  r.versus = "posenc.inplace_f16in";
  r.run = [s] {
    omp_set_num_threads(s->threads);
    rotary_embedding_cpu(s->positions, s->query, s->key, s->D, s->cos_sin_cache, true);
    s->k_buffer.index_put_({s->slot_t}, s->k3);
    s->v_buffer.index_put_({s->slot_t}, s->v3);
  };
  r.on_threads = on;
  r.reset = [s] { s->Reset(); };
  r.q_out = [s] { return s->QueryAsF32(); };
  auto at_ = [s](bool k) {
    return [s, k](int64_t t, int64_t i) -> float {
      return s->CacheAt(k, s->slots[static_cast<size_t>(t)] * s->Hkv * s->D + i);
    };
  };
  r.k_at = at_(true);
  r.v_at = at_(false);
  r.keep = s;

  Row rope;
  rope.name = "sglang.rope_only";
  rope.run = [s = MakeSgl(c, threads)] {
    omp_set_num_threads(s->threads);
    rotary_embedding_cpu(s->positions, s->query, s->key, s->D, s->cos_sin_cache, true);
  };
  rope.on_threads = on;
  return {r, rope};
}

}  // namespace sbs
