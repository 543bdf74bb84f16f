// Per-layer RoPE / NoPE schedules: Llama 4's no_rope_layers / no_rope_layer_interval
// (Llama4TextConfig.__post_init__, Llama4TextAttention.use_rope), Cohere2's sliding-window layers
// (Cohere2Config layer_types, Cohere2Attention: RoPE iff the layer has a sliding window).
#include "posenc/config/layer_schedule.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "posenc/config/model_families.hpp"

namespace posenc {

namespace {

Status KeyError(const PositionScheme& s, std::string_view key, const std::string& why) {
  const std::string& src = s.rope.source;
  return InvalidArgumentError(
      fmt::format("config {}: key '{}' {}", src.empty() ? std::string("(unnamed)") : src, key, why));
}

// The schedule a per-layer config list gives: layer i's RoPE flag is entry(list[i]), whose error
// message says why the value is refused (the key and index are named here).
template <typename T, typename Entry>
Result<LayerSchedule> FromLayerList(const PositionScheme& s, std::string_view key, const std::vector<T>& list,
                                    Entry entry, std::string rule) {
  const int64_t n = s.num_layers;
  if (static_cast<int64_t>(list.size()) != n)
    return KeyError(s, key, fmt::format("has {} entries, num_hidden_layers is {}", list.size(), n));
  LayerSchedule out;
  out.rope.assign(static_cast<size_t>(n), true);
  for (int64_t i = 0; i < n; ++i) {
    const Result<bool> rope = entry(list[static_cast<size_t>(i)]);
    if (!rope.ok()) return KeyError(s, fmt::format("{}[{}]", key, i), rope.status().message());
    out.rope[static_cast<size_t>(i)] = *rope;
  }
  out.rule = std::move(rule);
  return out;
}

// Every k-th layer (counting from 1) is NoPE, k = `value`, or 4 where the config leaves it 0 (the
// default of both Llama 4's no_rope_layer_interval and Cohere2's sliding_window_pattern).
Result<LayerSchedule> EveryKthLayerNope(const PositionScheme& s, std::string_view family, std::string_view key,
                                        int64_t value) {
  const int64_t k = value == 0 ? 4 : value;
  if (k <= 0) return KeyError(s, key, fmt::format("is {}, must be > 0", k));
  LayerSchedule out;
  out.rope.assign(static_cast<size_t>(s.num_layers), true);
  for (int64_t i = 0; i < s.num_layers; ++i) out.rope[static_cast<size_t>(i)] = (i + 1) % k != 0;
  out.rule = fmt::format("{} {} {}{}", family, key, k, value == 0 ? " (default)" : "");
  return out;
}

}  // namespace

int64_t LayerSchedule::num_nope_layers() const {
  return static_cast<int64_t>(std::count(rope.begin(), rope.end(), false));
}

namespace {

Result<LayerSchedule> RopeRule(const PositionScheme& s);

// Which layers have attention, the keyed set and head size of each: the rule's RoPE flags completed
// from the layer types.
LayerSchedule WithLayerTable(const PositionScheme& s, LayerSchedule out) {
  const size_t n = out.rope.size();
  const bool typed = s.layer_types.size() == n;
  const ModelFamily* family = FindModelFamily(s.model_type);
  out.attention.assign(n, true);
  out.rope_key.assign(n, -1);
  out.head_dim.assign(n, 0);
  auto key_index = [&](const std::string& key) -> int64_t {
    const auto it = std::find(s.rope_keys.begin(), s.rope_keys.end(), key);
    return it == s.rope_keys.end() ? -1 : static_cast<int64_t>(it - s.rope_keys.begin());
  };
  for (size_t i = 0; i < n; ++i) {
    const std::string type = typed ? s.layer_types[i] : std::string();
    // Untyped layers of a full-attention-only rule (Qwen3-Next's full_attention_interval) that the rule left
    // without RoPE are its linear_attention layers: no self-attention, as when the config lists them.
    const bool derived_linear =
        !typed && family != nullptr && family->layer_rule == LayerRule::kFullAttentionOnly && !out.rope[i];
    if ((typed && !LayerTypeHasAttention(type)) || derived_linear) {
      out.attention[i] = false;
      out.rope[i] = false;
      continue;
    }
    if (!s.rope_keys.empty()) {
      if (family != nullptr && family->keying == RopeKeying::kMainCompress)
        out.rope_key[i] = key_index(type == "sliding_attention" || type.empty() ? "main" : "compress");
      else
        out.rope_key[i] = key_index(type.empty() ? s.rope_key : type);
    }
    out.head_dim[i] = type == "full_attention" && s.full_attention_head_dim > 0 ? s.full_attention_head_dim
                                                                                : s.layer_head_dim;
  }
  if (s.kind != PositionKind::kRope) out.rope.assign(n, false);
  return out;
}

}  // namespace

Result<LayerSchedule> LayerRopeSchedule(const PositionScheme& s) {
  if (s.kind == PositionKind::kNone) {
    if (s.num_layers <= 0)
      return KeyError(s, "num_hidden_layers", "is missing (the layer schedule needs the layer count)");
    LayerSchedule out;
    out.rope.assign(static_cast<size_t>(s.num_layers), false);
    out.rule = fmt::format("{}: no positions", s.model_type.empty() ? std::string("model") : s.model_type);
    if (!s.layer_types.empty() && static_cast<int64_t>(s.layer_types.size()) != s.num_layers)
      return KeyError(s, "layer_types", fmt::format("has {} entries, num_hidden_layers is {}", s.layer_types.size(),
                                                    s.num_layers));
    return WithLayerTable(s, std::move(out));
  }
  POSENC_ASSIGN_OR_RETURN(LayerSchedule out, RopeRule(s));
  return WithLayerTable(s, std::move(out));
}

namespace {

Result<LayerSchedule> RopeRule(const PositionScheme& s) {
  if (s.kind != PositionKind::kRope)
    return InvalidArgumentError(fmt::format("config {}: the scheme is {}, not rope: no RoPE layer schedule",
                                            s.rope.source.empty() ? std::string("(unnamed)") : s.rope.source,
                                            ToString(s.kind)));
  const int64_t n = s.num_layers;
  if (n <= 0) return KeyError(s, "num_hidden_layers", "is missing (the layer schedule needs the layer count)");
  // The family's rule, from the registry (config/model_families.hpp).
  const ModelFamily* family = FindModelFamily(s.model_type);
  const LayerRule rule = family != nullptr ? family->layer_rule : LayerRule::kEveryLayer;
  // layer_types of two kinds: RoPE on `rope_type` layers, none on the `others`; any other type is
  // refused naming the known ones.
  auto two_types = [&](std::string_view name, std::string_view rope_type,
                       std::vector<std::string_view> others) -> Result<LayerSchedule> {
    return FromLayerList(
        s, "layer_types", s.layer_types,
        [name, rope_type, others](const std::string& t) -> Result<bool> {
          if (t == rope_type) return true;
          if (std::find(others.begin(), others.end(), t) != others.end()) return false;
          return InvalidArgumentError(
              fmt::format("is '{}', {} knows {} and {}", t, name, rope_type, fmt::join(others, ", ")));
        },
        fmt::format("{} layer_types", name));
  };
  auto sliding_layers_rope = [&](std::string_view name) {
    return two_types(name, "sliding_attention", {"full_attention"});
  };
  if (rule == LayerRule::kLlama4NoRope) {
    if (s.no_rope_layers.empty())
      return EveryKthLayerNope(s, "llama4", "no_rope_layer_interval", s.no_rope_layer_interval);
    return FromLayerList(
        s, "no_rope_layers", s.no_rope_layers,
        [](int64_t v) -> Result<bool> {
          if (v != 0 && v != 1) return InvalidArgumentError(fmt::format("is {}, expected 0 or 1", v));
          return v == 1;
        },
        "llama4 no_rope_layers");
  }
  // Qwen3-Next / Qwen3.5 (Qwen3NextConfig: layer_types default "linear_attention" unless (i + 1) is a
  // multiple of full_attention_interval): only the attention layers have positions.
  if (rule == LayerRule::kFullAttentionOnly) {
    if (s.layer_types.empty()) {
      LayerSchedule out = EveryKthLayerNope(s, s.model_type, "full_attention_interval", s.full_attention_interval)
                              .value();  // k > 0: the parser refuses a non-positive interval
      out.rope.flip();
      return out;
    }
    return two_types(s.model_type, "full_attention", {"linear_attention", "conv"});
  }
  // Mllama (MllamaTextModel): the cross-attention decoder layers apply no rotary embedding.
  if (rule == LayerRule::kCrossAttentionNoRope) {
    LayerSchedule out;
    out.rope.assign(static_cast<size_t>(n), true);
    for (int64_t i : s.cross_attention_layers) {
      if (i >= n)
        return KeyError(s, "cross_attention_layers", fmt::format("names layer {}, num_hidden_layers is {}", i, n));
      out.rope[static_cast<size_t>(i)] = false;
    }
    out.rule = fmt::format("{} cross_attention_layers", s.model_type);
    return out;
  }
  if (rule == LayerRule::kSlidingRopeFullNope) {
    if (s.layer_types.empty())
      return EveryKthLayerNope(s, "cohere2", "sliding_window_pattern", s.sliding_window_pattern);
    return sliding_layers_rope("cohere2");
  }
  // EXAONE 4 (Exaone4Attention): RoPE when the model has no sliding window at all, else on sliding
  // layers only ("global NoPE for hybrid attention").
  if (rule == LayerRule::kSlidingRopeIfWindowed && s.has_sliding_window) {
    if (s.layer_types.empty())
      return KeyError(s, "layer_types",
                      "is missing: with sliding_window set, the layer types (or sliding_window_pattern) decide which "
                      "layers are NoPE");
    return sliding_layers_rope(s.model_type);
  }
  LayerSchedule out;
  out.rope.assign(static_cast<size_t>(n), true);
  out.rule = s.layer_types.empty() ? "every layer" : "every attention layer";
  return out;
}

}  // namespace

bool QueryTemperatureApplies(const PositionScheme& scheme, const LayerSchedule& schedule, int64_t layer) {
  if (layer < 0 || layer >= schedule.num_layers()) return false;
  return scheme.attn_temperature.tuning &&
         (scheme.attn_temperature.every_layer || !schedule.rope[static_cast<size_t>(layer)]);
}

}  // namespace posenc
