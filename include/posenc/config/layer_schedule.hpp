// Which decoder layers apply RoPE: the per-layer RoPE / NoPE schedule a model family's code derives
// from its config.
//
//   Llama 4 (llama4, llama4_text): no_rope_layers when given and non-empty (its 1 means the layer
//     *uses* RoPE, despite the name), else layer i uses RoPE iff (i + 1) % no_rope_layer_interval != 0
//     (Llama4TextConfig's default interval 4). NoPE layers are where the query temperature applies.
//   Cohere2: RoPE on sliding_attention layers only, full_attention layers are NoPE; the types come
//     from layer_types, else every sliding_window_pattern-th layer (default 4) is full attention.
//   EXAONE 4: with sliding_window set, RoPE on sliding_attention layers only (layer_types, or its
//     string sliding_window_pattern "LLLG"); without one, every layer.
//   OLMo 3: every layer applies RoPE, but rope_scaling only on full_attention layers (the scheme of a
//     layer type: ParseHfConfig's layer_type option).
//   Every other RoPE model: every layer applies RoPE. The rule is the family's (ModelFamily::layer_rule).
//
// Example:
//   auto scheme = LoadHfConfig("config.json").value();
//   auto schedule = LayerRopeSchedule(scheme).value();          // schedule.rope[l]: layer l rotates
//   if (QueryTemperatureApplies(scheme, schedule, l)) ...       // Llama 4 NoPE layer with tuning on
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"

namespace posenc {

struct LayerSchedule {
  std::vector<bool> rope;       // per decoder layer: true = applies RoPE, false = NoPE (or no attention)
  std::vector<bool> attention;  // per decoder layer: has self-attention (false: mamba, linear attention, ...)
  std::vector<int64_t> rope_key;  // per layer: index into the scheme's rope_keys of the set its attention
                                  // uses; -1 = none (no attention, or a model with one set)
  std::vector<int64_t> head_dim;  // per layer: its q / k head size (0: no attention, or not known)
  std::string rule;               // which rule produced it, e.g. "llama4 no_rope_layers", for messages
  int64_t num_layers() const { return static_cast<int64_t>(rope.size()); }
  int64_t num_nope_layers() const;
};

// The schedule of `scheme` (a RoPE scheme as ParseHfConfig fills it, or a "none" scheme of a model
// whose positions are off: every layer NoPE, `attention` from its layer types). Layer types without
// attention (LayerTypeHasAttention) never rotate. Errors (kInvalidArgument, one line naming the config
// source, the key and the value): another scheme that is not RoPE; no
// num_hidden_layers; no_rope_layers or layer_types of a length other than num_hidden_layers; a
// Cohere2 layer type other than sliding_attention / full_attention; a non-positive interval or
// pattern.
Result<LayerSchedule> LayerRopeSchedule(const PositionScheme& scheme);

// True when layer `layer` of `schedule` is NoPE and the scheme's attention temperature is on
// (Llama 4's attn_temperature_tuning); false for a layer outside the schedule.
bool QueryTemperatureApplies(const PositionScheme& scheme, const LayerSchedule& schedule, int64_t layer);

}  // namespace posenc
