// The variant list of scalings, private to the library: one row per RopeScalingType.
//
// Everything posenc knows per scaling is its row: the names configs give it, its keys (which field of
// the config holds each, its default, how a reader gets it and its range rule), the ordering and
// cross-key rules, whether its frequencies depend on the sequence length, and its frequency function.
// The Hugging Face and ggml readers read the keys through it, ValidateRopeConfig checks the rules,
// ComputeRopeFrequencies calls the function; what a tool or binding needs from it is public in
// posenc/math/rope_scaling_facts.hpp (ScalingParamsOf, ScalingKeyNames). Adding a scaling is one row
// (and its RopeScalingType).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_scaling_facts.hpp"

namespace posenc {

enum class ScalingKeyRule {
  kAny,              // no range rule
  kPositive,         // finite and > 0 (an optional number: when given)
  kNonNegative,      // finite and >= 0
  kGivenPositive,    // an integer that must be given and > 0
  kUnitInterval,     // in (0, 1]
  kPairList,         // rotary_dim / 2 values, each finite and > 0
  kPairListIfGiven,  // empty, or as kPairList
};

enum class ScalingKeyRead {
  kOptional,   // read from the rope parameters when present, else the RopeScaling default stays
  kRequired,   // a config must give it
  kInferred,   // Hugging Face infers it when absent (factor = max_position_embeddings / original)
  kNamedStep,  // a reader's own step reads it (original_max_position_embeddings: top level first)
  kNotRead,    // set from elsewhere in the config (the layout, max_position_embeddings, GGUF arrays)
};

// Which field of a config holds a key's value: a member of RopeScaling, or (max_position_embeddings)
// of RopeConfig itself. The member's type is the key's kind (ScalingKeyKindOf).
using ScalingFieldRef =
    std::variant<double RopeScaling::*, int64_t RopeScaling::*, bool RopeScaling::*, std::vector<double> RopeScaling::*,
                 std::optional<double> RopeScaling::*, int64_t RopeConfig::*>;

struct RopeScalingKey {
  std::string_view name;  // as the config spells it (ggml_rope_ext's parameter names for the ggml row)
  ScalingKeyRule rule;
  ScalingKeyRead read;
  double default_value;       // RopeScaling's default (ggml: its neutral value), for notes and docs
  bool note_default = false;  // a reader notes "no KEY: DEFAULT assumed" when it is absent
  ScalingFieldRef field;

  // kNumber (double), kInteger (int64_t), kBoolean (bool), kNumberList (std::vector<double>) or
  // kOptionalNumber (std::optional<double>): the type of the field.
  ScalingKeyKind kind() const;

  // The key's value in `c` as a T, the type of its field; nullptr when T is not that type.
  template <class T>
  const T* In(const RopeConfig& c) const {
    return FieldIn<T>(field, c);
  }
  template <class T>
  T* In(RopeConfig& c) const {
    return FieldIn<T>(field, c);
  }

  // A number, an integer, or an optional number that is given, as a double; nullopt for the rest.
  std::optional<double> NumberIn(const RopeConfig& c) const;
  // Sets a number, an optional number, or an integer (v truncated toward 0) to `v`; false (nothing
  // set) for a boolean or a list.
  bool SetNumber(RopeConfig& c, double v) const;

 private:
  // C is RopeConfig or const RopeConfig; the pointer is as const as C.
  template <class T, class C>
  static auto FieldIn(const ScalingFieldRef& field, C& c) -> std::conditional_t<std::is_const_v<C>, const T*, T*> {
    if (const auto* m = std::get_if<T RopeScaling::*>(&field)) return &(c.scaling.**m);
    if constexpr (std::is_same_v<T, int64_t>)
      if (const auto* m = std::get_if<int64_t RopeConfig::*>(&field)) return &(c.**m);
    return nullptr;
  }
};

// `greater` must be at least `lesser` (both number keys of the row).
struct ScalingOrderRule {
  std::string_view greater;
  std::string_view lesser;
};

// A name a config gives the scaling (Hugging Face rope_type / type), and a note when it is an old one.
struct ScalingSpelling {
  std::string_view name;
  std::string_view note;  // "" for the current name
};

struct RopeScalingSpec {
  RopeScalingType type;
  std::string_view name;                       // ToString(type)
  std::span<const ScalingSpelling> spellings;  // Hugging Face rope_type values; empty: not a HF type
  std::span<const RopeScalingKey> keys;
  std::span<const ScalingOrderRule> orders;
  Status (*cross_rules)(const RopeConfig&);  // rules across keys and the layout; nullptr: none
  // The sequence length whose frequencies equal those at `seq_len`: 1 for the short (or only)
  // regime, another fixed length for a long regime, seq_len itself where every length differs
  // (dynamic NTK past max_position_embeddings). ValidateRopeConfig computes each regime of
  // {1, one past the original / max length} once.
  int64_t (*regime_of)(const RopeConfig&, int64_t seq_len);
  Result<RopeFrequencies> (*compute)(const RopeConfig&, int64_t seq_len);  // on a validated config
  // NominalScalingFactor: the factor the scaling aims at.
  double (*nominal_factor)(const RopeConfig&);
  // UnscaledFrequencies are over the whole head (base^(-2i/head_dim)), not the rotary window.
  bool unscaled_over_head_dim = false;
};

// The rows, in RopeScalingType order.
std::span<const RopeScalingSpec> RopeScalings();
const RopeScalingSpec& RopeScalingOf(RopeScalingType type);
// The row a Hugging Face rope_type spells (and its spelling), or nullptr.
const RopeScalingSpec* FindRopeScaling(std::string_view hf_name, const ScalingSpelling** spelling = nullptr);
// One key's range rule; the error is "rope config SOURCE: SCALING 'KEY' = VALUE RULE".
Status CheckRopeScalingKey(const RopeConfig& config, const RopeScalingKey& key);
// The row's key named `name`, or nullptr.
const RopeScalingKey* FindScalingKey(const RopeScalingSpec& row, std::string_view name);

// For tests: how many times a scaling's frequency function has run in this process.
int64_t RopeFrequencyComputations();

}  // namespace posenc
