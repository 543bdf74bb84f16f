// Position-dependent query temperature. The queries of token t are multiplied by
//     scale(p_t) = 1 + attn_scale * ln(1 + floor((p_t + offset) / floor_scale))
// in two forms real models use:
//   - Llama 4 (attn_temperature_tuning, floor_scale, attn_scale): offset 1, on NoPE layers only;
//     p_t is the token's index in the KV cache (Hugging Face's cache_position).
//   - Ministral 3 / Mistral 4 (rope_parameters.llama_4_scaling_beta): offset 0, floor_scale =
//     original_max_position_embeddings, attn_scale = beta, on every layer (modeling_ministral3.py:
//     get_llama_4_attn_scale over position_ids).
// The scale is 1 while p + offset < floor_scale, so short contexts are untouched; keys are never
// scaled. Which layers take it is the layer schedule's business (posenc/config/layer_schedule.hpp);
// this header only computes the scales and multiplies them in.
//
// Example (Llama-4-Scout: floor_scale 8192, attn_scale 0.1):
//   AttnTemperature t{/*tuning=*/true, 8192.0, 0.1};
//   auto scales = AttnTemperatureScales(t, positions).value();   // float32, as Hugging Face
//   Status s = ApplyQueryTemperature(q_view, scales);             // q[t, h, :] *= scales[t]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/core/array.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

struct AttnTemperature {
  bool tuning = false;        // whether queries are scaled at all (Llama 4's attn_temperature_tuning)
  double floor_scale = 8192;  // positions per step of the logarithm
  double attn_scale = 0.1;    // the logarithm's weight
  int64_t offset = 1;         // added to the position before the division: 1 (Llama 4) or 0 (Ministral 3)
  bool every_layer = false;   // false: NoPE layers only (Llama 4); true: every layer (Ministral 3)
};

// floor_scale finite and > 0, attn_scale finite; the error names the key and value.
Status ValidateAttnTemperature(const AttnTemperature& t);

// One scale per position, in float32 the way Hugging Face's Llama4TextAttention computes it:
// float32(p) + offset, / float32(floor_scale), floor, + 1, log, * float32(attn_scale), + 1, every step
// rounded to float32 (offset 0: float32(p) / float32(floor_scale), as torch divides an int64 tensor). Positions in [0,
// 2^31) (the error names the index and value). `tuning` is not consulted: the formula is returned whatever it says.
Result<std::vector<float>> AttnTemperatureScales(const AttnTemperature& t, std::span<const int64_t> positions);
// The same formula in float64 (floor of (p + offset) / floor_scale, then log): the value the float32
// scales approximate, within a few float32 ulps.
Result<std::vector<double>> AttnTemperatureScalesExact(const AttnTemperature& t, std::span<const int64_t> positions);

// queries[t, h, :] *= scales[t] for every head, in place. float32 scales: the product in float32,
// rounded to the storage type (Hugging Face: query * attn_scales in float32, then .to(dtype)).
// float64 scales: the product in float64, rounded to float32 and then to the storage type.
// Views: f32 / f16 / bf16, strided (HeadsView::Validate); scales.size() must equal the token count
// and every scale be finite (the error names the index). Nothing is written on error.
Status ApplyQueryTemperature(HeadsView queries, std::span<const float> scales);
Status ApplyQueryTemperature(HeadsView queries, std::span<const double> scales);

}  // namespace posenc
