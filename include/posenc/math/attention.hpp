// Reference scaled dot-product attention, to demonstrate and test the positional schemes (not a
// fast kernel): softmax(q . k * scale + bias) v per query head, with grouped-query attention,
// an optional causal mask and an additive relative-position bias (ALiBi, T5, Shaw).
//
// The bias is evaluated tile by tile over the keys with an online softmax (running max and sum,
// as in FlashAttention), so no Tq x Tk score or bias matrix is ever built: memory is O(D + tile)
// per query. Arithmetic is float64 on float32 inputs, rounded once to float32 at the end.
//
// Positions: query i sits at position query_offset + i, key j at position j. RoPE and absolute
// positions are applied by the caller before (to q/k, or to x); this function only knows the
// relative schemes.
//
// Example:
//   auto slopes = AlibiSlopes(num_heads, AlibiVariant::kBloom).value();
//   AttentionOptions opt{.causal = true, .bias = AttentionBias::Alibi(slopes)};
//   Array out = AttentionReference(q, k, v, opt).value();   // [Tq, H, D]
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/core/array.hpp"
#include "posenc/math/relative.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

enum class AttentionBiasKind { kNone, kAlibi, kT5, kShaw };
// "none", "alibi", "t5", "shaw"
std::string_view ToString(AttentionBiasKind k);

// The additive position bias. Non-owning: the slopes / tables must outlive the attention call.
struct AttentionBias {
  AttentionBiasKind kind = AttentionBiasKind::kNone;
  std::span<const double> alibi_slopes;          // kAlibi: one slope per query head
  const T5RelativeBias* t5 = nullptr;            // kT5: table heads == query heads
  const ShawRelativeEmbeddings* shaw = nullptr;  // kShaw: tables' head_dim == head_dim

  static AttentionBias None() { return {}; }
  static AttentionBias Alibi(std::span<const double> slopes) {
    return {AttentionBiasKind::kAlibi, slopes, nullptr, nullptr};
  }
  static AttentionBias T5(const T5RelativeBias& b) { return {AttentionBiasKind::kT5, {}, &b, nullptr}; }
  static AttentionBias Shaw(const ShawRelativeEmbeddings& e) { return {AttentionBiasKind::kShaw, {}, nullptr, &e}; }
};

struct AttentionOptions {
  bool causal = false;       // key j is visible to query i only if j <= query_offset + i
  int64_t query_offset = 0;  // position of query 0 (a KV cache holding Tk keys: Tk - Tq); >= 0
  double scale = 0.0;        // multiplies q . k; 0 means 1 / sqrt(head_dim)
  AttentionBias bias;
  int64_t key_tile = 32;  // keys per online-softmax step, >= 1 (the result does not depend on it
                          // beyond float64 rounding)
};

// q float32 [Tq, H, D]; k and v float32 [Tk, Hkv, D] with H a multiple of Hkv (query head h reads
// key/value head h / (H / Hkv)). Returns float32 [Tq, H, D]. Errors (kInvalidArgument) name the
// shapes and the rule: wrong rank or dtype, k/v shapes differ, D differs, H not a multiple of Hkv,
// Tk == 0 with Tq > 0, negative query_offset, non-finite or negative scale, key_tile < 1, a bias
// whose head count or head_dim does not match. Thread-safe (no shared state).
Result<Array> AttentionReference(const Array& q, const Array& k, const Array& v, const AttentionOptions& options = {});

// x float32 [T, d_model] times w [d_model, heads * head_dim] (row-major) -> float32 [T, heads, head_dim]:
// the toy q / k / v projection of the demo and the tests, float64 sums rounded once. Errors
// (kInvalidArgument): x not float32 [T, d_model], heads or head_dim < 1, w not d_model * heads * head_dim.
Result<Array> ProjectHeads(const Array& x, std::span<const float> w, int64_t heads, int64_t head_dim);

}  // namespace posenc
