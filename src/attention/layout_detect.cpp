// Layout detection by next-token loss, with a plain llama2.c forward pass (layout_detect.hpp).
#include "posenc/layout_detect.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "posenc/array.hpp"
#include "posenc/attention.hpp"
#include "posenc/llama2c.hpp"

namespace posenc {
namespace {

// out[r] = sum_c W[r*cols + c] x[c], float64 accumulation.
void MatVec(const float* w, const float* x, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    const float* row = w + r * cols;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(row[c]) * x[c];
    out[r] = static_cast<float>(s);
  }
}

void RmsNorm(const float* x, const float* w, int64_t n, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(w[i] * (x[i] * inv));
}

}  // namespace

Result<std::vector<double>> Llama2cTokenLosses(const std::string& model_path, std::span<const int64_t> tokens,
                                               RopePairing pairing) {
  POSENC_ASSIGN_OR_RETURN(Llama2cFile file, Llama2cFile::Open(model_path));
  const Llama2cConfig& c = file.config();
  const Llama2cWeights& w = file.weights();
  const int64_t T = static_cast<int64_t>(tokens.size()), D = c.dim, H = c.n_heads, Hkv = c.n_kv_heads,
                hs = c.head_size(), KV = c.kv_dim(), F = c.hidden_dim, V = c.vocab_size;
  if (T < 2) return InvalidArgumentError(fmt::format("detect-layout: {} tokens; at least 2 are needed", T));
  for (int64_t t = 0; t < T; ++t)
    if (tokens[static_cast<size_t>(t)] < 0 || tokens[static_cast<size_t>(t)] >= V)
      return InvalidArgumentError(fmt::format("detect-layout: token {} at index {} is outside [0, {}) of {}",
                                              tokens[static_cast<size_t>(t)], t, V, model_path));
  const RotaryLayout layout{pairing, hs, 0, hs};
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies freqs, DefaultRopeFrequencies(hs, 10000.0));
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(freqs, T, RopePrecision::kReference));
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = t;

  // Whole-sequence (teacher-forced) forward: x [T, D].
  std::vector<float> x(static_cast<size_t>(T * D)), xb(static_cast<size_t>(D)), hb(static_cast<size_t>(F)),
      hb2(static_cast<size_t>(F)), tmp(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(&x[static_cast<size_t>(t * D)], w.token_embedding_table.data() + tokens[static_cast<size_t>(t)] * D,
                static_cast<size_t>(D) * sizeof(float));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    POSENC_ASSIGN_OR_RETURN(Array q, Array::Zeros(DType::kF32, {T, H, hs}));
    POSENC_ASSIGN_OR_RETURN(Array k, Array::Zeros(DType::kF32, {T, Hkv, hs}));
    POSENC_ASSIGN_OR_RETURN(Array v, Array::Zeros(DType::kF32, {T, Hkv, hs}));
    for (int64_t t = 0; t < T; ++t) {
      RmsNorm(&x[static_cast<size_t>(t * D)], w.rms_att_weight.data() + l * D, D, xb.data());
      MatVec(w.wq.data() + l * D * D, xb.data(), D, D, q.data<float>() + t * D);
      MatVec(w.wk.data() + l * KV * D, xb.data(), KV, D, k.data<float>() + t * KV);
      MatVec(w.wv.data() + l * KV * D, xb.data(), KV, D, v.data<float>() + t * KV);
    }
    POSENC_ASSIGN_OR_RETURN(HeadsView qv, HeadsView::Of(q, "q"));
    POSENC_ASSIGN_OR_RETURN(HeadsView kv, HeadsView::Of(k, "k"));
    POSENC_RETURN_IF_ERROR(ApplyRopeQK({layout, &table, positions}, qv, kv));
    AttentionOptions opt;
    opt.causal = true;
    POSENC_ASSIGN_OR_RETURN(Array att, AttentionReference(q, k, v, opt));
    for (int64_t t = 0; t < T; ++t) {
      MatVec(w.wo.data() + l * D * D, att.data<float>() + t * D, D, D, tmp.data());
      float* xt = &x[static_cast<size_t>(t * D)];
      for (int64_t i = 0; i < D; ++i) xt[i] += tmp[static_cast<size_t>(i)];
      RmsNorm(xt, w.rms_ffn_weight.data() + l * D, D, xb.data());
      MatVec(w.w1.data() + l * F * D, xb.data(), F, D, hb.data());
      MatVec(w.w3.data() + l * F * D, xb.data(), F, D, hb2.data());
      for (int64_t i = 0; i < F; ++i) {
        const float g = hb[static_cast<size_t>(i)];
        hb[static_cast<size_t>(i)] = g / (1.0f + std::exp(-g)) * hb2[static_cast<size_t>(i)];
      }
      MatVec(w.w2.data() + l * D * F, hb.data(), D, F, tmp.data());
      for (int64_t i = 0; i < D; ++i) xt[i] += tmp[static_cast<size_t>(i)];
    }
  }
  std::vector<double> losses;
  std::vector<float> logits(static_cast<size_t>(V));
  for (int64_t t = 0; t + 1 < T; ++t) {
    RmsNorm(&x[static_cast<size_t>(t * D)], w.rms_final_weight.data(), D, xb.data());
    MatVec(w.wcls.data(), xb.data(), V, D, logits.data());
    const double mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (float lv : logits) z += std::exp(static_cast<double>(lv) - mx);
    losses.push_back(std::log(z) + mx - logits[static_cast<size_t>(tokens[static_cast<size_t>(t + 1)])]);
  }
  return losses;
}

Result<LayoutDetection> DetectLayout(const std::string& model_path, std::span<const int64_t> tokens,
                                     const LayoutDetectOptions& options) {
  {
    POSENC_ASSIGN_OR_RETURN(MappedFile probe, MappedFile::Open(model_path));
    const auto b = probe.bytes();
    if (b.size() >= 4 && std::memcmp(b.data(), "GGUF", 4) == 0)
      return UnimplementedError(fmt::format("detect-layout: {} is GGUF; only llama2.c checkpoints can be run here",
                                            model_path));
    if (b.size() >= 9 && static_cast<char>(b[8]) == '{')
      return UnimplementedError(fmt::format(
          "detect-layout: {} looks like safetensors; only llama2.c checkpoints can be run here", model_path));
  }
  LayoutDetection d;
  for (RopePairing p : {RopePairing::kHalf, RopePairing::kInterleaved}) {
    LayoutEvidence e;
    e.pairing = p;
    POSENC_ASSIGN_OR_RETURN(e.token_losses, Llama2cTokenLosses(model_path, tokens, p));
    double s = 0;
    for (double v : e.token_losses) s += v;
    e.mean_loss = s / static_cast<double>(e.token_losses.size());
    d.candidates.push_back(std::move(e));
  }
  const LayoutEvidence& h = d.candidates[0];
  const LayoutEvidence& i = d.candidates[1];
  const bool half_better = h.mean_loss < i.mean_loss;
  const LayoutEvidence& best = half_better ? h : i;
  const LayoutEvidence& other = half_better ? i : h;
  const size_t n = best.token_losses.size();
  double mean = 0, var = 0;
  for (size_t t = 0; t < n; ++t) mean += other.token_losses[t] - best.token_losses[t];
  mean /= static_cast<double>(n);
  for (size_t t = 0; t < n; ++t) {
    const double dlt = other.token_losses[t] - best.token_losses[t] - mean;
    var += dlt * dlt;
  }
  var = n > 1 ? var / static_cast<double>(n - 1) : 0;
  d.margin = mean;
  d.margin_stderr = std::sqrt(var / static_cast<double>(n));
  if (d.margin >= options.min_margin && d.margin >= options.z * d.margin_stderr) d.verdict = best.pairing;
  d.declared = "interleaved";  // llama2.c's run.c rotates adjacent pairs; the format records nothing else
  d.declared_disagrees = d.verdict.has_value() && ToString(*d.verdict) != d.declared;
  if (d.verdict)
    d.summary = fmt::format("{}: layout {} (loss {:.3f} vs {:.3f} nats/token over {} predictions; margin {:.3f} +- {:.3f})",
                            model_path, ToString(*d.verdict), best.mean_loss, other.mean_loss, n, d.margin,
                            d.margin_stderr);
  else
    d.summary = fmt::format("{}: evidence too weak (half {:.3f}, interleaved {:.3f} nats/token over {} predictions; "
                            "margin {:.3f} +- {:.3f} needs >= {} and >= {} stderr); give more tokens",
                            model_path, h.mean_loss, i.mean_loss, n, d.margin, d.margin_stderr, options.min_margin,
                            options.z);
  return d;
}

}  // namespace posenc
