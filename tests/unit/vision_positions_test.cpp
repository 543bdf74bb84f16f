// Position rows of vision-language models from the token layout (posenc/math/vision_positions.hpp):
// the worked example of the header, Qwen2.5-VL's float32 time index, a start offset and the decode
// continuation, the encoder's block-major patch order, and bad layouts refused by name before
// anything is allocated. (The golden cases of real models: tests/golden/vision_positions_golden_test.cpp.)
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "posenc/math/rope_types.hpp"
#include "posenc/math/vision_positions.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using testing::HasError;

std::vector<int64_t> Row(const TextVisionPositions& p, int r) {
  return {p.positions.begin() + r * p.tokens, p.positions.begin() + (r + 1) * p.tokens};
}

TEST(TextVisionPositions, TextImageTextAsGetRopeIndex) {
  const std::vector<PositionSpan> spans{PositionSpan::Text(3), PositionSpan::Vision(1, 4, 4), PositionSpan::Text(2)};
  Result<TextVisionPositions> p = BuildTextVisionPositions(spans, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->tokens, 9);
  EXPECT_EQ(Row(*p, 0), (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 3, 5, 6}));
  EXPECT_EQ(Row(*p, 1), (std::vector<int64_t>{0, 1, 2, 3, 3, 4, 4, 5, 6}));
  EXPECT_EQ(Row(*p, 2), (std::vector<int64_t>{0, 1, 2, 3, 4, 3, 4, 5, 6}));
  EXPECT_EQ(p->next_position, 7);
  // From a start offset every position moves by it (a prompt continued after a cached prefix).
  Result<TextVisionPositions> q = BuildTextVisionPositions(spans, 2, 100);
  ASSERT_TRUE(q.ok());
  for (size_t i = 0; i < p->positions.size(); ++i) EXPECT_EQ(q->positions[i], p->positions[i] + 100);
  EXPECT_EQ(q->next_position, 107);
  // Text only: the three rows are the 1-D positions.
  Result<TextVisionPositions> t = BuildTextVisionPositions(std::vector<PositionSpan>{PositionSpan::Text(5)}, 2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Row(*t, 2), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t->next_position, 5);
  // Nothing at all.
  Result<TextVisionPositions> e = BuildTextVisionPositions({}, 2);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->tokens, 0);
  EXPECT_EQ(e->next_position, 0);
}

TEST(TextVisionPositions, VideoTimeIndexInFloat32AsTorch) {
  // Qwen2-VL: frame f at t = f. A 3 x 2 x 2 video, merge 2: one token per frame.
  Result<TextVisionPositions> a = BuildTextVisionPositions(std::vector<PositionSpan>{PositionSpan::Vision(3, 2, 2)}, 2);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(Row(*a, 0), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(Row(*a, 1), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(a->next_position, 3);
  // Qwen2.5-VL: trunc(float32(f * second_per_grid_t) * tokens_per_second); 2 fps sampled at 2 frames per
  // grid step with tokens_per_second 2 gives 0, 2, 4, 6; a fractional step truncates per frame.
  Result<TextVisionPositions> b =
      BuildTextVisionPositions(std::vector<PositionSpan>{PositionSpan::Vision(4, 2, 2, 1.0f, 2.0f)}, 2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Row(*b, 0), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(b->next_position, 7);
  const float spt = 1.0f / 3.0f;
  Result<TextVisionPositions> c =
      BuildTextVisionPositions(std::vector<PositionSpan>{PositionSpan::Vision(7, 2, 2, spt, 2.0f)}, 2);
  ASSERT_TRUE(c.ok());
  for (int64_t f = 0; f < 7; ++f) {
    const float tf = (static_cast<float>(f) * spt) * 2.0f;
    EXPECT_EQ(c->positions[static_cast<size_t>(f)], static_cast<int64_t>(tf)) << f;
  }
  EXPECT_EQ(c->positions[3], 2);  // float32(3 * (1/3)) = 1 exactly: 2, not 1
  // An image in Qwen2.5-VL (second_per_grid_t 0) and a video whose time outruns its grid: the next
  // text starts after the largest position of any row.
  Result<TextVisionPositions> d = BuildTextVisionPositions(
      std::vector<PositionSpan>{PositionSpan::Vision(1, 4, 8, 0.0f, 2.0f), PositionSpan::Vision(3, 2, 2, 4.0f, 2.0f),
                                PositionSpan::Text(1)},
      2);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tokens, 8 + 3 + 1);
  EXPECT_EQ(d->positions[8], 4);              // the video starts after max(h, w) of the image: 0 + 3 + 1
  EXPECT_EQ(d->positions[10], 4 + 16);        // frame 2: trunc(2 * 4 * 2) = 16
  EXPECT_EQ(d->positions[11], 4 + 16 + 1);    // the text after it
  EXPECT_EQ(d->next_position, 4 + 16 + 2);
}

TEST(VisionPatchPositions, BlockMajorWindowsRepeatedPerFrame) {
  // 4 x 4 patches, merge 2: windows (0,0) (0,1) (1,0) (1,1), each 2 x 2 row-major inside.
  Result<std::vector<int64_t>> p = BuildVisionPatchPositions(1, 4, 4, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(std::vector<int64_t>(p->begin(), p->begin() + 16),
            (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3}));
  EXPECT_EQ(std::vector<int64_t>(p->begin() + 16, p->end()),
            (std::vector<int64_t>{0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3}));
  // merge 1 is row-major (Pixtral); frames repeat the grid.
  Result<std::vector<int64_t>> r = BuildVisionPatchPositions(2, 2, 3, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
}

TEST(VisionPositionsErrors, NameTheSpanAndField) {
  using S = PositionSpan;
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Text(2), S::Text(-1)}, 2).status(),
                       StatusCode::kInvalidArgument, "span 1: text tokens = -1"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Vision(1, 0, 4)}, 2).status(),
                       StatusCode::kInvalidArgument, "span 0: grid 1 x 0 x 4"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Text(1), S::Vision(1, 6, 5)}, 2).status(),
                       StatusCode::kInvalidArgument, "span 1: grid h 6 x w 5 is not a multiple of spatial_merge_size 2"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Text(1)}, 0).status(), StatusCode::kInvalidArgument,
                       "spatial_merge_size = 0"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Vision(2, 2, 2, nan, 2.0f)}, 2).status(),
                       StatusCode::kInvalidArgument, "span 0: seconds_per_t = nan"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Vision(2, 2, 2, 1.0f, -2.0f)}, 2).status(),
                       StatusCode::kInvalidArgument, "span 0: tokens_per_second = -2"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Text(1)}, 2, -3).status(), StatusCode::kOutOfRange,
                       "start position -3"));
  // Hostile sizes: refused by arithmetic, nothing allocated.
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Vision(1, int64_t{1} << 40, int64_t{1} << 40)}, 2)
                           .status(),
                       StatusCode::kOutOfRange, "span 0: grid"));
  EXPECT_TRUE(HasError(
      BuildTextVisionPositions(std::vector<S>{S::Text(kMaxVisionTextTokens), S::Text(1)}, 2).status(),
      StatusCode::kOutOfRange, "span 1: the layout is more than"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Vision(2, 2, 2, 1.0f, 1e30f)}, 2).status(),
                       StatusCode::kOutOfRange, "span 0: frame 1 time position"));
  EXPECT_TRUE(HasError(BuildTextVisionPositions(std::vector<S>{S::Text(10)}, 2, kMaxRopePosition - 5).status(),
                       StatusCode::kOutOfRange, "span 0: positions reach"));
  EXPECT_TRUE(HasError(BuildVisionPatchPositions(1, 3, 4, 2).status(), StatusCode::kInvalidArgument,
                       "vision patches: grid h 3 x w 4"));
  EXPECT_TRUE(HasError(BuildVisionPatchPositions(int64_t{1} << 30, 1 << 20, 1 << 20, 1).status(),
                       StatusCode::kOutOfRange, "vision patches: grid"));
}

}  // namespace
}  // namespace posenc
