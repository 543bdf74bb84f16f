// `posenc bench rerotate`: re-rotating a [4096 tokens, 8 heads, 128] key cache in place (RerotateKeys,
// dynamic NTK 4096 -> 4097) against rotating it afresh from kept pre-rotation keys with the new
// frequencies, both with the same SIMD kernels and threads. "afresh" is timed twice: with the new
// cos/sin table already built (a lower bound: the table must be rebuilt whenever the frequencies
// change) and including the table build. Medians of repetitions, interleaved.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "posenc/core/checked_math.hpp"
#include "posenc/core/message.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/rerotate.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc::cli {
namespace {

struct Options {
  int reps = 21;
  std::string threads = "1,2";
  bool json = false;
  int64_t tokens = 4096, heads = 8, head_dim = 128;
};

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status Run(const Options& o) {
  if (o.reps < 1) return InvalidArgumentError(fmt::format("--reps {} must be >= 1", o.reps));
  if (o.tokens < 1 || o.heads < 1 || o.head_dim < 2 || o.head_dim % 2)
    return InvalidArgumentError(
        fmt::format("--shape [{}, {}, {}]: tokens, heads >= 1 and head_dim even", o.tokens, o.heads, o.head_dim));
  // The three float32 buffers (raw keys, cache, output) are allocated before anything runs: bound
  // their size first (kMaxElements each, 3 GiB in all), with checked products.
  constexpr int64_t kMaxElements = int64_t{1} << 28;
  int64_t n_elements = 0;
  const int64_t dims[] = {o.tokens, o.heads, o.head_dim};
  if (!CheckedProduct(dims, &n_elements) || n_elements > kMaxElements)
    return InvalidArgumentError(
        fmt::format("--tokens {} x --heads {} x --head-dim {} is more than {} elements "
                    "(three float32 buffers of that size are allocated)",
                    o.tokens, o.heads, o.head_dim, kMaxElements));
  std::vector<int> threads;
  {
    std::stringstream ss(o.threads);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const long t = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || t < 1 || t > 256)
        return InvalidArgumentError(fmt::format("--threads {}: {} is not a thread count in [1, 256]",
                                                QuoteForMessage(o.threads), QuoteForMessage(item)));
      threads.push_back(static_cast<int>(t));
    }
    if (threads.empty())
      return InvalidArgumentError(fmt::format("--threads {} lists no thread count", QuoteForMessage(o.threads)));
  }
  // A Llama-like dynamic-NTK config whose frequencies change at the step from 4096 to 4097 tokens.
  RopeConfig cfg;
  cfg.layout = {RopePairing::kHalf, o.head_dim, 0, o.head_dim};
  cfg.base = 500000.0;
  cfg.max_position_embeddings = o.tokens;
  cfg.scaling.type = RopeScalingType::kDynamicNtk;
  cfg.scaling.factor = 2.0;
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f_old, ComputeRopeFrequencies(cfg, o.tokens));
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f_new, ComputeRopeFrequencies(cfg, o.tokens + 1));
  std::vector<int64_t> pos(static_cast<size_t>(o.tokens));
  for (int64_t t = 0; t < o.tokens; ++t) pos[static_cast<size_t>(t)] = t;
  const size_t n = static_cast<size_t>(n_elements);
  std::vector<float> raw(n), cache(n), out(n);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (float& v : raw) v = nd(rng);
  if (!o.json)
    std::printf(
        "simd %s; keys [%lld, %lld, %lld] float32, dynamic NTK %lld -> %lld tokens; medians of %d reps\n"
        "%-12s %-11s %7s %12s %14s %18s %9s\n",
        ChosenSimdTarget().c_str(), static_cast<long long>(o.tokens), static_cast<long long>(o.heads),
        static_cast<long long>(o.head_dim), static_cast<long long>(o.tokens), static_cast<long long>(o.tokens + 1),
        o.reps, "layout", "precision", "threads", "rerotate_ms", "afresh_ms", "afresh+table_ms", "ratio");
  for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved}) {
    RotaryLayout L = cfg.layout;
    L.pairing = pairing;
    for (RopePrecision prec : {RopePrecision::kExact, RopePrecision::kReference}) {
      POSENC_ASSIGN_OR_RETURN(RopeTable old_table, RopeTable::Build(f_old, o.tokens, prec));
      for (int nt : threads) {
        ThreadPool pool(nt);
        std::vector<double> t_re, t_fresh, t_fresh_table;
        for (int r = 0; r < o.reps + 1; ++r) {
          // The cache as it stands: keys rotated with the old frequencies (not timed).
          std::memcpy(cache.data(), raw.data(), n * sizeof(float));
          HeadsView cv = HeadsView::Dense(cache.data(), DType::kF32, o.tokens, o.heads, o.head_dim);
          HeadsView rv = HeadsView::Dense(raw.data(), DType::kF32, o.tokens, o.heads, o.head_dim);
          HeadsView ov = HeadsView::Dense(out.data(), DType::kF32, o.tokens, o.heads, o.head_dim);
          POSENC_RETURN_IF_ERROR(ApplyRope({L, &old_table, pos, RopeDirection::kForward, &pool}, cv));
          const double t0 = Now();
          POSENC_RETURN_IF_ERROR(RerotateKeys({L, pos, &f_old, &f_new, prec, &pool}, cv));
          const double t1 = Now();
          POSENC_ASSIGN_OR_RETURN(RopeTable new_table, RopeTable::Build(f_new, o.tokens, prec));
          const double t2 = Now();
          POSENC_RETURN_IF_ERROR(ApplyRope({L, &new_table, pos, RopeDirection::kForward, &pool}, rv, ov));
          const double t3 = Now();
          if (r == 0) continue;  // warm-up
          t_re.push_back(t1 - t0);
          t_fresh.push_back(t3 - t2);
          t_fresh_table.push_back(t3 - t1);
        }
        const double re = Median(t_re) * 1e3, fr = Median(t_fresh) * 1e3, frt = Median(t_fresh_table) * 1e3;
        if (o.json) {
          std::printf(
              "{\"op\": \"rerotate\", \"shape\": \"[%lld, %lld, %lld]\", \"dtype\": \"float32\", \"layout\": \"%s\", "
              "\"precision\": \"%s\", \"threads\": %d, \"simd\": \"%s\", \"rerotate_median_ms\": %.4f, "
              "\"afresh_median_ms\": %.4f, \"afresh_with_table_median_ms\": %.4f, \"reps\": %d}\n",
              static_cast<long long>(o.tokens), static_cast<long long>(o.heads), static_cast<long long>(o.head_dim),
              std::string(ToString(pairing)).c_str(), std::string(ToString(prec)).c_str(), nt,
              ChosenSimdTarget().c_str(), re, fr, frt, o.reps);
        } else {
          std::printf("%-12s %-11s %7d %12.3f %14.3f %18.3f %9.2f\n", std::string(ToString(pairing)).c_str(),
                      std::string(ToString(prec)).c_str(), nt, re, fr, frt, re / frt);
        }
        std::fflush(stdout);
      }
    }
  }
  if (!o.json)
    std::printf(
        "ratio = rerotate / (afresh + table). rerotate computes cos/sin of the angle differences per token\n"
        "inside the kernel (spread over the threads); afresh needs the pre-rotation keys kept in memory.\n");
  return OkStatus();
}

void RegisterBenchRerotate(CLI::App& app) {
  // A subcommand of `posenc bench`: `posenc bench rerotate`.
  CLI::App* bench = app.get_subcommand("bench");
  auto* cmd = bench->add_subcommand(
      "rerotate", "Time re-rotating a [4096, 8, 128] key cache (RerotateKeys) against rotating it afresh");
  auto o = std::make_shared<Options>();
  AddIntOption(cmd, "--reps", o->reps, "Repetitions (median reported)", 1, 100000)->capture_default_str();
  cmd->add_option("--threads", o->threads, "Comma-separated thread counts")->capture_default_str();
  // Positions are int32-range (ARCHITECTURE: positions in [0, 2^31)); the product is bounded in Run.
  AddIntOption(cmd, "--tokens", o->tokens, "Cached tokens (also the dynamic-NTK original length)", 1,
               (int64_t{1} << 31) - 2)
      ->capture_default_str();
  AddIntOption(cmd, "--heads", o->heads, "Key heads", 1, int64_t{1} << 20)->capture_default_str();
  AddIntOption(cmd, "--head-dim", o->head_dim, "Head dimension (all rotary)", 2, int64_t{1} << 20)
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON object per line");
  cmd->callback([o] {
    Status s = Run(*o);
    if (!s.ok()) ReportError("bench rerotate", s);
  });
}

}  // namespace
POSENC_CLI_COMMAND(91, RegisterBenchRerotate);  // after `bench` (90), which it extends
}  // namespace posenc::cli
