// `posenc demo`: the seed's story told with real numbers from a small embedded model (no files):
// attention alone is blind to word order (with the causal mask off, as the seed tells it), each
// positional scheme fixes that, a decoder's causal mask alone fixes it too (why NoPE layers work),
// RoPE keeps norms and encodes only distances, the seed's three exercises, then where the seed is too
// simple: RoPE does not extrapolate by itself (Llama 2's slow pairs past 4096, and what each scaling
// does about it), and its summary table corrected.
#include <cmath>
#include <cstdio>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/math/attention.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/math/relative.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/sinusoidal.hpp"

namespace posenc::cli {
namespace {

// The toy decoder layer: 4 words, d_model 8, 2 heads of 4 dims.
constexpr int64_t kVocab = 4, kDModel = 8, kHeads = 2, kHeadDim = 4, kMaxPositions = 16;
const char* const kWords[kVocab] = {"the", "dog", "cat", "chased"};

// Normal values from mt19937_64 through Box-Muller: the same numbers with every standard library.
std::vector<float> SeededNormal(std::mt19937_64& rng, size_t n, double stddev) {
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53; };
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * std::numbers::pi * uniform();
    v[i] = static_cast<float>(stddev * r * std::cos(a));
    if (i + 1 < n) v[i + 1] = static_cast<float>(stddev * r * std::sin(a));
  }
  return v;
}

enum class Scheme { kNone, kSinusoidal, kLearned, kRope, kAlibi, kT5, kShaw };

struct SchemeInfo {
  Scheme scheme;
  const char* name;
  const char* where;
};
const SchemeInfo kSchemes[] = {
    {Scheme::kNone, "none", "-"},
    {Scheme::kSinusoidal, "sinusoidal (Vaswani)", "x_t = e_t + p_t, fixed sin/cos"},
    {Scheme::kLearned, "learned (GPT-2 wpe)", "x_t = e_t + p_t, a learned row"},
    {Scheme::kRope, "RoPE (base 10000)", "rotate q_t and k_t by t*theta_i"},
    {Scheme::kT5, "T5 buckets (32, 128)", "score += b_h[bucket(j - i)]"},
    {Scheme::kShaw, "Shaw (clip k = 2)", "score += q.a^K_(j-i), v += a^V_(j-i)"},
};

struct ToyModel {
  std::vector<float> embed, wq, wk, wv, wpe;
  std::vector<double> slopes;
  T5RelativeBias t5;
  ShawRelativeEmbeddings shaw;
};

Result<ToyModel> MakeToy(uint64_t seed) {
  std::mt19937_64 rng(seed);
  ToyModel m;
  const double w = 1.0 / std::sqrt(static_cast<double>(kDModel));
  m.embed = SeededNormal(rng, kVocab * kDModel, 1.0);
  m.wq = SeededNormal(rng, kDModel * kHeads * kHeadDim, w);
  m.wk = SeededNormal(rng, kDModel * kHeads * kHeadDim, w);
  m.wv = SeededNormal(rng, kDModel * kHeads * kHeadDim, w);
  m.wpe = SeededNormal(rng, kMaxPositions * kDModel, 1.0);
  POSENC_ASSIGN_OR_RETURN(m.slopes, AlibiSlopes(kHeads, AlibiVariant::kBloom));
  POSENC_ASSIGN_OR_RETURN(m.t5, RandomT5Bias({true, 32, 128}, kHeads, seed + 1));
  POSENC_ASSIGN_OR_RETURN(m.shaw, RandomShawEmbeddings(2, kHeadDim, seed + 2));
  return m;
}

// x [T, d_model] times w [d_model, heads * head_dim] -> [T, heads, head_dim].
Result<Array> Project(const Array& x, const std::vector<float>& w) { return ProjectHeads(x, w, kHeads, kHeadDim); }

RotaryLayout ToyRopeLayout() { return {RopePairing::kHalf, kHeadDim, 0, kHeadDim}; }

// q and k of a sentence (RoPE applied when asked, at positions 0..T-1) and the attention output.
struct Pass {
  Array q, k, v, out;
};

Result<Pass> Forward(const ToyModel& m, const std::vector<int64_t>& ids, Scheme scheme, bool causal = false) {
  std::vector<int64_t> pos(ids.size());
  for (size_t t = 0; t < pos.size(); ++t) pos[t] = static_cast<int64_t>(t);
  POSENC_ASSIGN_OR_RETURN(Array x,
                          LookupEmbeddings(EmbeddingTable::View(m.embed.data(), DType::kF32, kVocab, kDModel), ids));
  if (scheme == Scheme::kSinusoidal) {
    POSENC_ASSIGN_OR_RETURN(Array p, SinusoidalTable(pos, kDModel, SinusoidalLayout::kInterleaved));
    POSENC_RETURN_IF_ERROR(AddPositions(p, x));
  }
  if (scheme == Scheme::kLearned) {
    POSENC_ASSIGN_OR_RETURN(
        Array p, LookupLearnedPositions(EmbeddingTable::View(m.wpe.data(), DType::kF32, kMaxPositions, kDModel), pos));
    POSENC_RETURN_IF_ERROR(AddPositions(p, x));
  }
  Pass pass;
  POSENC_ASSIGN_OR_RETURN(pass.q, Project(x, m.wq));
  POSENC_ASSIGN_OR_RETURN(pass.k, Project(x, m.wk));
  POSENC_ASSIGN_OR_RETURN(pass.v, Project(x, m.wv));
  if (scheme == Scheme::kRope) {
    POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, DefaultRopeFrequencies(kHeadDim, 10000.0));
    POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(f, kMaxPositions, RopePrecision::kReference));
    POSENC_ASSIGN_OR_RETURN(HeadsView qv, HeadsView::Of(pass.q, "q"));
    POSENC_ASSIGN_OR_RETURN(HeadsView kv, HeadsView::Of(pass.k, "k"));
    POSENC_RETURN_IF_ERROR(ApplyRopeQK({ToyRopeLayout(), &table, pos}, qv, kv));  // never v
  }
  AttentionOptions o;  // the seed's story has no causal mask; section 3 turns it on
  o.causal = causal;
  if (scheme == Scheme::kAlibi) o.bias = AttentionBias::Alibi(m.slopes);
  if (scheme == Scheme::kT5) o.bias = AttentionBias::T5(m.t5);
  if (scheme == Scheme::kShaw) o.bias = AttentionBias::Shaw(m.shaw);
  POSENC_ASSIGN_OR_RETURN(pass.out, AttentionReference(pass.q, pass.k, pass.v, o));
  return pass;
}

// max_t |b[t] - a[perm[t]]| over whole token rows.
double PermutationGap(const Array& a, const Array& b, const std::vector<int64_t>& perm) {
  const int64_t row = a.size() / a.dim(0);
  double gap = 0;
  for (size_t t = 0; t < perm.size(); ++t)
    for (int64_t c = 0; c < row; ++c)
      gap = std::max(gap, std::fabs(double{b.data<float>()[t * row + c]} - a.data<float>()[perm[t] * row + c]));
  return gap;
}

double Clean(double x, double eps) { return std::fabs(x) < eps ? 0.0 : x; }  // no "-0.0000"

std::string Row(const Array& a, int64_t t) {
  const int64_t row = a.size() / a.dim(0);
  std::string s = "[";
  for (int64_t c = 0; c < row; ++c)
    s += fmt::format("{}{:+.4f}", c ? " " : "", Clean(a.data<float>()[t * row + c], 5e-5));
  return s + "]";
}

const char* Mark(bool ok) { return ok ? "[ok]" : "[FAILED]"; }

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double{a[i]} * b[i];
  return s;
}

// Rotates one head vector to `position` with the given frequencies (one per pair).
Result<std::vector<float>> RotateOne(std::vector<float> v, int64_t position, const RopeFrequencies& f,
                                     RopePairing pairing, RopePrecision precision) {
  const int64_t d = static_cast<int64_t>(v.size());
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(f, 0, precision));
  const std::vector<int64_t> pos = {position};
  POSENC_RETURN_IF_ERROR(ApplyRope({{pairing, d, 0, 2 * table.num_pairs()}, &table, pos},
                                   HeadsView::Dense(v.data(), DType::kF32, 1, 1, d)));
  return v;
}

// Attention weights of query `i` over keys 0..i under the causal mask, head `h`, with ALiBi's bias
// -slope * (i - j) when `slope` is not 0: the scores from posenc's q and k, the bias from AlibiBiasAt.
std::vector<double> CausalWeights(const Pass& p, int64_t i, int64_t h, double slope) {
  const float* q = p.q.data<float>() + (i * kHeads + h) * kHeadDim;
  std::vector<double> w(static_cast<size_t>(i + 1));
  double top = -INFINITY, sum = 0;
  for (int64_t j = 0; j <= i; ++j) {
    w[j] = Dot(q, p.k.data<float>() + (j * kHeads + h) * kHeadDim, kHeadDim) / std::sqrt(double{kHeadDim}) +
           (slope != 0 ? AlibiBiasAt(slope, i, j) : 0.0);
    top = std::max(top, w[j]);
  }
  for (double& x : w) sum += (x = std::exp(x - top));
  for (double& x : w) x /= sum;
  return w;
}

// Section 6: Llama-2-7B's RoPE (head_dim 128, base 10000, trained on 4096 positions) read by posenc's
// config parser, unscaled and with each scaling's factor 4, at 4 x 4096 positions.
constexpr int64_t kTrainLength = 4096, kFactor = 4, kLongLength = kFactor * kTrainLength;

Result<RopeFrequencies> Llama2Frequencies(const std::string& rope_scaling) {
  const std::string text = fmt::format(
      R"({{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": {},)"
      R"( "rope_theta": 10000.0, "rope_scaling": {}}})",
      kTrainLength, rope_scaling);
  POSENC_ASSIGN_OR_RETURN(PositionScheme s, ParseHfConfig(text, "demo llama-2-7b"));
  return ComputeRopeFrequencies(s.rope, kLongLength);
}

Status ExtrapolationSection(const std::function<const char*(bool)>& check) {
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies plain, Llama2Frequencies("null"));
  const int64_t pairs = static_cast<int64_t>(plain.inv_freq.size()), last = kLongLength - 1;
  std::vector<int64_t> slow;  // pairs that never complete a turn within the training length
  for (int64_t i = 0; i < pairs; ++i)
    if (2 * std::numbers::pi / plain.inv_freq[i] > kTrainLength) slow.push_back(i);
  fmt::print("6. Where the seed is too simple: RoPE does not extrapolate by itself\n");
  fmt::print("   Llama-2-7B (head_dim 128, base 10000) was trained on {} positions. {} of its {} pairs turn\n",
             kTrainLength, slow.size(), pairs);
  fmt::print("   less than once in {} tokens (pairs {}..{}: wavelength > {}), so training only ever showed them\n",
             kTrainLength, slow.front(), slow.back(), kTrainLength);
  fmt::print("   angles up to (4096 - 1) * theta_i. At position {} (4 x 4096) they go past that:\n", last);
  fmt::print("   {:>6}{:>13}{:>22}{:>22}\n", "pair", "wavelength", "largest trained angle", "angle at 16383");
  for (int64_t i : slow) {
    const double th = plain.inv_freq[i];
    if (i == slow.front() || i == slow.back() || i == (slow.front() + slow.back()) / 2)
      fmt::print("   {:>6}{:>13.1f}{:>18.4f} rad{:>18.4f} rad\n", i, 2 * std::numbers::pi / th, (kTrainLength - 1) * th,
                 last * th);
  }
  fmt::print("   Between 4096 and 16383 every slow pair sweeps angles in ((4096 - 1) * theta_i, 2 pi) that it\n");
  fmt::print("   never had in training.\n");
  fmt::print("   There attention meets angles the model never learned (Chen et al. 2023, arXiv:2306.15595, show\n");
  fmt::print("   Llama's perplexity exploding past its training length). Each scaling, factor {}, as posenc\n",
             kFactor);
  fmt::print("   computes it at seq_len {}: the unscaled position whose angle the slowest pair reaches at 16383\n",
             kLongLength);
  fmt::print("   (theta'_63 * 16383 / theta_63), and how many slow pairs reach an unscaled position >= 4096:\n");
  fmt::print("   {:<10}{:>14}{:>22}       {}\n", "scaling", "slowest pair", "slow pairs past", "rope_scaling");
  struct Row {
    const char* name;
    const char* json;
    bool keeps_all;  // every slow pair stays in range
  };
  const Row rows[] = {
      {"none", "null", false},
      {"linear", R"({"rope_type": "linear", "factor": 4.0})", true},
      {"NTK", R"({"rope_type": "ntk", "factor": 4.0})", false},
      {"dynamic", R"({"rope_type": "dynamic", "factor": 4.0})", true},
      {"YaRN", R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})", true},
      {"Llama 3",
       R"({"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, )"
       R"("original_max_position_embeddings": 4096})",
       true},
  };
  for (const Row& r : rows) {
    POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, Llama2Frequencies(r.json));
    int64_t past = 0;
    for (int64_t i : slow) past += last * f.inv_freq[i] / plain.inv_freq[i] >= kTrainLength;
    const double slowest = last * f.inv_freq[slow.back()] / plain.inv_freq[slow.back()];
    // The slowest pair is always brought back; "none" keeps every slow pair past; NTK leaves some
    // middle pairs past (its base change divides them by less than the factor).
    const bool ok = r.keeps_all ? past == 0
                                : (std::string_view(r.name) == "none" ? past == static_cast<int64_t>(slow.size())
                                                                      : past > 0 && slowest < kTrainLength);
    fmt::print("   {:<10}{:>14.2f}{:>13} of {:<2} {:<8}{}\n", r.name, slowest, past, slow.size(), check(ok), r.json);
  }
  fmt::print("   Linear, YaRN and Llama 3 divide the slow pairs by the full factor (interpolation: 16383 turns them\n");
  fmt::print("   as far as 4095.75 did); dynamic NTK stretches the base with the length; static NTK brings the\n");
  fmt::print("   slowest pair back but leaves middle pairs past their range, which is why YaRN interpolates\n");
  fmt::print(
      "   slow pairs fully and keeps fast ones (`posenc inspect CONFIG --seq-len N` lists each pair's regime).\n\n");
  return OkStatus();
}

Status RunDemo(uint64_t seed, bool* all_ok) {
  POSENC_ASSIGN_OR_RETURN(ToyModel m, MakeToy(seed));
  const std::vector<int64_t> a_ids = {0, 1, 3, 0, 2};  // the dog chased the cat
  const std::vector<int64_t> b_ids = {0, 2, 3, 0, 1};  // the cat chased the dog
  const std::vector<int64_t> perm = {0, 4, 2, 3, 1};   // B's token t is A's token perm[t]
  std::function<const char*(bool)> check = [all_ok](bool ok) {
    *all_ok = *all_ok && ok;
    return Mark(ok);
  };
  // A and B through one scheme, and the gap max over tokens |out_B[t] - out_A[perm t]|.
  struct Both {
    Pass a, b;
    double gap;
  };
  auto forward_both = [&](Scheme scheme, bool causal) -> Result<Both> {
    POSENC_ASSIGN_OR_RETURN(Pass a, Forward(m, a_ids, scheme, causal));
    POSENC_ASSIGN_OR_RETURN(Pass b, Forward(m, b_ids, scheme, causal));
    const double gap = PermutationGap(a.out, b.out, perm);
    return Both{std::move(a), std::move(b), gap};
  };
  auto print_dogs = [](const Both& p) {  // "dog" is A's token 1 and B's token 4
    fmt::print("   A, \"dog\" at position 1: {}\n", Row(p.a.out, 1));
    fmt::print("   B, \"dog\" at position 4: {}\n", Row(p.b.out, 4));
  };

  fmt::print("posenc demo: how a decoder knows which word comes first\n\n");
  fmt::print("Toy model (seed {}): vocabulary {{the, dog, cat, chased}}, token embeddings e_t in R^{},\n", seed,
             kDModel);
  fmt::print("W_q, W_k, W_v for {} heads of {} dims, one attention layer. No files: all weights are seeded.\n", kHeads,
             kHeadDim);
  fmt::print("  A: \"The dog chased the cat\" -> ids [0, 1, 3, 0, 2]\n");
  fmt::print("  B: \"The cat chased the dog\" -> ids [0, 2, 3, 0, 1]   (B is A with \"dog\" and \"cat\" swapped)\n\n");

  // 1. Word-order blindness.
  POSENC_ASSIGN_OR_RETURN(const Both blind, forward_both(Scheme::kNone, /*causal=*/false));
  const Pass& a0 = blind.a;
  const double gap0 = blind.gap;
  fmt::print("1. Attention without positions is word-order blind (x_t = e_t only, causal mask OFF:\n");
  fmt::print("   every token attends to every token, as in the seed's story and in an encoder)\n");
  print_dogs(blind);
  fmt::print("   max over tokens |out_B[t] - out_A[perm t]| = {:.1e} < 1e-6: permutation-equivariant {}\n", gap0,
             check(gap0 < 1e-6));
  fmt::print("   B's outputs are A's outputs, reordered: the layer cannot tell who chased whom.\n");
  const double the_gap0 = PermutationGap(a0.out, a0.out, {3});
  fmt::print("   Both \"the\"s (positions 0 and 3) even get the same vector: max diff {:.1e} {}\n\n", the_gap0,
             check(the_gap0 < 1e-6));

  // 2. Every scheme breaks it.
  fmt::print("2. Each positional scheme breaks the symmetry (same weights, positions 0..4, causal mask OFF)\n");
  fmt::print("   {:<22}{:<38}{:>11}  {}\n", "scheme", "where position enters", "max gap", "order-aware");
  for (const SchemeInfo& s : kSchemes) {
    POSENC_ASSIGN_OR_RETURN(const Both both, forward_both(s.scheme, /*causal=*/false));
    const double gap = both.gap;
    const bool aware = gap > 1e-3;
    const bool ok = s.scheme == Scheme::kNone ? !aware : aware;
    fmt::print("   {:<22}{:<38}{:>11.2e}  {} {}\n", s.name, s.where, gap, aware ? "yes" : "no ", check(ok));
  }
  fmt::print("   (max gap = max over tokens |out_B[t] - out_A[perm t]|; > 1e-3 means B is no longer A reordered)\n");
  fmt::print("   ALiBi is not in this table: it is only defined under the causal mask (section 3).\n\n");

  // 3. The causal mask alone.
  POSENC_ASSIGN_OR_RETURN(const Both masked, forward_both(Scheme::kNone, /*causal=*/true));
  const Pass& ac = masked.a;
  const double gap_c = masked.gap;
  fmt::print("3. A decoder's causal mask alone breaks the symmetry (still no positional encoding)\n");
  fmt::print("   A decoder-only model masks the future: token t attends only to tokens 0..t.\n");
  print_dogs(masked);
  fmt::print("   max over tokens |out_B[t] - out_A[perm t]| = {:.2e} > 1e-3: order-aware {}\n", gap_c,
             check(gap_c > 1e-3));
  const double first_the = PermutationGap(ac.out, ac.v, {0});  // token 0 sees only itself: out = its v
  const double the_gap_c = PermutationGap(ac.out, ac.out, {3});
  fmt::print("   The first \"the\" sees only itself: |out_0 - v_0| = {:.1e} {}; the second averages 4 tokens:\n",
             first_the, check(first_the < 1e-6));
  fmt::print("   the two \"the\"s now differ by {:.4f} (without the mask: {:.1e}) {}\n", the_gap_c, the_gap0,
             check(the_gap_c > 1e-3));
  fmt::print("   What a token sees depends on how many tokens precede it, so a decoder can learn positions with\n");
  fmt::print("   no encoding at all (Haviv et al. 2022, arXiv:2203.16634): the reason NoPE layers work. Llama 4\n");
  fmt::print("   skips RoPE in every 4th layer (`posenc inspect` prints a model's per-layer RoPE / NoPE table).\n");
  // ALiBi under the mask, head 0 (BLOOM's slopes for 2 heads: 1/16 and 1/256).
  const std::vector<double> w_none = CausalWeights(ac, 4, 0, 0.0), w_alibi = CausalWeights(ac, 4, 0, m.slopes[0]);
  double back_none = 0, back_alibi = 0, sum_alibi = 0;
  for (int64_t j = 0; j <= 4; ++j) {
    back_none += w_none[j] * static_cast<double>(4 - j);
    back_alibi += w_alibi[j] * static_cast<double>(4 - j);
    sum_alibi += w_alibi[j];
  }
  fmt::print("   ALiBi adds -slope*(i - j) under this mask (BLOOM, MPT): for a visible key (j <= i) a penalty\n");
  fmt::print("   growing with distance; for a future key it would be a growing reward, so it is never used\n");
  fmt::print("   without the mask. Query 4, head 0 (slope {:g}), weights on keys 0..4, mean distance looked back:\n",
             m.slopes[0]);
  auto weights = [](const std::vector<double>& w) {
    std::string s;
    for (double x : w) s += fmt::format(" {:.3f}", x);
    return s;
  };
  fmt::print("     causal mask only:  {}   mean distance {:.3f}\n", weights(w_none), back_none);
  fmt::print("     causal + ALiBi:    {}   mean distance {:.3f} (rows sum to {:.6f}) {}\n\n", weights(w_alibi),
             back_alibi, sum_alibi, check(back_alibi < back_none && std::fabs(sum_alibi - 1) < 1e-9));

  // 4. RoPE: norms and relative distances.
  POSENC_ASSIGN_OR_RETURN(Pass ar, Forward(m, a_ids, Scheme::kRope));
  fmt::print("4. RoPE rotates q and k in 2-D planes: lengths stay, only m - n reaches the score\n");
  fmt::print("   |q_t| (head 0) before -> after rotation to position t, sentence A:\n  ");
  double worst_norm = 0;
  for (int64_t t = 0; t < 5; ++t) {
    const float* before = a0.q.data<float>() + t * kHeads * kHeadDim;
    const float* after = ar.q.data<float>() + t * kHeads * kHeadDim;
    const double nb = std::sqrt(Dot(before, before, kHeadDim)), na = std::sqrt(Dot(after, after, kHeadDim));
    worst_norm = std::max(worst_norm, std::fabs(na - nb) / nb);
    fmt::print(" {} {:.4f}->{:.4f}", kWords[a_ids[t]], nb, na);
  }
  fmt::print("\n   largest relative change {:.1e} < 1e-6 {}\n", worst_norm, check(worst_norm < 1e-6));
  // q of "chased" and k of "dog" (A's tokens 2 and 1), moved together along the sequence.
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, DefaultRopeFrequencies(kHeadDim, 10000.0));
  const std::vector<float> q_chased(a0.q.data<float>() + 2 * kHeads * kHeadDim,
                                    a0.q.data<float>() + 2 * kHeads * kHeadDim + kHeadDim);
  const std::vector<float> k_dog(a0.k.data<float>() + 1 * kHeads * kHeadDim,
                                 a0.k.data<float>() + 1 * kHeads * kHeadDim + kHeadDim);
  fmt::print(
      "   q(\"chased\") . k(\"dog\"), the words one step apart, at growing absolute positions (exact precision):\n");
  double first = 0, worst_shift = 0;
  for (int64_t shift : {int64_t{0}, int64_t{100}, int64_t{1000000}}) {
    POSENC_ASSIGN_OR_RETURN(std::vector<float> qr,
                            RotateOne(q_chased, 2 + shift, f, RopePairing::kHalf, RopePrecision::kExact));
    POSENC_ASSIGN_OR_RETURN(std::vector<float> kr,
                            RotateOne(k_dog, 1 + shift, f, RopePairing::kHalf, RopePrecision::kExact));
    const double score = Dot(qr.data(), kr.data(), kHeadDim);
    if (shift == 0) first = score;
    worst_shift = std::max(worst_shift, std::fabs(score - first));
    fmt::print("     (m, n) = {:<20} q_m . k_n = {:+.6f}\n", fmt::format("({}, {})", 2 + shift, 1 + shift), score);
  }
  fmt::print("   largest difference {:.1e} < 1e-5: the score depends only on m - n {}\n", worst_shift,
             check(worst_shift < 1e-5));
  {
    POSENC_ASSIGN_OR_RETURN(std::vector<float> qr,
                            RotateOne(q_chased, 1000002, f, RopePairing::kHalf, RopePrecision::kReference));
    POSENC_ASSIGN_OR_RETURN(std::vector<float> kr,
                            RotateOne(k_dog, 1000001, f, RopePairing::kHalf, RopePrecision::kReference));
    fmt::print(
        "   (with float32 angles, as PyTorch computes them, (1000002, 1000001) gives {:+.6f}: at large\n"
        "    positions the angle's rounding, about position * 2^-24 radians, shows)\n",
        Dot(qr.data(), kr.data(), kHeadDim));
  }
  fmt::print("   Relative in the score does not mean unlimited: a model only learned the distances (and\n");
  fmt::print("   angles) its training length showed it; section 6 shows what happens past that.\n\n");

  // 5. The seed's exercises, on a 2-dim head whose one pair has frequency theta.
  const double pi = std::numbers::pi;
  auto ex = [&](std::vector<float> v, int64_t pos, double theta) {
    return RotateOne(std::move(v), pos, RopeFrequencies{{theta}, 1.0}, RopePairing::kInterleaved,
                     RopePrecision::kExact);
  };
  auto f4 = [](double x) { return fmt::format("{:.4f}", Clean(x, 5e-5)); };
  auto f1 = [](double x) { return fmt::format("{:.1f}", Clean(x, 0.05)); };
  auto norm = [](const std::vector<float>& v) { return std::hypot(double{v[0]}, double{v[1]}); };
  fmt::print("5. The seed's exercises, computed by posenc's RoPE (head_dim 2, inv_freq = theta)\n");
  POSENC_ASSIGN_OR_RETURN(std::vector<float> v1, ex({1.0f, 0.0f}, 1, pi / 4));
  const bool ok1 = f4(v1[0]) == "0.7071" && f4(v1[1]) == "0.7071" && f4(norm(v1)) == "1.0000";
  fmt::print("   Exercise 1: v = [1.0, 0.0], m = 1, theta = pi/4 -> v' = [{}, {}]\n", f4(v1[0]), f4(v1[1]));
  fmt::print("               |v| = {}, |v'| = {}: the norm is preserved {}\n", f4(norm({1.0f, 0.0f})), f4(norm(v1)),
             check(ok1));
  POSENC_ASSIGN_OR_RETURN(std::vector<float> q2, ex({1.0f, 0.0f}, 2, pi / 4));
  POSENC_ASSIGN_OR_RETURN(std::vector<float> k2, ex({1.0f, 0.0f}, 1, pi / 4));
  const double dot2 = Dot(q2.data(), k2.data(), 2);
  const bool ok2 = f1(q2[0]) == "0.0" && f1(q2[1]) == "1.0" && f4(k2[0]) == "0.7071" && f4(k2[1]) == "0.7071" &&
                   f4(dot2) == "0.7071" && f4(std::cos(pi / 4)) == "0.7071";
  fmt::print("   Exercise 2: q = k = [1.0, 0.0], m = 2, n = 1, theta = pi/4 -> q' = [{}, {}], k' = [{}, {}],\n",
             f1(q2[0]), f1(q2[1]), f4(k2[0]), f4(k2[1]));
  fmt::print("               q' . k' = {} = cos((m - n) theta) = {} {}\n", f4(dot2), f4(std::cos(pi / 4)), check(ok2));
  POSENC_ASSIGN_OR_RETURN(std::vector<float> w3, ex({3.0f, 4.0f}, 2, pi / 2));
  const bool ok3 = f1(w3[0]) == "-3.0" && f1(w3[1]) == "-4.0" && f1(norm(w3)) == "5.0";
  fmt::print("   Exercise 3: w = [3.0, 4.0], m = 2, theta = pi/2 (a 180 degree turn) -> w' = [{}, {}]\n", f1(w3[0]),
             f1(w3[1]));
  fmt::print("               |w| = {}, |w'| = {}: flipped, same length {}\n\n", f1(norm({3.0f, 4.0f})), f1(norm(w3)),
             check(ok3));

  // 6. Extrapolation.
  POSENC_RETURN_IF_ERROR(ExtrapolationSection(check));

  // 7. The seed's summary table, corrected where sections 3 and 6 showed it too simple.
  struct Aspect {
    const char* aspect;
    const char* absolute;
    const char* rope;
  };
  const Aspect kTable[] = {
      {"Where applied", "added to input embeddings once, at the bottom",
       "applied to Q and K inside every attention layer"},
      {"Mechanism", "vector addition: x = e + p", "2-D rotation in Q/K space"},
      {"Position type", "absolute (position index t)", "relative (distance m - n in the dot product)"},
      {"Generalization", "poor beyond the training length (esp. learned)",
       "also poor past the training length by itself (section 6); a scaling"},
      {"", "", "(linear, NTK, YaRN, Llama 3) extends the context, often with fine-tuning"},
      {"Parameters", "learned: max_len x d_model", "zero: frequencies fixed by formula"},
      {"Norm preservation", "n/a (addition changes the norm)", "yes: rotation preserves the norm"},
      {"Attention formula", "unchanged (Q @ K^T)", "unchanged: RoPE pre-processes Q and K"},
      {"Used by", "original Transformer, GPT-2, BERT", "Llama 2/3, Mistral, Gemma, Qwen, DeepSeek, Phi"},
  };
  fmt::print("7. Summary: absolute encodings vs RoPE (the seed's table, corrected)\n");
  for (const Aspect& a : kTable) {
    if (*a.absolute != '\0') fmt::print("   {:<19}absolute: {}\n", a.aspect, a.absolute);
    fmt::print("   {:<19}{}{}\n", "", *a.absolute != '\0' ? "RoPE:     " : "          ", a.rope);
  }
  fmt::print("   Relative biases (Shaw, T5, ALiBi) sit in between: they change the scores, not x or q/k.\n");
  fmt::print("   And in a decoder the causal mask itself carries order (section 3): some layers use no encoding.\n\n");
  fmt::print("{}\n", *all_ok ? "All checks passed." : "SOME CHECKS FAILED.");
  return OkStatus();
}

void RegisterDemo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Tell the seed's story with real numbers (no files needed)");
  static uint64_t seed = 2024;
  AddIntOption(cmd, "--seed", seed, "Seed of the toy model's weights", 0, INT64_MAX)->capture_default_str();
  cmd->footer("Exit status: 0 when every check holds, 1 when one fails.");
  cmd->callback([] {
    bool all_ok = true;
    Status s = RunDemo(seed, &all_ok);
    std::fflush(stdout);
    if (!s.ok()) {
      ReportError("demo", s);
    } else if (!all_ok) {
      SetExitCode(1);
    }
  });
}

}  // namespace
POSENC_CLI_COMMAND(10, RegisterDemo);
}  // namespace posenc::cli
