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

#include "peers.hpp"
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

struct SglState {
  int threads = 1;
  int64_t T = 0, W = 0, Hkv = 0, D = 0, qn = 0;
  size_t in_bytes = 0;
  std::shared_ptr<void> src, in, kc, vc, pos, loc;
  std::vector<int64_t> slots;
  std::vector<float> q;
  at::Tensor positions, qkv, query, key, k3, v3, k_buffer, v_buffer, loc_t, cos_sin_cache;
};

std::shared_ptr<SglState> MakeSgl(const CaseData& c, int threads) {
  auto s = std::make_shared<SglState>();
  const int64_t T = c.T, D = c.D, W = c.W();
  s->threads = threads;
  s->T = T;
  s->W = W;
  s->Hkv = c.Hkv;
  s->D = D;
  s->qn = c.Hq * D;
  s->slots = c.slots;
  s->in_bytes = static_cast<size_t>(T * W) * 2;
  s->src = AlignedZeroed(s->in_bytes);
  auto* h = static_cast<posenc::f16_t*>(s->src.get());
  for (int64_t i = 0; i < T * W; ++i) h[i] = posenc::F32ToF16(c.qkv[static_cast<size_t>(i)]);
  s->in = AlignedZeroed(s->in_bytes);
  std::memcpy(s->in.get(), s->src.get(), s->in_bytes);
  const size_t cache_bytes = static_cast<size_t>(c.cache_slots * c.kv_row()) * 2;
  s->kc = AlignedZeroed(cache_bytes);
  s->vc = AlignedZeroed(cache_bytes);
  s->pos = AlignedZeroed(static_cast<size_t>(T) * 8);
  s->loc = AlignedZeroed(static_cast<size_t>(T) * 8);
  for (int64_t t = 0; t < T; ++t) {
    static_cast<int64_t*>(s->pos.get())[t] = c.pos[static_cast<size_t>(t)];
    static_cast<int64_t*>(s->loc.get())[t] = c.slots[static_cast<size_t>(t)];
  }
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const auto f16 = at::TensorOptions().dtype(at::kHalf);
  s->positions = at::from_blob(s->pos.get(), {T}, i64);
  s->loc_t = at::from_blob(s->loc.get(), {T}, i64);
  s->qkv = at::from_blob(s->in.get(), {T, W}, f16);
  s->query = s->qkv.narrow(1, 0, c.Hq * D);
  s->key = s->qkv.narrow(1, c.Hq * D, c.Hkv * D);
  s->k3 = s->key.view({T, c.Hkv, D});
  s->v3 = s->qkv.narrow(1, (c.Hq + c.Hkv) * D, c.Hkv * D).view({T, c.Hkv, D});
  s->k_buffer = at::from_blob(s->kc.get(), {c.cache_slots, c.Hkv, D}, f16);
  s->v_buffer = at::from_blob(s->vc.get(), {c.cache_slots, c.Hkv, D}, f16);
  {
    auto inv_freq = 1.0 / at::pow(c.theta, at::arange(0, D, 2, at::kFloat) / static_cast<double>(D));
    auto t = at::arange(c.max_positions, at::kFloat);
    auto freqs = at::einsum("i,j -> ij", {t, inv_freq});
    s->cos_sin_cache = at::cat({freqs.cos(), freqs.sin()}, -1).to(at::kHalf).contiguous();
  }
  return s;
}

}  // namespace

std::vector<Row> SglangRows(const CaseData& c, int threads) {
  if (!c.f16_cache) return {};
  auto s = MakeSgl(c, threads);
  OnThreads on = [threads](const std::function<void(int, int)>& fn) {
    if (threads <= 1) {
      fn(0, 1);
      return;
    }
#pragma omp parallel num_threads(threads)
    fn(omp_get_thread_num(), omp_get_num_threads());
  };
  Row r;
  r.name = "sglang";
  r.versus = "posenc.inplace_f16in";
  r.run = [s] {
    omp_set_num_threads(s->threads);
    rotary_embedding_cpu(s->positions, s->query, s->key, s->D, s->cos_sin_cache, true);
    s->k_buffer.index_put_({s->loc_t}, s->k3);
    s->v_buffer.index_put_({s->loc_t}, s->v3);
  };
  r.on_threads = on;
  r.reset = [s] { std::memcpy(s->in.get(), s->src.get(), s->in_bytes); };
  r.q_out = [s] {
    s->q.resize(static_cast<size_t>(s->T * s->qn));
    const auto* h = static_cast<const posenc::f16_t*>(s->in.get());
    for (int64_t t = 0; t < s->T; ++t)
      for (int64_t i = 0; i < s->qn; ++i) s->q[static_cast<size_t>(t * s->qn + i)] = posenc::F16ToF32(h[t * s->W + i]);
    return static_cast<const float*>(s->q.data());
  };
  auto at_ = [s](bool k) {
    return [s, k](int64_t t, int64_t i) -> float {
      const int64_t e = s->slots[static_cast<size_t>(t)] * s->Hkv * s->D + i;
      return posenc::F16ToF32(static_cast<const posenc::f16_t*>(k ? s->kc.get() : s->vc.get())[e]);
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
