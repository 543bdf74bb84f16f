// The bench probes' optional first argument: a SIMD target to cap posenc's dispatch at (`posenc info`
// lists them; 'best' by default). Not part of the library.
#pragma once

#include <cstdio>

#include "posenc/kernels/simd.hpp"

namespace posenc::bench {

// Caps the target named by argv[1], if given. False, with ForceSimdTarget's one-line reason (which
// names the target) on stderr, where it cannot.
inline bool CapSimdTargetFromArgs(int argc, char** argv) {
  if (argc < 2) return true;
  const Status s = ForceSimdTarget(argv[1]);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return s.ok();
}

}  // namespace posenc::bench
