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
// bf16 caches: the same on a bfloat16 copy (compared with posenc.inplace_bf16in).
//
// Qwen3 (c.qk_norm): vLLM's Qwen3Attention normalises the q and k heads with RMSNorm (csrc/cpu/layernorm.cpp's
// rms_norm, [128] weights in the model dtype) before rotary_embedding. That kernel indexes its rows as
// contiguous, so the q and k views of the projection output are first copied into contiguous tensors
// (ATen copy_, as .contiguous() would), normalised into new q / k tensors (as RMSNorm's empty_like out),
// rotated in place, and k (with the v view) written by reshape_and_cache. Compared with posenc.fused
// (float32, q out of place) or posenc.inplace_f16in / inplace_bf16in on the same 16-bit input.
//
// DeepSeek-V3 MLA (c.mla, f16 / bf16 only: the cache writer dispatches the reduced types only): the
// latent projection output [T, 576] and the queries [T, 128, 192] in the model dtype; rms_norm of kv_c
// (copied contiguous first, as above) with the [512] weight; the q heads' last 64 values gathered into a
// contiguous [T, 128 x 64] tensor (rotary_embedding indexes its tokens by query.stride(-2) and heads by
// head_size), rotary_embedding(positions, q_pe, k_pe, 64, cos_sin_cache, is_neox=false) with k_pe the
// [T, 64] view of the latent output (rotated in place), q_pe copied back into the queries, then
// concat_and_cache_mla_cpu(kv_c_normed, k_pe, kv_cache [blocks, 16, 576], slot_mapping)
// (csrc/cpu/sgl-kernels/mla_cache.cpp, built against our vllm_shim/sgl common.h / vec.h).
//
// vLLM V1's CPU attention backend (vllm/v1/attention/backends/cpu_attn.py, c.mla off): the same rotations
// (and qwen3 norms), then cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, isa)
// (csrc/cpu/cpu_attn.cpp) into caches [blocks, 8, block, 128], where each (block, head) slab holds the
// keys transposed ([128, block]: element d of the token at offset o at d * block + o) and the values as
// rows ([block, 128]). isa as the backend's _get_attn_isa picks it on a host without AMX: "vec" for
// vLLM's default CPU block size 128 (row vllm.v1), "vec16" for a block size that is not a multiple of 32
// (row vllm.v1_b16: block 16). Both isas run the same writer (AttentionImpl<VEC16> inherits VEC's).
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
void rms_norm(torch::Tensor& out, torch::Tensor& input, torch::Tensor& weight, double epsilon);
void concat_and_cache_mla_cpu(const at::Tensor& kv_c_normed, const at::Tensor& k_pe, at::Tensor& kv_cache,
                              const at::Tensor& slot_mapping);
void cpu_attn_reshape_and_cache(const torch::Tensor& key, const torch::Tensor& value, torch::Tensor& key_cache,
                                torch::Tensor& value_cache, const torch::Tensor& slot_mapping, const std::string& isa);

namespace sbs {

std::string VllmInfo() {
  return "vllm: csrc/cpu rotary_embedding + reshape_and_cache (qwen3: rms_norm first; deepseek3: rms_norm, "
         "rotary_embedding, concat_and_cache_mla_cpu); vllm.v1*: rotary_embedding + cpu_attn_reshape_and_cache "
         "(snapshot: bench/peers/snapshot.sh vllm), libtorch " TORCH_VERSION ", OpenMP";
}

namespace {

// vLLM's tensors: the layer in the cache's dtype and its paged caches (16-row blocks; keys
// [blocks, kv heads, D/x, block, x] with x 16 bytes of elements, values [blocks, kv heads, D, block]);
// V1 (v1_block > 0): keys and values [blocks, kv heads, v1_block, D] (keys transposed in each slab).
struct VllmState : TorchLayer {
  int64_t x = 0, v1_block = 0;
  torch::Tensor key_cache, value_cache;
  // qwen3: the norms' weights, the contiguous copies of the q / k views, the normalised q / k
  double eps = 1e-6;
  torch::Tensor q_norm_w, k_norm_w, q_in, k_in, q_n, k_n;

  void Qwen3() {
    q_in.view({T, -1}).copy_(query);
    k_in.view({T, -1}).copy_(key);
    rms_norm(q_n, q_in, q_norm_w, eps);
    rms_norm(k_n, k_in, k_norm_w, eps);
    auto q2 = q_n.view({T, -1}), k2 = k_n.view({T, -1});
    rotary_embedding(positions, q2, k2, D, cos_sin_cache, true);
  }

  // The layer's rotation (qwen3: with the norms), then its cache write: the older backend's
  // reshape_and_cache, or V1's cpu_attn_reshape_and_cache with the isa _get_attn_isa gives without AMX.
  void Rotate() {
    if (q_n.defined()) Qwen3();
    else rotary_embedding(positions, query, key, D, cos_sin_cache, true);
  }
  void Write() {
    torch::Tensor& k = q_n.defined() ? k_n : k3;
    if (v1_block > 0)
      cpu_attn_reshape_and_cache(k, v3, key_cache, value_cache, slot_t, v1_block % 32 == 0 ? "vec" : "vec16");
    else reshape_and_cache(k, v3, key_cache, value_cache, slot_t, "auto", 1.0, 1.0);
  }
  const float* QueryOut() { return q_n.defined() ? QueryAsF32(q_n.data_ptr(), qn) : QueryAsF32(); }

  // Value i of token t's key (k) or value row, read from the cache's layout. The older backend's:
  // key [block, head, d / x, offset, d % x], value [block, head, d, offset]. V1's: slab (block, head) of
  // v1_block * D values, keys [d, offset] in it, values [offset, d].
  float CacheValue(bool k, int64_t t, int64_t i) const {
    const int64_t B = v1_block > 0 ? v1_block : 16, slot = slots[static_cast<size_t>(t)], b = slot / B;
    const int64_t off = slot % B, h = i / D, d = i % D;
    if (v1_block > 0) {
      const int64_t slab = (b * Hkv + h) * B * D;
      return CacheAt(k, k ? slab + d * B + off : slab + off * D + d);
    }
    return CacheAt(k, k ? (((b * Hkv + h) * (D / x) + d / x) * 16 + off) * x + d % x
                        : ((b * Hkv + h) * D + d) * 16 + off);
  }
};

// The team size, as torch.set_num_threads sets it (at::set_num_threads: ATen's count, which its
// at::parallel_for in copy_ and concat_and_cache_mla_cpu reads, and OpenMP's). With omp_set_num_threads
// alone, ATen's lazily initialised count and ours disagree and every ATen parallel region at 2 threads
// took ~40 ms here (OpenMP teams resized back and forth).
void SetThreads(int n) {
  if (at::get_num_threads() != n) at::set_num_threads(n);
  omp_set_num_threads(n);
}

torch::Tensor Weight(const std::vector<float>& w, torch::ScalarType st) {
  return torch::tensor(w, torch::kFloat).to(st).contiguous();
}

std::shared_ptr<VllmState> MakeVllm(const CaseData& c, int threads, int64_t v1_block = 0) {
  auto s = std::make_shared<VllmState>();
  s->Fill(c, threads, TorchLayer::CaseDtype(c));
  const int64_t D = c.D, block = v1_block > 0 ? v1_block : 16;
  const size_t es = s->elem();
  s->x = 16 / static_cast<int64_t>(es);
  s->v1_block = v1_block;
  const int64_t blocks = (c.cache_slots + block - 1) / block;
  s->AllocateCaches(static_cast<size_t>(blocks * block * c.kv_row()) * es);
  const auto opt = torch::TensorOptions().dtype(s->dtype());
  if (v1_block > 0) {  // the backend's kv_cache [2, blocks, heads, block, D], unbind(0)
    s->key_cache = torch::from_blob(s->kc.get(), {blocks, c.Hkv, block, D}, opt);
    s->value_cache = torch::from_blob(s->vc.get(), {blocks, c.Hkv, block, D}, opt);
  } else {
    s->key_cache = torch::from_blob(s->kc.get(), {blocks, c.Hkv, D / s->x, block, s->x}, opt);
    s->value_cache = torch::from_blob(s->vc.get(), {blocks, c.Hkv, D, block}, opt);
  }
  if (c.qk_norm) {
    s->eps = c.eps;
    s->q_norm_w = Weight(c.q_norm_w, s->dtype());
    s->k_norm_w = Weight(c.k_norm_w, s->dtype());
    s->q_in = torch::empty({c.T, c.Hq, D}, opt);
    s->k_in = torch::empty({c.T, c.Hkv, D}, opt);
    s->q_n = torch::empty({c.T, c.Hq, D}, opt);
    s->k_n = torch::empty({c.T, c.Hkv, D}, opt);
    s->q_in.zero_(), s->k_in.zero_(), s->q_n.zero_(), s->k_n.zero_();
  }
  return s;
}

// The MLA layer in the model dtype: latent output and queries (own copies, restored by Reset), the
// norm's weight, the contiguous kv_c copy and its normalised output, the gathered q_pe, the cache.
struct VllmMla : TorchLayer {
  int64_t lora = 0, R = 0, H = 0, Dq = 0, nope = 0;
  double eps = 1e-6;
  size_t kv_bytes = 0, q_bytes = 0;
  std::shared_ptr<void> kv_src, kv_in, q_src, q_in, cache_mem;
  torch::Tensor kv, kv_c, k_pe, qt, q_pe_view, w, kvc_in, kvc_n, q_pe, cache;

  void Run() {
    kvc_in.copy_(kv_c);
    rms_norm(kvc_n, kvc_in, w, eps);
    q_pe.view({T, H, D}).copy_(q_pe_view);
    rotary_embedding(positions, q_pe, k_pe, D, cos_sin_cache, false);
    q_pe_view.copy_(q_pe.view({T, H, D}));
    concat_and_cache_mla_cpu(kvc_n, k_pe, cache, slot_t);
  }
  void ResetMla() {
    std::memcpy(kv_in.get(), kv_src.get(), kv_bytes);
    std::memcpy(q_in.get(), q_src.get(), q_bytes);
  }
};

std::shared_ptr<VllmMla> MakeVllmMla(const CaseData& c, int threads) {
  auto s = std::make_shared<VllmMla>();
  s->Fill(c, threads, TorchLayer::CaseDtype(c));
  s->lora = c.kv_lora, s->R = c.row_values, s->H = c.Hq, s->nope = c.nope, s->Dq = c.nope + c.D, s->eps = c.eps;
  const int64_t T = c.T;
  s->kv_bytes = static_cast<size_t>(T * s->R) * s->elem();
  s->q_bytes = static_cast<size_t>(T * s->H * s->Dq) * s->elem();
  s->kv_src = AlignedZeroed(s->kv_bytes);
  s->kv_in = AlignedZeroed(s->kv_bytes);
  s->q_src = AlignedZeroed(s->q_bytes);
  s->q_in = AlignedZeroed(s->q_bytes);
  s->Round(c.qkv.get(), T * s->R, s->kv_src.get());
  s->Round(c.q_mla.get(), T * s->H * s->Dq, s->q_src.get());
  s->ResetMla();
  const auto opt = torch::TensorOptions().dtype(s->dtype());
  s->kv = torch::from_blob(s->kv_in.get(), {T, s->R}, opt);
  s->kv_c = s->kv.narrow(1, 0, s->lora);
  s->k_pe = s->kv.narrow(1, s->lora, c.D);
  s->qt = torch::from_blob(s->q_in.get(), {T, s->H, s->Dq}, opt);
  s->q_pe_view = s->qt.narrow(2, s->nope, c.D);
  s->w = Weight(c.kv_norm_w, s->dtype());
  s->kvc_in = torch::zeros({T, s->lora}, opt);
  s->kvc_n = torch::zeros({T, s->lora}, opt);
  s->q_pe = torch::zeros({T, s->H * c.D}, opt);
  const int64_t block = 16, blocks = (c.cache_slots + block - 1) / block;
  s->cache_mem = AlignedZeroed(static_cast<size_t>(blocks * block * s->R) * s->elem());
  s->cache = torch::from_blob(s->cache_mem.get(), {blocks, block, s->R}, opt);
  return s;
}

std::vector<Row> VllmMlaRows(const CaseData& c, int threads) {
  if (!c.f16_cache && !c.bf16_cache) return {};  // concat_and_cache_mla_cpu: reduced types only
  auto s = MakeVllmMla(c, threads);
  Row r;
  r.name = "vllm";
  r.versus = c.f16_cache ? "posenc.inplace_f16in" : "posenc.inplace_bf16in";
  r.run = [s] {
    SetThreads(s->threads);
    s->Run();
  };
  r.on_threads = OnOmpThreads(threads);
  r.reset = [s] { s->ResetMla(); };
  r.q_out = [s] {  // the rotated windows, [T, H, 64]
    s->q.resize(static_cast<size_t>(s->T * s->H * s->D));
    for (int64_t th = 0; th < s->T * s->H; ++th)
      for (int64_t i = 0; i < s->D; ++i)
        s->q[static_cast<size_t>(th * s->D + i)] = s->At(s->q_in.get(), th * s->Dq + s->nope + i);
    return static_cast<const float*>(s->q.data());
  };
  r.k_at = [s](int64_t t, int64_t i) { return s->At(s->cache_mem.get(), s->slots[static_cast<size_t>(t)] * s->R + i); };
  r.v_at = r.k_at;
  r.keep = s;
  std::vector<Row> rows;
  rows.push_back(std::move(r));
  return rows;
}

// One layer row: the rotation and the cache write of s (VllmState::Rotate, Write), checked through
// the layout s writes.
Row VllmLayerRow(std::shared_ptr<VllmState> s, std::string name, std::string versus) {
  Row r;
  r.name = std::move(name);
  r.versus = std::move(versus);
  r.run = [s] {
    SetThreads(s->threads);
    s->Rotate();
    s->Write();
  };
  r.on_threads = OnOmpThreads(s->threads);
  r.reset = [s] { s->Reset(); };
  r.q_out = [s] { return s->QueryOut(); };
  r.k_at = [s](int64_t t, int64_t i) { return s->CacheValue(true, t, i); };
  r.v_at = [s](int64_t t, int64_t i) { return s->CacheValue(false, t, i); };
  r.keep = s;
  return r;
}

}  // namespace

std::vector<Row> VllmRows(const CaseData& c, int threads, posenc::ParallelRunner* pool) {
  (void)pool;
  if (c.mla) return VllmMlaRows(c, threads);
  const std::string versus = c.f16_cache    ? "posenc.inplace_f16in"
                             : c.bf16_cache ? "posenc.inplace_bf16in"
                             : c.qk_norm    ? "posenc.fused"
                                            : "posenc.fused_inplace";
  std::vector<Row> rows;
  rows.push_back(VllmLayerRow(MakeVllm(c, threads), "vllm", versus));

  // rotary_embedding alone (no cache write; its own buffers; qwen3: with the norms): not compared, it
  // shows the rotations' share.
  Row rope;
  rope.name = c.qk_norm ? "vllm.norm_rope" : "vllm.rope_only";
  rope.run = [s = MakeVllm(c, threads)] {
    SetThreads(s->threads);
    s->Rotate();
  };
  rope.on_threads = OnOmpThreads(threads);
  rows.push_back(std::move(rope));

  // V1's CPU backend: vLLM's default CPU block size 128 ("vec"), and block 16 ("vec16").
  rows.push_back(VllmLayerRow(MakeVllm(c, threads, 128), "vllm.v1", versus));
  rows.push_back(VllmLayerRow(MakeVllm(c, threads, 16), "vllm.v1_b16", versus));
  return rows;
}

}  // namespace sbs
