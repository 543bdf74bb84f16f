// StoreKvCache: validate once, then convert / quantize each token's k and v rows into its slot with
// the best SIMD target (kv_cache-inl.hpp), split over tokens. The scalar reference and the
// validation live in kv_cache_ref.cpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kv_cache/kv_cache.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "kernels/kv_cache/kv_cache-inl.hpp"
#include "kernels/kv_cache/kv_cache_internal.hpp"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {

void StoreKvTokensTarget(const KvCacheView& cache, int64_t layer, const int64_t* slots, const HeadsView& k,
                         const HeadsView& v, int64_t begin, int64_t end, bool stream) {
  const size_t n = static_cast<size_t>(cache.kv_heads * cache.head_dim);
  // A gather row for strided heads only: a decode call of dense rows allocates nothing.
  const bool gather = (k.tokens > 0 && detail::TokenRowCopies(k)) || (v.tokens > 0 && detail::TokenRowCopies(v));
  hwy::AlignedFreeUniquePtr<float[]> scratch = gather ? hwy::AllocateAligned<float>(n) : nullptr;
  for (int64_t t = begin; t < end; ++t) {
    if (k.tokens > 0)
      StoreRow(k.dtype, detail::TokenRow(k, t, scratch.get()), cache.type, cache.k_row(layer, slots[t]), n,
               detail::KeyScale(cache), stream);
    if (v.tokens > 0)
      StoreRow(v.dtype, detail::TokenRow(v, t, scratch.get()), cache.type, cache.v_row(layer, slots[t]), n,
               detail::ValueScale(cache), stream);
  }
  if (stream) hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "posenc/core/parallel.hpp"

namespace posenc {
HWY_EXPORT(StoreKvTokensTarget);

namespace detail {
void StoreKvTokens(const KvCacheView& cache, int64_t layer, const int64_t* slots, const HeadsView& k,
                   const HeadsView& v, int64_t begin, int64_t end, bool stream) {
  HWY_DYNAMIC_DISPATCH(StoreKvTokensTarget)(cache, layer, slots, k, v, begin, end, stream);
}
}  // namespace detail

Status StoreKvCache(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, HeadsView k, HeadsView v,
                    ParallelRunner* parallel) {
  POSENC_RETURN_IF_ERROR(detail::ValidateKvWrite(cache, layer, slots, k, v));
  const int64_t tokens = static_cast<int64_t>(slots.size());
  if (tokens == 0 || (k.tokens == 0 && v.tokens == 0)) return OkStatus();
  const DType dt = k.tokens > 0 ? k.dtype : v.dtype;
  const double n = static_cast<double>(cache.kv_heads * cache.head_dim);
  const double touched = static_cast<double>(tokens) * 2.0 *
                         (n * static_cast<double>(SizeOf(dt)) + static_cast<double>(cache.slot_bytes()));
  const bool stream =
      detail::StreamsCacheRows(cache, static_cast<double>(tokens) * 2.0 * static_cast<double>(cache.slot_bytes()));
  ParallelFor(parallel, tokens, detail::TouchedBytes(touched),
              [&](int64_t b, int64_t e) { detail::StoreKvTokens(cache, layer, slots.data(), k, v, b, e, stream); });
  return OkStatus();
}

}  // namespace posenc
#endif  // HWY_ONCE
