// KV caches: names, slot arithmetic of contiguous and paged caches, validation shared by every cache
// write, and the scalar references (Q8_0 quantization as ggml's quantize_row_q8_0_ref defines it).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/kv_cache/kv_cache_internal.hpp"
#include "posenc/kernels/kv_cache.hpp"

namespace posenc {

bool IsKvCacheType(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return true;
    default: return false;
  }
}

bool ParseKvCacheType(std::string_view name, KvCacheType* out) {
  DType d;
  if (!ParseDType(name, &d) || !IsKvCacheType(d)) return false;
  *out = d;
  return true;
}

int64_t KvCacheView::slot_bytes() const {
  const DTypeTraits& t = TraitsOf(type);
  return kv_heads * head_dim / t.block_size * static_cast<int64_t>(t.type_size);
}

int64_t KvCacheView::bytes() const { return layers * slots * slot_bytes(); }

namespace detail {

Status CheckCacheTypeAndScale(const char* cache, KvCacheType type, const char* name, std::span<const float> scale,
                              int64_t per_head) {
  if (!IsKvCacheType(type))
    return InvalidArgumentError(
        fmt::format("{}: {} is not a cache type (float32, float16, bfloat16, q8_0, float8_e4m3fn, float8_e5m2)", cache,
                    ToString(type)));
  if (scale.empty()) return OkStatus();
  if (type != DType::kF8E4M3 && type != DType::kF8E5M2)
    return InvalidArgumentError(
        fmt::format("{}: {} given for a {} cache (scales are for float8 caches)", cache, name, ToString(type)));
  if (per_head == 0 && scale.size() != 1)
    return InvalidArgumentError(
        fmt::format("{}: {} has {} values, not 1 (one row per token)", cache, name, scale.size()));
  if (per_head > 0 && scale.size() != 1 && static_cast<int64_t>(scale.size()) != per_head)
    return InvalidArgumentError(
        fmt::format("{}: {} has {} values, not 1 (per tensor) or {} (per head)", cache, name, scale.size(), per_head));
  for (size_t h = 0; h < scale.size(); ++h)
    if (!std::isfinite(scale[h]) || !(scale[h] > 0.0f))
      return InvalidArgumentError(fmt::format("{}: {}[{}] = {} is not a finite scale > 0", cache, name, h, scale[h]));
  return OkStatus();
}

}  // namespace detail

Status KvCacheView::Validate() const {
  for (const auto& [name, scale] : {std::pair{"k_scale", k_scale}, std::pair{"v_scale", v_scale}})
    POSENC_RETURN_IF_ERROR(detail::CheckCacheTypeAndScale("kv cache", type, name, scale, kv_heads));
  if (layers <= 0) return InvalidArgumentError(fmt::format("kv cache: layers = {} must be > 0", layers));
  if (slots < 0) return InvalidArgumentError(fmt::format("kv cache: slots = {} is negative", slots));
  if (kv_heads <= 0) return InvalidArgumentError(fmt::format("kv cache: kv_heads = {} must be > 0", kv_heads));
  if (head_dim <= 0) return InvalidArgumentError(fmt::format("kv cache: head_dim = {} must be > 0", head_dim));
  using Wide = __int128;
  const Wide row = Wide{kv_heads} * head_dim;
  if (type == KvCacheType::kQ8_0 && row % kQ8_0Block != 0)
    return InvalidArgumentError(
        fmt::format("kv cache: q8_0 needs kv_heads * head_dim a multiple of 32, got {} * {} = {}", kv_heads, head_dim,
                    static_cast<int64_t>(row)));
  // Step by step, each product of two values below 2^63 fits in 128 bits.
  Wide total = row > Wide{INT64_MAX} ? row : row * 4;  // row < 2^126: row * 4 fits
  for (const int64_t f : {layers, slots}) {
    if (total > Wide{INT64_MAX}) break;
    total *= f;
  }
  if (total > Wide{INT64_MAX})
    return InvalidArgumentError(
        fmt::format("kv cache: {} layers x {} slots x {} x {} is too large", layers, slots, kv_heads, head_dim));
  if (slots == 0) return OkStatus();
  if (k == nullptr || v == nullptr) return InvalidArgumentError("kv cache: null k or v memory");
  // Rows at their element's alignment (float32 4 bytes; float16, bfloat16 and Q8_0's float16 scale 2;
  // float8 1; rows are whole multiples of it): the scalar paths store them as those types.
  const size_t align = type == KvCacheType::kF32 ? 4 : (type == DType::kF8E4M3 || type == DType::kF8E5M2) ? 1 : 2;
  for (const auto& [name, p] : {std::pair{"k", k}, std::pair{"v", v}})
    if (reinterpret_cast<uintptr_t>(p) % align != 0)
      return InvalidArgumentError(
          fmt::format("kv cache: {} memory {} is not aligned to {} bytes ({} cache)", name, p, align, ToString(type)));
  const auto* kb = static_cast<const std::byte*>(k);
  const auto* vb = static_cast<const std::byte*>(v);
  if (kb < vb + bytes() && vb < kb + bytes()) return InvalidArgumentError("kv cache: k and v memory overlap");
  return OkStatus();
}

Result<std::vector<int64_t>> ContiguousKvSlots(int64_t num_sequences, int64_t max_seq_len,
                                               std::span<const int64_t> seq_ids, std::span<const int64_t> offsets) {
  if (num_sequences < 0 || max_seq_len < 0 || (max_seq_len > 0 && num_sequences > INT64_MAX / max_seq_len))
    return InvalidArgumentError(
        fmt::format("kv cache: {} sequences x max_seq_len {} is not a cache size", num_sequences, max_seq_len));
  if (seq_ids.size() != offsets.size())
    return InvalidArgumentError(
        fmt::format("kv cache: {} sequence ids for {} offsets", seq_ids.size(), offsets.size()));
  std::vector<int64_t> slots(seq_ids.size());
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    if (seq_ids[i] < 0 || seq_ids[i] >= num_sequences)
      return OutOfRangeError(
          fmt::format("kv cache: token {} has sequence {} outside [0, {})", i, seq_ids[i], num_sequences));
    if (offsets[i] < 0 || offsets[i] >= max_seq_len)
      return OutOfRangeError(
          fmt::format("kv cache: token {} has offset {} outside [0, {})", i, offsets[i], max_seq_len));
    slots[i] = seq_ids[i] * max_seq_len + offsets[i];
  }
  return slots;
}

Result<std::vector<int64_t>> PagedKvSlots(const PagedKvTable& table, std::span<const int64_t> seq_ids,
                                          std::span<const int64_t> positions) {
  if (table.page_size <= 0)
    return InvalidArgumentError(fmt::format("kv cache: page_size = {} must be > 0", table.page_size));
  if (table.num_pages < 0 || table.num_pages > INT64_MAX / table.page_size)
    return InvalidArgumentError(fmt::format("kv cache: num_pages = {} is not a page count", table.num_pages));
  if (table.max_pages_per_seq <= 0 || table.block_table.size() % static_cast<size_t>(table.max_pages_per_seq) != 0)
    return InvalidArgumentError(fmt::format("kv cache: block table of {} entries is not [sequences, {}]",
                                            table.block_table.size(), table.max_pages_per_seq));
  if (seq_ids.size() != positions.size())
    return InvalidArgumentError(
        fmt::format("kv cache: {} sequence ids for {} positions", seq_ids.size(), positions.size()));
  const int64_t seqs = table.num_sequences();
  std::vector<int64_t> slots(seq_ids.size());
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    const int64_t s = seq_ids[i], p = positions[i];
    if (s < 0 || s >= seqs)
      return OutOfRangeError(fmt::format("kv cache: token {} has sequence {} outside [0, {})", i, s, seqs));
    if (p < 0 || p / table.page_size >= table.max_pages_per_seq)
      return OutOfRangeError(fmt::format("kv cache: token {} has position {} outside [0, {}) ({} pages of {})", i, p,
                                         table.max_pages_per_seq * table.page_size, table.max_pages_per_seq,
                                         table.page_size));
    const int64_t page = table.block_table[static_cast<size_t>(s * table.max_pages_per_seq + p / table.page_size)];
    if (page < 0 || page >= table.num_pages)
      return OutOfRangeError(
          fmt::format("kv cache: token {} (sequence {}, position {}) maps to page {} outside [0, {})", i, s, p, page,
                      table.num_pages));
    slots[i] = page * table.page_size + p % table.page_size;
  }
  return slots;
}

Status ValidateKvSlots(const KvCacheView& cache, std::span<const int64_t> slots) {
  bool increasing = true;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0 || slots[i] >= cache.slots)
      return OutOfRangeError(
          fmt::format("kv cache: token {} writes slot {} outside the cache's [0, {})", i, slots[i], cache.slots));
    if (i > 0 && slots[i] <= slots[i - 1]) increasing = false;
  }
  if (increasing) return OkStatus();  // the common prefill case: no sort
  std::vector<std::pair<int64_t, size_t>> order(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) order[i] = {slots[i], i};
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i].first == order[i - 1].first)
      return InvalidArgumentError(fmt::format("kv cache: tokens {} and {} both write slot {}", order[i - 1].second,
                                              order[i].second, order[i].first));
  return OkStatus();
}

namespace detail {

namespace {
Status CheckKvView(const KvCacheView& cache, const HeadsView& x, size_t tokens, const char* what) {
  POSENC_RETURN_IF_ERROR(x.Validate(what));
  if (x.tokens == 0) return OkStatus();
  if (x.heads != cache.kv_heads || x.head_dim != cache.head_dim)
    return InvalidArgumentError(fmt::format("kv cache: {} are [{}, {}, {}], the cache holds {} heads of {}", what,
                                            x.tokens, x.heads, x.head_dim, cache.kv_heads, cache.head_dim));
  if (static_cast<size_t>(x.tokens) != tokens)
    return InvalidArgumentError(fmt::format("kv cache: {} slots for {} tokens of {}", tokens, x.tokens, what));
  return OkStatus();
}
}  // namespace

size_t SpanBytes(const HeadsView& v) {
  if (v.tokens == 0 || v.heads == 0 || v.head_dim == 0) return 0;
  return static_cast<size_t>((v.tokens - 1) * v.token_stride + (v.heads - 1) * v.head_stride + v.head_dim) *
         SizeOf(v.dtype);
}

bool BytesOverlap(const void* a, size_t an, const void* b, size_t bn) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

Status ValidateKvWrite(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, const HeadsView& k,
                       const HeadsView& v) {
  POSENC_RETURN_IF_ERROR(cache.Validate());
  if (layer < 0 || layer >= cache.layers)
    return OutOfRangeError(fmt::format("kv cache: layer {} outside [0, {})", layer, cache.layers));
  POSENC_RETURN_IF_ERROR(CheckKvView(cache, k, slots.size(), "keys"));
  POSENC_RETURN_IF_ERROR(CheckKvView(cache, v, slots.size(), "values"));
  if (k.tokens > 0 && v.tokens > 0 && k.dtype != v.dtype)
    return InvalidArgumentError(fmt::format("kv cache: keys are {}, values {}; both must share one dtype",
                                            posenc::ToString(k.dtype), posenc::ToString(v.dtype)));
  return ValidateKvSlots(cache, slots);
}

void StoreRowReference(DType src_dtype, const void* src, KvCacheType type, void* dst, int64_t n, RowScale scale) {
  const size_t un = static_cast<size_t>(n);
  auto load = [&](size_t i) {
    switch (src_dtype) {
      case DType::kF32: return static_cast<const float*>(src)[i];
      case DType::kF16: return F16ToF32(static_cast<const f16_t*>(src)[i]);
      default: return BF16ToF32(static_cast<const bf16_t*>(src)[i]);
    }
  };
  if (StoresAsIs(type, src_dtype)) {
    std::memcpy(dst, src, un * SizeOf(src_dtype));
    return;
  }
  switch (type) {
    case KvCacheType::kF32:
      for (size_t i = 0; i < un; ++i) static_cast<float*>(dst)[i] = load(i);
      return;
    case KvCacheType::kF16:
      for (size_t i = 0; i < un; ++i) static_cast<f16_t*>(dst)[i] = F32ToF16(load(i));
      return;
    case KvCacheType::kBF16:
      for (size_t i = 0; i < un; ++i) static_cast<bf16_t*>(dst)[i] = F32ToBF16(load(i));
      return;
    case KvCacheType::kQ8_0: {
      std::vector<float> row(un);
      for (size_t i = 0; i < un; ++i) row[i] = load(i);
      QuantizeRowQ8_0Reference(row.data(), n, static_cast<BlockQ8_0*>(dst));
      return;
    }
    case KvCacheType::kF8E4M3:
      for (size_t i = 0; i < un; ++i)
        static_cast<f8e4m3_t*>(dst)[i] = F32ToF8E4M3(load(i) / scale.of_head(static_cast<int64_t>(i) / scale.head_dim));
      return;
    case KvCacheType::kF8E5M2:
      for (size_t i = 0; i < un; ++i)
        static_cast<f8e5m2_t*>(dst)[i] = F32ToF8E5M2(load(i) / scale.of_head(static_cast<int64_t>(i) / scale.head_dim));
      return;
    default: return;  // not a cache type: refused by KvCacheView::Validate
  }
}

const void* TokenRow(const HeadsView& x, int64_t t, void* row) {
  const size_t es = SizeOf(x.dtype);
  const auto* base = static_cast<const std::byte*>(x.data) + static_cast<size_t>(t * x.token_stride) * es;
  if (!TokenRowCopies(x)) return base;
  for (int64_t h = 0; h < x.heads; ++h)
    std::memcpy(static_cast<std::byte*>(row) + static_cast<size_t>(h * x.head_dim) * es,
                base + static_cast<size_t>(h * x.head_stride) * es, static_cast<size_t>(x.head_dim) * es);
  return row;
}

}  // namespace detail

Status StoreKvCacheReference(const KvCacheView& cache, int64_t layer, std::span<const int64_t> slots, HeadsView k,
                             HeadsView v) {
  POSENC_RETURN_IF_ERROR(detail::ValidateKvWrite(cache, layer, slots, k, v));
  const int64_t n = cache.kv_heads * cache.head_dim;
  std::vector<std::byte> row(static_cast<size_t>(n) * 4);
  for (size_t t = 0; t < slots.size(); ++t) {
    const int64_t ti = static_cast<int64_t>(t);
    if (k.tokens > 0)
      detail::StoreRowReference(k.dtype, detail::TokenRow(k, ti, row.data()), cache.type, cache.k_row(layer, slots[t]),
                                n, detail::KeyScale(cache));
    if (v.tokens > 0)
      detail::StoreRowReference(v.dtype, detail::TokenRow(v, ti, row.data()), cache.type, cache.v_row(layer, slots[t]),
                                n, detail::ValueScale(cache));
  }
  return OkStatus();
}

}  // namespace posenc
