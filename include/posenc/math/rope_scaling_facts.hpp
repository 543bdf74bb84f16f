// What a config's scaling is, as data, read from its row of the scaling table (private,
// src/math/rope_scaling_table.hpp): the parameters it uses (in the config's own words, the ones
// `posenc inspect` lists under "scaling"), whether its frequencies depend on the sequence length, and
// each scaling's key names. Bindings and tools ask these instead of keeping their own lists, so a new
// row (or a new key of a row) reaches them with no second edit.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/math/rope_config.hpp"

namespace posenc {

// How a scaling key's value is held.
enum class ScalingKeyKind { kNumber, kInteger, kBoolean, kNumberList, kOptionalNumber };

// One parameter of the scaling as the config gives it: `kind` says which value field holds it.
struct ScalingParam {
  std::string_view name;
  ScalingKeyKind kind = ScalingKeyKind::kNumber;
  double number = 0.0;         // kNumber, kOptionalNumber
  int64_t integer = 0;         // kInteger
  bool boolean = false;        // kBoolean
  std::vector<double> list;    // kNumberList
};

// The row's keys with the config's values, in the row's order; an optional number that is absent and a
// pair list that may be empty and is empty are left out (as inspect prints them).
std::vector<ScalingParam> ScalingParamsOf(const RopeConfig& config);

// Whether ComputeRopeFrequencies(config, seq_len) gives different frequencies for different seq_len
// (dynamic NTK past max_position_embeddings, LongRoPE and ggml's two lists past the original length,
// Qwen's NTK alpha past seq_length): the row's regime_of, asked at every length where a row switches.
bool FrequenciesDependOnSeqLen(const RopeConfig& config);

// One scaling's name (ToString of its type) and the names of the keys it reads, in the row's order.
struct ScalingKeyNames {
  std::string_view scaling;
  std::vector<std::string_view> keys;
};
// Every scaling's, in RopeScalingType order.
std::vector<ScalingKeyNames> AllScalingKeyNames();

}  // namespace posenc
