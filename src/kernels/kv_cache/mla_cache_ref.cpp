// The MLA cache row: the cache view's checks, the validation shared with the fast path, and the scalar
// reference (the norm reference, RotateTokensReference, then the scalar row write).
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "kernels/kv_cache/mla_cache_internal.hpp"
#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/mla_cache.hpp"

namespace posenc {

Status MlaCacheView::Validate() const {
  POSENC_RETURN_IF_ERROR(detail::CheckCacheTypeAndScale("mla cache", type, "scale", scale, /*per_head=*/0));
  if (layers <= 0) return InvalidArgumentError(fmt::format("mla cache: layers = {} must be > 0", layers));
  if (slots < 0) return InvalidArgumentError(fmt::format("mla cache: slots = {} is negative", slots));
  if (kv_lora_rank <= 0)
    return InvalidArgumentError(fmt::format("mla cache: kv_lora_rank = {} must be > 0", kv_lora_rank));
  if (rope_dim <= 0) return InvalidArgumentError(fmt::format("mla cache: rope_dim = {} must be > 0", rope_dim));
  using Wide = __int128;
  const Wide row = Wide{kv_lora_rank} + rope_dim;
  if (type == KvCacheType::kQ8_0 && row % kQ8_0Block != 0)
    return InvalidArgumentError(fmt::format("mla cache: q8_0 needs kv_lora_rank + rope_dim a multiple of 32, got {}",
                                            static_cast<int64_t>(row)));
  // Step by step, each product of two values below 2^63 fits in 128 bits.
  Wide total = row * 4;  // row < 2^64
  for (const int64_t f : {layers, slots > 0 ? slots : int64_t{1}})
    if (total <= Wide{INT64_MAX}) total *= f;
  if (total > Wide{INT64_MAX})
    return InvalidArgumentError(
        fmt::format("mla cache: {} layers x {} slots x ({} + {}) is too large", layers, slots, kv_lora_rank, rope_dim));
  if (slots == 0) return OkStatus();
  if (data == nullptr) return InvalidArgumentError("mla cache: null memory");
  const bool fp8 = type == DType::kF8E4M3 || type == DType::kF8E5M2;
  const size_t align = type == KvCacheType::kF32 ? 4 : fp8 ? 1 : 2;
  if (reinterpret_cast<uintptr_t>(data) % align != 0)
    return InvalidArgumentError(
        fmt::format("mla cache: memory {} is not aligned to {} bytes ({} cache)", data, align, ToString(type)));
  return OkStatus();
}

namespace detail {

Status ValidateMlaRopeCache(const MlaRopeArgs& args, const HeadsView& kv_c, const HeadsView& k_pe, const HeadsView& q,
                            const HeadsView& q_out, const MlaCacheView& cache) {
  POSENC_RETURN_IF_ERROR(cache.Validate());
  if (args.layer < 0 || args.layer >= cache.layers)
    return OutOfRangeError(fmt::format("mla cache: layer {} outside [0, {})", args.layer, cache.layers));
  POSENC_RETURN_IF_ERROR(kv_c.Validate("latent kv_c"));
  POSENC_RETURN_IF_ERROR(k_pe.Validate("rope key k_pe"));
  const int64_t T = kv_c.tokens;
  if (kv_c.heads != 1 || kv_c.head_dim != cache.kv_lora_rank)
    return InvalidArgumentError(fmt::format("mla cache: kv_c is [{}, {}, {}], the cache needs [T, 1, {}]", kv_c.tokens,
                                            kv_c.heads, kv_c.head_dim, cache.kv_lora_rank));
  if (k_pe.heads != 1 || k_pe.head_dim != cache.rope_dim || k_pe.tokens != T)
    return InvalidArgumentError(fmt::format("mla cache: k_pe is [{}, {}, {}], the cache needs [{}, 1, {}]", k_pe.tokens,
                                            k_pe.heads, k_pe.head_dim, T, cache.rope_dim));
  if (args.rope.layout.rotary_dim != cache.rope_dim)
    return InvalidArgumentError(fmt::format("mla cache: layout rotary_dim {} differs from the cache's rope_dim {}",
                                            args.rope.layout.rotary_dim, cache.rope_dim));
  RopeArgs ka = args.rope;
  ka.layout = MlaKeyLayout(args.rope.layout, cache.rope_dim);
  POSENC_RETURN_IF_ERROR(ValidateRope(ka, k_pe, "k_pe"));
  const bool has_q = q.heads > 0;
  if (has_q) {
    POSENC_RETURN_IF_ERROR(ValidateRope(args.rope, q, "queries"));
    POSENC_RETURN_IF_ERROR(q_out.Validate("query output"));
    POSENC_RETURN_IF_ERROR(ValidateRopeOutput(q, q_out));
    if (q.tokens != T)
      return InvalidArgumentError(fmt::format("mla cache: {} query tokens for {} latent tokens", q.tokens, T));
    // Out of place, q_out is written while kv_c and k_pe are still being read (the fast path works in
    // chunks of tokens, the reference in whole passes): memory shared with them would make the result
    // depend on that order.
    if (q_out.data != q.data)
      for (const HeadsView* v : {&kv_c, &k_pe})
        if (BytesOverlap(q_out.data, SpanBytes(q_out), v->data, SpanBytes(*v)))
          return InvalidArgumentError(
              "mla cache: the query output overlaps kv_c or k_pe (rotate q in place, q_out = q, or into separate "
              "memory)");
  }
  for (const HeadsView* v : {&k_pe, &q})
    if (v->tokens > 0 && v->heads > 0 && v->dtype != kv_c.dtype)
      return InvalidArgumentError(fmt::format("mla cache: kv_c is {}, k_pe / q {}; all must share one dtype",
                                              ToString(kv_c.dtype), ToString(v->dtype)));
  if (kv_c.dtype != DType::kF32 && kv_c.dtype != DType::kF16 && kv_c.dtype != DType::kBF16)
    return InvalidArgumentError(
        fmt::format("mla cache: dtype {} is not float32, float16 or bfloat16", ToString(kv_c.dtype)));
  if (args.kv_norm.enabled()) POSENC_RETURN_IF_ERROR(ValidateHeadRmsNorm(args.kv_norm, kv_c, "kv_c"));
  if (static_cast<int64_t>(args.slots.size()) != T)
    return InvalidArgumentError(fmt::format("mla cache: {} slots for {} tokens", args.slots.size(), T));
  POSENC_RETURN_IF_ERROR(ValidateKvSlots(cache.AsKvCache(nullptr), args.slots));
  if (cache.slots > 0) {
    const size_t cb = static_cast<size_t>(cache.bytes());
    for (const HeadsView* v : {&kv_c, &k_pe, &q, &q_out})
      if (BytesOverlap(cache.data, cb, v->data, SpanBytes(*v)))
        return InvalidArgumentError("mla cache: the cache memory overlaps an input or the query output");
  }
  return OkStatus();
}

}  // namespace detail

namespace {

template <typename T>
void MlaReference(const MlaRopeArgs& args, const HeadsView& kv_c, const HeadsView& k_pe, const HeadsView& q,
                  const HeadsView& q_out, const MlaCacheView& cache) {
  const int64_t T_ = kv_c.tokens, R = cache.row_values(), L = cache.kv_lora_rank;
  const double sign = args.rope.direction == RopeDirection::kForward ? 1.0 : -1.0;
  auto cos_sin = [&](int64_t t, float* c, float* s) { args.rope.table->CosSin(args.rope.positions[size_t(t)], c, s); };
  std::vector<T> rows(static_cast<size_t>(T_ * R));
  const HeadsView latent{rows.data(), kv_c.dtype, T_, 1, L, R, L};
  const HeadsView pe{rows.data() + L, kv_c.dtype, T_, 1, cache.rope_dim, R, cache.rope_dim};
  if (args.kv_norm.enabled()) {
    (void)ApplyHeadRmsNormReference(args.kv_norm, kv_c, latent);  // validated
  } else {
    for (int64_t t = 0; t < T_; ++t) std::memcpy(latent.at<T>(t, 0), kv_c.at<T>(t, 0), sizeof(T) * size_t(L));
  }
  detail::RotateTokensReference<T>(detail::MlaKeyLayout(args.rope.layout, cache.rope_dim), sign, k_pe, pe, cos_sin);
  if (q.heads > 0) detail::RotateTokensReference<T>(args.rope.layout, sign, q, q_out, cos_sin);
  for (int64_t t = 0; t < T_; ++t)
    detail::StoreRowReference(kv_c.dtype, rows.data() + t * R, cache.type,
                              cache.row(args.layer, args.slots[static_cast<size_t>(t)]), R,
                              detail::KeyScale(cache.AsKvCache(nullptr)));
}

}  // namespace

Status ApplyMlaRopeCacheReference(const MlaRopeArgs& args, HeadsView kv_c, HeadsView k_pe, HeadsView q, HeadsView q_out,
                                  const MlaCacheView& cache) {
  POSENC_RETURN_IF_ERROR(detail::ValidateMlaRopeCache(args, kv_c, k_pe, q, q_out, cache));
  if (kv_c.tokens == 0) return OkStatus();
  switch (kv_c.dtype) {
    case DType::kF32: MlaReference<float>(args, kv_c, k_pe, q, q_out, cache); break;
    case DType::kF16: MlaReference<f16_t>(args, kv_c, k_pe, q, q_out, cache); break;
    default: MlaReference<bf16_t>(args, kv_c, k_pe, q, q_out, cache); break;
  }
  return OkStatus();
}

}  // namespace posenc
