// Multi-axis RoPE: section rules (Hugging Face, ggml) -> pair components, frequency indices, frequencies.
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_config.hpp"
#include "core/enum_names.hpp"

namespace posenc {

constexpr detail::EnumName<SectionLayout> kSectionLayoutNames[] = {{SectionLayout::kChunked, "chunked"},
                                                                   {SectionLayout::kInterleaved, "interleaved"},
                                                                   {SectionLayout::kChunkedRestart, "chunked_restart"},
                                                                   {SectionLayout::kChunkedStrided, "chunked_strided"},
                                                                   {SectionLayout::kHwAlternating, "hw_alternating"}};
constexpr detail::EnumName<SectionRules> kSectionRulesNames[] = {{SectionRules::kHf, "hf"},
                                                                 {SectionRules::kGgml, "ggml"}};

std::string_view ToString(SectionLayout l) { return detail::NameOf(l, kSectionLayoutNames, "?"); }
bool ParseSectionLayout(std::string_view s, SectionLayout* out) { return detail::ValueOf(s, kSectionLayoutNames, out); }

std::string_view ToString(SectionRules r) { return detail::NameOf(r, kSectionRulesNames); }

namespace {

std::string SectionsString(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The block (section) a sector falls in for the chunked layouts: the first c with sector < s0+..+sc;
// past the last block, the last component.
int64_t ChunkOf(const std::vector<int64_t>& sections, int64_t sector, int64_t* start) {
  int64_t begin = 0;
  for (size_t c = 0; c < sections.size(); ++c) {
    if (sector < begin + sections[c]) {
      *start = begin;
      return static_cast<int64_t>(c);
    }
    begin += sections[c];
  }
  // Only reachable when sector >= sum, which the callers rule out (sector = j % sum, or hf sum == pairs).
  *start = begin - sections.back();
  return static_cast<int64_t>(sections.size()) - 1;
}

// Component and frequency index of pair j (after validation).
void PairOf(const MultiAxisRope& m, int64_t j, int64_t* component, int64_t* freq_index) {
  const int64_t sum = std::accumulate(m.sections.begin(), m.sections.end(), int64_t{0});
  const bool ggml = m.rules == SectionRules::kGgml;
  const int64_t sector = ggml ? j % sum : j;
  if (m.layout == SectionLayout::kHwAlternating) {
    // Validated: Hugging Face rules, 3 sections [s_h, s_w, s_t] summing to the pair count.
    const int64_t hw = m.sections[0] + m.sections[1];
    *component = j < hw ? (j % 2 == 0 ? 1 : 2) : 0;
    *freq_index = j;
    return;
  }
  if (m.layout == SectionLayout::kInterleaved) {
    const auto& s = m.sections;
    if (ggml) {
      if (sector % 3 == 1 && sector < 3 * s[1])
        *component = 1;
      else if (sector % 3 == 2 && sector < 3 * s[2])
        *component = 2;
      else if (sector % 3 == 0 && sector < 3 * s[0])
        *component = 0;
      else
        *component = 3;
    } else {
      if (j % 3 == 1 && j < 3 * s[1])
        *component = 1;
      else if (j % 3 == 2 && j < 3 * s[2])
        *component = 2;
      else
        *component = 0;
    }
    *freq_index = j;
    return;
  }
  int64_t start = 0;
  *component = ChunkOf(m.sections, sector, &start);
  switch (m.layout) {
    case SectionLayout::kChunkedRestart: *freq_index = sector - start; break;
    case SectionLayout::kChunkedStrided: *freq_index = (sector - start) * m.num_components + *component; break;
    default: *freq_index = j; break;
  }
}

}  // namespace

Status ValidateMultiAxisRope(const MultiAxisRope& m, int64_t num_pairs, std::string_view what) {
  if (num_pairs <= 0 || num_pairs > kMaxRopeHeadDim / 2)
    return InvalidArgumentError(
        fmt::format("{}: multi-axis rope over {} pairs (must be in [1, {}])", what, num_pairs, kMaxRopeHeadDim / 2));
  if (m.num_components < 1 || m.num_components > kMaxRopeComponents)
    return InvalidArgumentError(
        fmt::format("{}: {} position components (must be in [1, {}])", what, m.num_components, kMaxRopeComponents));
  const std::string secs = SectionsString(m.sections);
  for (size_t i = 0; i < m.sections.size(); ++i) {
    if (m.sections[i] < 0)
      return InvalidArgumentError(
          fmt::format("{}: sections {}: section {} is {}, must be >= 0", what, secs, i, m.sections[i]));
    if (m.sections[i] > kMaxRopeHeadDim)
      return InvalidArgumentError(fmt::format("{}: sections {}: section {} is {}, beyond {} pairs", what, secs, i,
                                              m.sections[i], kMaxRopeHeadDim));
  }
  const int64_t sum = std::accumulate(m.sections.begin(), m.sections.end(), int64_t{0});
  if (m.rules == SectionRules::kGgml) {
    if (m.sections.size() != 4)
      return InvalidArgumentError(fmt::format("{}: ggml sections {} must have 4 entries", what, secs));
    if (m.num_components != 4)
      return InvalidArgumentError(
          fmt::format("{}: ggml multi-axis rope takes 4 position rows, not {}", what, m.num_components));
    if (sum <= 0) return InvalidArgumentError(fmt::format("{}: ggml sections {} sum to 0", what, secs));
    if (m.layout == SectionLayout::kChunkedStrided || m.layout == SectionLayout::kHwAlternating)
      return InvalidArgumentError(fmt::format("{}: section layout {} is not a ggml mode", what, ToString(m.layout)));
    return OkStatus();
  }
  // Hugging Face.
  if ((m.layout == SectionLayout::kInterleaved || m.layout == SectionLayout::kHwAlternating) && m.num_components != 3)
    return InvalidArgumentError(fmt::format("{}: {} sections take 3 components (t, h, w), not {}", what,
                                            ToString(m.layout), m.num_components));
  if (m.layout == SectionLayout::kHwAlternating && m.sections.size() == 3 && m.sections[0] != m.sections[1])
    return InvalidArgumentError(fmt::format(
        "{}: hw_alternating sections {} must give h and w the same count (h and w pairs alternate)", what, secs));
  if (static_cast<int64_t>(m.sections.size()) != m.num_components)
    return InvalidArgumentError(
        fmt::format("{}: sections {} name {} components, positions have {} (component index {} "
                    "out of range)",
                    what, secs, m.sections.size(), m.num_components, static_cast<int64_t>(m.sections.size()) - 1));
  if (sum != num_pairs)
    return InvalidArgumentError(
        fmt::format("{}: sections {} sum to {}, the rotary pair count is {}", what, secs, sum, num_pairs));
  return OkStatus();
}

Result<std::vector<int64_t>> PairComponents(const MultiAxisRope& m, int64_t num_pairs, std::string_view what) {
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRope(m, num_pairs, what));
  std::vector<int64_t> out(static_cast<size_t>(num_pairs));
  for (int64_t j = 0; j < num_pairs; ++j) {
    int64_t k = 0;
    PairOf(m, j, &out[static_cast<size_t>(j)], &k);
  }
  return out;
}

Result<std::vector<int64_t>> PairFrequencyIndices(const MultiAxisRope& m, int64_t num_pairs, std::string_view what) {
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRope(m, num_pairs, what));
  std::vector<int64_t> out(static_cast<size_t>(num_pairs));
  for (int64_t j = 0; j < num_pairs; ++j) {
    int64_t c = 0;
    PairOf(m, j, &c, &out[static_cast<size_t>(j)]);
  }
  return out;
}

Result<MultiAxisPlan> ComputeMultiAxisRope(const RopeConfig& config, int64_t seq_len) {
  const std::string what = fmt::format("rope config {}", config.source.empty() ? "(unnamed)" : config.source);
  if (!config.multi_axis.has_value()) return InvalidArgumentError(fmt::format("{}: not a multi-axis rope", what));
  const MultiAxisRope& m = *config.multi_axis;
  POSENC_RETURN_IF_ERROR(config.layout.Validate());
  const int64_t n = config.layout.num_pairs();
  MultiAxisPlan plan;
  plan.num_components = m.num_components;
  POSENC_ASSIGN_OR_RETURN(plan.pair_component, PairComponents(m, n, what));
  if (m.layout == SectionLayout::kChunked || m.layout == SectionLayout::kInterleaved ||
      m.layout == SectionLayout::kHwAlternating) {
    POSENC_ASSIGN_OR_RETURN(plan.freqs, ComputeRopeFrequencies(config, seq_len));
    return plan;
  }
  // Restarted / strided frequency indices: the base's own powers, unscaled or with ggml's plain factors.
  const RopeScaling& sc = config.scaling;
  double freq_scale = 1.0;
  plan.freqs.attention_scaling = 1.0;
  if (sc.type == RopeScalingType::kGgml) {
    if (sc.ext_factor != 0.0 || !sc.freq_factors.empty())
      return UnimplementedError(
          fmt::format("{}: section layout {} with ggml ext_factor {} / {} freq_factors is not "
                      "supported (only freq_scale and attn_factor)",
                      what, ToString(m.layout), sc.ext_factor, sc.freq_factors.size()));
    freq_scale = sc.freq_scale;
    plan.freqs.attention_scaling = sc.attn_factor;
  } else if (sc.type != RopeScalingType::kNone) {
    return UnimplementedError(fmt::format("{}: section layout {} with rope scaling {} is not supported", what,
                                          ToString(m.layout), ToString(sc.type)));
  }
  if (!(config.base > 0) || !std::isfinite(config.base))
    return InvalidArgumentError(fmt::format("{}: base (rope_theta) {} must be finite and positive", what, config.base));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> index, PairFrequencyIndices(m, n, what));
  // restart: base^(-2k / (R/2)) = base^(-2k / n); strided: base^(-2i / R) = base^(-i / n).
  const double step = m.layout == SectionLayout::kChunkedRestart ? 2.0 : 1.0;
  plan.freqs.inv_freq.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    plan.freqs.inv_freq[static_cast<size_t>(j)] =
        std::pow(config.base, -step * static_cast<double>(index[static_cast<size_t>(j)]) / static_cast<double>(n)) *
        freq_scale;
  POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(plan.freqs, what));
  return plan;
}

Status ValidateMultiAxisPositions(std::span<const int64_t> shape, std::span<const int64_t> values,
                                  int64_t num_components, std::string_view what) {
  std::string sh = "[";
  for (size_t i = 0; i < shape.size(); ++i) sh += (i ? ", " : "") + std::to_string(shape[i]);
  sh += "]";
  if (shape.size() != 2 || shape[0] != num_components || shape[1] < 0)
    return InvalidArgumentError(fmt::format(
        "{}: positions have shape {}, expected [{}, tokens] (one row per component)", what, sh, num_components));
  if (static_cast<int64_t>(values.size()) != shape[0] * shape[1])
    return InvalidArgumentError(fmt::format("{}: positions of shape {} hold {} values", what, sh, values.size()));
  const int64_t t_count = shape[1];
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t p = values[i];
    if (p < 0 || p >= kMaxRopePosition)
      return OutOfRangeError(fmt::format("{}: position [{}, {}] = {} is outside [0, 2^31)", what,
                                         static_cast<int64_t>(i) / t_count, static_cast<int64_t>(i) % t_count, p));
  }
  return OkStatus();
}

}  // namespace posenc
