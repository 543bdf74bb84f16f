// tiny_llama: a minimal, readable Llama forward pass on top of posenc — how an inference engine uses
// posenc's input stage. It runs llama2.c checkpoints (stories260K.bin) with their tok512.bin tokenizer:
//
//   x_t   = LookupEmbeddings(token_embedding_table, token_t)          posenc: identity
//   for each layer:
//     h   = RMSNorm(x) ; q = Wq h ; k = Wk h ; v = Wv h
//     q,k = ApplyRopeQK(interleaved pairs, theta 10000, position t)    posenc: position
//     x  += Wo AttentionReference(q, k_cache, v_cache, causal)         posenc: grouped-query attention
//     x  += W2 (silu(W1 RMSNorm(x)) * W3 RMSNorm(x))                   SwiGLU
//   logits = Wcls RMSNorm(x)        (Wcls = the token embedding table when shared)
//
// Modes:
//   tiny_llama --check CASE_DIR [--model PATH] [--layout half|interleaved]
//       runs a reference case (case.json: model, tokenizer, token_ids, files roles embeddings, q_rope,
//       k_rope, logits, greedy_continuation.new_token_ids), prints one line per check and
//       "N passed, M failed"; exit 1 if any failed, 2 on bad input.
//   tiny_llama --model stories260K.bin --tokenizer tok512.bin --ids 1,403,407 [--steps 40]
//       greedy generation, printed as text.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/math/attention.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/model/layout_convert.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/kernels/rope.hpp"

namespace {

using posenc::Array;
using posenc::DType;
using posenc::Result;
using posenc::Status;

// ---------------------------------------------------------------------------------------------
// The model: weights (views into the mapped checkpoint) and the per-layer KV caches.

struct Model {
  posenc::Llama2cFile file;
  posenc::RotaryLayout rope_layout;
  posenc::RopeTable rope_table;
  std::vector<Array> k_cache, v_cache;  // per layer: [positions so far, n_kv_heads, head_size]
  int64_t cached = 0;                   // positions in the caches
};

Result<Model> LoadModel(const std::string& path, posenc::RopePairing pairing) {
  Model m;
  POSENC_ASSIGN_OR_RETURN(m.file, posenc::Llama2cFile::Open(path));
  const posenc::Llama2cConfig& c = m.file.config();
  m.rope_layout = {pairing, c.head_size(), 0, c.head_size()};
  // run.c: angle = pos * 10000^(-2i/head_size), computed in float32 -> kReference precision.
  POSENC_ASSIGN_OR_RETURN(posenc::RopeFrequencies freqs, posenc::DefaultRopeFrequencies(c.head_size(), 10000.0));
  POSENC_ASSIGN_OR_RETURN(m.rope_table, posenc::RopeTable::Build(freqs, c.seq_len, posenc::RopePrecision::kReference));
  m.k_cache.resize(static_cast<size_t>(c.n_layers));
  m.v_cache.resize(static_cast<size_t>(c.n_layers));
  return m;
}

// out[i] = sum_j W[i * n + j] * x[j]   (W is [d, n], as run.c's matmul)
void MatMul(const float* w, const float* x, int64_t d, int64_t n, float* out) {
  for (int64_t i = 0; i < d; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += w[i * n + j] * x[j];
    out[i] = s;
  }
}

// RMSNorm as run.c: w * x / sqrt(mean(x^2) + 1e-5), in float32.
void RmsNorm(const float* x, const float* w, int64_t n, float* out) {
  float ss = 0.0f;
  for (int64_t j = 0; j < n; ++j) ss += x[j] * x[j];
  ss = 1.0f / std::sqrt(ss / static_cast<float>(n) + 1e-5f);
  for (int64_t j = 0; j < n; ++j) out[j] = w[j] * (ss * x[j]);
}

// Appends `rows` [T, H, D] to a cache [P, H, D] -> [P + T, H, D].
Status Append(Array& cache, const Array& rows) {
  const int64_t p = cache.ndim() == 3 ? cache.dim(0) : 0;
  POSENC_ASSIGN_OR_RETURN(Array grown, Array::Zeros(DType::kF32, {p + rows.dim(0), rows.dim(1), rows.dim(2)}));
  if (p > 0) std::copy(cache.data<float>(), cache.data<float>() + cache.size(), grown.data<float>());
  std::copy(rows.data<float>(), rows.data<float>() + rows.size(), grown.data<float>() + (p > 0 ? cache.size() : 0));
  cache = std::move(grown);
  return posenc::OkStatus();
}

// What the check mode compares, captured during a forward pass.
struct Taps {
  Array embeddings;  // [T, dim]
  Array q_rope;      // layer 0 [T, n_heads, head_size]
  Array k_rope;      // layer 0 [T, n_kv_heads, head_size]
};

// Runs `tokens` at positions cached .. cached + T - 1 (appending to the KV caches); returns logits
// [T, vocab]. `taps` (optional) receives the embeddings and layer 0's q/k after RoPE.
Result<Array> Forward(Model& m, const std::vector<int64_t>& tokens, Taps* taps) {
  const posenc::Llama2cConfig& c = m.file.config();
  const posenc::Llama2cWeights& w = m.file.weights();
  const int64_t T = static_cast<int64_t>(tokens.size());
  const int64_t D = c.dim, HS = c.head_size(), H = c.n_heads, HKV = c.n_kv_heads, KV = c.kv_dim(), F = c.hidden_dim;
  const int64_t V = c.vocab_size;

  // 1. Identity: one embedding row per token (posenc checks every id against the vocabulary).
  const auto table = posenc::EmbeddingTable::View(w.token_embedding_table.data(), DType::kF32, V, D);
  POSENC_ASSIGN_OR_RETURN(Array x, posenc::LookupEmbeddings(table, tokens));
  if (taps) taps->embeddings = x;

  std::vector<int64_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = m.cached + t;

  std::vector<float> h(static_cast<size_t>(D)), h2(static_cast<size_t>(D)), ffn1(static_cast<size_t>(F)),
      ffn3(static_cast<size_t>(F));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    POSENC_ASSIGN_OR_RETURN(Array q, Array::Zeros(DType::kF32, {T, H, HS}));
    POSENC_ASSIGN_OR_RETURN(Array k, Array::Zeros(DType::kF32, {T, HKV, HS}));
    POSENC_ASSIGN_OR_RETURN(Array v, Array::Zeros(DType::kF32, {T, HKV, HS}));
    for (int64_t t = 0; t < T; ++t) {
      RmsNorm(x.data<float>() + t * D, w.rms_att_weight.data() + l * D, D, h.data());
      MatMul(w.wq.data() + l * D * D, h.data(), D, D, q.data<float>() + t * D);
      MatMul(w.wk.data() + l * KV * D, h.data(), KV, D, k.data<float>() + t * KV);
      MatMul(w.wv.data() + l * KV * D, h.data(), KV, D, v.data<float>() + t * KV);
    }
    // 2. Position: rotate q and k (grouped-query: k has fewer heads) by each token's position.
    POSENC_ASSIGN_OR_RETURN(posenc::HeadsView qv, posenc::HeadsView::Of(q, "q"));
    POSENC_ASSIGN_OR_RETURN(posenc::HeadsView kv, posenc::HeadsView::Of(k, "k"));
    POSENC_RETURN_IF_ERROR(posenc::ApplyRopeQK({m.rope_layout, &m.rope_table, positions}, qv, kv));
    if (taps && l == 0) {
      taps->q_rope = q;
      taps->k_rope = k;
    }
    // 3. Attention over every cached position plus these (causal), query head h reads kv head h / (H/HKV).
    POSENC_RETURN_IF_ERROR(Append(m.k_cache[static_cast<size_t>(l)], k));
    POSENC_RETURN_IF_ERROR(Append(m.v_cache[static_cast<size_t>(l)], v));
    posenc::AttentionOptions ao;
    ao.causal = true;
    ao.query_offset = m.cached;
    POSENC_ASSIGN_OR_RETURN(Array att, posenc::AttentionReference(q, m.k_cache[static_cast<size_t>(l)],
                                                                  m.v_cache[static_cast<size_t>(l)], ao));
    for (int64_t t = 0; t < T; ++t) {
      float* xt = x.data<float>() + t * D;
      MatMul(w.wo.data() + l * D * D, att.data<float>() + t * D, D, D, h.data());
      for (int64_t j = 0; j < D; ++j) xt[j] += h[static_cast<size_t>(j)];
      // 4. SwiGLU feed-forward.
      RmsNorm(xt, w.rms_ffn_weight.data() + l * D, D, h.data());
      MatMul(w.w1.data() + l * F * D, h.data(), F, D, ffn1.data());
      MatMul(w.w3.data() + l * F * D, h.data(), F, D, ffn3.data());
      for (int64_t j = 0; j < F; ++j) {
        const float g = ffn1[static_cast<size_t>(j)];
        ffn1[static_cast<size_t>(j)] = g / (1.0f + std::exp(-g)) * ffn3[static_cast<size_t>(j)];
      }
      MatMul(w.w2.data() + l * D * F, ffn1.data(), D, F, h2.data());
      for (int64_t j = 0; j < D; ++j) xt[j] += h2[static_cast<size_t>(j)];
    }
  }
  m.cached += T;
  // 5. Classifier (shared with the embedding table in stories260K).
  POSENC_ASSIGN_OR_RETURN(Array logits, Array::Zeros(DType::kF32, {T, V}));
  for (int64_t t = 0; t < T; ++t) {
    RmsNorm(x.data<float>() + t * D, w.rms_final_weight.data(), D, h.data());
    MatMul(w.wcls.data(), h.data(), V, D, logits.data<float>() + t * V);
  }
  return logits;
}

int64_t ArgMax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

// Greedy: feed the prompt, then `steps` times the argmax of the last logits row.
Result<std::vector<int64_t>> Greedy(Model& m, const std::vector<int64_t>& prompt, int64_t steps) {
  POSENC_ASSIGN_OR_RETURN(Array logits, Forward(m, prompt, nullptr));
  const int64_t V = m.file.config().vocab_size;
  std::vector<int64_t> out;
  int64_t next = ArgMax(logits.data<float>() + (logits.dim(0) - 1) * V, V);
  for (int64_t s = 0; s < steps; ++s) {
    out.push_back(next);
    if (s + 1 == steps || m.cached >= m.file.config().seq_len) break;
    POSENC_ASSIGN_OR_RETURN(Array l1, Forward(m, {next}, nullptr));
    next = ArgMax(l1.data<float>(), V);
  }
  return out;
}

// llama2.c tokenizer: int32 max_token_length, then per id: float32 score, int32 length, bytes.
Result<std::vector<std::string>> LoadTokenizer(const std::string& path, int64_t vocab) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return posenc::NotFoundError(fmt::format("opening tokenizer '{}'", path));
  int32_t max_len = 0;
  f.read(reinterpret_cast<char*>(&max_len), 4);
  std::vector<std::string> pieces;
  for (int64_t i = 0; i < vocab; ++i) {
    float score;
    int32_t len = 0;
    f.read(reinterpret_cast<char*>(&score), 4);
    f.read(reinterpret_cast<char*>(&len), 4);
    if (!f || len < 0 || len > 1024) {
      return posenc::DataLossError(
          fmt::format("reading tokenizer '{}': entry {} is truncated or has length {}", path, i, len));
    }
    std::string s(static_cast<size_t>(len), '\0');
    f.read(s.data(), len);
    if (!f) return posenc::DataLossError(fmt::format("reading tokenizer '{}': entry {} is truncated", path, i));
    pieces.push_back(std::move(s));
  }
  return pieces;
}

std::string Decode(const std::vector<std::string>& pieces, const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) {
    const std::string& p = pieces[static_cast<size_t>(id)];
    unsigned byte = 0;
    if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%02X>", &byte) == 1)
      s.push_back(static_cast<char>(byte));
    else
      s += p;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// --check CASE_DIR

struct Check {
  int passed = 0, failed = 0;
  void Report(bool ok, const std::string& line) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", line.c_str());
    (ok ? passed : failed)++;
  }
};

// |got - want| <= atol + rtol * |want| elementwise (the case's rule, shared/golden/FORMAT.md).
void Compare(Check& check, const std::string& role, const Array& got, const Array& want, double atol, double rtol) {
  if (got.shape() != want.shape()) {
    check.Report(false, fmt::format("{}: shape {} but the reference is {}", role, posenc::ShapeToString(got.shape()),
                                    posenc::ShapeToString(want.shape())));
    return;
  }
  double max_abs = 0.0, worst_excess = -1.0;
  int64_t worst = -1;
  for (int64_t i = 0; i < got.size(); ++i) {
    const double g = got.data<float>()[i], wv = want.data<float>()[i];
    const double d = std::fabs(g - wv);
    max_abs = std::max(max_abs, d);
    const double excess = d - (atol + rtol * std::fabs(wv));
    if (!(excess <= 0.0) && (worst < 0 || excess > worst_excess)) {
      worst = i;
      worst_excess = excess;
    }
  }
  std::string line = fmt::format("{}: shape {}, max |got - ref| = {:.3g} (atol {:g}, rtol {:g})", role,
                                 posenc::ShapeToString(got.shape()), max_abs, atol, rtol);
  if (worst >= 0)
    line += fmt::format("; worst at flat index {}: got {} ref {}", worst, got.data<float>()[worst],
                        want.data<float>()[worst]);
  check.Report(worst < 0, line);
}

Result<int> RunCheck(const std::string& case_dir, const std::string& model_override,
                     const std::string& layout_override) {
  std::ifstream f(case_dir + "/case.json");
  if (!f) return posenc::NotFoundError(fmt::format("opening '{}/case.json'", case_dir));
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    return posenc::DataLossError(fmt::format("reading '{}/case.json': {}", case_dir, e.what()));
  }
  try {
    const std::string model_path =
        model_override.empty() ? case_dir + "/" + c.at("model").get<std::string>() : model_override;
    std::string layout = layout_override.empty() ? c.value("layout", std::string("interleaved")) : layout_override;
    posenc::RopePairing pairing;
    if (!posenc::ParseRopePairing(layout, &pairing)) {
      return posenc::InvalidArgumentError(fmt::format("layout '{}' (expected half or interleaved)", layout));
    }
    const auto tokens = c.at("token_ids").get<std::vector<int64_t>>();
    const auto& files = c.at("files");
    const nlohmann::json tol = c.value("tolerance", nlohmann::json::object());
    POSENC_ASSIGN_OR_RETURN(Model model, LoadModel(model_path, pairing));
    std::printf("case %s: model %s, %zu tokens, layout %s\n", case_dir.c_str(), model_path.c_str(), tokens.size(),
                std::string(posenc::ToString(pairing)).c_str());
    Taps taps;
    POSENC_ASSIGN_OR_RETURN(Array logits, Forward(model, tokens, &taps));

    Check check;
    // Tolerances: the case's own where given. Otherwise: embeddings are a copy (exact); q/k after
    // RoPE 1e-4 and logits 1e-3 + 1e-4 relative. The reference (run.c, float32) agrees with a float64
    // forward to 7e-6 on q/k and 1.6e-5 on logits; this program sums in float32 in the same order for
    // the matmuls but does attention in float64, so it differs from run.c by a few 1e-6 through the
    // layers. The bounds leave 5-50x headroom over that and are orders of magnitude below what a wrong
    // layout or position gives (errors of ~10).
    auto tol_of = [&](const std::string& role, double atol, double rtol) {
      if (tol.contains(role)) {
        atol = tol[role].value("atol", atol);
        rtol = tol[role].value("rtol", rtol);
      }
      return std::make_pair(atol, rtol);
    };
    auto compare_role = [&](const std::string& role, const Array& got, double atol, double rtol) -> Status {
      if (!files.contains(role)) return posenc::OkStatus();
      POSENC_ASSIGN_OR_RETURN(Array want, posenc::ReadNpy(case_dir + "/" + files[role].get<std::string>()));
      if (want.dtype() != DType::kF32) {
        return posenc::InvalidArgumentError(
            fmt::format("{}: reference dtype {} (float32 expected)", role, posenc::ToString(want.dtype())));
      }
      const auto [a, r] = tol_of(role, atol, rtol);
      Compare(check, role, got, want, a, r);
      return posenc::OkStatus();
    };
    // A model converted to another layout (posenc convert-layout) keeps every score, but its q/k dims
    // sit in the other order: map them back to the case's layout before comparing.
    posenc::RopePairing case_pairing = pairing;
    posenc::ParseRopePairing(c.value("layout", std::string("interleaved")), &case_pairing);
    if (case_pairing != pairing) {
      const posenc::RotaryLayout run_layout = model.rope_layout;
      POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, posenc::RotaryRowPermutation(run_layout, case_pairing));
      for (Array* a : {&taps.q_rope, &taps.k_rope}) {
        const Array src = *a;
        const size_t hd = static_cast<size_t>(run_layout.head_dim);
        for (size_t row = 0; row < static_cast<size_t>(src.size()) / hd; ++row)
          for (size_t j = 0; j < hd; ++j)
            a->data<float>()[row * hd + j] = src.data<float>()[row * hd + static_cast<size_t>(perm[j])];
      }
      std::printf("q/k compared after mapping %s dims to the case's %s layout\n",
                  std::string(posenc::ToString(pairing)).c_str(), std::string(posenc::ToString(case_pairing)).c_str());
    }
    POSENC_RETURN_IF_ERROR(compare_role("embeddings", taps.embeddings, 0.0, 0.0));
    POSENC_RETURN_IF_ERROR(compare_role("q_rope", taps.q_rope, 1e-4, 1e-4));
    POSENC_RETURN_IF_ERROR(compare_role("k_rope", taps.k_rope, 1e-4, 1e-4));
    POSENC_RETURN_IF_ERROR(compare_role("logits", logits, 1e-3, 1e-4));

    if (c.contains("greedy_continuation")) {
      const auto want = c["greedy_continuation"].at("new_token_ids").get<std::vector<int64_t>>();
      POSENC_ASSIGN_OR_RETURN(Model fresh, LoadModel(model_path, pairing));
      POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> got, Greedy(fresh, tokens, static_cast<int64_t>(want.size())));
      size_t first_diff = 0;
      while (first_diff < want.size() && first_diff < got.size() && got[first_diff] == want[first_diff]) ++first_diff;
      std::string line = fmt::format("greedy_continuation: {} of {} new tokens match", first_diff, want.size());
      if (c.contains("tokenizer")) {
        auto pieces = LoadTokenizer(case_dir + "/" + c["tokenizer"].get<std::string>(), model.file.config().vocab_size);
        if (pieces.ok()) line += fmt::format(": \"{}\"", Decode(*pieces, got));
      }
      if (first_diff < want.size()) {
        line += fmt::format("; first difference at new token {}: got {} want {}", first_diff,
                            first_diff < got.size() ? got[first_diff] : -1, want[first_diff]);
      }
      check.Report(first_diff == want.size() && got.size() == want.size(), line);
    }
    std::printf("%d passed, %d failed\n", check.passed, check.failed);
    return check.failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    return posenc::DataLossError(fmt::format("reading '{}/case.json': {}", case_dir, e.what()));
  }
}

void Usage() {
  std::fprintf(stderr,
               "usage: tiny_llama --check CASE_DIR [--model PATH] [--layout half|interleaved]\n"
               "       tiny_llama --model MODEL.bin --tokenizer TOK.bin --ids 1,403,407 [--steps N] [--layout ...]\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string check_dir, model, tokenizer, ids_text, layout;
  int64_t steps = 40;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tiny_llama: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--check")
      check_dir = next();
    else if (a == "--model")
      model = next();
    else if (a == "--tokenizer")
      tokenizer = next();
    else if (a == "--ids")
      ids_text = next();
    else if (a == "--layout")
      layout = next();
    else if (a == "--steps")
      steps = std::atoll(next().c_str());
    else if (a == "--help" || a == "-h") {
      Usage();
      return 0;
    } else {
      std::fprintf(stderr, "tiny_llama: unknown argument '%s'\n", a.c_str());
      Usage();
      return 2;
    }
  }
  if (!check_dir.empty()) {
    Result<int> rc = RunCheck(check_dir, model, layout);
    if (!rc.ok()) {
      std::fprintf(stderr, "tiny_llama: error: %s\n", rc.status().ToString().c_str());
      return 2;
    }
    return *rc;
  }
  if (model.empty() || tokenizer.empty() || ids_text.empty()) {
    Usage();
    return 2;
  }
  posenc::RopePairing pairing = posenc::RopePairing::kInterleaved;
  if (!layout.empty() && !posenc::ParseRopePairing(layout, &pairing)) {
    Usage();
    return 2;
  }
  std::vector<int64_t> ids;
  std::stringstream ss(ids_text);
  for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::atoll(item.c_str()));
  auto m = LoadModel(model, pairing);
  if (!m.ok()) {
    std::fprintf(stderr, "tiny_llama: error: %s\n", m.status().ToString().c_str());
    return 2;
  }
  auto pieces = LoadTokenizer(tokenizer, m->file.config().vocab_size);
  if (!pieces.ok()) {
    std::fprintf(stderr, "tiny_llama: error: %s\n", pieces.status().ToString().c_str());
    return 2;
  }
  auto out = Greedy(*m, ids, steps);
  if (!out.ok()) {
    std::fprintf(stderr, "tiny_llama: error: %s\n", out.status().ToString().c_str());
    return 2;
  }
  std::printf("%s%s\n", Decode(*pieces, ids).c_str(), Decode(*pieces, *out).c_str());
  return 0;
}
