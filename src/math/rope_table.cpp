// RopeTable: cos/sin rows built once (kExact rows by float64 angle addition), in parallel.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/parallel.hpp"
#include "posenc/math/rope_table.hpp"

namespace posenc {

namespace {

// kExact rows by one angle addition in float64: position p = a + j with anchor a a multiple of
// kExactBlock and 0 <= j < kExactBlock,
//   cos(p w) = cos(a w) cos(j w) - sin(a w) sin(j w),   sin(p w) = sin(a w) cos(j w) + cos(a w) sin(j w),
// with cos/sin of the anchor angle fl(a w) and the step angle fl(j w) from glibc in float64, exactly as
// ComputeCosSin computes them (at j = 0 the row is ComputeCosSin's bit for bit). Cost per element: four
// multiplies and two adds instead of a float64 cos and sin, so the exact table is cheaper than the
// reference one (two float32 libm calls per element).
//
// Error against ComputeCosSin's float64 value cos(fl(p w)) (before the scaling and the rounding to
// float32): the three angles differ from the real a w, j w, p w by at most 2^-53 of themselves, and
// glibc's cos/sin and the four products add a few float64 ulps, so the float64 values differ by at
// most E = 2^-52 |p w| + 2^-50. After the scaling s and the rounding to float32 a table entry is
// within s E + one float32 ulp of the entry ComputeCosSin gives (usually equal: the ulp only appears
// where ComputeCosSin's value lies within s E of a float32 rounding midpoint);
// tests/unit/rope_simd_test.cpp checks this bound. For every position below 2^31 and |w| <= 1,
// s E < 2^-20 s, inside the kExact bound of rope.hpp (2e-6 max|x|).
constexpr int64_t kExactBlock = 32;

void BuildExactRows(const RopeFrequencies& f, int64_t num_positions, float* cos_data, float* sin_data,
                    ParallelRunner* parallel) {
  const size_t n = f.inv_freq.size();
  const double scale = f.attention_scaling;
  // Step table: cos/sin(j w_i) for j < kExactBlock, shared read-only by all threads.
  std::vector<double> step_c(kExactBlock * n), step_s(kExactBlock * n);
  for (int64_t j = 0; j < kExactBlock; ++j)
    for (size_t i = 0; i < n; ++i) {
      const double angle = static_cast<double>(j) * f.inv_freq[i];
      step_c[static_cast<size_t>(j) * n + i] = std::cos(angle);
      step_s[static_cast<size_t>(j) * n + i] = std::sin(angle);
    }
  const int64_t blocks = (num_positions + kExactBlock - 1) / kExactBlock;
  // Each block's rows depend only on its anchor, so any partition of blocks gives the same bits.
  ParallelFor(parallel, blocks, num_positions * static_cast<int64_t>(n) * 16, [&](int64_t b0, int64_t b1) {
    std::vector<double> anchor_c(n), anchor_s(n);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t a = b * kExactBlock;
      for (size_t i = 0; i < n; ++i) {
        const double angle = static_cast<double>(a) * f.inv_freq[i];
        anchor_c[i] = std::cos(angle);
        anchor_s[i] = std::sin(angle);
      }
      const int64_t end = std::min(a + kExactBlock, num_positions);
      for (int64_t p = a; p < end; ++p) {
        const double* sc = step_c.data() + static_cast<size_t>(p - a) * n;
        const double* ss = step_s.data() + static_cast<size_t>(p - a) * n;
        float* co = cos_data + p * static_cast<int64_t>(n);
        float* so = sin_data + p * static_cast<int64_t>(n);
        for (size_t i = 0; i < n; ++i) {
          const double c = anchor_c[i] * sc[i] - anchor_s[i] * ss[i];
          const double s = anchor_s[i] * sc[i] + anchor_c[i] * ss[i];
          co[i] = static_cast<float>(c * scale);
          so[i] = static_cast<float>(s * scale);
        }
      }
    }
  });
}

}  // namespace

Result<RopeTable> RopeTable::Build(RopeFrequencies freqs, int64_t num_positions, RopePrecision precision,
                                   ParallelRunner* parallel) {
  if (num_positions < 0 || num_positions > kMaxRopePosition)
    return InvalidArgumentError(fmt::format("rope table: num_positions {} must be in [0, 2^31]", num_positions));
  POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(freqs, "rope table"));
  RopeTable t;
  t.freqs_ = std::move(freqs);
  t.num_positions_ = num_positions;
  t.precision_ = precision;
  const size_t n = t.freqs_.inv_freq.size();
  t.cos_.resize(n * static_cast<size_t>(num_positions));
  t.sin_.resize(n * static_cast<size_t>(num_positions));
  const RopeFrequencies& f = t.freqs_;
  float* cos_data = t.cos_.data();
  float* sin_data = t.sin_.data();
  if (precision == RopePrecision::kReference) {
    // Rows are independent, so they are split over the runner; each row is ComputeCosSin's own
    // result (bit-identical for any thread count). glibc's cosf/sinf are not vectorizable bit for bit.
    ParallelFor(parallel, num_positions, num_positions * static_cast<int64_t>(n) * 64, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) ComputeCosSin(f, p, precision, cos_data + p * n, sin_data + p * n);
    });
  } else {
    BuildExactRows(f, num_positions, cos_data, sin_data, parallel);
  }
  return t;
}

Result<RopeTable> RopeTable::BuildPerToken(RopeFrequencies freqs, std::span<const int64_t> pair_component,
                                           int64_t num_components, std::span<const int64_t> positions,
                                           RopePrecision precision, ParallelRunner* parallel) {
  POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(freqs, "multi-axis rope table"));
  const size_t n = freqs.inv_freq.size();
  if (pair_component.size() != n)
    return InvalidArgumentError(
        fmt::format("multi-axis rope table: {} pair components for {} frequency pairs", pair_component.size(), n));
  if (num_components < 1)
    return InvalidArgumentError(
        fmt::format("multi-axis rope table: {} position components, must be >= 1", num_components));
  for (size_t j = 0; j < n; ++j)
    if (pair_component[j] < 0 || pair_component[j] >= num_components)
      return InvalidArgumentError(fmt::format("multi-axis rope table: pair {} takes component {}, outside [0, {})", j,
                                              pair_component[j], num_components));
  if (positions.size() % static_cast<size_t>(num_components) != 0)
    return InvalidArgumentError(fmt::format("multi-axis rope table: {} positions are not {} rows of equal length",
                                            positions.size(), num_components));
  const int64_t tokens = static_cast<int64_t>(positions.size()) / num_components;
  if (tokens > kMaxRopePosition)
    return InvalidArgumentError(fmt::format("multi-axis rope table: {} tokens, beyond 2^31", tokens));
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] < 0 || positions[i] >= kMaxRopePosition)
      return OutOfRangeError(fmt::format("multi-axis rope table: position [{}, {}] = {} is outside [0, 2^31)",
                                         static_cast<int64_t>(i) / tokens, static_cast<int64_t>(i) % tokens,
                                         positions[i]));
  // Per component, the frequencies of its pairs and where they go in a row: each row is then one
  // ComputeCosSin per component, scattered, so every entry is ComputeCosSin's own value.
  std::vector<RopeFrequencies> sub(static_cast<size_t>(num_components));
  std::vector<std::vector<size_t>> where(static_cast<size_t>(num_components));
  for (size_t j = 0; j < n; ++j) {
    const size_t c = static_cast<size_t>(pair_component[j]);
    sub[c].inv_freq.push_back(freqs.inv_freq[j]);
    sub[c].attention_scaling = freqs.attention_scaling;
    where[c].push_back(j);
  }
  RopeTable t;
  t.freqs_ = std::move(freqs);
  t.num_positions_ = tokens;
  t.precision_ = precision;
  t.cos_.resize(n * static_cast<size_t>(tokens));
  t.sin_.resize(n * static_cast<size_t>(tokens));
  float* cos_data = t.cos_.data();
  float* sin_data = t.sin_.data();
  ParallelFor(parallel, tokens, tokens * static_cast<int64_t>(n) * 64, [&](int64_t b, int64_t e) {
    std::vector<float> c(n), s(n);
    for (int64_t row = b; row < e; ++row) {
      float* co = cos_data + row * static_cast<int64_t>(n);
      float* so = sin_data + row * static_cast<int64_t>(n);
      for (size_t comp = 0; comp < sub.size(); ++comp) {
        if (where[comp].empty()) continue;
        const int64_t pos = positions[comp * static_cast<size_t>(tokens) + static_cast<size_t>(row)];
        ComputeCosSin(sub[comp], pos, precision, c.data(), s.data());
        for (size_t k = 0; k < where[comp].size(); ++k) {
          co[where[comp][k]] = c[k];
          so[where[comp][k]] = s[k];
        }
      }
    }
  });
  return t;
}

void RopeTable::CosSin(int64_t pos, float* cos_out, float* sin_out) const {
  if (pos >= 0 && pos < num_positions_) {
    const size_t n = freqs_.inv_freq.size();
    for (size_t i = 0; i < n; ++i) {
      cos_out[i] = cos_row(pos)[i];
      sin_out[i] = sin_row(pos)[i];
    }
    return;
  }
  ComputeCosSin(freqs_, pos, precision_, cos_out, sin_out);
}

}  // namespace posenc
