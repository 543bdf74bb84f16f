// Strided tensors from other frameworks: the overlap rule (StridedApart) against brute force, and the
// [B,H,S,D] / [B,S,H,D] planner (PlanHeads): views, folding, and the refusals it words.
#include "posenc/core/strided.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <set>
#include <vector>

namespace posenc {
namespace {

std::byte* At(std::vector<float>& buf, int64_t i) { return reinterpret_cast<std::byte*>(buf.data() + i); }

// Every element offset (in floats from base) a tensor touches.
std::set<int64_t> Elements(const StridedTensor& t, const std::byte* base) {
  std::set<int64_t> out;
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  const int64_t origin = (t.data - base) / static_cast<int64_t>(sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, off = origin;
    for (size_t a = t.shape.size(); a-- > 0;) {
      off += (rest % t.shape[a]) * t.stride[a];
      rest /= t.shape[a];
    }
    out.insert(off);
  }
  return out;
}

TEST(StridedApart, FusedQkvSlicesShareRowsNotElements) {
  // [T, (4 + 2 + 2) * 8] rows: q heads, then k, then v (split_qkv's views).
  const int64_t T = 5, D = 8, row = 8 * D;
  std::vector<float> buf(static_cast<size_t>(T * row));
  const StridedTensor q{At(buf, 0), DType::kF32, {T, 4, D}, {row, D, 1}};
  const StridedTensor k{At(buf, 4 * D), DType::kF32, {T, 2, D}, {row, D, 1}};
  const StridedTensor v{At(buf, 6 * D), DType::kF32, {T, 2, D}, {row, D, 1}};
  EXPECT_TRUE(StridedApart(q, k));
  EXPECT_TRUE(StridedApart(k, v));
  EXPECT_TRUE(StridedApart(v, q));
  const StridedTensor k_wide{At(buf, 3 * D), DType::kF32, {T, 2, D}, {row, D, 1}};  // takes q's last head
  EXPECT_FALSE(StridedApart(q, k_wide));
  EXPECT_FALSE(StridedApart(q, q));
  const StridedTensor none{At(buf, 0), DType::kF32, {0, 4, D}, {row, D, 1}};
  EXPECT_TRUE(StridedApart(q, none));
  std::vector<float> other(16);
  EXPECT_TRUE(StridedApart(q, {At(other, 0), DType::kF32, {16}, {1}}));
}

// Sound on random small tensors over one buffer: "apart" never claimed where an element is shared,
// and exact where the byte spans are apart or both are row slices.
TEST(StridedApart, NeverClaimsApartWhenAnElementIsShared) {
  std::vector<float> buf(4096);
  std::mt19937 rng(7);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int apart = 0, shared = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    StridedTensor t[2];
    for (StridedTensor& x : t) {
      const int rank = pick(1, 3);
      x.dtype = DType::kF32;
      x.shape.clear();
      x.stride.clear();
      int64_t reach = 0;
      for (int a = 0; a < rank; ++a) {
        x.shape.push_back(pick(1, 4));
        x.stride.push_back(pick(1, 24));
        reach += (x.shape.back() - 1) * x.stride.back();
      }
      x.data = At(buf, pick(0, static_cast<int>(2000 - reach)));
    }
    const std::set<int64_t> a = Elements(t[0], At(buf, 0)), b = Elements(t[1], At(buf, 0));
    bool meet = false;
    for (int64_t e : a) meet |= b.count(e) != 0;
    const bool claimed = StridedApart(t[0], t[1]);
    ASSERT_FALSE(claimed && meet) << "trial " << trial << ": apart claimed for tensors sharing an element";
    EXPECT_EQ(claimed, StridedApart(t[1], t[0])) << "trial " << trial;
    (claimed ? apart : shared) += 1;
  }
  EXPECT_GT(apart, 300);  // both answers occur (the check above is not vacuous)
  EXPECT_GT(shared, 300);
}

TEST(PlanHeads, ThdIsOneView) {
  std::vector<float> buf(3 * 4 * 8);
  Result<HeadsPlan> p = PlanHeads({At(buf, 0), DType::kF32, {3, 4, 8}, {32, 8, 1}}, "", "x");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->views.size(), 1u);
  EXPECT_EQ(p->views[0].tokens, 3);
  EXPECT_EQ(p->views[0].heads, 4);
  EXPECT_EQ(p->views[0].token_stride, 32);
  EXPECT_EQ(p->views[0].head_stride, 8);
  Result<HeadsPlan> h = PlanHeads({At(buf, 0), DType::kF32, {4, 3, 8}, {24, 8, 1}}, "htd", "x");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->views[0].tokens, 3);
  EXPECT_EQ(h->views[0].token_stride, 8);
  EXPECT_EQ(h->views[0].head_stride, 24);
}

TEST(PlanHeads, BhsdPerBatchElementAndDecodeFolds) {
  const int64_t B = 3, H = 4, S = 5, D = 8;
  std::vector<float> buf(static_cast<size_t>(B * H * S * D));
  // HF's [B, H, S, D] as a transposed view of [B, S, H, D]: elements are not back to back per token.
  const StridedTensor bhsd{At(buf, 0), DType::kF16, {B, H, S, D}, {S * H * D, D, H * D, 1}};
  Result<HeadsPlan> p = PlanHeads(bhsd, "", "q");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->batch, B);
  // token-major elements back to back: one view of B * S tokens
  ASSERT_EQ(p->views.size(), 1u);
  EXPECT_EQ(p->views[0].tokens, B * S);
  // unfolded: one view per element, 2-byte elements apart by the batch stride
  Result<HeadsPlan> u = PlanHeads(bhsd, "bhsd", "q", false);
  ASSERT_TRUE(u.ok());
  ASSERT_EQ(u->views.size(), static_cast<size_t>(B));
  EXPECT_EQ(static_cast<std::byte*>(u->views[2].data) - static_cast<std::byte*>(u->views[0].data), 2 * S * H * D * 2);
  // head-major [B, H, S, D] contiguous: not foldable for S > 1
  Result<HeadsPlan> hm = PlanHeads({At(buf, 0), DType::kF32, {B, H, S, D}, {H * S * D, S * D, D, 1}}, "", "q");
  ASSERT_TRUE(hm.ok());
  EXPECT_EQ(hm->views.size(), static_cast<size_t>(B));
  // decode: S = 1 folds whatever the batch stride
  Result<HeadsPlan> dec = PlanHeads({At(buf, 0), DType::kF32, {B, H, 1, D}, {2 * H * D, D, D, 1}}, "", "q");
  ASSERT_TRUE(dec.ok());
  ASSERT_EQ(dec->views.size(), 1u);
  EXPECT_EQ(dec->views[0].tokens, B);
  EXPECT_EQ(dec->views[0].token_stride, 2 * H * D);
}

TEST(PlanHeads, RefusalsNameTheArgumentAndValue) {
  std::vector<float> buf(1024);
  const auto msg = [&](StridedTensor t, const char* order) {
    t.data = At(buf, 0);
    Result<HeadsPlan> p = PlanHeads(t, order, "q");
    EXPECT_FALSE(p.ok());
    return p.ok() ? std::string() : p.status().message();
  };
  EXPECT_EQ(msg({nullptr, DType::kF32, {4, 8}, {8, 1}}, ""),
            "q: shape [4, 8] is not [tokens, heads, head_dim] or [batch, heads, seq, head_dim]");
  EXPECT_EQ(msg({nullptr, DType::kF32, {2, 4, 8}, {32, 8, 1}}, "bhsd"),
            "q: order 'bhsd' does not fit a 3-d shape (expected one of thd, htd)");
  EXPECT_EQ(msg({nullptr, DType::kF32, {2, 4, 8}, {64, 16, 2}}, ""),
            "q: head_dim axis has stride 2; posenc needs it contiguous (stride 1)");
  EXPECT_EQ(msg({nullptr, DType::kF32, {2, 4, 8}, {-32, 8, 1}}, ""), "q: negative strides [-32, 8, 1]");
  EXPECT_EQ(msg({nullptr, DType::kF32, {2, 4, 8}, {0, 8, 1}}, ""),
            "q: an axis of extent 2 has stride 0 (its elements overlap; shape [2, 4, 8], strides [0, 8, 1])");
  EXPECT_EQ(msg({nullptr, DType::kF32, {2, 4, 3, 8}, {8, 24, 8, 1}}, ""),
            "q: batch stride 8 overlaps the 96 elements of one batch element (strides [8, 24, 8, 1])");
  // An empty tensor's strides mean nothing: accepted, no views for batch 0.
  Result<HeadsPlan> e = PlanHeads({At(buf, 0), DType::kF32, {0, 4, 3, 8}, {0, 0, 0, 0}}, "", "q");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->views.empty());
}

}  // namespace
}  // namespace posenc
