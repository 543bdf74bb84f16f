// The test engine of posenc check's tests: rotated q computed as Hugging Face does in the dump's dtype
// (the angle in float32, cos/sin cast to the dtype, q*cos + rotate_half(q)*sin with each product and
// the sum rounded), with one fault planted or none (rope_check_test.cpp, rope_check_cases_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/core/dtype.hpp"
#include "posenc/model/rope_check.hpp"
#include "test_support.hpp"

namespace posenc::testing {

inline float Round(float v, DType t) {
  if (t == DType::kF16) return F16ToF32(F32ToF16(v));
  if (t == DType::kBF16) return BF16ToF32(F32ToBF16(v));
  return v;
}

// One fault of the test engine (default: none).
struct Fault {
  std::optional<RopePairing> pairing;
  std::optional<RopeConfig> config;  // frequencies (and window) from this config instead
  int64_t offset = 0;
  bool index_positions = false;
  bool negate_sin = false, swap = false;
  bool angle_bf16 = false, cos_sin_bf16 = false;
  std::optional<double> scaling;
  std::function<void(std::vector<double>&)> tweak;  // a fault outside the list
};

template <typename Fn>
Fault With(Fn fn) {
  Fault f;
  fn(f);
  return f;
}

// The engine: rotated q for `positions`, heads H, the whole head (or `width` = the rotary window alone).
inline RopeDump Engine(const RopeConfig& ref, DType dt, int64_t H, const std::vector<int64_t>& positions, const Fault& f,
                uint64_t seed, int64_t width = 0) {
  const RopeConfig& cfg = f.config ? *f.config : ref;
  int64_t seq_len = 1;
  for (int64_t p : positions) seq_len = std::max(seq_len, p + 1);
  RopeFrequencies freqs = ComputeRopeFrequencies(cfg, seq_len).value();
  if (f.tweak) f.tweak(freqs.inv_freq);
  RotaryLayout layout = RotaryLayoutForInput(cfg.layout, width > 0 ? width : cfg.layout.head_dim, "test").value();
  if (f.pairing) layout.pairing = *f.pairing;
  const double s = f.scaling.value_or(freqs.attention_scaling);
  const int64_t T = static_cast<int64_t>(positions.size()), D = layout.head_dim;
  RopeDump d;
  d.kind = RopeDumpKind::kRotated;
  d.dtype = dt;
  d.what = "test dump";
  d.tokens = T, d.heads = H, d.width = D;
  d.positions = positions;
  std::mt19937_64 rng = MakeRng(seed);
  for (float v : RandomNormal(rng, static_cast<size_t>(T * H * D))) d.before.push_back(Round(v, dt));
  d.after = d.before;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = (f.index_positions ? t : positions[t]) + f.offset;
    for (int64_t j = 0; j < layout.num_pairs(); ++j) {
      float a = static_cast<float>(pos) * static_cast<float>(freqs.inv_freq[j]);
      if (f.angle_bf16) a = Round(a, DType::kBF16);
      float c = static_cast<float>(std::cos(static_cast<double>(a))) * static_cast<float>(s);
      float sn = static_cast<float>(std::sin(static_cast<double>(a))) * static_cast<float>(s);
      if (f.cos_sin_bf16) c = Round(c, DType::kBF16), sn = Round(sn, DType::kBF16);
      if (f.negate_sin) sn = -sn;
      if (f.swap) std::swap(c, sn);
      c = Round(c, dt), sn = Round(sn, dt);
      for (int64_t h = 0; h < H; ++h) {
        const size_t b = static_cast<size_t>((t * H + h) * D);
        const float x1 = d.before[b + layout.first(j)], x2 = d.before[b + layout.second(j)];
        d.after[b + layout.first(j)] = Round(Round(x1 * c, dt) + Round(-x2 * sn, dt), dt);
        d.after[b + layout.second(j)] = Round(Round(x2 * c, dt) + Round(x1 * sn, dt), dt);
      }
    }
  }
  return d;
}

// 0..7, then roughly geometric up to `top`, 32 tokens.
inline std::vector<int64_t> Positions(int64_t top) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < 8; ++i) p.push_back(i);
  for (int64_t i = 0; i < 24; ++i)
    p.push_back(8 + static_cast<int64_t>(std::pow(static_cast<double>(top - 8), (i + 1) / 24.0)));
  return p;
}

// Gemma 3 1B's 26 layers: five sliding, then one full.
inline nlohmann::json GemmaLayerTypes(nlohmann::json c) {
  c["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 26; ++i) c["layer_types"].push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  return c;
}

}  // namespace posenc::testing
