// Internal to RopeConfig (rope_config.cpp): what each scaling row computes, its frequencies and its
// regimes (the lengths at which they change), and the error shape every key rule shares. The row
// table itself (kScalings, RopeScalings()) stays in rope_config.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc::rope_scaling {

// "rope config" and the config's source, when it has one: how every error about a config begins.
std::string ConfigWhat(const RopeConfig& c);
// "<ConfigWhat>: <scaling> '<key>' = <value> <rule>".
Status FieldError(const RopeConfig& c, std::string_view key, const std::string& value, std::string_view rule);
bool Positive(double x);
// base^(-2i/dim) for i in [0, pairs).
std::vector<double> Powers(double base, int64_t pairs, int64_t dim);

// Each row's frequency function (RopeScalingSpec::compute), at sequence length seq_len.
Result<RopeFrequencies> Default(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> Linear(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> Ntk(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> DynamicNtk(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> Yarn(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> Llama3(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> LongRope(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> Proportional(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> Ggml(const RopeConfig& c, int64_t seq_len);
Result<RopeFrequencies> QwenDynamicNtk(const RopeConfig& c, int64_t seq_len);

// One past the longer of the original and max lengths (at least 2), saturating at 2^63-1.
int64_t LongLength(const RopeConfig& c);
// Each row's regime function (RopeScalingSpec::regime_of): the length that stands for seq_len's regime.
int64_t OneRegime(const RopeConfig& c, int64_t seq_len);
int64_t SwitchAtOriginal(const RopeConfig& c, int64_t seq_len);
int64_t GgmlRegime(const RopeConfig& c, int64_t seq_len);
int64_t DynamicRegime(const RopeConfig& c, int64_t seq_len);
int64_t QwenNtkRegime(const RopeConfig& c, int64_t seq_len);

}  // namespace posenc::rope_scaling
