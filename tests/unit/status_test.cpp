// Status and Result<T>: value() on an error says which error before it aborts. Includes the umbrella
// header too, so the suite checks that every public header compiles together.
#include "posenc/core/status.hpp"
#include "posenc/posenc.hpp"

#include <gtest/gtest.h>

#include <string>

namespace posenc {
namespace {

Result<int> Fails() { return InvalidArgumentError("head_dim 7 is odd; RoPE rotates pairs"); }

TEST(Result, ValueOnOkReturnsIt) {
  Result<int> r = 3;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 3);
  EXPECT_EQ(*r, 3);
}

TEST(Result, BuiltFromOkStatusIsAnInternalError) {
  Result<int> r = OkStatus();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultDeathTest, ValueOnErrorPrintsTheErrorThenAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)Fails().value(),
               "posenc: Result::value\\(\\) called on an error: invalid argument: head_dim 7 is odd; "
               "RoPE rotates pairs");
  const Result<std::string> r = NotFoundError("tensor 'wte' in x.safetensors");
  EXPECT_DEATH((void)r.value(), "not found: tensor 'wte' in x.safetensors");
  Result<std::string> m = DataLossError("truncated");
  EXPECT_DEATH((void)m->size(), "data loss: truncated");
}

TEST(Status, ToStringAndContext) {
  EXPECT_EQ(OkStatus().ToString(), "ok");
  EXPECT_EQ(OutOfRangeError("id 9").WithContext("lookup").ToString(), "out of range: lookup: id 9");
}

}  // namespace
}  // namespace posenc
