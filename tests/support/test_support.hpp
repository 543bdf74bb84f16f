// Shared helpers for posenc tests: where the shared data lives, deterministic random inputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden_case.hpp"
#include "posenc/core/array.hpp"

namespace posenc::testing {

// The shared data folder: $POSENC_DATA_DIR if set, else the configure-time default (../shared).
std::string DataDir();
// DataDir()/relative if it exists, else "" (the caller skips with a message naming the path).
std::string DataPath(const std::string& relative);
// Path of the built `posenc` CLI.
std::string CliPath();
// Runs a shell command, returns its exit status and fills `output` with stdout+stderr.
int RunCommand(const std::string& command, std::string* output);

// A fresh, empty folder <tmp>/posenc_<prefix>_<pid>/<name> (removed first if it exists).
std::filesystem::path TempDir(const std::string& prefix, const std::string& name);
// The bytes of a file ("" if it cannot be read), and a file written with exactly `bytes`.
std::string ReadFile(const std::filesystem::path& p);
void WriteFile(const std::filesystem::path& p, const std::string& bytes);

// A seeded generator; tests print the seed on failure (SCOPED_TRACE).
inline std::mt19937_64 MakeRng(uint64_t seed) { return std::mt19937_64(seed); }
std::vector<float> RandomNormal(std::mt19937_64& rng, size_t n, float stddev = 1.0f);

// Golden case folders under golden/hf and golden/ggml whose scheme is one of `schemes`, sorted; a
// single "" when the data is absent or holds none, so a parameterized test has one instance that
// skips (or, under POSENC_REQUIRE_DATA, fails) naming what is missing.
std::vector<std::string> GoldenCaseDirs(std::initializer_list<const char*> schemes);
// "<family>_<case>" with non-alphanumerics as '_', for INSTANTIATE_TEST_SUITE_P.
std::string GoldenCaseName(const ::testing::TestParamInfo<std::string>& info);
// golden::Compare (the one tolerance check, shared with `posenc golden`) as a gtest assertion.
// An error test's one check: `s` failed with `code` and its message contains `needle` (the file, key,
// value it must name); the failure shows the whole message. EXPECT_TRUE(HasError(r.status(), ...)).
::testing::AssertionResult HasError(const Status& s, StatusCode code, std::string_view needle);

::testing::AssertionResult GoldenClose(const std::string& role, std::span<const double> got, const Array& want,
                                       golden::Tolerance tol);
::testing::AssertionResult GoldenClose(const std::string& role, std::span<const double> got,
                                       std::span<const double> want, golden::Tolerance tol);

}  // namespace posenc::testing

// Skips the current test, naming what is missing, when the shared data is absent. CI sets
// POSENC_REQUIRE_DATA=1, which turns the skip into a failure.
#define POSENC_REQUIRE_DATA(path_var, relative)                                                  \
  const std::string path_var = ::posenc::testing::DataPath(relative);                            \
  if (path_var.empty()) {                                                                        \
    if (std::getenv("POSENC_REQUIRE_DATA") != nullptr)                                           \
      FAIL() << "shared data missing: " << ::posenc::testing::DataDir() << "/" << (relative);    \
    GTEST_SKIP() << "shared data missing: " << ::posenc::testing::DataDir() << "/" << (relative) \
                 << " (set POSENC_DATA_DIR to the folder holding golden/ and models/)";          \
  }
