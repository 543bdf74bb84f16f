// `posenc bench`: the kernels on real shapes (bench/bench_cases.hpp) against the roofline pass over the
// same bytes, measured in the same run, interleaved; medians of many repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "bench_cases.hpp"
#include "commands.hpp"
#include "posenc/core/message.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/rerotate.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/kernels/simd.hpp"
#include "posenc/math/rope_table.hpp"

namespace posenc::cli {
namespace {

struct BenchOptions {
  bool json = false;
  std::string filter;
  std::string threads = "1,2";
  std::string simd = "best";
  int reps = 0;                // 0: chosen per case from its size
  std::string cache = "both";  // warm, cold or both
  int evict_mib = 0;           // 0: bench::EvictBytes()'s default
  bool list = false;
};

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One core's rate on `core`, an L1-resident slice of the case (bench_cases.hpp): the median of 41
// samples, each repeating the slice back to back for at least 50 us. GB/s of the slice's bytes.
double CoreGbps(const bench::Prepared& p) {
  for (int w = 0; w < 3; ++w) p.core();
  double t0 = Now();
  p.core();
  const int repeats = std::clamp(static_cast<int>(50e-6 / std::max(Now() - t0, 1e-8)), 1, 100000);
  std::vector<double> ts;
  for (int r = 0; r < 41; ++r) {
    t0 = Now();
    for (int i = 0; i < repeats; ++i) p.core();
    ts.push_back((Now() - t0) / repeats);
  }
  return p.core_bytes / Median(ts) / 1e9;
}

Status ParseThreads(const std::string& s, std::vector<int>* out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 256)
      return InvalidArgumentError(
          fmt::format("--threads {}: {} is not a thread count in [1, 256]", QuoteForMessage(s), QuoteForMessage(item)));
    out->push_back(static_cast<int>(v));
  }
  if (out->empty()) return InvalidArgumentError(fmt::format("--threads '{}' lists no thread count", s));
  return OkStatus();
}

// The exact table must cost at most 1.5x the reference one: both built here, interleaved.
// RopeTable::Build runs on the internal pool, so --threads does not apply (the row reports its size).
Status BenchTable(const BenchOptions& o) {
  const int64_t positions = 32768;
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies freqs, DefaultRopeFrequencies(128, 500000.0));
  std::vector<double> ref, exact;
  const int reps = o.reps > 0 ? o.reps : 11;
  // Each table is dropped before the next is built and the order alternates, so both precisions see
  // the same allocator state (a table built while the other is alive can land on freshly mapped pages
  // and pay their first-touch faults, which is the allocator's cost, not the build's).
  for (int r = 0; r < reps + 1; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool is_exact = (r + k) % 2 == 1;
      const double t0 = Now();
      POSENC_ASSIGN_OR_RETURN(
          RopeTable table,
          RopeTable::Build(freqs, positions, is_exact ? RopePrecision::kExact : RopePrecision::kReference));
      const double t1 = Now();
      if (r > 0) (is_exact ? exact : ref).push_back(t1 - t0);  // r == 0: warm-up
    }
  }
  const double mr = Median(ref) * 1e3, me = Median(exact) * 1e3;
  if (o.json) {
    std::printf(
        "{\"op\": \"rope_table_build\", \"shape\": \"[%lld, 64]\", \"dtype\": \"float32\", \"simd\": \"%s\", "
        "\"threads\": %d, \"reference_median_ms\": %.4f, \"exact_median_ms\": %.4f, \"exact_over_reference\": %.3f, "
        "\"reps\": %d}\n",
        static_cast<long long>(positions), ChosenSimdTarget().c_str(), DefaultThreadCount(), mr, me, me / mr, reps);
  } else {
    std::printf("%-40s reference %8.3f ms   exact %8.3f ms   exact/reference %.2f\n",
                fmt::format("rope_table_build/[{}, 64]", positions).c_str(), mr, me, me / mr);
  }
  return OkStatus();
}

// --filter as a regular expression. std::regex compiles and matches by recursion (a long or deeply
// nested pattern overflows the stack, a backtracking one can take exponential time): bound the
// pattern, and on libstdc++ ask for its polynomial (Thompson) executor.
Result<std::regex> CompileFilter(const std::string& text) {
  constexpr size_t kMaxFilter = 256;
  if (text.size() > kMaxFilter)
    return InvalidArgumentError(fmt::format("--filter {}: {} bytes, more than the {} accepted",
                                            QuoteForMessage(text, 60), text.size(), kMaxFilter));
  int depth = 0, max_depth = 0;
  for (char ch : text) {
    depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
    max_depth = std::max(max_depth, depth);
  }
  if (max_depth > 16)
    return InvalidArgumentError(
        fmt::format("--filter {}: groups nested {} deep (at most 16)", QuoteForMessage(text, 60), max_depth));
  try {
#if defined(__GLIBCXX__)
    return std::regex(text.empty() ? ".*" : text, std::regex::ECMAScript | std::regex_constants::__polynomial);
#else
    return std::regex(text.empty() ? ".*" : text);
#endif
  } catch (const std::regex_error& e) {
    return InvalidArgumentError(
        fmt::format("--filter {} is not a valid regular expression ({})", QuoteForMessage(text), e.what()));
  }
}

void PrintHeader(const BenchOptions& o) {
  std::printf(
      "simd %s, threads %s; median over repetitions, kernel and roofline interleaved; cold: %zu MiB read first\n"
      "core GB/s: one core on an L1-resident slice of the case; attain: min(1, threads x core / roof), the\n"
      "best fraction the kernel could reach if it never waited on memory; frac_all: every byte moved (cos/sin\n"
      "rows, cache rows) over the roofline; vs_unfused: fused rows, time of posenc's separate calls / fused;\n"
      "of_pattern: fused rows, time of the same bytes moved in the same order with no arithmetic / fused;\n"
      "UNSTEADY: still over 2x its fastest run, or a reference pass over 2x slower than the kernel, after 3 tries\n"
      "%-58s %5s %7s %10s %9s %9s %8s %8s %9s %7s %10s %10s\n",
      ChosenSimdTarget().c_str(), o.threads.c_str(), bench::EvictBytes() >> 20, "case", "cache", "threads",
      "median_ms", "GB/s", "roof GB/s", "fraction", "frac_all", "core GB/s", "attain", "vs_unfused", "of_pattern");
}

// One case at one cache mode and thread count: its prepared buffers, the times of each pass (kernel,
// roofline, unfused calls, bare pattern), and how it was measured.
struct Measured {
  std::unique_ptr<bench::Prepared> p;
  int reps = 0, warmup_rounds = 0, attempts = 0;
  double core = 0.0;
  std::vector<double> tk, tr, tu, tp;
  bool steady = false;
};

double Fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Each attempt prepares the case afresh (new buffers), warms up and times. Warm: kernel and roofline
// alternate over the same buffers, so each starts with whatever of them the other left in cache (all
// of it when the tensor fits in L2/L3). Cold: every timed run starts after an untimed eviction pass,
// so both stream their bytes from DRAM. The core rate is measured first, while the pool's workers
// sleep (a polling worker can slow the other vCPU).
Measured MeasureCase(const bench::CaseSpec& c, bool cold, ThreadPool& pool, const BenchOptions& o) {
  Measured m;
  const auto timed = [&](const std::function<void()>& fn, std::vector<double>& times) {
    if (cold) bench::EvictCaches(pool);
    const double t0 = Now();
    fn();
    times.push_back(Now() - t0);
  };
  // An attempt is steady when every pass's median is within kUnsteady x its fastest run, and neither
  // reference pass (the roofline, the bare access pattern: each moves the kernel's bytes the cheapest
  // way) is over kUnsteady x slower than the kernel. On a 2-vCPU AMD EPYC guest (2026-12-02) some
  // allocations ran at 0.8-1.5 GB/s instead of 25-30 for seconds at a time, often for a whole row
  // (every repetition alike, so its median was its fastest run), while the kernel's own buffers were
  // fast: rows printed fraction_all 13-29 and speedups of 9-14. Up to kMaxAttempts attempts; a row
  // still unsteady says "steady": false.
  constexpr int kMaxAttempts = 3;
  constexpr double kUnsteady = 2.0;
  for (; !m.steady && m.attempts < kMaxAttempts; ++m.attempts) {
    m.p.reset();  // the previous attempt's buffers go before the new ones are allocated
    m.p = bench::Prepare(c, &pool);
    const bench::Prepared& p = *m.p;
    const int auto_reps = cold ? 15 : std::clamp(static_cast<int>(4e9 / p.bytes), 15, 501);
    m.reps = o.reps > 0 ? o.reps : auto_reps;
    m.core = CoreGbps(p);
    // The timed passes in their order, each with its times: the kernel, the roofline, the same work
    // as separate calls (fused rows), the same bytes in the same order with no arithmetic (fused rows).
    struct Pass {
      const std::function<void()>* fn;
      std::vector<double>* times;
    };
    std::vector<Pass> passes = {{&p.run, &m.tk}, {&p.roofline, &m.tr}};
    if (p.unfused) passes.push_back({&p.unfused, &m.tu});
    if (p.pattern) passes.push_back({&p.pattern, &m.tp});
    // Warm-up (page faults, caches, thread start): rounds of every pass, as the timed loop runs
    // them, until the last round of each is within 1.25x of its fastest so far (at least 3 rounds,
    // at most kMaxWarmupSeconds).
    constexpr double kMaxWarmupSeconds = 3.0;
    for (auto* v : {&m.tk, &m.tr, &m.tu, &m.tp}) v->clear();
    const double w0 = Now();
    m.warmup_rounds = 0;
    for (bool warm = false; !warm && (m.warmup_rounds < 3 || Now() - w0 < kMaxWarmupSeconds);) {
      for (const Pass& ps : passes) timed(*ps.fn, *ps.times);
      ++m.warmup_rounds;
      warm = m.warmup_rounds >= 3 && std::all_of(passes.begin(), passes.end(), [&](const Pass& ps) {
               return ps.times->back() <= 1.25 * Fastest(*ps.times);
             });
    }
    for (auto* v : {&m.tk, &m.tr, &m.tu, &m.tp}) v->clear();
    for (int r = 0; r < m.reps; ++r)
      for (const Pass& ps : passes) timed(*ps.fn, *ps.times);
    m.steady = std::all_of(passes.begin(), passes.end(),
                           [&](const Pass& ps) { return Median(*ps.times) <= kUnsteady * Fastest(*ps.times); });
    // Per byte: the roofline pass moves roofline_bytes, the kernel and its bare pattern bytes_all
    // (or bytes, where a row has no bytes_all).
    const double kernel_bytes = p.bytes_all > 0 ? p.bytes_all : p.bytes;
    m.steady = m.steady && Median(m.tr) / p.roofline_bytes <= kUnsteady * Median(m.tk) / kernel_bytes;
    if (!m.tp.empty()) m.steady = m.steady && Median(m.tp) <= kUnsteady * Median(m.tk);
  }
  return m;
}

// One row of the table, or one JSON object.
void PrintRow(const bench::CaseSpec& c, const Measured& m, bool cold, int t, bool json) {
  const bench::Prepared& p = *m.p;
  const double mk = Median(m.tk), mr = Median(m.tr), mu = m.tu.empty() ? 0.0 : Median(m.tu);
  const double mp = m.tp.empty() ? 0.0 : Median(m.tp);
  const double gbps = p.bytes / mk / 1e9, roof = p.roofline_bytes / mr / 1e9;
  // The best fraction `t` cores computing at the single-core cache-resident rate could reach.
  const double attainable = std::min(1.0, t * m.core / roof);
  const char* cache = cold ? "cold" : "warm";
  const double fraction_all = p.bytes_all > 0 ? p.bytes_all / mk / 1e9 / roof : 0.0;
  std::string extra;  // fields only some rows have
  if (p.bytes_all > 0)
    extra += fmt::format(", \"bytes_all\": {:.0f}, \"fraction_all\": {:.3f}", p.bytes_all, fraction_all);
  if (c.fused)
    extra += fmt::format(
        ", \"fused\": true, \"cache_type\": \"{}\", \"unfused_median_ms\": {:.4f}, \"speedup_vs_unfused\": "
        "{:.3f}",
        ToString(c.cache_type), mu * 1e3, mu / mk);
  if (cold) extra += fmt::format(", \"evict_mib\": {}", bench::EvictBytes() >> 20);
  if (p.pattern)
    extra += fmt::format(", \"pattern_median_ms\": {:.4f}, \"fraction_of_pattern\": {:.3f}", mp * 1e3, mp / mk);
  if (json) {
    std::printf(
        "{\"op\": \"%s\", \"shape\": \"%s\", \"dtype\": \"%s\", \"layout\": \"%s\", \"threads\": %d, "
        "\"inplace\": %s, \"cache\": \"%s\", \"simd\": \"%s\", \"median_ms\": %.4f, \"gbps\": %.3f, "
        "\"roofline\": \"%s\", "
        "\"roofline_median_ms\": %.4f, \"roofline_gbps\": %.3f, \"fraction\": %.3f, \"core_gbps\": %.3f, "
        "\"attainable\": %.3f, \"bytes\": %.0f, \"reps\": %d, \"warmup_rounds\": %d, \"attempts\": %d, \"steady\": %s%s}\n",
        c.op.c_str(), c.shape.c_str(), std::string(ToString(c.dtype)).c_str(),
        c.op.rfind("gather", 0) == 0 ? "rows" : std::string(ToString(c.layout)).c_str(), t,
        c.inplace ? "true" : "false", cache, ChosenSimdTarget().c_str(), mk * 1e3, gbps, p.roofline_kind,
        mr * 1e3, roof, gbps / roof, m.core, attainable, p.bytes, m.reps, m.warmup_rounds, m.attempts,
        m.steady ? "true" : "false", extra.c_str());
  } else {
    const std::string fa = p.bytes_all > 0 ? fmt::format("{:.3f}", fraction_all) : "-";
    const std::string su = c.fused ? fmt::format("{:.2f}", mu / mk) : "-";
    const std::string sp = p.pattern ? fmt::format("{:.2f}", mp / mk) : "-";
    std::printf("%-58s %5s %7d %10.3f %9.2f %9.2f %8.3f %8s %9.2f %7.2f %10s %10s%s\n", c.Name().c_str(), cache,
                t, mk * 1e3, gbps, roof, gbps / roof, fa.c_str(), m.core, attainable, su.c_str(), sp.c_str(),
                m.steady ? "" : "  UNSTEADY");
  }
  std::fflush(stdout);
}

Status RunBench(const BenchOptions& o) {
  std::vector<int> threads;
  POSENC_RETURN_IF_ERROR(ParseThreads(o.threads, &threads));
  POSENC_RETURN_IF_ERROR(ForceSimdTarget(o.simd));
  POSENC_ASSIGN_OR_RETURN(const std::regex filter, CompileFilter(o.filter));
  const auto cases = bench::AllCases();
  const bool table_case = std::regex_search(std::string("rope_table_build"), filter);
  if (!table_case && std::none_of(cases.begin(), cases.end(),
                                  [&](const bench::CaseSpec& c) { return std::regex_search(c.Name(), filter); }))
    return InvalidArgumentError(
        fmt::format("--filter {} matches no case (posenc bench --list names them)", QuoteForMessage(o.filter)));
  if (o.list) {
    for (const auto& c : cases) std::printf("%s\n", c.Name().c_str());
    std::printf("rope_table_build\n");
    return OkStatus();
  }
  if (o.evict_mib > 0) bench::SetEvictBytes(static_cast<size_t>(o.evict_mib) << 20);
  if (!o.json) PrintHeader(o);
  std::vector<bool> cold_modes;
  if (o.cache == "warm" || o.cache == "both") cold_modes.push_back(false);
  if (o.cache == "cold" || o.cache == "both") cold_modes.push_back(true);
  if (cold_modes.empty()) return InvalidArgumentError(fmt::format("--cache '{}' must be warm, cold or both", o.cache));
  for (const auto& c : cases) {
    if (!std::regex_search(c.Name(), filter)) continue;
    for (bool cold : cold_modes)
      for (int t : threads) {
        ThreadPool pool(t);
        const Measured m = MeasureCase(c, cold, pool, o);
        PrintRow(c, m, cold, t, o.json);
      }
  }
  if (table_case) POSENC_RETURN_IF_ERROR(BenchTable(o));
  return OkStatus();
}

void RegisterBench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time the SIMD kernels on Llama-3-8B shapes against the memory roofline");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_flag("--json", o->json,
                "One JSON object per line (op, shape, dtype, layout, threads, inplace, median_ms, gbps, roofline_gbps, "
                "fraction, core_gbps, attainable, ...)");
  cmd->add_option("--filter", o->filter,
                  "Regular expression on case names (see --list), e.g. 'rope_prefill_q/float32'");
  cmd->add_option("--threads", o->threads, "Comma-separated thread counts")->capture_default_str();
  cmd->add_option("--simd", o->simd, "Cap the SIMD target (see `posenc info`), or 'best'")->capture_default_str();
  AddIntOption(cmd, "--reps", o->reps, "Repetitions per case (default: from the case size, 15..501)", 0, 100000);
  AddIntOption(cmd, "--evict-mib", o->evict_mib,
               "MiB the cold pass reads (default: twice the largest cache the machine reports, 256..4096)", 0, 8192);
  cmd->add_option("--cache", o->cache,
                  "warm: kernel and roofline alternate over the same buffers (cache-resident when they fit); "
                  "cold: an untimed pass reads --evict-mib MiB before every timed run of either; both")
      ->capture_default_str();
  cmd->add_flag("--list", o->list, "List the case names and exit");
  cmd->callback([o, cmd] {
    if (cmd->get_subcommands().size() > 0) return;  // `posenc bench rerotate` runs only its own case
    Status s = RunBench(*o);
    if (!s.ok()) ReportError("bench", s);
  });
}

}  // namespace
POSENC_CLI_COMMAND(90, RegisterBench);
}  // namespace posenc::cli
