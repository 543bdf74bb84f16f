// The one per-SIMD-target loop of the kernel tests, and the walk of the kernel case list
// (bench/cases/kernel_cases.hpp) on it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_cases.hpp"
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

// Runs body(kernel_case, index, first_target) on every SIMD target for every case of `family` in the
// kernel case list, scaled down to at most `max_tokens` tokens, with a SCOPED_TRACE naming the case;
// `index` is the case's place in the family's list (tests vary slots, misalignment and options by it),
// `first_target` is true on the first target only (tests run the slow references there). As ggml's
// test-backend-ops: one list, every backend.
template <typename Body>
void ForEachKernelCase(cases::KernelFamily family, int64_t max_tokens, Body&& body) {
  const std::vector<cases::KernelCase> list = cases::KernelCases(family);
  ASSERT_FALSE(list.empty()) << cases::ToString(family);
  bool first = true;
  ForEachSimdTarget([&](const std::string&) {
    for (size_t i = 0; i < list.size(); ++i) {
      const cases::KernelCase c = list[i].ScaledDown(max_tokens);
      SCOPED_TRACE(c.Label());
      body(c, i, first);
      if (::testing::Test::HasFatalFailure()) return;
    }
    first = false;
  });
}

}  // namespace posenc::testing
