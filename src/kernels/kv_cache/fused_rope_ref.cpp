// The fused RoPE + KV-cache write: the fused QKV split, the validation shared with the fast path, and
// the scalar reference (RotateTokenReference per token, then the scalar cache-row write).
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/kv_cache/fused_rope_internal.hpp"
#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/fused_rope.hpp"

namespace posenc {

Result<QkvViews> SplitFusedQkv(void* data, DType dtype, int64_t tokens, int64_t q_heads, int64_t kv_heads,
                               int64_t head_dim, int64_t row_stride) {
  if (tokens < 0 || q_heads < 0 || kv_heads < 0 || head_dim < 0)
    return InvalidArgumentError(fmt::format("fused qkv: negative shape tokens {}, q_heads {}, kv_heads {}, head_dim {}",
                                            tokens, q_heads, kv_heads, head_dim));
  using Wide = __int128;
  const Wide row = (Wide{q_heads} + 2 * Wide{kv_heads}) * head_dim;
  if (row > Wide{INT64_MAX} / 8)
    return InvalidArgumentError(
        fmt::format("fused qkv: row of ({} + 2 x {}) x {} is too long", q_heads, kv_heads, head_dim));
  if (row_stride == 0) row_stride = static_cast<int64_t>(row);
  if (Wide{row_stride} < row)
    return InvalidArgumentError(fmt::format("fused qkv: row_stride {} is shorter than a row of {} values", row_stride,
                                            static_cast<int64_t>(row)));
  auto* base = static_cast<std::byte*>(data);
  const size_t es = SizeOf(dtype);
  QkvViews v;
  v.q = {data, dtype, tokens, q_heads, head_dim, row_stride, head_dim};
  v.k = {base + static_cast<size_t>(q_heads * head_dim) * es, dtype, tokens, kv_heads, head_dim, row_stride, head_dim};
  v.v = {base + static_cast<size_t>((q_heads + kv_heads) * head_dim) * es,
         dtype,
         tokens,
         kv_heads,
         head_dim,
         row_stride,
         head_dim};
  POSENC_RETURN_IF_ERROR(v.q.Validate("fused qkv queries"));
  return v;
}

namespace detail {

Status ValidateRopeKvCache(const FusedRopeArgs& args, const QkvViews& qkv, const HeadsView& q_out,
                           const KvCacheView& cache) {
  POSENC_RETURN_IF_ERROR(ValidateRope(args.rope, qkv.q, "queries"));
  POSENC_RETURN_IF_ERROR(ValidateRope(args.rope, qkv.k, "keys"));
  if (args.q_norm.enabled()) POSENC_RETURN_IF_ERROR(ValidateHeadRmsNorm(args.q_norm, qkv.q, "queries"));
  if (args.k_norm.enabled()) POSENC_RETURN_IF_ERROR(ValidateHeadRmsNorm(args.k_norm, qkv.k, "keys"));
  POSENC_RETURN_IF_ERROR(qkv.v.Validate("values"));
  if (qkv.k.dtype != qkv.q.dtype || qkv.v.dtype != qkv.q.dtype)
    return InvalidArgumentError(fmt::format("fused rope: queries {}, keys {}, values {}; all must share one dtype",
                                            ToString(qkv.q.dtype), ToString(qkv.k.dtype), ToString(qkv.v.dtype)));
  if (qkv.v.tokens != qkv.q.tokens)
    return InvalidArgumentError(
        fmt::format("fused rope: {} value tokens for {} query tokens", qkv.v.tokens, qkv.q.tokens));
  if (static_cast<int64_t>(args.slots.size()) != qkv.q.tokens)
    return InvalidArgumentError(fmt::format("fused rope: {} slots for {} tokens", args.slots.size(), qkv.q.tokens));
  POSENC_RETURN_IF_ERROR(q_out.Validate("query output"));
  POSENC_RETURN_IF_ERROR(ValidateRopeOutput(qkv.q, q_out));
  if (!args.q_scale.empty()) {
    if (static_cast<int64_t>(args.q_scale.size()) != qkv.q.tokens)
      return InvalidArgumentError(
          fmt::format("fused rope: {} query scales for {} tokens", args.q_scale.size(), qkv.q.tokens));
    for (size_t i = 0; i < args.q_scale.size(); ++i)
      if (!std::isfinite(args.q_scale[i]))
        return InvalidArgumentError(fmt::format("fused rope: q_scale[{}] = {} is not finite", i, args.q_scale[i]));
  }
  POSENC_RETURN_IF_ERROR(ValidateKvWrite(cache, args.layer, args.slots, qkv.k, qkv.v));
  // The fast path writes q_out and the cache rows a chunk of tokens at a time while it still reads the
  // inputs, the reference in whole passes: an output sharing memory with an input (beyond q_out = q
  // exactly) would make the result depend on that order.
  if (q_out.data != qkv.q.data)
    for (const HeadsView* x : {&qkv.k, &qkv.v})
      if (BytesOverlap(q_out.data, SpanBytes(q_out), x->data, SpanBytes(*x)))
        return InvalidArgumentError(
            "fused rope: the query output overlaps k or v (rotate q in place, q_out = q, or into separate memory)");
  const size_t cb = static_cast<size_t>(cache.bytes());
  for (const void* c : {cache.k, cache.v})
    for (const HeadsView* x : {&qkv.q, &qkv.k, &qkv.v, &q_out})
      if (BytesOverlap(c, cb, x->data, SpanBytes(*x)))
        return InvalidArgumentError("fused rope: the cache memory overlaps an input or the query output");
  return OkStatus();
}

}  // namespace detail

namespace {

// The unfused sequence in scalar form: q and k normed (when asked) and rotated by the reference rotation (k into a
// dense scratch copy), q scaled, then each token's k and v rows written by the scalar cache-row write.
template <typename T>
void FusedReference(const FusedRopeArgs& args, const QkvViews& qkv, const HeadsView& q_out, const KvCacheView& cache) {
  const RotaryLayout& L = args.rope.layout;
  const int64_t n = cache.kv_heads * cache.head_dim;
  const double sign = args.rope.direction == RopeDirection::kForward ? 1.0 : -1.0;
  auto cos_sin = [&](int64_t t, float* c, float* s) { args.rope.table->CosSin(args.rope.positions[size_t(t)], c, s); };
  if (args.q_norm.enabled()) {                                   // norm into q_out, then rotate it in place
    (void)ApplyHeadRmsNormReference(args.q_norm, qkv.q, q_out);  // validated
    detail::RotateTokensReference<T>(L, sign, q_out, q_out, cos_sin);
  } else {
    detail::RotateTokensReference<T>(L, sign, qkv.q, q_out, cos_sin);
  }
  if (!args.q_scale.empty()) {
    for (int64_t t = 0; t < q_out.tokens; ++t) {
      const float sc = args.q_scale[static_cast<size_t>(t)];
      for (int64_t h = 0; h < q_out.heads; ++h) {
        T* r = q_out.at<T>(t, h);
        for (int64_t d = 0; d < q_out.head_dim; ++d) StoreFromF32(LoadAsF32(r + d) * sc, r + d);
      }
    }
  }
  std::vector<T> k_rot(static_cast<size_t>(qkv.k.tokens * n)), v_row(static_cast<size_t>(n));
  const HeadsView k_out = HeadsView::Dense(k_rot.data(), qkv.k.dtype, qkv.k.tokens, qkv.k.heads, qkv.k.head_dim);
  if (args.k_norm.enabled()) {
    (void)ApplyHeadRmsNormReference(args.k_norm, qkv.k, k_out);  // validated
    detail::RotateTokensReference<T>(L, sign, k_out, k_out, cos_sin);
  } else {
    detail::RotateTokensReference<T>(L, sign, qkv.k, k_out, cos_sin);
  }
  for (int64_t t = 0; t < qkv.q.tokens; ++t) {
    const int64_t slot = args.slots[static_cast<size_t>(t)];
    detail::StoreRowReference(qkv.k.dtype, k_rot.data() + t * n, cache.type, cache.k_row(args.layer, slot), n,
                              detail::KeyScale(cache));
    detail::StoreRowReference(qkv.v.dtype, detail::TokenRow(qkv.v, t, v_row.data()), cache.type,
                              cache.v_row(args.layer, slot), n, detail::ValueScale(cache));
  }
}

}  // namespace

Status ApplyRopeKvCacheReference(const FusedRopeArgs& args, const QkvViews& qkv, HeadsView q_out,
                                 const KvCacheView& cache) {
  POSENC_RETURN_IF_ERROR(detail::ValidateRopeKvCache(args, qkv, q_out, cache));
  if (qkv.q.tokens == 0) return OkStatus();
  switch (qkv.q.dtype) {
    case DType::kF32: FusedReference<float>(args, qkv, q_out, cache); break;
    case DType::kF16: FusedReference<f16_t>(args, qkv, q_out, cache); break;
    case DType::kBF16: FusedReference<bf16_t>(args, qkv, q_out, cache); break;
    default: return InvalidArgumentError("fused rope: unsupported dtype");
  }
  return OkStatus();
}

}  // namespace posenc
