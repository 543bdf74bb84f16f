// Relative position schemes that act on attention scores instead of token vectors: ALiBi (Press et
// al. 2021, as BLOOM and MPT compute it), T5's bucketed learned biases (Raffel et al. 2020) and
// Shaw et al. (2018) clipped relative embeddings.
//
// Every scheme here is a function of (head, query position i, key position j); the reference
// attention (posenc/attention.hpp) evaluates it tile by tile, never as a whole Tq x Tk matrix.
// Relative position means key minus query, j - i, as in T5 and Shaw.
//
// Example:
//   std::vector<double> slopes = AlibiSlopes(12, AlibiVariant::kBloom).value();
//   double b = AlibiBiasAt(slopes[h], /*query_pos=*/7, /*key_pos=*/3);     // -slope * (7 - 3)
//   int64_t bucket = T5RelativeBucket(/*rel=*/-40, /*bidirectional=*/false, 32, 128);
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// ---------------------------------------------------------------------------------------------
// ALiBi: bias(h, i, j) = -slope_h * (i - j), added to the score of query i and key j.

enum class AlibiVariant {
  // Press et al. / BLOOM (transformers build_alibi_tensor): for n heads let P = the largest power
  // of two <= n; slopes 2^(-8k/P) for k = 1..P, then, if n > P, appended after them, the
  // odd-numbered slopes of the 2P-head sequence, 2^(-4(2m+1)/P) for m = 0..n-P-1 (their values
  // fall between those of the first P).
  kBloom,
  // MPT (transformers build_mpt_alibi_tensor): P = the smallest power of two >= n; slopes
  // 2^(-k * bias_max / P) for k = 1..P; if n < P, the slopes at even k (2, 4, ...) are taken
  // first, then those at odd k (1, 3, ...), and the first n kept.
  kMpt,
};
// "bloom", "mpt"
std::string_view ToString(AlibiVariant v);
bool ParseAlibiVariant(std::string_view s, AlibiVariant* out);

// The slope of every head, computed in float64 (the values the float32 references approximate;
// the differences are within a few float32 ulps). `bias_max` is MPT's `alibi_bias_max` (8 in every
// released MPT) and is ignored by kBloom. kInvalidArgument naming the value: num_heads <= 0 or
// > 2^20, bias_max not finite and > 0.
Result<std::vector<double>> AlibiSlopes(int64_t num_heads, AlibiVariant variant, double bias_max = 8.0);

// -slope * (query_pos - key_pos). Positive distances (keys in the past) get negative biases.
inline double AlibiBiasAt(double slope, int64_t query_pos, int64_t key_pos) {
  return -slope * static_cast<double>(query_pos - key_pos);
}

// The whole bias as a float32 Array [H, Tq, Tk] with query i at position query_offset + i and key
// j at position j, rounded once from float64: for golden checks and small demonstrations only
// (attention never builds it). kInvalidArgument on empty slopes or negative sizes.
Result<Array> AlibiBias(std::span<const double> slopes, int64_t query_length, int64_t key_length,
                        int64_t query_offset = 0);

// ---------------------------------------------------------------------------------------------
// T5 buckets: relative position j - i mapped to one of num_buckets buckets, exact for small
// distances, logarithmic up to max_distance, the last bucket beyond. Bidirectional (encoder) uses
// half the buckets for each sign; causal (decoder) keeps only the past (j - i <= 0; the future maps
// to bucket 0).

struct T5BucketParams {
  bool bidirectional = true;
  int64_t num_buckets = 32;
  int64_t max_distance = 128;

  // kInvalidArgument naming the value and the rule: num_buckets must be >= 2 (causal) or even and
  // >= 4 (bidirectional), so that max_exact = (buckets per side) / 2 >= 1; max_distance must exceed
  // max_exact (the logarithmic part divides by log(max_distance / max_exact)).
  Status Validate() const;
};

// The bucket of relative position `rel` = key - query, computed as Hugging Face's
// T5Attention._relative_position_bucket does: log(n / max_exact) / log(max_distance / max_exact) *
// (buckets - max_exact) in float32, truncated toward zero, capped at the last bucket. A formula
// that is algebraically equal but rounds differently lands in the wrong bucket at boundaries.
// Precondition: T5BucketParams{bidirectional, num_buckets, max_distance}.Validate() is ok.
int64_t T5RelativeBucket(int64_t rel, bool bidirectional, int64_t num_buckets, int64_t max_distance);
inline int64_t T5RelativeBucket(int64_t rel, const T5BucketParams& p) {
  return T5RelativeBucket(rel, p.bidirectional, p.num_buckets, p.max_distance);
}
// Buckets of many relative positions; validates the parameters first.
Result<std::vector<int64_t>> T5RelativeBuckets(std::span<const int64_t> relative_positions,
                                               const T5BucketParams& params);

// T5's learned bias: bias(h, i, j) = table[bucket(j - i), h], table float32 [num_buckets, heads].
struct T5RelativeBias {
  T5BucketParams params;
  Array table;  // float32 [num_buckets, heads]

  int64_t num_heads() const { return table.ndim() == 2 ? table.dim(1) : 0; }
  // Checks params and that the table is float32 [num_buckets, heads] with heads >= 1.
  Status Validate() const;
  // Precondition: Validate() ok, 0 <= head < num_heads().
  float BiasAt(int64_t head, int64_t query_pos, int64_t key_pos) const {
    const int64_t b = T5RelativeBucket(key_pos - query_pos, params);
    return table.data<float>()[b * num_heads() + head];
  }
};

// ---------------------------------------------------------------------------------------------
// Shaw et al. (2018): learned vectors per clipped relative distance, shared by every head.
// idx(i, j) = clip(j - i, -k, k) + k indexes two tables of 2k+1 rows of head_dim:
//   score(i, j) = q_i . (k_j + a^K[idx]) * scale      (a^K added to the keys, i.e. q_i . a^K to scores)
//   out_i       = sum_j softmax_j(score) * (v_j + a^V[idx])

struct ShawRelativeEmbeddings {
  int64_t max_relative_position = 0;  // k >= 0
  Array key_table;                    // a^K float32 [2k+1, head_dim]
  Array value_table;                  // a^V float32 [2k+1, head_dim]

  // Row of both tables for query position i and key position j.
  int64_t Index(int64_t query_pos, int64_t key_pos) const {
    int64_t rel = key_pos - query_pos;
    if (rel < -max_relative_position) rel = -max_relative_position;
    if (rel > max_relative_position) rel = max_relative_position;
    return rel + max_relative_position;
  }
  int64_t head_dim() const { return key_table.ndim() == 2 ? key_table.dim(1) : 0; }
  // Checks k >= 0 and both tables float32 [2k+1, head_dim] with the same head_dim >= 1.
  Status Validate() const;
};

// Tables of 2k+1 rows filled with seeded normal values times `stddev` (tests and the demo).
Result<ShawRelativeEmbeddings> RandomShawEmbeddings(int64_t max_relative_position, int64_t head_dim, uint64_t seed,
                                                    double stddev = 1.0);
// A T5 bias table [num_buckets, heads] filled the same way.
Result<T5RelativeBias> RandomT5Bias(const T5BucketParams& params, int64_t num_heads, uint64_t seed,
                                    double stddev = 1.0);

}  // namespace posenc
