// Layout detection by next-token loss, with a plain Llama forward pass over llama2.c, GGUF and
// safetensors weights (layout_detect.hpp).
#include "posenc/model/layout_detect.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "posenc/core/array.hpp"
#include "posenc/core/checked_math.hpp"
#include "posenc/math/attention.hpp"
#include "posenc/model/model_file.hpp"
#include "posenc/model/model_scheme.hpp"

namespace posenc {
namespace {

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(w[i] * (x[i] * inv));
}

// A weight matrix inside a model file, in its stored type: rows [row_begin, row_begin + rows) of rows
// of `cols` elements (llama2.c stacks every layer's matrix in one tensor; the other formats have one
// tensor per layer, row_begin 0).
struct Weight {
  const ModelTensor* t = nullptr;
  int64_t row_begin = 0, rows = 0, cols = 0;
};

// Y[i, r] = sum_c W[r, c] X[i, c] for i < n (X [n, cols], Y [n, rows]), float64 accumulation per dot
// product. W is dequantized 64 rows at a time, so no float copy of a matrix (or of the model) is made.
Status Project(const Weight& w, const float* X, int64_t n, float* Y) {
  constexpr int64_t kChunk = 64;
  std::vector<float> rows(static_cast<size_t>(std::min(kChunk, w.rows) * w.cols));
  for (int64_t r0 = 0; r0 < w.rows; r0 += kChunk) {
    const int64_t m = std::min(kChunk, w.rows - r0);
    POSENC_ASSIGN_OR_RETURN(const DType dtype, w.t->RowType());
    POSENC_RETURN_IF_ERROR(DequantizeRows(dtype, w.t->data, w.cols, w.row_begin + r0, m, rows.data()));
    for (int64_t i = 0; i < n; ++i) {
      const float* x = X + i * w.cols;
      for (int64_t r = 0; r < m; ++r) {
        const float* row = rows.data() + r * w.cols;
        double acc = 0;
        for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * x[c];
        Y[i * w.rows + r0 + r] = static_cast<float>(acc);
      }
    }
  }
  return OkStatus();
}

// A Llama-family model read from any model file OpenModel knows: llama2.c (its stacked [layers, ...]
// tensors), GGUF (architecture llama: blk.N.attn_q.weight, ...) or a Hugging Face safetensors file /
// folder (model.layers.N.self_attn.q_proj.weight, ...). Matrices are [out, in] row-major in all three
// and stay in the file's mapping in their stored type; only the norm vectors are copied.
struct LlamaModel {
  // The Weights point into file's tensor list: moving keeps them valid (the vector's buffer moves),
  // a copy would not, so there is none.
  LlamaModel() = default;
  LlamaModel(LlamaModel&&) = default;
  LlamaModel& operator=(LlamaModel&&) = default;
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  ModelFile file;
  std::string path;
  int64_t D = 0, H = 0, Hkv = 0, hs = 0, F = 0, V = 0, L = 0;  // hs: the scheme's head size (H * hs may differ from D)
  double rms_eps = 1e-5;
  RopeConfig rope;       // frequencies and rotary window; the pairing is set per candidate
  std::string declared;  // the pairing the format's runtime uses ("" if the format does not say)
  Weight emb, cls;       // cls is emb when the model ties them
  std::vector<float> final_norm;
  struct Layer {
    std::vector<float> att_norm, ffn_norm;
    Weight wq, wk, wv, wo, w1, w2, w3;
  };
  std::vector<Layer> layers;
};

// Checks that `t` holds `want_elems` elements in rows of `cols` of a type posenc dequantizes, and
// returns rows [row_begin, row_begin + rows) of it.
Result<Weight> CheckedWeight(const ModelTensor& t, int64_t want_elems, int64_t cols, int64_t row_begin, int64_t rows,
                             const std::string& path) {
  const QuantizedTable q = t.AsTable();
  int64_t elems = 1;
  for (int64_t d : t.shape) elems *= d;
  if (elems != want_elems || q.row_length != cols || cols <= 0)
    return InvalidArgumentError(
        fmt::format("detect-layout: {}: tensor '{}' has shape [{}], expected {} elements in rows of {}", path, t.name,
                    fmt::join(t.shape, ", "), want_elems, cols));
  POSENC_RETURN_IF_ERROR(q.Validate());
  return Weight{&t, row_begin, rows, cols};
}

Result<std::vector<float>> ReadVector(const ModelTensor& t, int64_t n, int64_t row_begin, int64_t want_elems,
                                      const std::string& path) {
  POSENC_ASSIGN_OR_RETURN(Weight w, CheckedWeight(t, want_elems, n, row_begin, 1, path));
  std::vector<float> out(static_cast<size_t>(n));
  POSENC_ASSIGN_OR_RETURN(const DType dtype, w.t->RowType());
  POSENC_RETURN_IF_ERROR(DequantizeRows(dtype, w.t->data, n, row_begin, 1, out.data()));
  return out;
}

// Which of the three name sets the file's tensors use (llama2.c stacks the layers in one tensor).
enum class Naming { kLlama2c, kGguf, kHf };

// A Llama model in a format the pass runs (and, for Hugging Face, a config.json beside it).
Result<Naming> CheckLlamaFile(const ModelFile& m, const std::string& path) {
  const bool hf = m.format() == ModelFormat::kSafetensors || m.format() == ModelFormat::kHuggingFaceFolder;
  if (m.format() != ModelFormat::kLlama2c && m.format() != ModelFormat::kGguf && !hf)
    return UnimplementedError(fmt::format(
        "detect-layout: {} is {}; it runs llama2.c, GGUF and safetensors Llama models", path, ToString(m.format())));
  if (m.architecture() != "llama" && !(hf && m.architecture().empty()))
    return UnimplementedError(
        fmt::format("detect-layout: {} is a '{}' model; it runs the Llama architecture only", path, m.architecture()));
  if (hf && m.config_path().empty())
    return NotFoundError(fmt::format("detect-layout: {}: no config.json beside it (heads, RoPE, rms_norm_eps)", path));
  return hf ? Naming::kHf : m.format() == ModelFormat::kGguf ? Naming::kGguf : Naming::kLlama2c;
}

// Vocabulary and width from the token table; head and layer counts from the metadata.
Status ReadSizes(const ModelFile& m, const std::string& path, LlamaModel* r) {
  const ModelTensor* emb = m.token_embedding();
  if (emb == nullptr || emb->shape.size() != 2)
    return NotFoundError(fmt::format("detect-layout: {}: no [vocab, d_model] token embedding", path));
  r->V = emb->shape[0];
  r->D = emb->shape[1];
  r->H = m.num_heads();
  r->Hkv = m.num_kv_heads() > 0 ? m.num_kv_heads() : r->H;
  r->L = m.num_layers();
  if (r->H <= 0 || r->Hkv <= 0 || r->H % r->Hkv != 0 || r->L <= 0)
    return InvalidArgumentError(fmt::format("detect-layout: {}: {} heads, {} kv heads, {} layers do not fit d_model {}",
                                            path, r->H, r->Hkv, r->L, r->D));
  // Counts from metadata are checked against what the file holds before anything is sized by them:
  // a GGUF or Hugging Face model has at least nine tensors per layer (llama2.c's stacked tensors were
  // sized from its header against the file by the reader), and the layers are then read one by one.
  const int64_t tensors = static_cast<int64_t>(m.tensors().size());
  if (m.format() != ModelFormat::kLlama2c && r->L > tensors / 9)
    return InvalidArgumentError(
        fmt::format("detect-layout: {}: {} layers (block_count / num_hidden_layers) need at least {} tensors; the file "
                    "has {}",
                    path, r->L, r->L > INT64_MAX / 9 ? INT64_MAX : r->L * 9, tensors));
  POSENC_ASSIGN_OR_RETURN(r->emb, CheckedWeight(*emb, r->V * r->D, r->D, 0, r->V, path));
  return OkStatus();
}

// RoPE with the head size, as each format's runtime takes it (ModelScheme: llama2.c's fixed scheme,
// GGUF metadata with llama.cpp's 10000 when freq_base is absent, config.json's head_dim or
// hidden_size / heads), the pairing that runtime uses, and the norm epsilon the file states (else
// the runtime's default: run.c and llama.cpp 1e-5, LlamaConfig 1e-6).
Status ReadRopeAndNorm(const ModelFile& m, Naming naming, const std::string& path, LlamaModel* r) {
  ModelSchemeOptions options;
  options.allow_default_freq_base = true;
  POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, ModelScheme(m, options));
  if (scheme.kind != PositionKind::kRope)
    return InvalidArgumentError(
        fmt::format("detect-layout: {}: {} describes no RoPE", path, m.config_path().empty() ? path : m.config_path()));
  r->rope = scheme.rope;
  r->declared = std::string(ToString(scheme.rope.layout.pairing));
  r->hs = r->rope.layout.head_dim;
  if (r->hs <= 0)
    return InvalidArgumentError(
        fmt::format("detect-layout: {}: the RoPE config's head_dim {} is not positive", path, r->hs));
  r->rms_eps = m.rms_norm_eps().value_or(naming == Naming::kHf ? 1e-6 : 1e-5);
  // The norm runs in float32: an epsilon that overflows or flushes there would give Inf or 0 rows.
  if (!(r->rms_eps >= 0) || !FitsFloat32(r->rms_eps))
    return InvalidArgumentError(fmt::format(
        "detect-layout: {}: rms_norm_eps {} is not a number >= 0 within float32 (at most {}, 0 or at least {})", path,
        r->rms_eps, std::numeric_limits<float>::max(), std::numeric_limits<float>::min()));
  return OkStatus();
}

// Every layer's norms and matrices ([heads * head_size, d_model] for W_q), the final norm and the
// classifier (the embedding table when the model ties them).
Status ReadWeights(const ModelFile& m, Naming naming, const std::string& path, LlamaModel* r) {
  const bool l2c = naming == Naming::kLlama2c, gguf = naming == Naming::kGguf;
  const int64_t D = r->D;
  int64_t Q = 0, KV = 0;
  if (!CheckedMul(r->H, r->hs, &Q) || !CheckedMul(r->Hkv, r->hs, &KV))
    return InvalidArgumentError(
        fmt::format("detect-layout: {}: {} heads of head size {} overflow int64", path, r->H, r->hs));
  auto find = [&](const std::string& name) -> Result<const ModelTensor*> {
    const ModelTensor* t = m.Find(name);
    if (t == nullptr) return NotFoundError(fmt::format("detect-layout: {}: no tensor '{}'", path, name));
    return t;
  };
  auto layer_name = [&](const char* l2c_name, const char* gguf_name, const char* hf_name, int64_t l) {
    if (l2c) return std::string(l2c_name);
    return gguf ? fmt::format("blk.{}.{}.weight", l, gguf_name) : fmt::format("model.layers.{}.{}.weight", l, hf_name);
  };
  auto weight = [&](const char* a, const char* b, const char* c, int64_t l, int64_t rows, int64_t cols,
                    Weight* out) -> Status {
    POSENC_ASSIGN_OR_RETURN(const ModelTensor* t, find(layer_name(a, b, c, l)));
    POSENC_ASSIGN_OR_RETURN(*out,
                            CheckedWeight(*t, (l2c ? r->L : 1) * rows * cols, cols, l2c ? l * rows : 0, rows, path));
    return OkStatus();
  };
  auto norm = [&](const char* a, const char* b, const char* c, int64_t l, std::vector<float>* out) -> Status {
    POSENC_ASSIGN_OR_RETURN(const ModelTensor* t, find(layer_name(a, b, c, l)));
    POSENC_ASSIGN_OR_RETURN(*out, ReadVector(*t, D, l2c ? l : 0, (l2c ? r->L : 1) * D, path));
    return OkStatus();
  };
  {
    const std::string w1 = layer_name("w1", "ffn_gate", "mlp.gate_proj", 0);
    POSENC_ASSIGN_OR_RETURN(const ModelTensor* t, find(w1));
    if (t->shape.size() < 2)
      return InvalidArgumentError(fmt::format("detect-layout: {}: tensor '{}' is not a matrix", path, w1));
    r->F = t->shape[t->shape.size() - 2];
  }
  for (int64_t l = 0; l < r->L; ++l) {
    LlamaModel::Layer& y = r->layers.emplace_back();  // one layer at a time, as its tensors are found
    POSENC_RETURN_IF_ERROR(norm("rms_att_weight", "attn_norm", "input_layernorm", l, &y.att_norm));
    POSENC_RETURN_IF_ERROR(weight("wq", "attn_q", "self_attn.q_proj", l, Q, D, &y.wq));
    POSENC_RETURN_IF_ERROR(weight("wk", "attn_k", "self_attn.k_proj", l, KV, D, &y.wk));
    POSENC_RETURN_IF_ERROR(weight("wv", "attn_v", "self_attn.v_proj", l, KV, D, &y.wv));
    POSENC_RETURN_IF_ERROR(weight("wo", "attn_output", "self_attn.o_proj", l, D, Q, &y.wo));
    POSENC_RETURN_IF_ERROR(norm("rms_ffn_weight", "ffn_norm", "post_attention_layernorm", l, &y.ffn_norm));
    POSENC_RETURN_IF_ERROR(weight("w1", "ffn_gate", "mlp.gate_proj", l, r->F, D, &y.w1));
    POSENC_RETURN_IF_ERROR(weight("w2", "ffn_down", "mlp.down_proj", l, D, r->F, &y.w2));
    POSENC_RETURN_IF_ERROR(weight("w3", "ffn_up", "mlp.up_proj", l, r->F, D, &y.w3));
  }
  POSENC_ASSIGN_OR_RETURN(const ModelTensor* fin, find(l2c    ? "rms_final_weight"
                                                       : gguf ? "output_norm.weight"
                                                              : "model.norm.weight"));
  POSENC_ASSIGN_OR_RETURN(r->final_norm, ReadVector(*fin, D, 0, D, path));
  const ModelTensor* cls = m.Find(l2c ? "wcls" : gguf ? "output.weight" : "lm_head.weight");
  if (cls == nullptr) {
    r->cls = r->emb;
    return OkStatus();
  }
  POSENC_ASSIGN_OR_RETURN(r->cls, CheckedWeight(*cls, r->V * D, D, 0, r->V, path));
  return OkStatus();
}

Result<LlamaModel> LoadLlama(const std::string& path) {
  LlamaModel r;
  POSENC_ASSIGN_OR_RETURN(r.file, OpenModel(path));
  r.path = path;
  POSENC_ASSIGN_OR_RETURN(Naming naming, CheckLlamaFile(r.file, path));
  POSENC_RETURN_IF_ERROR(ReadSizes(r.file, path, &r));
  POSENC_RETURN_IF_ERROR(ReadRopeAndNorm(r.file, naming, path, &r));
  POSENC_RETURN_IF_ERROR(ReadWeights(r.file, naming, path, &r));
  return r;
}

Result<std::vector<double>> TokenLosses(const LlamaModel& w, std::span<const int64_t> tokens, RopePairing pairing) {
  const int64_t T = static_cast<int64_t>(tokens.size()), D = w.D, H = w.H, Hkv = w.Hkv, hs = w.hs, F = w.F, V = w.V;
  if (T < 2) return InvalidArgumentError(fmt::format("detect-layout: {} tokens; at least 2 are needed", T));
  for (int64_t t = 0; t < T; ++t)
    if (tokens[static_cast<size_t>(t)] < 0 || tokens[static_cast<size_t>(t)] >= V)
      return InvalidArgumentError(fmt::format("detect-layout: token {} at index {} is outside [0, {}) of {}",
                                              tokens[static_cast<size_t>(t)], t, V, w.path));
  RopeConfig rc = w.rope;
  rc.layout.pairing = pairing;
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies freqs, ComputeRopeFrequencies(rc, T));
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(freqs, T, RopePrecision::kReference));
  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = t;
  const float eps = static_cast<float>(w.rms_eps);
  auto at = [](std::vector<float>& v, int64_t i) { return v.data() + i; };

  // Whole-sequence (teacher-forced) forward: x [T, D].
  std::vector<float> x(static_cast<size_t>(T * D)), xn(static_cast<size_t>(T * D)), tmp(static_cast<size_t>(T * D)),
      hb(static_cast<size_t>(T * F)), hb2(static_cast<size_t>(T * F));
  POSENC_ASSIGN_OR_RETURN(const DType emb_type, w.emb.t->RowType());
  for (int64_t t = 0; t < T; ++t)
    POSENC_RETURN_IF_ERROR(
        DequantizeRows(emb_type, w.emb.t->data, D, tokens[static_cast<size_t>(t)], 1, at(x, t * D)));
  for (const LlamaModel::Layer& y : w.layers) {
    POSENC_ASSIGN_OR_RETURN(Array q, Array::Zeros(DType::kF32, {T, H, hs}));
    POSENC_ASSIGN_OR_RETURN(Array k, Array::Zeros(DType::kF32, {T, Hkv, hs}));
    POSENC_ASSIGN_OR_RETURN(Array v, Array::Zeros(DType::kF32, {T, Hkv, hs}));
    for (int64_t t = 0; t < T; ++t) RmsNorm(at(x, t * D), y.att_norm.data(), D, eps, at(xn, t * D));
    POSENC_RETURN_IF_ERROR(Project(y.wq, xn.data(), T, q.data<float>()));
    POSENC_RETURN_IF_ERROR(Project(y.wk, xn.data(), T, k.data<float>()));
    POSENC_RETURN_IF_ERROR(Project(y.wv, xn.data(), T, v.data<float>()));
    POSENC_ASSIGN_OR_RETURN(HeadsView qv, HeadsView::Of(q, "q"));
    POSENC_ASSIGN_OR_RETURN(HeadsView kv, HeadsView::Of(k, "k"));
    POSENC_RETURN_IF_ERROR(ApplyRopeQK({rc.layout, &table, positions}, qv, kv));
    AttentionOptions opt;
    opt.causal = true;
    POSENC_ASSIGN_OR_RETURN(Array att, AttentionReference(q, k, v, opt));
    POSENC_RETURN_IF_ERROR(Project(y.wo, att.data<float>(), T, tmp.data()));
    for (int64_t i = 0; i < T * D; ++i) x[static_cast<size_t>(i)] += tmp[static_cast<size_t>(i)];
    for (int64_t t = 0; t < T; ++t) RmsNorm(at(x, t * D), y.ffn_norm.data(), D, eps, at(xn, t * D));
    POSENC_RETURN_IF_ERROR(Project(y.w1, xn.data(), T, hb.data()));
    POSENC_RETURN_IF_ERROR(Project(y.w3, xn.data(), T, hb2.data()));
    for (int64_t i = 0; i < T * F; ++i) {
      const float g = hb[static_cast<size_t>(i)];
      hb[static_cast<size_t>(i)] = g / (1.0f + std::exp(-g)) * hb2[static_cast<size_t>(i)];
    }
    POSENC_RETURN_IF_ERROR(Project(y.w2, hb.data(), T, tmp.data()));
    for (int64_t i = 0; i < T * D; ++i) x[static_cast<size_t>(i)] += tmp[static_cast<size_t>(i)];
  }
  // Logits of the first T - 1 positions (the last one predicts nothing here).
  for (int64_t t = 0; t + 1 < T; ++t) RmsNorm(at(x, t * D), w.final_norm.data(), D, eps, at(xn, t * D));
  std::vector<float> logits(static_cast<size_t>((T - 1) * V));
  POSENC_RETURN_IF_ERROR(Project(w.cls, xn.data(), T - 1, logits.data()));
  std::vector<double> losses;
  for (int64_t t = 0; t + 1 < T; ++t) {
    const float* lt = logits.data() + t * V;
    const double mx = *std::max_element(lt, lt + V);
    double z = 0;
    for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(lt[i]) - mx);
    const double loss = std::log(z) + mx - lt[tokens[static_cast<size_t>(t + 1)]];
    // No verdict, and no advice to give more tokens, from a NaN: the weights themselves are at fault.
    if (!std::isfinite(loss))
      return InvalidArgumentError(
          fmt::format("detect-layout: {}: the forward pass under layout {} gives loss {} predicting token index {}: "
                      "the model's weights hold NaN or Inf, or overflow float32",
                      w.path, ToString(pairing), loss, t + 1));
    losses.push_back(loss);
  }
  return losses;
}

}  // namespace

Result<std::vector<double>> LlamaTokenLosses(const std::string& model_path, std::span<const int64_t> tokens,
                                             RopePairing pairing) {
  POSENC_ASSIGN_OR_RETURN(LlamaModel w, LoadLlama(model_path));
  return TokenLosses(w, tokens, pairing);
}

Result<LayoutDetection> DetectLayout(const std::string& model_path, std::span<const int64_t> tokens,
                                     const LayoutDetectOptions& options) {
  POSENC_ASSIGN_OR_RETURN(LlamaModel w, LoadLlama(model_path));
  LayoutDetection d;
  for (RopePairing p : {RopePairing::kHalf, RopePairing::kInterleaved}) {
    LayoutEvidence e;
    e.pairing = p;
    POSENC_ASSIGN_OR_RETURN(e.token_losses, TokenLosses(w, tokens, p));
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
  d.declared = w.declared;
  d.declared_disagrees = d.verdict.has_value() && ToString(*d.verdict) != d.declared;
  if (d.verdict)
    d.summary =
        fmt::format("{}: layout {} (loss {:.3f} vs {:.3f} nats/token over {} predictions; margin {:.3f} +- {:.3f})",
                    model_path, ToString(*d.verdict), best.mean_loss, other.mean_loss, n, d.margin, d.margin_stderr);
  else
    d.summary = fmt::format(
        "{}: evidence too weak (half {:.3f}, interleaved {:.3f} nats/token over {} predictions; "
        "margin {:.3f} +- {:.3f} needs >= {} and >= {} stderr); give more tokens",
        model_path, h.mean_loss, i.mean_loss, n, d.margin, d.margin_stderr, options.min_margin, options.z);
  return d;
}

}  // namespace posenc
