// Llama 4's query temperature: the scales at p = 0 and around the floor steps (p + 1 = k * floor_scale),
// float32 against float64, the errors; the multiply over [T, H, D] views in float32, float16 and
// bfloat16 with odd sizes and strides, against the product computed here element by element.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/layer_schedule.hpp"
#include "posenc/kernels/attn_temperature.hpp"

namespace posenc {
namespace {

const AttnTemperature kScout{true, 8192.0, 0.1};

TEST(AttnTemperatureScales, OneBelowTheFirstStepThenLogSteps) {
  const std::vector<int64_t> p = {0, 1, 8190, 8191, 8192, 16382, 16383, 98303, 131071, (int64_t{1} << 31) - 1};
  Result<std::vector<double>> exact = AttnTemperatureScalesExact(kScout, p);
  Result<std::vector<float>> f32 = AttnTemperatureScales(kScout, p);
  ASSERT_TRUE(exact.ok() && f32.ok());
  // p + 1 < 8192: floor 0, scale exactly 1.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*exact)[i], 1.0) << p[i];
    EXPECT_EQ((*f32)[i], 1.0f) << p[i];
  }
  // p + 1 = 8192: the first step, ln 2.
  EXPECT_DOUBLE_EQ((*exact)[3], 1.0 + 0.1 * std::log(2.0));
  EXPECT_DOUBLE_EQ((*exact)[4], 1.0 + 0.1 * std::log(2.0));       // 8193 / 8192 still floors to 1
  EXPECT_DOUBLE_EQ((*exact)[5], 1.0 + 0.1 * std::log(2.0));       // 16383 / 8192 = 1.99.. -> 1
  EXPECT_DOUBLE_EQ((*exact)[6], 1.0 + 0.1 * std::log(3.0));       // 16384 / 8192 = 2
  EXPECT_DOUBLE_EQ((*exact)[7], 1.0 + 0.1 * std::log(13.0));      // 98304 / 8192 = 12
  EXPECT_DOUBLE_EQ((*exact)[8], 1.0 + 0.1 * std::log(17.0));      // 131072 / 8192 = 16
  EXPECT_DOUBLE_EQ((*exact)[9], 1.0 + 0.1 * std::log(262145.0));  // 2^31 / 8192 = 2^18
  // float32 as Hugging Face forms it: within a few float32 ulps of the float64 value.
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR((*f32)[i], (*exact)[i], 4 * std::ldexp((*exact)[i], -24)) << p[i];
  // The float32 steps, one by one.
  for (size_t i = 0; i < p.size(); ++i) {
    const float steps = std::floor((static_cast<float>(p[i]) + 1.0f) / 8192.0f);
    EXPECT_EQ((*f32)[i], std::log(steps + 1.0f) * 0.1f + 1.0f) << p[i];
  }
}

TEST(AttnTemperatureScales, NonIntegralFloorScaleAndZeroWeight) {
  const AttnTemperature t{true, 2.5, 0.5};
  const std::vector<int64_t> p = {0, 1, 3, 4};  // (p + 1) / 2.5 = 0.4, 0.8, 1.6, 2.0
  std::vector<double> e = AttnTemperatureScalesExact(t, p).value();
  EXPECT_EQ(e[0], 1.0);
  EXPECT_EQ(e[1], 1.0);
  EXPECT_DOUBLE_EQ(e[2], 1.0 + 0.5 * std::log(2.0));
  EXPECT_DOUBLE_EQ(e[3], 1.0 + 0.5 * std::log(3.0));
  const std::vector<double> flat = AttnTemperatureScalesExact({true, 8192.0, 0.0}, p).value();
  for (double s : flat) EXPECT_EQ(s, 1.0);
  EXPECT_TRUE(AttnTemperatureScales(t, {}).value().empty());
}

// Ministral 3 / Mistral 4 (get_llama_4_attn_scale): offset 0, so the first step is at p = floor_scale,
// one token later than Llama 4's; float32 as torch divides an int64 tensor by an int.
TEST(AttnTemperatureScales, ScalingBetaFormHasNoOffset) {
  const AttnTemperature t{.tuning = true, .floor_scale = 16384.0, .attn_scale = 0.1, .offset = 0, .every_layer = true};
  const std::vector<int64_t> p = {0, 16382, 16383, 16384, 32767, 32768, 262143};
  const std::vector<double> e = AttnTemperatureScalesExact(t, p).value();
  const std::vector<float> f = AttnTemperatureScales(t, p).value();
  EXPECT_EQ(e[1], 1.0);
  EXPECT_EQ(e[2], 1.0);  // Llama 4's form steps here (16383 + 1 = 16384)
  EXPECT_DOUBLE_EQ(e[3], 1.0 + 0.1 * std::log(2.0));
  EXPECT_DOUBLE_EQ(e[4], 1.0 + 0.1 * std::log(2.0));
  EXPECT_DOUBLE_EQ(e[5], 1.0 + 0.1 * std::log(3.0));
  EXPECT_DOUBLE_EQ(e[6], 1.0 + 0.1 * std::log(16.0));
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_EQ(f[i], 1.0f + 0.1f * std::log(1.0f + std::floor(static_cast<float>(p[i]) / 16384.0f))) << p[i];
  AttnTemperature bad = t;
  bad.offset = 2;
  EXPECT_FALSE(ValidateAttnTemperature(bad).ok());
}

// The config side: a Ministral 3 config (text_config, rope_parameters.llama_4_scaling_beta, as
// mistralai/Ministral-3-3B-Instruct-2512 ships it) scales queries on every layer, RoPE layers included.
TEST(AttnTemperatureConfig, Ministral3ScalingBetaOnEveryLayer) {
  const char* cfg = R"({"model_type": "mistral3", "text_config": {"model_type": "ministral3", "head_dim": 128,
      "hidden_size": 3072, "max_position_embeddings": 262144, "num_attention_heads": 32, "num_hidden_layers": 4,
      "num_key_value_heads": 8, "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 16.0,
      "llama_4_scaling_beta": 0.1, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 16384,
      "rope_theta": 1000000.0, "rope_type": "yarn"}}})";
  Result<PositionScheme> s = ParseHfConfig(cfg, "ministral3.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const AttnTemperature& t = s->attn_temperature;
  EXPECT_TRUE(t.tuning);
  EXPECT_EQ(t.attn_scale, 0.1);
  EXPECT_EQ(t.floor_scale, 16384.0);
  EXPECT_EQ(t.offset, 0);
  Result<LayerSchedule> sched = LayerRopeSchedule(*s);
  ASSERT_TRUE(sched.ok());
  for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(QueryTemperatureApplies(*s, *sched, i)) << i;
  // Without original_max_position_embeddings beside the beta: an error naming the key.
  std::string no_len = cfg;
  no_len.replace(no_len.find(R"("original_max_position_embeddings": 16384,)"), 43, "");
  Result<PositionScheme> e = ParseHfConfig(no_len, "ministral3.json");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("original_max_position_embeddings"), std::string::npos) << e.status().message();
  // A Mistral config without the key has no temperature.
  Result<PositionScheme> m = ParseHfConfig(R"({"model_type": "mistral", "hidden_size": 4096,
      "num_attention_heads": 32, "max_position_embeddings": 32768, "rope_theta": 1000000.0})",
                                           "m.json");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->attn_temperature.tuning);
}

TEST(AttnTemperatureScales, Errors) {
  const std::vector<int64_t> bad = {0, -1};
  Result<std::vector<float>> r = AttnTemperatureScales(kScout, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("positions[1] = -1"), std::string::npos) << r.status().message();
  const std::vector<int64_t> big = {int64_t{1} << 31};
  EXPECT_FALSE(AttnTemperatureScalesExact(kScout, big).ok());
  const std::vector<int64_t> ok = {0};
  for (const AttnTemperature& t : {AttnTemperature{true, 0.0, 0.1}, AttnTemperature{true, -8.0, 0.1},
                                   AttnTemperature{true, NAN, 0.1}, AttnTemperature{true, 8192.0, INFINITY}}) {
    Result<std::vector<double>> e = AttnTemperatureScalesExact(t, ok);
    ASSERT_FALSE(e.ok());
    EXPECT_TRUE(e.status().message().find("floor_scale") != std::string::npos ||
                e.status().message().find("attn_scale") != std::string::npos)
        << e.status().message();
  }
}

// A strided [T, H, D] buffer (token stride and head stride padded) filled with values exact in
// every storage type; the padding must stay untouched.
struct Buffer {
  int64_t T, H, D, token_stride, head_stride;
  DType dtype;
  std::vector<uint8_t> bytes;
  Buffer(DType dt, int64_t t, int64_t h, int64_t d)
      : T(t), H(h), D(d), token_stride(h * (d + 3) + 5), head_stride(d + 3), dtype(dt) {
    bytes.assign(static_cast<size_t>(T * token_stride) * SizeOf(dt), 0xAB);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < H; ++j)
        for (int64_t k = 0; k < D; ++k) Set(i, j, k, static_cast<float>((i * 7 + j * 3 + k) % 23 - 11) * 0.375f);
  }
  HeadsView View() { return {bytes.data(), dtype, T, H, D, token_stride, head_stride}; }
  size_t Index(int64_t t, int64_t h, int64_t d) const {
    return static_cast<size_t>(t * token_stride + h * head_stride + d);
  }
  float Get(int64_t t, int64_t h, int64_t d) const {
    const size_t i = Index(t, h, d);
    switch (dtype) {
      case DType::kF32: return reinterpret_cast<const float*>(bytes.data())[i];
      case DType::kF16: return F16ToF32(reinterpret_cast<const f16_t*>(bytes.data())[i]);
      default: return BF16ToF32(reinterpret_cast<const bf16_t*>(bytes.data())[i]);
    }
  }
  void Set(int64_t t, int64_t h, int64_t d, float v) {
    const size_t i = Index(t, h, d);
    switch (dtype) {
      case DType::kF32: reinterpret_cast<float*>(bytes.data())[i] = v; break;
      case DType::kF16: reinterpret_cast<f16_t*>(bytes.data())[i] = F32ToF16(v); break;
      default: reinterpret_cast<bf16_t*>(bytes.data())[i] = F32ToBF16(v); break;
    }
  }
  float Round(float v) const {
    switch (dtype) {
      case DType::kF32: return v;
      case DType::kF16: return F16ToF32(F32ToF16(v));
      default: return BF16ToF32(F32ToBF16(v));
    }
  }
};

TEST(ApplyQueryTemperature, EveryStorageTypeOddSizesStrided) {
  const std::vector<int64_t> p = {0, 8191, 16383, 131070, 98303, 5, 1 << 20};
  const std::vector<float> s32 = AttnTemperatureScales(kScout, p).value();
  const std::vector<double> s64 = AttnTemperatureScalesExact(kScout, p).value();
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (bool exact : {false, true}) {
      Buffer b(dt, 7, 3, 13);
      const Buffer before = b;
      const Status st = exact ? ApplyQueryTemperature(b.View(), s64) : ApplyQueryTemperature(b.View(), s32);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int64_t t = 0; t < b.T; ++t)
        for (int64_t h = 0; h < b.H; ++h)
          for (int64_t d = 0; d < b.D; ++d) {
            const float x = before.Get(t, h, d);
            const float want =
                exact ? b.Round(static_cast<float>(static_cast<double>(x) * s64[t])) : b.Round(x * s32[t]);
            ASSERT_EQ(b.Get(t, h, d), want)
                << ToString(dt) << (exact ? " f64" : " f32") << " t " << t << " h " << h << " d " << d;
          }
      // Tokens 0 (p = 0) keep their values; the padding between rows is untouched.
      for (int64_t d = 0; d < b.D; ++d) EXPECT_EQ(b.Get(0, 1, d), before.Get(0, 1, d));
      for (int64_t t = 0; t < b.T; ++t)
        for (int64_t h = 0; h < b.H; ++h)
          for (int64_t d = b.D; d < b.head_stride; ++d) {
            const size_t i = b.Index(t, h, d) * SizeOf(dt);
            EXPECT_EQ(b.bytes[i], 0xAB);
          }
    }
  }
}

TEST(ApplyQueryTemperature, ErrorsWriteNothing) {
  Buffer b(DType::kF32, 3, 2, 5);
  const Buffer before = b;
  std::vector<float> two = {1.5f, 1.5f};
  Status s = ApplyQueryTemperature(b.View(), two);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("2 scales for 3"), std::string::npos) << s.message();
  std::vector<double> nan = {1.0, NAN, 2.0};
  s = ApplyQueryTemperature(b.View(), nan);
  EXPECT_NE(s.message().find("scales[1]"), std::string::npos) << s.message();
  EXPECT_EQ(b.bytes, before.bytes);
  HeadsView wrong = b.View();
  wrong.dtype = DType::kF64;
  EXPECT_FALSE(ApplyQueryTemperature(wrong, std::vector<float>{1, 1, 1}).ok());
  // An empty view is fine.
  EXPECT_TRUE(ApplyQueryTemperature(HeadsView::Dense(nullptr, DType::kF32, 0, 2, 5), std::vector<float>{}).ok());
}

}  // namespace
}  // namespace posenc
