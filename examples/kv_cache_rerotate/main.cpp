// kv_cache_rerotate: an engine loop that keeps its KV cache while a scaling's frequencies change.
//
// Dynamic NTK recomputes RoPE's base from the sequence length once the sequence passes the model's
// original length; LongRoPE (Phi-3) switches from short_factor to long_factor one token past
// original_max_position_embeddings. The keys in the cache were rotated with the old frequencies. An
// engine can drop the cache and recompute every key, keep the stale keys (what most engines do), or
// re-rotate the cached keys in place by the angle difference (posenc::RerotateKeys). This program
// runs one attention layer of a tiny random "model" token by token across the change and, at every
// step, compares the attention output of the re-rotated cache with the output of recomputing every
// key from scratch (and reports what the stale cache would have given).
//
// Usage: kv_cache_rerotate                      built-in dynamic-NTK and LongRoPE configs
//        kv_cache_rerotate --config FILE [--prefill N] [--steps M]
//   FILE: a Hugging Face config.json, or a golden case.json (its "config" object is used).
// Exit 0 when every step matches within the bound printed, 1 otherwise, 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/math/attention.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/kernels/rerotate.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_config.hpp"

namespace {

using posenc::Array;
using posenc::DType;
using posenc::HeadsView;
using posenc::RopeConfig;
using posenc::RopeFrequencies;

constexpr int64_t kHeads = 4;    // query heads
constexpr int64_t kKvHeads = 2;  // key/value heads (grouped-query attention)

// A tiny one-layer "model": token t's pre-rotation q, k, v are fixed random vectors (seeded by t), so
// recomputing them from scratch is possible at any step.
struct Projections {
  int64_t head_dim;
  std::vector<float> QkvOf(int64_t t, int64_t heads, int which) const {
    std::mt19937_64 rng(static_cast<uint64_t>(t) * 3 + static_cast<uint64_t>(which) + 12345);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(heads * head_dim));
    for (float& v : x) v = n(rng);
    return x;
  }
};

bool SameFrequencies(const RopeFrequencies& a, const RopeFrequencies& b) {
  return a.inv_freq == b.inv_freq && a.attention_scaling == b.attention_scaling;
}

// Rotates token rows [first, first + n) of a dense [T, H, D] array with `f` (exact precision).
bool Rotate(Array& a, int64_t first, int64_t n, const posenc::RotaryLayout& layout, const RopeFrequencies& f) {
  auto table = posenc::RopeTable::Build(f, 0, posenc::RopePrecision::kExact);
  if (!table.ok()) return false;
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = first + i;
  HeadsView v = HeadsView::Dense(a.data<float>() + first * a.dim(1) * a.dim(2), DType::kF32, n, a.dim(1), a.dim(2));
  return posenc::ApplyRope({layout, &table.value(), pos}, v).ok();
}

Array Rows(const Array& a, int64_t n) {  // the first n token rows of a [T, H, D] array
  Array out = Array::Zeros(DType::kF32, {n, a.dim(1), a.dim(2)}).value();
  std::memcpy(out.bytes(), a.bytes(), out.nbytes());
  return out;
}

double MaxAbs(const Array& a) {
  double m = 0;
  for (float v : a.span<float>()) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}
double MaxAbsDiff(const Array& a, const Array& b) {
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a.span<float>()[static_cast<size_t>(i)]) -
                              b.span<float>()[static_cast<size_t>(i)]));
  return m;
}

// Runs the loop for one config; returns the number of steps whose outputs differ past the bound.
int RunEngine(const std::string& name, const RopeConfig& cfg, int64_t prefill, int64_t steps) {
  const posenc::RotaryLayout& L = cfg.layout;
  const int64_t D = L.head_dim, total = prefill + steps;
  const Projections proj{D};
  std::printf("== %s: %s, head_dim %lld, rotary_dim %lld, %s; prefill %lld tokens, then decode to %lld\n", name.c_str(),
              std::string(posenc::ToString(cfg.scaling.type)).c_str(), static_cast<long long>(D),
              static_cast<long long>(L.rotary_dim), std::string(posenc::ToString(L.pairing)).c_str(),
              static_cast<long long>(prefill), static_cast<long long>(total));

  // The engine's state: a KV cache of rotated keys and values, and the frequencies the keys carry.
  Array k_cache = Array::Zeros(DType::kF32, {total, kKvHeads, D}).value();
  Array v_cache = Array::Zeros(DType::kF32, {total, kKvHeads, D}).value();
  Array stale = Array::Zeros(DType::kF32, {total, kKvHeads, D}).value();  // never re-rotated, for contrast
  Array raw_k = Array::Zeros(DType::kF32, {total, kKvHeads, D}).value();  // pre-rotation keys (checker only)
  for (int64_t t = 0; t < total; ++t) {
    const auto k = proj.QkvOf(t, kKvHeads, 1), v = proj.QkvOf(t, kKvHeads, 2);
    std::copy(k.begin(), k.end(), raw_k.data<float>() + t * kKvHeads * D);
    std::copy(v.begin(), v.end(), v_cache.data<float>() + t * kKvHeads * D);
  }
  RopeFrequencies cache_freqs = posenc::ComputeRopeFrequencies(cfg, prefill).value();
  std::memcpy(k_cache.bytes(), raw_k.bytes(), static_cast<size_t>(prefill * kKvHeads * D) * sizeof(float));
  if (!Rotate(k_cache, 0, prefill, L, cache_freqs)) return 1;
  std::memcpy(stale.bytes(), k_cache.bytes(), k_cache.nbytes());
  std::vector<int64_t> positions(static_cast<size_t>(total));
  for (int64_t t = 0; t < total; ++t) positions[static_cast<size_t>(t)] = t;

  int failures = 0, rerotations = 0;
  double worst_ratio = 0, worst_stale = 0;
  for (int64_t t = prefill; t < total; ++t) {
    // Hugging Face's rule: the frequencies for a sequence whose largest position is t.
    const RopeFrequencies f = posenc::ComputeRopeFrequencies(cfg, t + 1).value();
    if (!SameFrequencies(f, cache_freqs)) {
      posenc::RerotateArgs args{L, std::span<const int64_t>(positions.data(), static_cast<size_t>(t)), &cache_freqs, &f,
                                posenc::RopePrecision::kExact};
      HeadsView cached = HeadsView::Dense(k_cache.bytes(), DType::kF32, t, kKvHeads, D);
      if (auto s = posenc::RerotateKeys(args, cached); !s.ok()) {
        std::fprintf(stderr, "rerotate failed: %s\n", std::string(s.message()).c_str());
        return 1;
      }
      cache_freqs = f;
      ++rerotations;
    }
    // The new token: rotate its q and k with the current frequencies, append k and v.
    Array q = Array::Zeros(DType::kF32, {1, kHeads, D}).value();
    const auto qv = proj.QkvOf(t, kHeads, 0);
    std::copy(qv.begin(), qv.end(), q.data<float>());
    std::memcpy(k_cache.data<float>() + t * kKvHeads * D, raw_k.data<float>() + t * kKvHeads * D,
                static_cast<size_t>(kKvHeads * D) * sizeof(float));
    if (!Rotate(k_cache, t, 1, L, f)) return 1;
    std::memcpy(stale.data<float>() + t * kKvHeads * D, k_cache.data<float>() + t * kKvHeads * D,
                static_cast<size_t>(kKvHeads * D) * sizeof(float));
    {
      auto table = posenc::RopeTable::Build(f, 0, posenc::RopePrecision::kExact).value();
      const int64_t pos[1] = {t};
      if (!posenc::ApplyRope({L, &table, pos}, HeadsView::Of(q, "q").value()).ok()) return 1;
    }
    // Attention of the new query over the kept (re-rotated) cache.
    posenc::AttentionOptions opt;
    opt.causal = true;
    opt.query_offset = t;
    const Array kept_k = Rows(k_cache, t + 1), vals = Rows(v_cache, t + 1);
    const Array out_kept = posenc::AttentionReference(q, kept_k, vals, opt).value();
    // From scratch: every key rotated again with the current frequencies.
    Array fresh_k = Rows(raw_k, t + 1);
    if (!Rotate(fresh_k, 0, t + 1, L, f)) return 1;
    const Array out_fresh = posenc::AttentionReference(q, fresh_k, vals, opt).value();
    const Array out_stale = posenc::AttentionReference(q, Rows(stale, t + 1), vals, opt).value();
    // Bound: each cached key is within 2e-6 * max|k| of the fresh one (rerotate.hpp), so each score
    // moves by at most scale * sum_d |q_d| * 2e-6 * max|k|, and the softmax-weighted mean of values
    // by at most 2 * max|v| * that.
    double q_l1 = 0;
    for (int64_t h = 0; h < kHeads; ++h) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += std::fabs(q.data<float>()[h * D + d]);
      q_l1 = std::max(q_l1, s);
    }
    const double score_err = q_l1 / std::sqrt(static_cast<double>(D)) * 2e-6 * MaxAbs(fresh_k);
    const double bound = 2.0 * MaxAbs(vals) * score_err + 1e-6 * MaxAbs(vals);
    const double diff = MaxAbsDiff(out_kept, out_fresh), stale_diff = MaxAbsDiff(out_stale, out_fresh);
    worst_ratio = std::max(worst_ratio, diff / bound);
    worst_stale = std::max(worst_stale, stale_diff);
    const bool ok = diff <= bound;
    failures += !ok;
    if (!ok || t == prefill || t + 1 == total || (t - prefill) % std::max<int64_t>(1, steps / 8) == 0)
      std::printf("  pos %6lld: |kept - recomputed| = %.3g (bound %.3g)  |stale - recomputed| = %.3g  %s\n",
                  static_cast<long long>(t), diff, bound, stale_diff, ok ? "ok" : "MISMATCH");
  }
  std::printf(
      "  %d re-rotations of the cache; worst |kept - recomputed| / bound = %.3g; worst stale-cache error %.3g; "
      "%s\n",
      rerotations, worst_ratio, worst_stale, failures == 0 ? "all steps match" : "FAILED");
  if (rerotations == 0) {
    std::printf("  (the frequencies never changed in this range: nothing was tested)\n");
    return 1;
  }
  return failures;
}

// A built-in half-layout RoPE with theta 10000, head_dim `head_dim`, and one scaling.
RopeConfig BuiltIn(int64_t head_dim, int64_t max_positions, posenc::RopeScalingType type, double factor,
                   std::string source) {
  RopeConfig c;
  c.layout = {posenc::RopePairing::kHalf, head_dim, 0, head_dim};
  c.base = 10000.0;
  c.max_position_embeddings = max_positions;
  c.scaling.type = type;
  c.scaling.factor = factor;
  c.source = std::move(source);
  return c;
}

RopeConfig BuiltInDynamicNtk() {
  return BuiltIn(64, 128, posenc::RopeScalingType::kDynamicNtk, 2.0,
                 "built-in dynamic NTK (max_position_embeddings 128, factor 2)");
}

RopeConfig BuiltInLongRope() {
  RopeConfig c =
      BuiltIn(32, 4096, posenc::RopeScalingType::kLongRope, 32.0, "built-in LongRoPE (original 128, 16 pairs)");
  c.scaling.original_max_position_embeddings = 128;
  for (int i = 0; i < 16; ++i) {  // Phi-3-like shape: factors grow with the wavelength
    c.scaling.short_factor.push_back(1.0 + 0.1 * i);
    c.scaling.long_factor.push_back(1.0 + 4.0 * i);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  int64_t prefill = -1, steps = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "kv_cache_rerotate [--config FILE] [--prefill N] [--steps M]\n"
          "Runs one attention layer token by token across a dynamic-NTK / LongRoPE frequency change, keeps\n"
          "the KV cache by re-rotating it, and checks every step against recomputing all keys.\n"
          "FILE: config.json or a golden case.json. Default: built-in configs; with FILE, prefill defaults\n"
          "to the original length - 6 and steps to 12.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kv_cache_rerotate: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--config")
      config_path = argv[++i];
    else if (a == "--prefill")
      prefill = std::atoll(argv[++i]);
    else if (a == "--steps")
      steps = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "kv_cache_rerotate: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  int failures = 0;
  if (config_path.empty()) {
    failures += RunEngine("dynamic NTK", BuiltInDynamicNtk(), prefill > 0 ? prefill : 100, steps > 0 ? steps : 80);
    failures += RunEngine("LongRoPE", BuiltInLongRope(), prefill > 0 ? prefill : 120, steps > 0 ? steps : 20);
  } else {
    std::ifstream f(config_path);
    if (!f) {
      std::fprintf(stderr, "kv_cache_rerotate: cannot open %s\n", config_path.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) {
      std::fprintf(stderr, "kv_cache_rerotate: %s is not JSON\n", config_path.c_str());
      return 2;
    }
    // A golden case names its family in hf_model_type where its config does not.
    nlohmann::json config = j.contains("config") ? j["config"] : j;
    if (j.contains("config") && !config.contains("model_type") && j.contains("hf_model_type"))
      config["model_type"] = j["hf_model_type"];
    const std::string text = j.contains("config") ? config.dump() : ss.str();
    auto scheme = posenc::ParseHfConfig(text, config_path);
    if (!scheme.ok()) {
      std::fprintf(stderr, "kv_cache_rerotate: %s\n", std::string(scheme.status().message()).c_str());
      return 2;
    }
    RopeConfig cfg = scheme.value().rope;
    if (j.value("layout", "") == "interleaved") cfg.layout.pairing = posenc::RopePairing::kInterleaved;
    const int64_t original = cfg.scaling.original_max_position_embeddings > 0
                                 ? cfg.scaling.original_max_position_embeddings
                                 : cfg.max_position_embeddings;
    if (original <= 0) {
      std::fprintf(stderr, "kv_cache_rerotate: %s gives no original length\n", config_path.c_str());
      return 2;
    }
    failures +=
        RunEngine(config_path, cfg, prefill > 0 ? prefill : std::max<int64_t>(1, original - 6), steps > 0 ? steps : 12);
  }
  std::printf("%s\n", failures == 0 ? "kv_cache_rerotate: kept cache == recomputed keys at every step"
                                    : "kv_cache_rerotate: FAILED");
  return failures == 0 ? 0 : 1;
}
