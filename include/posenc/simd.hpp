// Which SIMD code path posenc's kernels run: every target compiled into the library, the one chosen
// for this CPU at run time (Highway's dynamic dispatch), and a cap that forces a lower one (for tests,
// `posenc info` and `posenc bench --simd=...`). Names are Highway's: "AVX3", "AVX2", "SSE4",
// "SSSE3", "EMU128" (portable C++, always compiled), "NEON", "SVE", ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "posenc/status.hpp"

namespace posenc {

// Targets compiled into the library, best first (whether or not this CPU runs them).
std::vector<std::string> CompiledSimdTargets();
// Compiled targets this CPU runs (after any ForceSimdTarget cap), best first.
std::vector<std::string> AvailableSimdTargets();
// The target the kernels use now: the best of AvailableSimdTargets().
std::string ChosenSimdTarget();

// Caps the choice at `name` (case-insensitive): every better target is disabled for the whole
// process, so the kernels run `name` if this CPU supports it. "best" (or "auto", "") lifts the cap.
// kInvalidArgument naming the value and the compiled list when `name` is not compiled;
// kUnimplemented when this CPU cannot run it. Not thread-safe with kernels running concurrently:
// call it between calls (tests, CLI start-up).
Status ForceSimdTarget(std::string_view name);

}  // namespace posenc
