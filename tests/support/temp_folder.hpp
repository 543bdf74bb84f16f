// A GoogleTest fixture whose every test gets a fresh, empty folder of its own, removed after the test.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace posenc::testing {

// dir_ is TempDir(<suite>, <test>): <tmp>/posenc_<suite>_<pid>/<test>, emptied first, for the
// running test's suite and name. A fixture that writes its inputs in SetUp overrides it and calls
// TempFolderTest::SetUp() first.
class TempFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = TempDir(t->test_suite_name(), t->name());
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    std::error_code ec;
    std::filesystem::remove(dir_.parent_path(), ec);  // the per-process folder, once it is empty
  }
  // The path of `name` in the test's folder, and a file there holding exactly `text`.
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& text) const { WriteFile(dir_ / name, text); }

  std::filesystem::path dir_;
};

}  // namespace posenc::testing
