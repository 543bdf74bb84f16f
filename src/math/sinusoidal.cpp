// Sinusoidal position tables in float64, rounded once to float32.
#include <cmath>

#include <fmt/format.h>

#include "posenc/math/sinusoidal.hpp"
#include "core/enum_names.hpp"

namespace posenc {

constexpr detail::EnumName<SinusoidalLayout> kLayoutNames[] = {{SinusoidalLayout::kInterleaved, "interleaved"},
                                                               {SinusoidalLayout::kConcat, "concat"}};

std::string_view ToString(SinusoidalLayout l) { return detail::NameOf(l, kLayoutNames); }
bool ParseSinusoidalLayout(std::string_view s, SinusoidalLayout* out) { return detail::ValueOf(s, kLayoutNames, out); }

Result<Array> SinusoidalTable(std::span<const int64_t> positions, int64_t d_model, SinusoidalLayout layout,
                              double base) {
  if (d_model <= 0 || d_model % 2 != 0)
    return InvalidArgumentError(fmt::format("sinusoidal positions: d_model {} must be even and positive", d_model));
  if (!(base > 0) || !std::isfinite(base))
    return InvalidArgumentError(fmt::format("sinusoidal positions: base {} must be finite and positive", base));
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] < 0)
      return OutOfRangeError(fmt::format("sinusoidal positions: position {} at index {} is negative", positions[i], i));
  POSENC_ASSIGN_OR_RETURN(Array out, Array::Zeros(DType::kF32, {static_cast<int64_t>(positions.size()), d_model}));
  float* o = out.data<float>();
  const int64_t half = d_model / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    float* row = o + static_cast<int64_t>(t) * d_model;
    for (int64_t i = 0; i < half; ++i) {
      // angle = p / base^(2i/d): the division form, as Vaswani et al. write it.
      const double angle =
          static_cast<double>(positions[t]) / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(d_model));
      const float s = static_cast<float>(std::sin(angle));
      const float c = static_cast<float>(std::cos(angle));
      if (layout == SinusoidalLayout::kInterleaved) {
        row[2 * i] = s;
        row[2 * i + 1] = c;
      } else {
        row[i] = s;
        row[half + i] = c;
      }
    }
  }
  return out;
}

}  // namespace posenc
