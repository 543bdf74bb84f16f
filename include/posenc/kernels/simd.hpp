// Which SIMD code path posenc's kernels run: every target compiled into the library, the one chosen
// for this CPU at run time (Highway's dynamic dispatch), and a cap that forces a lower one (for tests,
// `posenc info` and `posenc bench --simd=...`). Names are Highway's: "AVX3", "AVX2", "SSE4",
// "SSSE3", "EMU128" (portable C++, always compiled), "NEON", "SVE", ...
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/status.hpp"

namespace posenc {

// Targets compiled into the library, best first (whether or not this CPU runs them).
std::vector<std::string> CompiledSimdTargets();
// Compiled targets this CPU runs, best first; the same list before and after ForceSimdTarget (so a
// per-target loop can ask for it inside other loops).
std::vector<std::string> AvailableSimdTargets();
// The target the kernels use now: the best of AvailableSimdTargets() at or below any cap, as the
// dispatch itself reports it (a probe called the way every kernel is called).
std::string ChosenSimdTarget();

// Caps the choice at `name` (case-insensitive): every better target is disabled for the whole
// process, so the kernels run `name` if this CPU supports it. "best" (or "auto", "") lifts the cap.
// kInvalidArgument naming the value and the compiled list when `name` is not compiled;
// kUnimplemented when this CPU cannot run it. Not thread-safe with kernels running concurrently:
// call it between calls (tests, CLI start-up).
Status ForceSimdTarget(std::string_view name);

// Whether the HF-exact float16 kernel (kernels/rope_cos_sin.hpp) runs on the CPU's own float16
// arithmetic (x86 AVX512-FP16, Sapphire Rapids and later) when the AVX3 target is chosen: the same bits
// as its float32 arithmetic rounded after each operation (the proof is in rope_cos_sin_f16.cpp), with
// no conversions. True where this CPU has it and it is allowed (the default);
// AllowNativeF16Arithmetic(false) turns it off for the whole process (tests compare both). Not
// thread-safe with kernels running concurrently, as ForceSimdTarget.
bool NativeF16Arithmetic();
void AllowNativeF16Arithmetic(bool allow);

// Whether the kernels that write a buffer other than the one they read also prefetch the
// destination's lines ahead of their stores, so that each line is in cache before the store that
// needs it. A tuning choice by CPU make and family, measured with `posenc bench` prefetch off and on
// alternating (docs/PERFORMANCE.md, "Prefetching the destination" and "A token's factors in
// registers"): the gather's rows gain on every CPU measured (an Intel Xeon with AVX-512, an AMD Zen 3);
// out-of-place RoPE (and the fused kernel's q rows) gains on the Intel Xeon (float32 half layout
// 0.53-0.61 of memcpy -> 0.96-1.11) and on an AMD Zen 5 (fused prefill cold, mean fraction_all 0.80 ->
// 0.87) but loses 1-7% on one AMD Zen 3 thread. So by default: gather rows always, out-of-place RoPE on
// Intel CPUs and on AMD family 0x1A (Zen 5) and later; off elsewhere (Zen 4, family 0x19 as Zen 3, is
// not measured). POSENC_PREFETCH_STORES=1 or 0 turns both on or off instead (read once per process).
// Results do not depend on it.
struct StorePrefetch {
  bool gather_rows = false;
  bool rope_out_of_place = false;
};
StorePrefetch StorePrefetchPolicy();

// Where the fused kernels (ApplyRopeKvCache with q_norm / k_norm) compute a float32 head's QK-norm: in
// the rotation's registers (the norm's value of each loaded vector, then the rotation), or written to
// the output row and rotated there. 16-bit heads are always normed in registers. A tuning choice by CPU,
// measured with `posenc bench --filter '^qknorm_'` (docs/PERFORMANCE.md, "QK-norm + RoPE + KV write"):
// on an Intel Xeon with AVX-512 the row measured faster (float32 prefill 16.8 vs 21.0 ms, 2026-12-06); on
// an AMD Zen 5 registers (7.9-8.2 vs 8.9-9.4 ms, 2026-12-07). So by default registers on AMD family
// 0x1A (Zen 5) and later, the row elsewhere (Zen 3 and 4 are not measured). POSENC_QKNORM_F32_REGS=1 or
// 0 chooses instead (read once per process). Results do not depend on it: the same bits either way.
bool Float32NormInRegisters();

// A kernel call that writes at least this many bytes of output writes them with streaming (non-temporal)
// stores: the gather's rows (where aligned), the fused kernels' q rows and cache rows. 16 MiB (glibc's
// memcpy makes the same choice for large copies): such outputs do not stay in cache, and a streaming
// store skips reading each line before it is written, a third of the traffic of a copy.
// POSENC_STREAM_STORES=1 or 0 instead: always (0 bytes) or never (SIZE_MAX); read once per process, the
// tests run both. Results do not depend on it.
size_t StreamStoreMinBytes();

}  // namespace posenc
