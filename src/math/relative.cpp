// ALiBi slopes and biases, T5 relative-position buckets and tables, Shaw et al. relative embeddings.
#include "posenc/math/relative.hpp"

#include <cmath>
#include <limits>
#include <numbers>
#include <random>

#include <fmt/format.h>

namespace posenc {
namespace {

constexpr int64_t kMaxAlibiHeads = int64_t{1} << 20;

// floor(log2(n)) for n >= 1.
int FloorLog2(int64_t n) {
  int r = 0;
  while ((n >> (r + 1)) != 0) ++r;
  return r;
}

// Normal values from mt19937_64 through Box-Muller, so the sequence is the same with every standard
// library (std::normal_distribution's algorithm is implementation-defined).
void FillNormal(uint64_t seed, double stddev, std::span<float> out) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53; };  // (0, 1)
  for (size_t i = 0; i < out.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * std::numbers::pi * uniform();
    out[i] = static_cast<float>(stddev * r * std::cos(a));
    if (i + 1 < out.size()) out[i + 1] = static_cast<float>(stddev * r * std::sin(a));
  }
}

Status CheckTable(const Array& t, int64_t rows, const char* what) {
  if (t.dtype() != DType::kF32 || t.ndim() != 2 || t.dim(0) != rows || t.dim(1) < 1)
    return InvalidArgumentError(fmt::format("{}: expected float32 [{}, >=1], got {} {}", what, rows,
                                            ToString(t.dtype()), ShapeToString(t.shape())));
  return OkStatus();
}

}  // namespace

std::string_view ToString(AlibiVariant v) {
  switch (v) {
    case AlibiVariant::kBloom: return "bloom";
    case AlibiVariant::kMpt: return "mpt";
  }
  return "?";
}

bool ParseAlibiVariant(std::string_view s, AlibiVariant* out) {
  if (s == "bloom" || s == "press") {
    *out = AlibiVariant::kBloom;
    return true;
  }
  if (s == "mpt") {
    *out = AlibiVariant::kMpt;
    return true;
  }
  return false;
}

Result<std::vector<double>> AlibiSlopes(int64_t num_heads, AlibiVariant variant, double bias_max) {
  if (num_heads <= 0 || num_heads > kMaxAlibiHeads)
    return InvalidArgumentError(fmt::format("alibi: num_heads {} must be in [1, 2^20]", num_heads));
  std::vector<double> slopes;
  slopes.reserve(static_cast<size_t>(num_heads));
  if (variant == AlibiVariant::kBloom) {
    // Press et al.: the geometric sequence starting at 2^(-8/P) with that ratio, for P a power of two.
    const int64_t p = int64_t{1} << FloorLog2(num_heads);
    for (int64_t k = 1; k <= p; ++k)
      slopes.push_back(std::exp2(-8.0 * static_cast<double>(k) / static_cast<double>(p)));
    // The remaining heads take every other slope of the 2P sequence (ratio 2^(-4/P), odd powers).
    for (int64_t m = 0; m < num_heads - p; ++m)
      slopes.push_back(std::exp2(-4.0 * static_cast<double>(2 * m + 1) / static_cast<double>(p)));
  } else {
    if (!std::isfinite(bias_max) || bias_max <= 0.0)
      return InvalidArgumentError(fmt::format("alibi: alibi_bias_max {} must be finite and > 0", bias_max));
    const int64_t p = num_heads == 1 ? 1 : int64_t{2} << FloorLog2(num_heads - 1);  // ceil power of 2
    std::vector<double> all;
    for (int64_t k = 1; k <= p; ++k)
      all.push_back(std::exp2(-static_cast<double>(k) * bias_max / static_cast<double>(p)));
    if (p == num_heads) {
      slopes = all;
    } else {
      // MPT keeps the slopes at 0-based indices 1, 3, 5, ... then 0, 2, 4, ..., cut to num_heads.
      for (int64_t i = 1; i < p; i += 2) slopes.push_back(all[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < p; i += 2) slopes.push_back(all[static_cast<size_t>(i)]);
      slopes.resize(static_cast<size_t>(num_heads));
    }
  }
  return slopes;
}

Result<Array> AlibiBias(std::span<const double> slopes, int64_t query_length, int64_t key_length,
                        int64_t query_offset) {
  if (slopes.empty()) return InvalidArgumentError("alibi bias: no slopes (num_heads 0)");
  if (query_length < 0 || key_length < 0)
    return InvalidArgumentError(
        fmt::format("alibi bias: negative size query_length {} key_length {}", query_length, key_length));
  const int64_t h_count = static_cast<int64_t>(slopes.size());
  POSENC_ASSIGN_OR_RETURN(Array bias, Array::Zeros(DType::kF32, {h_count, query_length, key_length}));
  float* out = bias.data<float>();
  for (int64_t h = 0; h < h_count; ++h)
    for (int64_t i = 0; i < query_length; ++i)
      for (int64_t j = 0; j < key_length; ++j)
        *out++ = static_cast<float>(AlibiBiasAt(slopes[static_cast<size_t>(h)], query_offset + i, j));
  return bias;
}

Status T5BucketParams::Validate() const {
  if (bidirectional && (num_buckets < 4 || num_buckets % 2 != 0))
    return InvalidArgumentError(fmt::format(
        "t5 buckets: num_buckets {} must be even and >= 4 when bidirectional (half per direction)", num_buckets));
  if (!bidirectional && num_buckets < 2)
    return InvalidArgumentError(fmt::format("t5 buckets: num_buckets {} must be >= 2", num_buckets));
  const int64_t per_side = bidirectional ? num_buckets / 2 : num_buckets;
  const int64_t max_exact = per_side / 2;
  if (max_distance <= max_exact)
    return InvalidArgumentError(fmt::format("t5 buckets: max_distance {} must exceed max_exact {} (num_buckets {})",
                                            max_distance, max_exact, num_buckets));
  return OkStatus();
}

int64_t T5RelativeBucket(int64_t rel, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t bucket = 0;
  // The distance, >= 0. -INT64_MIN does not exist: it saturates to INT64_MAX, which (as every
  // distance past max_distance) lands in the last bucket, so the answer is still exact.
  const int64_t dist = rel == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max()
                       : rel < 0                                  ? -rel
                                                                  : rel;
  int64_t n = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (rel > 0) bucket += num_buckets;  // keys after the query use the upper half
    n = dist;
  } else {
    n = rel < 0 ? dist : 0;  // only the past is distinguished; the future shares bucket 0
  }
  const int64_t max_exact = num_buckets / 2;
  if (n < max_exact) return bucket + n;
  // The same float32 operations, in the same order, as T5 in PyTorch: n / max_exact (float32),
  // log (float32), divided by log(max_distance / max_exact) (float64 rounded to float32, as a
  // Python scalar meeting a float32 tensor), times the number of log buckets, truncated.
  const float ratio = static_cast<float>(n) / static_cast<float>(max_exact);
  const float denom = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / denom * static_cast<float>(num_buckets - max_exact);
  int64_t large = max_exact + static_cast<int64_t>(scaled);
  if (large > num_buckets - 1) large = num_buckets - 1;
  return bucket + large;
}

Result<std::vector<int64_t>> T5RelativeBuckets(std::span<const int64_t> relative_positions,
                                               const T5BucketParams& params) {
  POSENC_RETURN_IF_ERROR(params.Validate());
  std::vector<int64_t> out;
  out.reserve(relative_positions.size());
  for (int64_t rel : relative_positions) out.push_back(T5RelativeBucket(rel, params));
  return out;
}

Status T5RelativeBias::Validate() const {
  POSENC_RETURN_IF_ERROR(params.Validate());
  return CheckTable(table, params.num_buckets, "t5 bias table [num_buckets, heads]");
}

Status ShawRelativeEmbeddings::Validate() const {
  if (max_relative_position < 0)
    return InvalidArgumentError(fmt::format("shaw: max_relative_position {} must be >= 0", max_relative_position));
  const int64_t rows = 2 * max_relative_position + 1;
  POSENC_RETURN_IF_ERROR(CheckTable(key_table, rows, "shaw key table a^K [2k+1, head_dim]"));
  POSENC_RETURN_IF_ERROR(CheckTable(value_table, rows, "shaw value table a^V [2k+1, head_dim]"));
  if (key_table.dim(1) != value_table.dim(1))
    return InvalidArgumentError(fmt::format("shaw: key table head_dim {} differs from value table head_dim {}",
                                            key_table.dim(1), value_table.dim(1)));
  return OkStatus();
}

Result<ShawRelativeEmbeddings> RandomShawEmbeddings(int64_t max_relative_position, int64_t head_dim, uint64_t seed,
                                                    double stddev) {
  if (max_relative_position < 0 || max_relative_position > (int64_t{1} << 24))
    return InvalidArgumentError(
        fmt::format("shaw: max_relative_position {} must be in [0, 2^24]", max_relative_position));
  if (head_dim < 1) return InvalidArgumentError(fmt::format("shaw: head_dim {} must be >= 1", head_dim));
  ShawRelativeEmbeddings e;
  e.max_relative_position = max_relative_position;
  const int64_t rows = 2 * max_relative_position + 1;
  POSENC_ASSIGN_OR_RETURN(e.key_table, Array::Zeros(DType::kF32, {rows, head_dim}));
  POSENC_ASSIGN_OR_RETURN(e.value_table, Array::Zeros(DType::kF32, {rows, head_dim}));
  FillNormal(seed, stddev, e.key_table.span<float>());
  FillNormal(seed ^ 0x9e3779b97f4a7c15ull, stddev, e.value_table.span<float>());
  return e;
}

Result<T5RelativeBias> RandomT5Bias(const T5BucketParams& params, int64_t num_heads, uint64_t seed, double stddev) {
  POSENC_RETURN_IF_ERROR(params.Validate());
  if (num_heads < 1) return InvalidArgumentError(fmt::format("t5 bias: num_heads {} must be >= 1", num_heads));
  T5RelativeBias b;
  b.params = params;
  POSENC_ASSIGN_OR_RETURN(b.table, Array::Zeros(DType::kF32, {params.num_buckets, num_heads}));
  FillNormal(seed, stddev, b.table.span<float>());
  return b;
}

}  // namespace posenc
