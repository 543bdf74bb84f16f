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
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> RopeCases() {
  std::vector<std::string> out;
  for (const char* family : {"golden/hf", "golden/ggml"}) {
    const std::string root = testing::DataPath(family);
    if (root.empty()) continue;
    for (const auto& e : fs::directory_iterator(root)) {
      if (!fs::exists(e.path() / "case.json")) continue;
      std::ifstream f(e.path() / "case.json");
      json c = json::parse(f, nullptr, false);
      if (!c.is_discarded() && c.value("scheme", "") == "rope") out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) out.push_back("");  // one instance that skips, naming the missing folder
  return out;
}

struct Tol {
  double atol = 0, rtol = 0;
};

Tol ToleranceOf(const json& c, const std::string& role, Tol fallback) {
  if (c.contains("tolerance") && c["tolerance"].contains(role)) {
    const json& t = c["tolerance"][role];
    return {t.value("atol", 0.0), t.value("rtol", 0.0)};
  }
  return fallback;
}

// Compares got with want elementwise: |got - want| <= atol + rtol*|want|; describes the worst.
::testing::AssertionResult Close(const std::vector<double>& got, const std::vector<double>& want, Tol tol,
                                 const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, want " << want.size();
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    const double allowed = tol.atol + tol.rtol * std::abs(want[i]);
    worst = std::max(worst, err);
    if (!(err <= allowed)) {
      if (bad == 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << what << " max err " << worst;
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size() << " outside atol " << tol.atol
                                       << " rtol " << tol.rtol << "; first at " << first << ": got " << got[first]
                                       << " want " << want[first] << "; max err " << worst;
}

std::vector<double> AsDoubles(const Array& a) {
  std::vector<double> out(static_cast<size_t>(a.size()));
  if (a.dtype() == DType::kF64) {
    auto s = a.span<double>();
    std::copy(s.begin(), s.end(), out.begin());
  } else {
    Array f = a.AsType(DType::kF32).value();
    auto s = f.span<float>();
    std::copy(s.begin(), s.end(), out.begin());
  }
  return out;
}

class RopeGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(RopeGolden, FrequenciesAndRotation) {
  if (GetParam().empty()) {
    POSENC_REQUIRE_DATA(dir, "golden/hf");
    FAIL() << "golden/hf exists but holds no rope case";
  }
  const fs::path dir = GetParam();
  std::ifstream f(dir / "case.json");
  const json c = json::parse(f);
  const bool is_ggml = dir.parent_path().filename() == "ggml";
  auto file = [&](const std::string& role) { return (dir / c["files"][role].get<std::string>()).string(); };

  Result<Array> input = ReadNpy(file("input"));
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  Result<Array> pos_arr = ReadNpy(file("positions"));
  ASSERT_TRUE(pos_arr.ok()) << pos_arr.status().ToString();
  Array pos64 = pos_arr->AsType(DType::kI64).value();
  std::vector<int64_t> positions(pos64.span<int64_t>().begin(), pos64.span<int64_t>().end());
  const int64_t head_dim = input->dim(2);

  RopeConfig config;
  if (is_ggml) {
    Result<RopeConfig> rc = RopeConfigFromGgmlParams(c["config"].dump(), head_dim, dir.string());
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    config = *rc;
    if (c["files"].contains("freq_factors")) {
      Result<Array> ff = ReadNpy(file("freq_factors"));
      ASSERT_TRUE(ff.ok()) << ff.status().ToString();
      config.scaling.freq_factors = AsDoubles(*ff);
    }
  } else {
    // The case names the model family where its config does not (GPT-J's config has no model_type).
    json hf = c["config"];
    if (!hf.contains("model_type") && c.contains("hf_model_type")) hf["model_type"] = c["hf_model_type"];
    Result<PositionScheme> s = ParseHfConfig(hf.dump(), dir.string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(s->kind, PositionKind::kRope);
    config = s->rope;
    EXPECT_EQ(config.layout.head_dim, c["head_dim"].get<int64_t>());
    EXPECT_EQ(config.layout.rotary_dim, c["rotary_dim"].get<int64_t>());
  }
  // The pairing: llama.cpp and GPT-J fix it outside the config; the case states it.
  RopePairing pairing;
  ASSERT_TRUE(ParseRopePairing(c["layout"].get<std::string>(), &pairing));
  if (!is_ggml) {
    EXPECT_EQ(config.layout.pairing, pairing) << "pairing implied by the config";
  }
  config.layout.pairing = pairing;

  int64_t seq_len = 0;
  if (c.contains("seq_len")) seq_len = c["seq_len"].get<int64_t>();
  else seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
  Result<RopeFrequencies> freqs = ComputeRopeFrequencies(config, seq_len);
  ASSERT_TRUE(freqs.ok()) << freqs.status().ToString();

  // Frequencies and attention scaling.
  Result<Array> inv = ReadNpy(file("inv_freq"));
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_TRUE(Close(freqs->inv_freq, AsDoubles(*inv), ToleranceOf(c, "inv_freq", {0.0, std::ldexp(1.0, -22)}), "inv_freq"));
  const double want_scaling = c.value("attention_scaling", 1.0);
  EXPECT_NEAR(freqs->attention_scaling, want_scaling, 1e-12 * std::abs(want_scaling)) << "attention_scaling";

  // Rotation in both precisions.
  const bool f16 = c.value("dtype", "float32") == "float16";
  for (const auto& [role, precision] : {std::pair{"expected", RopePrecision::kReference},
                                        std::pair{"expected_exact", RopePrecision::kExact}}) {
    if (!c["files"].contains(role)) continue;
    SCOPED_TRACE(role);
    Result<Array> want = ReadNpy(file(role));
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Result<RopeTable> table = RopeTable::Build(*freqs, 0, precision);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    // float16 cases ran in float16 storage: so do we for `expected`.
    const DType storage = f16 && precision == RopePrecision::kReference ? DType::kF16 : DType::kF32;
    Array x = input->AsType(storage).value();
    Array y = x;
    RopeArgs args{config.layout, &*table, positions};
    Status st = ApplyRope(args, HeadsView::Of(x, "input").value(), HeadsView::Of(y, "output").value());
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(Close(AsDoubles(y), AsDoubles(*want), ToleranceOf(c, role, {1e-5, 1e-6}), role));
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  if (info.param.empty()) return "missing_data";
  const fs::path p(info.param);
  std::string name = p.parent_path().filename().string() + "_" + p.filename().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, RopeGolden, ::testing::ValuesIn(RopeCases()), CaseName);

}  // namespace
}  // namespace posenc
