// posenc's C API for the browser explorer (web/index.html): every number the page shows comes from
// these calls, which call the library; the page's JavaScript only draws. Each call returns a JSON
// text owned by the module (valid until the next call), {"error": "..."} on a bad input.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include <emscripten/emscripten.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/config/scheme_description.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/relative.hpp"
#include "posenc/math/sinusoidal.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/math/rope_table.hpp"

namespace posenc::web {
namespace {

using nlohmann::json;

std::string& Buffer() {
  static std::string text;
  return text;
}

const char* Out(const json& j) {
  Buffer() = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return Buffer().c_str();
}

const char* Error(const Status& s) { return Out(json{{"error", s.ToString()}}); }

// Rotates a head of `head_dim` dims (half pairing) at `position` with frequencies base^(-2i/head_dim).
Result<std::vector<float>> Rotate(std::vector<float> v, int64_t position, const RopeFrequencies& f,
                                  RopePairing pairing) {
  const int64_t d = static_cast<int64_t>(v.size());
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(f, 0, RopePrecision::kExact));
  const std::vector<int64_t> pos = {position};
  HeadsView view = HeadsView::Dense(v.data(), DType::kF32, 1, 1, d);
  POSENC_RETURN_IF_ERROR(ApplyRopeReference({{pairing, d, 0, d}, &table, pos}, view, view));
  return v;
}

// The lesson's sentences over a vocabulary {the, dog, cat, chased} with fixed embeddings (d = 8) and
// fixed W_q, W_k (cos/sin patterns: the same numbers in every browser). One head of 8 dims.
constexpr int64_t kD = 8;
float Fixed(int64_t row, int64_t col, double a) { return static_cast<float>(std::cos(a * (row + 1) + 0.37 * col)); }

// Attention weights [T][T] of `ids` under `scheme` (0 none, 1 sinusoidal x + p, 2 RoPE, 3 ALiBi
// slope 1/2), with or without the causal mask: the positional numbers from posenc (SinusoidalTable,
// the reference RoPE kernel, AlibiBiasAt), then a softmax.
Result<std::vector<std::vector<double>>> StoryWeights(const std::vector<int64_t>& ids, int scheme, bool causal) {
  const int64_t t_count = static_cast<int64_t>(ids.size());
  std::vector<int64_t> pos(ids.size());
  for (int64_t t = 0; t < t_count; ++t) pos[t] = t;
  std::vector<float> x(static_cast<size_t>(t_count * kD));
  for (int64_t t = 0; t < t_count; ++t)
    for (int64_t c = 0; c < kD; ++c) x[t * kD + c] = Fixed(ids[t], c, 1.3);
  if (scheme == 1) {
    POSENC_ASSIGN_OR_RETURN(Array p, SinusoidalTable(pos, kD, SinusoidalLayout::kInterleaved));
    for (int64_t i = 0; i < t_count * kD; ++i) x[i] += p.data<float>()[i];
  }
  std::vector<float> q(x.size()), k(x.size());
  for (int64_t t = 0; t < t_count; ++t)
    for (int64_t o = 0; o < kD; ++o) {
      double sq = 0, sk = 0;
      for (int64_t i = 0; i < kD; ++i) {
        sq += double{x[t * kD + i]} * Fixed(i, o, 0.71) / std::sqrt(double{kD});
        sk += double{x[t * kD + i]} * Fixed(i + 9, o, 0.53) / std::sqrt(double{kD});
      }
      q[t * kD + o] = static_cast<float>(sq);
      k[t * kD + o] = static_cast<float>(sk);
    }
  if (scheme == 2) {
    POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, DefaultRopeFrequencies(kD, 10000.0));
    POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(f, t_count, RopePrecision::kReference));
    for (std::vector<float>* v : {&q, &k}) {
      HeadsView view = HeadsView::Dense(v->data(), DType::kF32, t_count, 1, kD);
      POSENC_RETURN_IF_ERROR(ApplyRopeReference({{RopePairing::kHalf, kD, 0, kD}, &table, pos}, view, view));
    }
  }
  std::vector<std::vector<double>> w(static_cast<size_t>(t_count), std::vector<double>(ids.size(), 0.0));
  for (int64_t i = 0; i < t_count; ++i) {
    const int64_t end = causal ? i + 1 : t_count;
    double top = -INFINITY, sum = 0;
    for (int64_t j = 0; j < end; ++j) {
      double s = 0;
      for (int64_t c = 0; c < kD; ++c) s += double{q[i * kD + c]} * k[j * kD + c];
      s /= std::sqrt(double{kD});
      if (scheme == 3) s += AlibiBiasAt(0.5, i, j);
      w[i][j] = s;
      top = std::max(top, s);
    }
    for (int64_t j = 0; j < end; ++j) sum += (w[i][j] = std::exp(w[i][j] - top));
    for (int64_t j = 0; j < end; ++j) w[i][j] /= sum;
  }
  return w;
}

}  // namespace
}  // namespace posenc::web

using namespace posenc;
using namespace posenc::web;

extern "C" {

// A Hugging Face config.json's text: what `posenc inspect --json --seq-len seq_len` reports
// (DescribeSchemeJson; seq_len < 0: max_position_embeddings).
EMSCRIPTEN_KEEPALIVE const char* posenc_describe(const char* config_json, double seq_len) {
  Result<PositionScheme> s = ParseHfConfig(config_json, "config.json");
  if (!s.ok()) return Error(s.status());
  Result<std::string> d = DescribeSchemeJson(*s, "config.json", static_cast<int64_t>(seq_len));
  if (!d.ok()) return Error(d.status());
  Buffer() = std::move(d).value();
  return Buffer().c_str();
}

// One pair of a 2-dim head rotated by posenc: v = (x0, x1) at position m with frequency theta
// (the seed's exercises), and the dot product with k = (y0, y1) at position n.
EMSCRIPTEN_KEEPALIVE const char* posenc_rotate_pair(double x0, double x1, double y0, double y1, double theta, double m,
                                                    double n) {
  const RopeFrequencies f{{theta}, 1.0};
  Result<std::vector<float>> q =
      Rotate({static_cast<float>(x0), static_cast<float>(x1)}, static_cast<int64_t>(m), f, RopePairing::kInterleaved);
  if (!q.ok()) return Error(q.status());
  Result<std::vector<float>> k =
      Rotate({static_cast<float>(y0), static_cast<float>(y1)}, static_cast<int64_t>(n), f, RopePairing::kInterleaved);
  if (!k.ok()) return Error(k.status());
  const double dot = double{(*q)[0]} * (*k)[0] + double{(*q)[1]} * (*k)[1];
  return Out(json{{"q", *q},
                  {"k", *k},
                  {"dot", dot},
                  {"q_norm", std::hypot(double{(*q)[0]}, double{(*q)[1]})},
                  {"angle_q", static_cast<double>(static_cast<int64_t>(m)) * theta}});
}

// q . k against m - n for a seeded q and k of `head_dim` dims with base `base`: the query at m, keys at
// m - r for r in [-span, span]; and pair `pair`'s frequency.
EMSCRIPTEN_KEEPALIVE const char* posenc_scores(double head_dim, double base, double m, double span, double pair) {
  const int64_t d = static_cast<int64_t>(head_dim);
  Result<RopeFrequencies> f = DefaultRopeFrequencies(d, base);
  if (!f.ok()) return Error(f.status());
  std::vector<float> q0(static_cast<size_t>(d)), k0(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) {  // fixed, deterministic vectors (no RNG needed in the page)
    q0[i] = static_cast<float>(std::cos(0.7 * i + 0.3));
    k0[i] = static_cast<float>(std::sin(1.3 * i + 0.1));
  }
  json rel = json::array(), scores = json::array();
  const int64_t mm = static_cast<int64_t>(m), sp = static_cast<int64_t>(span);
  Result<std::vector<float>> q = Rotate(q0, mm, *f, RopePairing::kHalf);
  if (!q.ok()) return Error(q.status());
  for (int64_t r = -sp; r <= sp; ++r) {
    if (mm - r < 0) continue;
    Result<std::vector<float>> k = Rotate(k0, mm - r, *f, RopePairing::kHalf);
    if (!k.ok()) return Error(k.status());
    double s = 0;
    for (int64_t i = 0; i < d; ++i) s += double{(*q)[i]} * (*k)[i];
    rel.push_back(r);
    scores.push_back(s);
  }
  const int64_t p = static_cast<int64_t>(pair);
  const double theta = p >= 0 && p < static_cast<int64_t>(f->inv_freq.size()) ? f->inv_freq[p] : 0.0;
  return Out(json{{"relative", rel}, {"scores", scores}, {"theta", theta}, {"inv_freq", f->inv_freq}});
}

// The lesson's story: attention weights of "The dog chased the cat" (A) and of "The cat chased the
// dog" (B) mapped back to A's order, under `scheme` (0 none, 1 sinusoidal, 2 RoPE, 3 ALiBi: only with
// the causal mask), with or without the causal mask, and max |A - B mapped back| (0: word-order blind).
EMSCRIPTEN_KEEPALIVE const char* posenc_story(double scheme, double causal) {
  const int sc = static_cast<int>(scheme);
  if (sc < 0 || sc > 3) return Error(Status(StatusCode::kInvalidArgument, "story: scheme is 0..3"));
  if (sc == 3 && causal == 0)
    return Error(Status(StatusCode::kInvalidArgument, "story: ALiBi is only used under the causal mask"));
  const std::vector<int64_t> a_ids = {0, 1, 3, 0, 2}, b_ids = {0, 2, 3, 0, 1};
  const std::vector<int64_t> perm = {0, 4, 2, 3, 1};  // B's token t is A's token perm[t]
  Result<std::vector<std::vector<double>>> a = StoryWeights(a_ids, sc, causal != 0);
  if (!a.ok()) return Error(a.status());
  Result<std::vector<std::vector<double>>> b = StoryWeights(b_ids, sc, causal != 0);
  if (!b.ok()) return Error(b.status());
  // B mapped back: row/column of A's token perm[t] is B's t.
  // The masks too: B's mask (key after query in B's order) lands elsewhere once mapped back.
  const size_t n = a->size();
  std::vector<std::vector<double>> back(n, std::vector<double>(n, 0.0));
  std::vector<std::vector<int>> mask_a(n, std::vector<int>(n, 0)), mask_b = mask_a;
  double gap = 0;
  for (size_t t = 0; t < n; ++t)
    for (size_t u = 0; u < n; ++u) {
      back[perm[t]][perm[u]] = (*b)[t][u];
      mask_a[t][u] = causal != 0 && u > t;
      mask_b[perm[t]][perm[u]] = causal != 0 && u > t;
    }
  for (size_t i = 0; i < back.size(); ++i)
    for (size_t j = 0; j < back.size(); ++j) gap = std::max(gap, std::fabs(back[i][j] - (*a)[i][j]));
  return Out(json{{"a", *a}, {"b_mapped_back", back}, {"mask_a", mask_a}, {"mask_b", mask_b}, {"max_gap", gap}});
}

// The family registry: model_type, scheme and pair layout of every family posenc knows.
EMSCRIPTEN_KEEPALIVE const char* posenc_families() {
  json out = json::array();
  for (const ModelFamily& m : ModelFamilies())
    out.push_back({{"model_type", std::string(m.model_type)},
                   {"scheme", std::string(ToString(m.scheme))},
                   {"pairing", std::string(ToString(m.pairing))}});
  return Out(out);
}

}  // extern "C"
