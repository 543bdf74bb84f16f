// Google Benchmark registrations for every case of bench_cases.hpp at 1 and 2 threads, each paired
// with its roofline pass (…/roofline) in the same process, reporting bytes/s. Run
//   build/bench/posenc_bench --benchmark_filter=rope_prefill_q/float32 --benchmark_repetitions=11
// and compare the kernel's bytes_per_second with its roofline's. Names ending in /cold (/cold/roofline)
// evict the caches before every iteration (untimed), like `posenc bench --cache cold`.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "bench_cases.hpp"

namespace {

using posenc::bench::CaseSpec;
using posenc::bench::Prepared;

// One pool per thread count, created once.
posenc::ThreadPool* Pool(int threads) {
  static std::map<int, std::unique_ptr<posenc::ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<posenc::ThreadPool>(threads);
  return p.get();
}

void RunCase(benchmark::State& state, CaseSpec c, bool roofline, bool cold) {
  const int threads = static_cast<int>(state.range(0));
  auto p = posenc::bench::Prepare(c, Pool(threads));
  const auto& fn = roofline ? p->roofline : p->run;
  fn();  // warm-up: page faults
  for (auto _ : state) {
    if (cold) {  // untimed eviction pass, as `posenc bench --cache cold`
      state.PauseTiming();
      posenc::bench::EvictCaches(*Pool(threads));
      state.ResumeTiming();
    }
    fn();
    benchmark::ClobberMemory();
  }
  const double bytes = roofline ? p->roofline_bytes : p->bytes;
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.SetLabel(roofline ? p->roofline_kind : "kernel");
}

const bool registered = [] {
  for (const CaseSpec& c : posenc::bench::AllCases()) {
    for (bool cold : {false, true})
      for (bool roof : {false, true}) {
        benchmark::RegisterBenchmark((c.Name() + (cold ? "/cold" : "") + (roof ? "/roofline" : "")).c_str(), RunCase, c,
                                     roof, cold)
            ->Arg(1)
            ->Arg(2)
            ->ArgName("threads")
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
