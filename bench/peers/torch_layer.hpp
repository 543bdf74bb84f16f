// The layer's tensors as the torch-based peers (vLLM, SGLang) take them: their own copy of the fused
// QKV projection output (rotated in place; `reset` restores it from `src`), q/k/v views of it, int64
// positions and cache slots, and the cos/sin cache as vLLM's RotaryEmbedding builds it
// (_compute_inv_freq / _compute_cos_sin_cache, then .to(the activations' dtype)), and the memory of
// the key and value caches; each peer adds its own cache tensors over it. For the peer files only
// (they are built against PyTorch's headers).
#pragma once

#include <torch/all.h>

#include <cstring>
#include <memory>
#include <vector>

#include "peers.hpp"
#include "posenc/core/dtype.hpp"

namespace sbs {

struct TorchLayer {
  int threads = 1;
  // activations (and caches) in float16 or bfloat16, rounded from the float32 case, or float32
  torch::ScalarType st = torch::kFloat;
  int64_t T = 0, W = 0, Hkv = 0, D = 0, qn = 0;
  size_t in_bytes = 0;
  std::shared_ptr<void> src, in, pos, slot;
  std::shared_ptr<void> kc, vc;  // the key and value caches' memory (AllocateCaches)
  std::vector<int64_t> slots;
  std::vector<float> q;
  torch::Tensor positions, slot_t, qkv, query, key, k3, v3, cos_sin_cache;

  torch::ScalarType dtype() const { return st; }
  size_t elem() const { return st == torch::kFloat ? 4 : 2; }

  // The model dtype a case's vLLM / SGLang rows run in: the cache's.
  static torch::ScalarType CaseDtype(const CaseData& c) {
    return c.f16_cache ? torch::kHalf : c.bf16_cache ? torch::kBFloat16 : torch::kFloat;
  }

  // n float32 values rounded to st into dst.
  void Round(const float* src, int64_t n, void* dst) const {
    if (st == torch::kHalf) {
      auto* h = static_cast<posenc::f16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = posenc::F32ToF16(src[i]);
    } else if (st == torch::kBFloat16) {
      auto* h = static_cast<posenc::bf16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = posenc::F32ToBF16(src[i]);
    } else {
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
    }
  }

  // Element e of a buffer in st, as float32.
  float At(const void* buf, int64_t e) const {
    if (st == torch::kHalf) return posenc::F16ToF32(static_cast<const posenc::f16_t*>(buf)[e]);
    if (st == torch::kBFloat16) return posenc::BF16ToF32(static_cast<const posenc::bf16_t*>(buf)[e]);
    return static_cast<const float*>(buf)[e];
  }

  // The positions, slots and cos/sin cache (rot dims D, theta), and the activations of the llama3 / qwen3
  // cases (mla cases: the peer file fills its own).
  void Fill(const CaseData& c, int n_threads, torch::ScalarType type) {
    threads = n_threads;
    st = type;
    T = c.T;
    W = c.W();
    Hkv = c.Hkv;
    D = c.D;
    qn = c.Hq * D;
    slots = c.slots;
    if (!c.mla) {
      in_bytes = static_cast<size_t>(T * W) * elem();
      src = AlignedZeroed(in_bytes);
      Round(c.qkv.get(), T * W, src.get());
      in = AlignedZeroed(in_bytes);
      std::memcpy(in.get(), src.get(), in_bytes);
    }
    pos = AlignedZeroed(static_cast<size_t>(T) * 8);
    slot = AlignedZeroed(static_cast<size_t>(T) * 8);
    for (int64_t t = 0; t < T; ++t) {
      static_cast<int64_t*>(pos.get())[t] = c.pos[static_cast<size_t>(t)];
      static_cast<int64_t*>(slot.get())[t] = c.slots[static_cast<size_t>(t)];
    }
    const auto i64 = torch::TensorOptions().dtype(torch::kLong);
    positions = torch::from_blob(pos.get(), {T}, i64);
    slot_t = torch::from_blob(slot.get(), {T}, i64);
    if (!c.mla) {
      qkv = torch::from_blob(in.get(), {T, W}, torch::TensorOptions().dtype(dtype()));
      query = qkv.narrow(1, 0, c.Hq * D);
      key = qkv.narrow(1, c.Hq * D, c.Hkv * D);
      k3 = key.view({T, c.Hkv, D});
      v3 = qkv.narrow(1, (c.Hq + c.Hkv) * D, c.Hkv * D).view({T, c.Hkv, D});
    }
    auto inv_freq = 1.0 / torch::pow(c.theta, torch::arange(0, D, 2, torch::kFloat) / static_cast<double>(D));
    auto freqs = torch::einsum("i,j -> ij", {torch::arange(c.max_positions, torch::kFloat), inv_freq});
    cos_sin_cache = torch::cat({freqs.cos(), freqs.sin()}, -1).to(dtype()).contiguous();
  }

  void Reset() { std::memcpy(in.get(), src.get(), in_bytes); }

  // The key and value caches' memory, `bytes` each, zeroed.
  void AllocateCaches(size_t bytes) {
    kc = AlignedZeroed(bytes);
    vc = AlignedZeroed(bytes);
  }

  // Element e of the key (k) or value cache, read back as float32.
  float CacheAt(bool k, int64_t e) const { return At(k ? kc.get() : vc.get(), e); }

  // The rotated queries, read back as float32 for the comparison with posenc: qn values per token,
  // `stride` elements apart (default: the fused buffer `in`, stride W).
  const float* QueryAsF32(const void* buf = nullptr, int64_t stride = 0) {
    if (buf == nullptr) buf = in.get(), stride = W;
    q.resize(static_cast<size_t>(T * qn));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < qn; ++i) q[static_cast<size_t>(t * qn + i)] = At(buf, t * stride + i);
    return q.data();
  }
};

}  // namespace sbs
