// Sinusoidal absolute positions (Vaswani et al. 2017): a fixed table p_t added to the token embeddings.
//
// Example:
//   Array p = SinusoidalTable(positions, d_model, SinusoidalLayout::kInterleaved).value();
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

// Sinusoidal positions: angle(p, i) = p / 10000^(2i / d_model), i = 0 .. d_model/2 - 1.
//   kInterleaved: table[p, 2i] = sin, table[p, 2i+1] = cos (Vaswani et al., XLM)
//   kConcat:      table[p, i] = sin, table[p, d_model/2 + i] = cos (fairseq, Marian)
enum class SinusoidalLayout { kInterleaved, kConcat };
std::string_view ToString(SinusoidalLayout l);
bool ParseSinusoidalLayout(std::string_view s, SinusoidalLayout* out);
// [positions.size(), d_model] float32, computed in float64 and rounded once. d_model must be even
// and positive, positions >= 0 (kInvalidArgument / kOutOfRange naming the value and index).
Result<Array> SinusoidalTable(std::span<const int64_t> positions, int64_t d_model, SinusoidalLayout layout,
                              double base = 10000.0);

}  // namespace posenc
