// Internal to the Hugging Face reader (hf_config_internal.hpp): the per-layer keys of a config.json,
// the inputs of the layer schedule (layer counts, layer types as listed or as the family derives
// them, NoPE and sliding-window keys, query/key norm) and Llama 4's query temperature; the layer
// asked for, and the scheme of a layer that applies no RoPE.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"

namespace posenc::hf_json {

// Layer count and types, layer index lists, no_rope_layers, the sliding-window keys, the family's
// derived layer types and qk norm, and the query temperature.
Status ParseLayerKeys(const nlohmann::json& j, const std::string& source, PositionScheme* s);

// The layer asked for (options->layer): its type from the derived layer types, checked against
// options->layer_type, becomes the layer type read.
Status SelectLayer(const std::string& source, HfConfigOptions* options, PositionScheme* s);

// After the parse: a layer asked for that applies no RoPE (a NoPE layer, or one without attention)
// makes the scheme "none" for that layer, said in a note.
void ApplyLayerSchedule(PositionScheme* s);

}  // namespace posenc::hf_json
