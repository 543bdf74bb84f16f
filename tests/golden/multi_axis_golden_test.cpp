// Every multi-axis RoPE golden case (scheme mrope or rope_vision_2d) under golden/hf and golden/ggml,
// through the library (golden/FORMAT.md, "From config to pairs"): the config is read by
// RopeConfigFromGgmlParams, ParseHfConfig (model_type = the case's hf_model_type) or
// ParseHfVision2dConfig (vision_2d_variant); ComputeMultiAxisRope's pair_component must equal
// pair_component.npy and its frequencies inv_freq.npy; input.npy is rotated at positions.npy ([C, T])
// by the fast path and by the scalar reference, each compared with expected.npy (reference precision)
// and expected_exact.npy (exact precision) within the case's tolerance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/config/multi_axis_config.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "golden_case_fixture.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using nlohmann::json;

class MultiAxisGolden : public testing::GoldenCaseTest<"mrope / rope_vision_2d"> {};

TEST_P(MultiAxisGolden, ComponentsFrequenciesAndRotation) {
  const std::string& dir = GetParam();
  const json& c = Case().j();
  const Array input = Case().Read("input").value();
  ASSERT_EQ(input.ndim(), 3);
  const Array pos = Case().Read("positions").value().AsType(DType::kI64).value();
  const std::vector<int64_t> positions(pos.span<int64_t>().begin(), pos.span<int64_t>().end());

  Result<RopeConfig> rc = InvalidArgumentError("unset");
  json config = c["config"];
  if (config.contains("n_dims")) {
    rc = RopeConfigFromGgmlParams(config.dump(), input.dim(2), dir);
  } else if (c["scheme"] == "rope_vision_2d") {
    Vision2dVariant v;
    ASSERT_TRUE(ParseVision2dVariant(c["vision_2d_variant"].get<std::string>(), &v));
    rc = ParseHfVision2dConfig(config.dump(), v, dir);
  } else {
    if (!config.contains("model_type")) config["model_type"] = c["hf_model_type"];
    Result<PositionScheme> s = ParseHfConfig(config.dump(), dir);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    rc = s->rope;
  }
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  ASSERT_TRUE(rc->multi_axis.has_value());
  EXPECT_EQ(rc->layout.head_dim, c["head_dim"].get<int64_t>());
  EXPECT_EQ(rc->layout.rotary_dim, c["rotary_dim"].get<int64_t>());
  EXPECT_EQ(ToString(rc->layout.pairing), c["layout"].get<std::string>());
  if (c.contains("section_layout")) {
    EXPECT_EQ(ToString(rc->multi_axis->layout), c["section_layout"].get<std::string>());
  }
  if (c.contains("sections")) { EXPECT_EQ(rc->multi_axis->sections, c["sections"].get<std::vector<int64_t>>()); }
  ASSERT_TRUE(ValidateMultiAxisPositions(pos.shape(), positions, rc->multi_axis->num_components, "positions").ok());

  const int64_t seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
  Result<MultiAxisPlan> plan = ComputeMultiAxisRope(*rc, seq_len);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const Array pc = Case().Read("pair_component").value().AsType(DType::kI64).value();
  EXPECT_EQ(plan->pair_component, std::vector<int64_t>(pc.span<int64_t>().begin(), pc.span<int64_t>().end()));
  EXPECT_TRUE(
      testing::GoldenClose("inv_freq", plan->freqs.inv_freq, Case().Read("inv_freq").value(), Case().Tol("inv_freq")));
  EXPECT_DOUBLE_EQ(plan->freqs.attention_scaling, c.value("attention_scaling", 1.0));

  for (const auto& [role, precision] :
       {std::pair{"expected", RopePrecision::kReference}, std::pair{"expected_exact", RopePrecision::kExact}}) {
    SCOPED_TRACE(role);
    const Array want = Case().Read(role).value();
    const golden::Tolerance tol = Case().Tol(role, {0.0, 0.0});
    const MultiAxisRopeArgs args{rc->layout,           &plan->freqs, plan->pair_component,
                                 plan->num_components, positions,    precision};
    Array x = input, y = input, z = input;
    ASSERT_TRUE(ApplyMultiAxisRope(args, HeadsView::Of(x, "x").value(), HeadsView::Of(y, "y").value()).ok());
    ASSERT_TRUE(ApplyMultiAxisRopeReference(args, HeadsView::Of(x, "x").value(), HeadsView::Of(z, "z").value()).ok());
    EXPECT_TRUE(testing::GoldenClose(std::string(role) + " (fast)", golden::ToDoubles(y), want, tol));
    EXPECT_TRUE(testing::GoldenClose(std::string(role) + " (reference)", golden::ToDoubles(z), want, tol));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MultiAxisGolden,
                         ::testing::ValuesIn(testing::GoldenCaseDirs({"mrope", "rope_vision_2d"})),
                         testing::GoldenCaseName);

}  // namespace
}  // namespace posenc
