// Llama 4's query temperature: the per-token scales (float32 as Hugging Face, float64) and the
// multiply over [T, H, D] query heads. One plain loop per storage type: the work is one multiply per
// element, so there is no separate fast path.
#include "posenc/kernels/attn_temperature.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace posenc {

namespace {

constexpr int64_t kMaxPosition = int64_t{1} << 31;

Status CheckPositions(std::span<const int64_t> positions) {
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] < 0 || positions[i] >= kMaxPosition)
      return InvalidArgumentError(
          fmt::format("attention temperature: positions[{}] = {} is outside [0, 2^31)", i, positions[i]));
  return OkStatus();
}

template <typename S>
Status CheckScales(const HeadsView& q, std::span<const S> scales) {
  POSENC_RETURN_IF_ERROR(q.Validate("queries"));
  if (static_cast<int64_t>(scales.size()) != q.tokens)
    return InvalidArgumentError(
        fmt::format("attention temperature: {} scales for {} query tokens", scales.size(), q.tokens));
  for (size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i]))
      return InvalidArgumentError(fmt::format("attention temperature: scales[{}] = {} is not finite", i, scales[i]));
  return OkStatus();
}

// Product in S (float or double), rounded to float, then to the storage type T.
template <typename T, typename S>
void Scale(const HeadsView& q, std::span<const S> scales) {
  for (int64_t t = 0; t < q.tokens; ++t) {
    const S s = scales[static_cast<size_t>(t)];
    for (int64_t h = 0; h < q.heads; ++h) {
      T* row = q.at<T>(t, h);
      for (int64_t d = 0; d < q.head_dim; ++d)
        StoreFromF32(static_cast<float>(static_cast<S>(LoadAsF32(row + d)) * s), row + d);
    }
  }
}

template <typename S>
Status Apply(HeadsView q, std::span<const S> scales) {
  POSENC_RETURN_IF_ERROR(CheckScales(q, scales));
  if (q.tokens == 0 || q.heads == 0 || q.head_dim == 0) return OkStatus();
  switch (q.dtype) {
    case DType::kF32: Scale<float, S>(q, scales); break;
    case DType::kF16: Scale<f16_t, S>(q, scales); break;
    case DType::kBF16: Scale<bf16_t, S>(q, scales); break;
    default: return InvalidArgumentError("attention temperature: unsupported dtype");
  }
  return OkStatus();
}

}  // namespace

Status ValidateAttnTemperature(const AttnTemperature& t) {
  if (!std::isfinite(t.floor_scale) || !(t.floor_scale > 0))
    return InvalidArgumentError(
        fmt::format("attention temperature: key 'floor_scale' = {} must be finite and > 0", t.floor_scale));
  if (!std::isfinite(t.attn_scale))
    return InvalidArgumentError(
        fmt::format("attention temperature: key 'attn_scale' = {} must be finite", t.attn_scale));
  // The scales are computed in float32 (as Hugging Face and llama.cpp do): floor_scale must be a
  // float32 value for which (2^31 - 1) / floor_scale stays finite there, and attn_scale must stay
  // finite times the largest ln(steps + 1) float32 gives (under 89; 128 bounds it).
  constexpr double kF32Max = std::numeric_limits<float>::max();
  if (!(t.floor_scale <= kF32Max && t.floor_scale >= static_cast<double>(kMaxPosition) / kF32Max))
    return InvalidArgumentError(fmt::format(
        "attention temperature: key 'floor_scale' = {} is outside float32's range for it ({} to {}: the scale "
        "divides positions up to 2^31 in float32)",
        t.floor_scale, static_cast<double>(kMaxPosition) / kF32Max, kF32Max));
  if (!(std::abs(t.attn_scale) <= kF32Max / 128))
    return InvalidArgumentError(fmt::format(
        "attention temperature: key 'attn_scale' = {} is outside float32's range for it (magnitude at most {}: "
        "it multiplies ln(steps + 1) in float32)",
        t.attn_scale, kF32Max / 128));
  if (t.offset != 0 && t.offset != 1)
    return InvalidArgumentError(fmt::format("attention temperature: offset {} must be 0 or 1", t.offset));
  return OkStatus();
}

Result<std::vector<float>> AttnTemperatureScales(const AttnTemperature& t, std::span<const int64_t> positions) {
  POSENC_RETURN_IF_ERROR(ValidateAttnTemperature(t));
  POSENC_RETURN_IF_ERROR(CheckPositions(positions));
  const float floor_scale = static_cast<float>(t.floor_scale);
  const float attn_scale = static_cast<float>(t.attn_scale);
  std::vector<float> out(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    const float p = static_cast<float>(positions[i]);
    const float steps = std::floor((t.offset != 0 ? p + 1.0f : p) / floor_scale);
    out[i] = std::log(steps + 1.0f) * attn_scale + 1.0f;
  }
  return out;
}

Result<std::vector<double>> AttnTemperatureScalesExact(const AttnTemperature& t, std::span<const int64_t> positions) {
  POSENC_RETURN_IF_ERROR(ValidateAttnTemperature(t));
  POSENC_RETURN_IF_ERROR(CheckPositions(positions));
  std::vector<double> out(positions.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    // p + offset < 2^31 + 1 is exact in float64; so is the quotient's floor for an integral floor_scale.
    const double steps = std::floor(static_cast<double>(positions[i] + t.offset) / t.floor_scale);
    out[i] = 1.0 + t.attn_scale * std::log1p(steps);
  }
  return out;
}

Status ApplyQueryTemperature(HeadsView queries, std::span<const float> scales) { return Apply(queries, scales); }
Status ApplyQueryTemperature(HeadsView queries, std::span<const double> scales) { return Apply(queries, scales); }

}  // namespace posenc
