// Every RoPE golden case under golden/hf and golden/ggml: the case's config is parsed
// (ParseHfConfig / RopeConfigFromGgmlParams), its frequencies computed at the case's sequence length
// and compared with inv_freq.npy and attention_scaling, then input.npy is rotated at positions.npy
// and compared with expected.npy (reference precision) and expected_exact.npy (exact precision), each
// with the case's tolerance (golden/FORMAT.md).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/config/ggml_config.hpp"
#include "golden_case_fixture.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class RopeGolden : public testing::GoldenCaseTest<"rope"> {};

TEST_P(RopeGolden, FrequenciesAndRotation) {
  const fs::path dir = GetParam();
  const golden::GoldenCase& gc = Case();
  const json& c = gc.j();
  const bool is_ggml = dir.parent_path().filename() == "ggml";

  Result<Array> input = gc.Read("input");
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  Result<Array> pos_arr = gc.Read("positions");
  ASSERT_TRUE(pos_arr.ok()) << pos_arr.status().ToString();
  Array pos64 = pos_arr->AsType(DType::kI64).value();
  std::vector<int64_t> positions(pos64.span<int64_t>().begin(), pos64.span<int64_t>().end());
  const int64_t head_dim = input->dim(2);

  RopeConfig config;
  RopeDirection direction = RopeDirection::kForward;
  if (is_ggml) {
    Result<RopeConfig> rc = RopeConfigFromGgmlParams(c["config"].dump(), head_dim, dir.string());
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    config = *rc;
    if (c["files"].contains("freq_factors")) {
      Result<Array> ff = gc.Read("freq_factors");
      ASSERT_TRUE(ff.ok()) << ff.status().ToString();
      config.scaling.freq_factors = golden::ToDoubles(*ff);
    }
  } else {
    // The case names the model family where its config does not (GPT-J's config has no model_type).
    json hf = c["config"];
    if (!hf.contains("model_type") && c.contains("hf_model_type")) hf["model_type"] = c["hf_model_type"];
    // The layer and site the case holds (a keyed set, a second RoPE site).
    Result<PositionScheme> s = ParseHfConfig(hf.dump(), dir.string(), golden::CaseConfigOptions(c));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(s->kind, PositionKind::kRope);
    config = s->rope;
    if (s->rotation_sign < 0) direction = RopeDirection::kBackward;
    EXPECT_EQ(config.layout.head_dim, c["head_dim"].get<int64_t>());
    EXPECT_EQ(config.layout.rotary_dim, c["rotary_dim"].get<int64_t>());
  }
  // The pairing: llama.cpp and GPT-J fix it outside the config; the case states it.
  RopePairing pairing;
  ASSERT_TRUE(ParseRopePairing(c["layout"].get<std::string>(), &pairing));
  if (!is_ggml) { EXPECT_EQ(config.layout.pairing, pairing) << "pairing implied by the config"; }
  config.layout.pairing = pairing;

  int64_t seq_len = 0;
  if (c.contains("seq_len"))
    seq_len = c["seq_len"].get<int64_t>();
  else
    seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
  Result<RopeFrequencies> freqs = ComputeRopeFrequencies(config, seq_len);
  ASSERT_TRUE(freqs.ok()) << freqs.status().ToString();

  // Frequencies and attention scaling.
  Result<Array> inv = gc.Read("inv_freq");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_TRUE(testing::GoldenClose("inv_freq", freqs->inv_freq, *inv, gc.Tol("inv_freq")));
  const double want_scaling = c.value("attention_scaling", 1.0);
  EXPECT_NEAR(freqs->attention_scaling, want_scaling, 1e-12 * std::abs(want_scaling)) << "attention_scaling";

  // Rotation in both precisions.
  const bool f16 = c.value("dtype", "float32") == "float16";
  for (const auto& [role, precision] :
       {std::pair{"expected", RopePrecision::kReference}, std::pair{"expected_exact", RopePrecision::kExact}}) {
    if (!c["files"].contains(role)) continue;
    SCOPED_TRACE(role);
    Result<Array> want = gc.Read(role);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Result<RopeTable> table = RopeTable::Build(*freqs, 0, precision);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    // float16 cases ran in float16 storage: so do we for `expected`.
    const DType storage = f16 && precision == RopePrecision::kReference ? DType::kF16 : DType::kF32;
    Array x = input->AsType(storage).value();
    Array y = x;
    // The whole head, or the rotary slice alone where the case's input is that slice.
    const RotaryLayout layout = RotaryLayoutForInput(config.layout, head_dim, "input").value();
    RopeArgs args{layout, &*table, positions, direction};
    Status st = ApplyRope(args, HeadsView::Of(x, "input").value(), HeadsView::Of(y, "output").value());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(testing::GoldenClose(role, golden::ToDoubles(y), *want, gc.Tol(role, {1e-5, 1e-6})));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RopeGolden, ::testing::ValuesIn(testing::GoldenCaseDirs({"rope"})),
                         testing::GoldenCaseName);

}  // namespace
}  // namespace posenc
