// `posenc info`: the build and the machine as posenc's kernels see them (SIMD targets, threads).
#include <cstdio>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "commands.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc::cli {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

void RegisterInfo(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the compiled and chosen SIMD targets and the thread count");
  auto simd = std::make_shared<std::string>("best");
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--simd", *simd, "Cap the SIMD target first (as `posenc bench --simd`), then report")
      ->capture_default_str();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([simd, json] {
    Status s = ForceSimdTarget(*simd);
    if (!s.ok()) return ReportError("info", s);
    const StorePrefetch prefetch = StorePrefetchPolicy();
    const size_t stream_min = StreamStoreMinBytes(), kNever = std::numeric_limits<size_t>::max();
    if (*json) {
      auto list = [](const std::vector<std::string>& v) {
        std::string out = "[";
        for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}\"{}\"", i ? ", " : "", v[i]);
        return out + "]";
      };
      std::printf(
          "{\"compiled\": %s, \"available\": %s, \"chosen\": \"%s\", \"threads\": %d, "
          "\"prefetch_stores\": {\"gather_rows\": %s, \"rope_out_of_place\": %s}, \"native_f16\": %s, "
          "\"qknorm_f32_regs\": %s, \"stream_store_min_bytes\": %s}\n",
          list(CompiledSimdTargets()).c_str(), list(AvailableSimdTargets()).c_str(), ChosenSimdTarget().c_str(),
          DefaultThreadCount(), prefetch.gather_rows ? "true" : "false", prefetch.rope_out_of_place ? "true" : "false",
          NativeF16Arithmetic() ? "true" : "false", Float32NormInRegisters() ? "true" : "false",
          stream_min == kNever ? "null" : std::to_string(stream_min).c_str());
      return;
    }
    std::printf("simd compiled:  %s\n", Join(CompiledSimdTargets()).c_str());
    std::printf("simd available: %s\n", Join(AvailableSimdTargets()).c_str());
    std::printf("simd chosen:    %s\n", ChosenSimdTarget().c_str());
    std::printf("threads:        %d (POSENC_NUM_THREADS overrides)\n", DefaultThreadCount());
    std::printf("store prefetch: gather rows %s, out-of-place rope %s (POSENC_PREFETCH_STORES=0/1 overrides)\n",
                prefetch.gather_rows ? "on" : "off", prefetch.rope_out_of_place ? "on" : "off");
    std::printf("native float16: %s\n", NativeF16Arithmetic() ? "yes (AVX512-FP16: the HF-exact float16 rows on AVX3)"
                                                                : "no (float16 computed in float32)");
    std::printf("qk-norm f32:    %s (POSENC_QKNORM_F32_REGS=0/1 overrides)\n",
                Float32NormInRegisters() ? "in registers" : "through the output row");
    std::printf("stream stores:  %s (POSENC_STREAM_STORES=0/1 overrides)\n",
                stream_min == kNever ? "never" : fmt::format("outputs of {} bytes or more", stream_min).c_str());
  });
}

}  // namespace
POSENC_CLI_COMMAND(95, RegisterInfo);
}  // namespace posenc::cli
