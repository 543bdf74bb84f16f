// A GoogleTest fixture whose every test gets a fresh, empty folder of its own, removed after the test.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace posenc::testing {

// dir_ is TempDir(prefix, <the test's name>): <tmp>/posenc_<prefix>_<pid>/<test name>, emptied first.
// A fixture that writes its inputs in SetUp overrides it and calls TempFolderTest::SetUp() first.
class TempFolderTest : public ::testing::Test {
 protected:
  explicit TempFolderTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override { dir_ = TempDir(prefix_, ::testing::UnitTest::GetInstance()->current_test_info()->name()); }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    std::error_code ec;
    std::filesystem::remove(dir_.parent_path(), ec);  // the per-process folder, once it is empty
  }
  // The path of `name` in the test's folder, and a file there holding exactly `text`.
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& text) const { WriteFile(dir_ / name, text); }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace posenc::testing
