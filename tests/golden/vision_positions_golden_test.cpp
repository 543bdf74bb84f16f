// The position rows of every Hugging Face multi-axis golden case, rebuilt from the case's token
// layout by posenc/math/vision_positions.hpp and compared with positions.npy, which the model's own
// get_rope_index (text M-RoPE) or vision encoder (2-D patch RoPE) produced. A case that stores a subset
// of a longer sequence (token_subset) must be an ordered subsequence of the rebuilt rows. Every hf case
// of these schemes must carry its layout (token_layout, grid_thw or image_patches); the ggml cases give
// ggml's own rows and no layout.
#include <cstdio>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/io/npy.hpp"
#include "posenc/math/vision_positions.hpp"
#include "golden_case.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using nlohmann::json;

// Whether the columns of got (C rows of n) contain the columns of want (C rows of m) in order.
bool Subsequence(const std::vector<int64_t>& got, int64_t n, const std::vector<int64_t>& want, int64_t m, int64_t C) {
  int64_t j = 0;
  for (int64_t i = 0; i < n && j < m; ++i) {
    bool same = true;
    for (int64_t c = 0; c < C && same; ++c) same = got[static_cast<size_t>(c * n + i)] == want[static_cast<size_t>(c * m + j)];
    if (same) ++j;
  }
  return j == m;
}

TEST(VisionPositionsGolden, EveryHfCaseFromItsLayout) {
  int checked = 0;
  for (const std::string& dir : testing::GoldenCaseDirs({"mrope", "rope_vision_2d"})) {
    if (dir.empty()) {
      POSENC_REQUIRE_DATA(golden_hf, "golden/hf");
      FAIL() << "golden/hf holds no mrope / rope_vision_2d case";
    }
    if (dir.find("/ggml/") != std::string::npos) continue;
    SCOPED_TRACE(dir);
    Result<golden::GoldenCase> gc = golden::GoldenCase::Load(dir);
    ASSERT_TRUE(gc.ok()) << gc.status().ToString();
    const json& c = gc->j();
    const Array pos = gc->Read("positions").value().AsType(DType::kI64).value();
    ASSERT_EQ(pos.ndim(), 2);
    const int64_t C = pos.dim(0), m = pos.dim(1);
    const std::vector<int64_t> want(pos.span<int64_t>().begin(), pos.span<int64_t>().end());
    const std::string type = c.value("hf_model_type", "");
    const json& config = c["config"];
    std::vector<int64_t> got;
    int64_t n = 0;
    if (c.contains("token_layout") && c["token_layout"].is_object()) {
      // The 2026 cases (FORMAT.md: GLM-4.5V, ERNIE-4.5-VL, Qwen3-Omni) describe their tokens as
      // information only: their positions come from each family's own get_rope_index, which
      // text_vision_positions does not build; the golden runner checks their rotation from positions.npy.
      std::printf("skipped (token_layout of %s's own get_rope_index): %s\n", type.c_str(), dir.c_str());
      continue;
    }
    if (c.contains("token_layout")) {
      ASSERT_EQ(C, 3);
      std::vector<PositionSpan> spans;
      int64_t merge = 0;
      for (const json& s : c["token_layout"]) {
        const std::string kind = s["type"].get<std::string>();
        if (kind == "text") {
          spans.push_back(PositionSpan::Text(s["tokens"].get<int64_t>()));
          continue;
        }
        const auto g = s["grid_thw"].get<std::vector<int64_t>>();
        ASSERT_EQ(g.size(), 3u);
        merge = s["spatial_merge_size"].get<int64_t>();
        // Qwen2-VL: the frame index itself; Qwen2.5-VL: second_per_grid_t * tokens_per_second (0 for an
        // image); Qwen3-VL: one grid per frame (grid_t 1).
        float spt = 1.0f, tps = 1.0f;
        if (type == "qwen2_5_vl") {
          spt = kind == "image" ? 0.0f : s.value("second_per_grid_t", 1.0f);
          tps = config.contains("vision_config") ? config["vision_config"].value("tokens_per_second", 2.0f) : 2.0f;
        }
        spans.push_back(PositionSpan::Vision(g[0], g[1], g[2], spt, tps));
        EXPECT_EQ(s["tokens"].get<int64_t>(), g[0] * (g[1] / merge) * (g[2] / merge));
      }
      ASSERT_GT(merge, 0) << "a layout without a vision span";
      Result<TextVisionPositions> r = BuildTextVisionPositions(spans, merge);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      got = r->positions;
      n = r->tokens;
    } else if (c.contains("grid_thw")) {
      ASSERT_EQ(C, 2);
      const auto g = c["grid_thw"].get<std::vector<int64_t>>();
      Result<std::vector<int64_t>> r = BuildVisionPatchPositions(g[0], g[1], g[2], config.value("spatial_merge_size", 2));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      got = *r;
      n = g[0] * g[1] * g[2];
    } else if (c.contains("image_patches")) {  // Pixtral: row-major patches
      ASSERT_EQ(C, 2);
      const auto g = c["image_patches"].get<std::vector<int64_t>>();
      Result<std::vector<int64_t>> r = BuildVisionPatchPositions(1, g[0], g[1], 1);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      got = *r;
      n = g[0] * g[1];
    } else {
      ADD_FAILURE() << "no token_layout, grid_thw or image_patches: the positions cannot be rebuilt";
      continue;
    }
    if (c.contains("token_subset")) {
      EXPECT_LT(m, n);
      EXPECT_TRUE(Subsequence(got, n, want, m, C)) << "the stored tokens are not in the rebuilt rows";
    } else {
      EXPECT_EQ(n, m);
      EXPECT_EQ(got, want);
    }
    ++checked;
  }
  if (!testing::DataPath("golden/hf").empty()) {
    EXPECT_GE(checked, 9);  // 6 text M-RoPE and 3 vision-encoder cases when this was written
  }
}

}  // namespace
}  // namespace posenc
