// Per-layer RoPE / NoPE schedules: Llama 4's no_rope_layers / no_rope_layer_interval
// (Llama4TextConfig.__post_init__, Llama4TextAttention.use_rope), Cohere2's sliding-window layers
// (Cohere2Config layer_types, Cohere2Attention: RoPE iff the layer has a sliding window).
#include "posenc/config/layer_schedule.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace posenc {

namespace {

Status KeyError(const PositionScheme& s, std::string_view key, const std::string& why) {
  const std::string& src = s.rope.source;
  return InvalidArgumentError(
      fmt::format("config {}: key '{}' {}", src.empty() ? std::string("(unnamed)") : src, key, why));
}

}  // namespace

int64_t LayerSchedule::num_nope_layers() const {
  return static_cast<int64_t>(std::count(rope.begin(), rope.end(), false));
}

Result<LayerSchedule> LayerRopeSchedule(const PositionScheme& s) {
  if (s.kind != PositionKind::kRope)
    return InvalidArgumentError(fmt::format("config {}: the scheme is {}, not rope: no RoPE layer schedule",
                                            s.rope.source.empty() ? std::string("(unnamed)") : s.rope.source,
                                            ToString(s.kind)));
  const int64_t n = s.num_layers;
  if (n <= 0) return KeyError(s, "num_hidden_layers", "is missing (the layer schedule needs the layer count)");
  LayerSchedule out;
  out.rope.assign(static_cast<size_t>(n), true);
  const std::string& mt = s.model_type;
  if (mt == "llama4" || mt == "llama4_text") {
    if (!s.no_rope_layers.empty()) {
      if (static_cast<int64_t>(s.no_rope_layers.size()) != n)
        return KeyError(s, "no_rope_layers",
                        fmt::format("has {} entries, num_hidden_layers is {}", s.no_rope_layers.size(), n));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = s.no_rope_layers[static_cast<size_t>(i)];
        if (v != 0 && v != 1)
          return KeyError(s, fmt::format("no_rope_layers[{}]", i), fmt::format("is {}, expected 0 or 1", v));
        out.rope[static_cast<size_t>(i)] = v == 1;
      }
      out.rule = "llama4 no_rope_layers";
      return out;
    }
    const int64_t interval = s.no_rope_layer_interval == 0 ? 4 : s.no_rope_layer_interval;
    if (interval <= 0) return KeyError(s, "no_rope_layer_interval", fmt::format("is {}, must be > 0", interval));
    for (int64_t i = 0; i < n; ++i) out.rope[static_cast<size_t>(i)] = (i + 1) % interval != 0;
    out.rule =
        fmt::format("llama4 no_rope_layer_interval {}{}", interval, s.no_rope_layer_interval == 0 ? " (default)" : "");
    return out;
  }
  if (mt == "cohere2") {
    if (!s.layer_types.empty()) {
      if (static_cast<int64_t>(s.layer_types.size()) != n)
        return KeyError(s, "layer_types",
                        fmt::format("has {} entries, num_hidden_layers is {}", s.layer_types.size(), n));
      for (int64_t i = 0; i < n; ++i) {
        const std::string& t = s.layer_types[static_cast<size_t>(i)];
        if (t == "sliding_attention")
          out.rope[static_cast<size_t>(i)] = true;
        else if (t == "full_attention")
          out.rope[static_cast<size_t>(i)] = false;
        else
          return KeyError(s, fmt::format("layer_types[{}]", i),
                          fmt::format("is '{}', cohere2 knows sliding_attention and full_attention", t));
      }
      out.rule = "cohere2 layer_types";
      return out;
    }
    const int64_t pattern = s.sliding_window_pattern == 0 ? 4 : s.sliding_window_pattern;
    if (pattern <= 0) return KeyError(s, "sliding_window_pattern", fmt::format("is {}, must be > 0", pattern));
    for (int64_t i = 0; i < n; ++i) out.rope[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
    out.rule =
        fmt::format("cohere2 sliding_window_pattern {}{}", pattern, s.sliding_window_pattern == 0 ? " (default)" : "");
    return out;
  }
  out.rule = "every layer";
  return out;
}

bool QueryTemperatureApplies(const PositionScheme& scheme, const LayerSchedule& schedule, int64_t layer) {
  if (layer < 0 || layer >= schedule.num_layers()) return false;
  return scheme.attn_temperature.tuning && !schedule.rope[static_cast<size_t>(layer)];
}

}  // namespace posenc
