// The one per-SIMD-target loop of the kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "posenc/kernels/simd.hpp"

namespace posenc::testing {

// Runs body(target) once per SIMD target this CPU runs (AvailableSimdTargets(), best first) with the
// kernels capped at that target and a SCOPED_TRACE naming it, then lifts the cap. A fatal failure
// (an ASSERT inside body returns from body only) ends the loop.
template <typename Body>
void ForEachSimdTarget(Body&& body) {
  for (const std::string& target : AvailableSimdTargets()) {
    SCOPED_TRACE("SIMD target " + target);
    const Status forced = ForceSimdTarget(target);
    ASSERT_TRUE(forced.ok()) << forced.ToString();
    body(target);
    if (::testing::Test::HasFatalFailure()) break;
  }
  EXPECT_TRUE(ForceSimdTarget("best").ok());
}

}  // namespace posenc::testing
