// posenc check's library, one model at a time: layer types, partial and MLA windows, cos/sin caches and
// frequencies, bad input, posenc's own kernel and ggml's arithmetic, packed sequences, scalings,
// multi-axis sections; MakeRopeDump reading the caller's tensors; the causes' vocabulary. Dumps come
// from the test engine of rope_check_engine.hpp.
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/core/dtype.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_table.hpp"
#include "posenc/model/rope_check.hpp"
#include "published_configs.hpp"
#include "rope_check_engine.hpp"
#include "temp_folder.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using nlohmann::json;
using namespace ::posenc::testing;  // NOLINT

class RopeCheckOneModel : public TempFolderTest {
 protected:
  RopeDescription Open(const json& c) {
    WriteFile(dir_ / "config.json", c.dump());
    return OpenRopeDescription((dir_ / "config.json").string()).value();
  }
  // A dump of the published config `name` computed with its scaling factor set to `factor`: the
  // diagnosis names scaling_param first, with `detail` in its words.
  void ExpectScalingFactorNamed(const std::string& name, double factor, DType dt, int64_t top, uint64_t seed,
                                const std::string& detail) {
    const RopeDescription d = Open(PublishedConfig(name));
    const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
    RopeConfig off = t.config;
    off.scaling.factor = factor;
    const RopeCheckReport r =
        CheckRope(t, Engine(t.config, dt, 2, Positions(top), With([&](Fault& f) { f.config = off; }), seed)).value();
    ASSERT_FALSE(r.diagnosis.empty());
    EXPECT_EQ(r.diagnosis.front().id, "scaling_param");
    EXPECT_NE(r.diagnosis.front().detail.find(detail), std::string::npos) << r.diagnosis.front().detail;
  }
};

TEST_F(RopeCheckOneModel, TheWrongLayerTypesParametersAreNamed) {
  const RopeDescription d = Open(GemmaLayerTypes(PublishedConfig("gemma3_text__gemma-3-1b-it")));
  const RopeCheckTarget sliding = RopeCheckTargetOf(d, RopeCheckSelect{.layer = 0, .layer_type = "", .site = ""}).value();
  const RopeCheckTarget full = RopeCheckTargetOf(d, RopeCheckSelect{.layer = 5, .layer_type = "", .site = ""}).value();
  EXPECT_EQ(sliding.config.base, 10000.0);
  EXPECT_EQ(full.config.base, 1000000.0);
  ASSERT_EQ(sliding.other_layer_types.size(), 1u);
  // Layer 0 (sliding) computed with the full layers' base.
  const RopeDump dump = Engine(sliding.config, DType::kBF16, 2, Positions(8000), With([&](Fault& f) { f.config = full.config; }), 3);
  const RopeCheckReport r = CheckRope(sliding, dump).value();
  EXPECT_FALSE(r.pass);
  ASSERT_FALSE(r.diagnosis.empty());
  EXPECT_EQ(r.diagnosis.front().id, "layer_type");
  EXPECT_NE(r.diagnosis.front().detail.find("full_attention"), std::string::npos);
  // The same dump is right for layer 5.
  EXPECT_TRUE(CheckRope(full, dump).value().pass);
}

TEST_F(RopeCheckOneModel, AWindowOnlyDumpOfAPartialHeadIsChecked) {
  const RopeDescription d = Open(PublishedConfig("gptj__gpt-j-6b-8bit"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  ASSERT_EQ(t.config.layout.rotary_dim, 64);
  const RopeDump slice = Engine(t.config, DType::kF16, 2, Positions(2000), Fault{}, 4, /*width=*/64);
  EXPECT_EQ(slice.width, 64);
  EXPECT_TRUE(CheckRope(t, slice).value().pass);
}

TEST_F(RopeCheckOneModel, CosSinCachesAndFrequenciesAreChecked) {
  const RopeDescription d = Open(PublishedConfig("llama__llama-3.1-8b"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  const int64_t T = 64, R = 128;
  const RopeFrequencies f = ComputeRopeFrequencies(t.config, 131072).value();
  // HF's cache: [T, R] = cat(freqs, freqs) per row, row i = position i * 100.
  auto cache = [&](bool drop_scaling, int64_t width) {
    RopeConfig c = t.config;
    if (drop_scaling) c.scaling = RopeScaling{};
    const RopeFrequencies g = ComputeRopeFrequencies(c, 131072).value();
    RopeDump dump;
    dump.kind = RopeDumpKind::kCosSin;
    dump.what = "cache";
    dump.tokens = T, dump.width = width;
    dump.seq_len = 131072;
    for (int64_t p = 0; p < T; ++p) dump.positions.push_back(p * 1000);
    for (int64_t p = 0; p < T; ++p)
      for (int64_t k = 0; k < width; ++k) {
        const float a = static_cast<float>(p * 1000) * static_cast<float>(g.inv_freq[k % (R / 2)]);
        dump.cos.push_back(static_cast<float>(std::cos(static_cast<double>(a))));
        dump.sin.push_back(static_cast<float>(std::sin(static_cast<double>(a))));
      }
    return dump;
  };
  EXPECT_TRUE(CheckRope(t, cache(false, R)).value().pass);
  EXPECT_TRUE(CheckRope(t, cache(false, R / 2)).value().pass);
  const RopeCheckReport bad = CheckRope(t, cache(true, R)).value();
  EXPECT_FALSE(bad.pass);
  ASSERT_FALSE(bad.diagnosis.empty());
  EXPECT_EQ(bad.diagnosis.front().id, "scaling_missing");

  RopeDump freqs;
  freqs.kind = RopeDumpKind::kInvFreq;
  freqs.what = "inv_freq";
  for (double w : f.inv_freq) freqs.inv_freq.push_back(static_cast<float>(w));
  EXPECT_TRUE(CheckRope(t, freqs).value().pass);
  RopeConfig other = t.config;
  other.base = 10000.0;
  freqs.inv_freq.clear();
  const RopeFrequencies g = ComputeRopeFrequencies(other, 131072).value();
  for (double w : g.inv_freq) freqs.inv_freq.push_back(static_cast<float>(w));
  const RopeCheckReport rb = CheckRope(t, freqs).value();
  ASSERT_FALSE(rb.diagnosis.empty());
  EXPECT_EQ(rb.diagnosis.front().id, "base");
  EXPECT_NE(rb.diagnosis.front().detail.find("base 10000 fits"), std::string::npos) << rb.diagnosis.front().detail;
}

TEST_F(RopeCheckOneModel, BadInputIsOneLineNamingIt) {
  const RopeDescription d = Open(PublishedConfig("llama__llama-3.1-8b"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  const std::vector<int64_t> pos = Positions(1000);
  {  // another layer's head size
    RopeConfig c = t.config;
    c.layout.head_dim = c.layout.rotary_dim = 96;
    const Result<RopeCheckReport> r = CheckRope(t, Engine(c, DType::kF32, 2, pos, Fault{}, 1));
    EXPECT_TRUE(HasError(r.status(), StatusCode::kInvalidArgument, "head_dim 96"));
  }
  {  // a position out of range
    RopeDump dump = Engine(t.config, DType::kF32, 2, pos, Fault{}, 1);
    dump.positions[3] = -4;
    EXPECT_TRUE(HasError(CheckRope(t, dump).status(), StatusCode::kOutOfRange, "position -4"));
  }
  {  // NaN in the dump
    RopeDump dump = Engine(t.config, DType::kF32, 2, pos, Fault{}, 1);
    dump.after[300] = NAN;
    EXPECT_TRUE(HasError(CheckRope(t, dump).status(), StatusCode::kInvalidArgument, "NaN at element 300"));
  }
  {  // positions that do not match the tokens
    RopeDump dump = Engine(t.config, DType::kF32, 2, pos, Fault{}, 1);
    dump.positions.pop_back();
    EXPECT_TRUE(HasError(CheckRope(t, dump).status(), StatusCode::kInvalidArgument, "31 positions for 32 tokens"));
  }
  // A layer past the model's, a layer type it does not have.
  EXPECT_TRUE(HasError(RopeCheckTargetOf(d, RopeCheckSelect{.layer = 32, .layer_type = "", .site = ""}).status(), StatusCode::kOutOfRange,
                       "the model has 32 layers"));
  EXPECT_TRUE(HasError(RopeCheckTargetOf(d, RopeCheckSelect{.layer = -1, .layer_type = "sliding_attention", .site = ""}).status(),
                       StatusCode::kNotFound, "sliding_attention"));
}

TEST_F(RopeCheckOneModel, PosencsOwnKernelAndAFloat64AngleEnginePass) {
  const RopeDescription d = Open(PublishedConfig("llama__llama-3.1-8b"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{.layer = 3, .layer_type = "", .site = ""}).value();
  const std::vector<int64_t> pos = Positions(100000);
  RopeDump dump = Engine(t.config, DType::kF32, 4, pos, Fault{}, 21);
  // The SIMD kernel, in the exact precision (float64 angles): a different rounding of every angle.
  for (RopePrecision precision : {RopePrecision::kReference, RopePrecision::kExact}) {
    const RopeFrequencies f = ComputeRopeFrequencies(t.config, pos.back() + 1).value();
    const RopeTable table = RopeTable::Build(f, 1024, precision).value();
    std::vector<float> out = dump.before;
    RopeArgs args;
    args.layout = t.config.layout;
    args.table = &table;
    args.positions = pos;
    ASSERT_TRUE(ApplyRope(args, HeadsView::Dense(out.data(), DType::kF32, dump.tokens, dump.heads, dump.width)).ok());
    RopeDump kernel = dump;
    kernel.after = out;
    const RopeCheckReport r = CheckRope(t, kernel).value();
    EXPECT_TRUE(r.pass) << ToString(precision) << " " << r.max_ratio;
  }
}

TEST_F(RopeCheckOneModel, PackedSequencesCountedOnAreAPositionReset) {
  const RopeDescription d = Open(PublishedConfig("qwen2__qwen2.5-7b-instruct"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  // Two packed sequences of 16 tokens: positions restart at 0; the engine counts on to 31.
  std::vector<int64_t> packed;
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t i = 0; i < 16; ++i) packed.push_back(i * 97);
  std::vector<int64_t> counted;
  for (int64_t i = 0; i < 32; ++i) counted.push_back(i);
  RopeDump dump = Engine(t.config, DType::kBF16, 2, counted, Fault{}, 8);
  dump.positions = packed;
  const RopeCheckReport r = CheckRope(t, dump).value();
  ASSERT_FALSE(r.diagnosis.empty());
  EXPECT_EQ(r.diagnosis.front().id, "position_reset") << r.diagnosis.front().detail;
}

TEST_F(RopeCheckOneModel, AYarnFactorOffIsAScalingParameter) {
  // The config says 4.
  ExpectScalingFactorNamed("qwen2__qwen2.5-7b-instruct-yarn-d1e200f", 2.0, DType::kF32, 60000, 4, "factor 2");
}

TEST_F(RopeCheckOneModel, MultiAxisSectionsIgnoredAreNamed) {
  const RopeDescription d = Open(PublishedConfig("qwen2_5_vl__gd-ml-autodrive-r2-7b-cot-sft"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  ASSERT_TRUE(t.config.multi_axis.has_value());
  const int64_t T = 24, H = 2, D = t.config.layout.head_dim;
  // Text tokens (t = h = w), then an image grid whose h and w run apart from t.
  std::vector<int64_t> pos(3 * T);
  for (int64_t i = 0; i < T; ++i) {
    const bool image = i >= 8;
    pos[i] = image ? 8 : i;
    pos[T + i] = image ? 8 + (i - 8) / 4 : i;
    pos[2 * T + i] = image ? 8 + (i - 8) % 4 : i;
  }
  const SiteFrequencies f = ComputeSiteFrequencies(t.config, 64).value();
  auto dump_with = [&](bool ignore_sections) {
    RopeDump dump;
    dump.what = "mrope";
    dump.tokens = T, dump.heads = H, dump.width = D;
    dump.positions = pos;
    std::mt19937_64 rng = MakeRng(3);
    dump.before = RandomNormal(rng, static_cast<size_t>(T * H * D));
    dump.after = dump.before;
    const RotaryLayout& l = t.config.layout;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < l.num_pairs(); ++j) {
        const int64_t comp = ignore_sections ? 0 : f.pair_component[j];
        const float a = static_cast<float>(pos[comp * T + i]) * static_cast<float>(f.freqs.inv_freq[j]);
        const float c = std::cos(a), s = std::sin(a);
        for (int64_t h = 0; h < H; ++h) {
          const size_t b = static_cast<size_t>((i * H + h) * D);
          const float x1 = dump.before[b + l.first(j)], x2 = dump.before[b + l.second(j)];
          dump.after[b + l.first(j)] = x1 * c - x2 * s;
          dump.after[b + l.second(j)] = x2 * c + x1 * s;
        }
      }
    return dump;
  };
  EXPECT_TRUE(CheckRope(t, dump_with(false)).value().pass);
  const RopeCheckReport r = CheckRope(t, dump_with(true)).value();
  EXPECT_FALSE(r.pass);
  ASSERT_FALSE(r.diagnosis.empty());
  EXPECT_EQ(r.diagnosis.front().id, "sections") << r.diagnosis.front().detail;
  // Height and width exchanged (t, w, h).
  std::vector<int64_t> swapped = pos;
  for (int64_t i = 0; i < T; ++i) std::swap(swapped[T + i], swapped[2 * T + i]);
  const std::vector<int64_t> truth = pos;
  pos = swapped;  // the engine rotated with h and w exchanged; the dump states the true positions
  RopeDump hw_dump = dump_with(false);
  pos = truth;
  hw_dump.positions = truth;
  const RopeCheckReport rs = CheckRope(t, hw_dump).value();
  EXPECT_FALSE(rs.pass);
  ASSERT_FALSE(rs.diagnosis.empty());
  EXPECT_EQ(rs.diagnosis.front().id, "sections") << rs.diagnosis.front().detail;
  EXPECT_NE(rs.diagnosis.front().detail.find("[0, 2, 1]"), std::string::npos) << rs.diagnosis.front().detail;
  // 1-D positions for a 3-component model are refused.
  RopeDump flat = dump_with(false);
  flat.positions.resize(T);
  EXPECT_TRUE(HasError(CheckRope(t, flat).status(), StatusCode::kInvalidArgument, "takes 3 per token"));
}

TEST_F(RopeCheckOneModel, DeepSeekMlaWindowAtTheFrontIsNamed) {
  // DeepSeek-V2-Lite: q = [q_nope (128) | q_pe (64)], RoPE on the back 64 dims, interleaved, YaRN.
  const RopeDescription d = Open(PublishedConfig("deepseek_v2__deepseek-v2-lite"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  ASSERT_EQ(t.config.layout.rotary_start, 128);
  ASSERT_EQ(t.config.layout.rotary_dim, 64);
  const std::vector<int64_t> pos = Positions(20000);
  EXPECT_TRUE(CheckRope(t, Engine(t.config, DType::kBF16, 2, pos, Fault{}, 6)).value().pass);
  // The q_pe slice alone, as the model's code rotates it.
  EXPECT_TRUE(CheckRope(t, Engine(t.config, DType::kBF16, 2, pos, Fault{}, 6, /*width=*/64)).value().pass);
  // An engine that rotates the front 64 dims of the whole head.
  RopeConfig front = t.config;
  front.layout.rotary_start = 0;
  const RopeCheckReport r =
      CheckRope(t, Engine(t.config, DType::kBF16, 2, pos, With([&](Fault& f) { f.config = front; }), 6)).value();
  ASSERT_FALSE(r.diagnosis.empty());
  EXPECT_EQ(r.diagnosis.front().id, "window");
  EXPECT_NE(r.diagnosis.front().detail.find("front"), std::string::npos) << r.diagnosis.front().detail;
  // Half pairs in the q_pe slice (the DeepSeek port that forgot the interleave).
  const RopeCheckReport h = CheckRope(t, Engine(t.config, DType::kF16, 2, pos,
                                                With([&](Fault& f) { f.pairing = RopePairing::kHalf; }), 6, 64))
                                .value();
  ASSERT_FALSE(h.diagnosis.empty());
  EXPECT_EQ(h.diagnosis.front().id, "pairing");
}

TEST_F(RopeCheckOneModel, AnOddScalingFactorIsFittedAndNamed) {
  // Llama 3.1 with factor 6 where the config says 8 (neither the default, twice nor half).
  ExpectScalingFactorNamed("llama__llama-3.1-8b", 6.0, DType::kBF16, 100000, 12, "factor 6 fits");
}

TEST_F(RopeCheckOneModel, GgmlsRepeatedFrequencyProductsPass) {
  // llama.cpp's CPU rope: theta = p, then theta *= theta_scale once per pair, all in float32, with
  // theta_scale = powf(base, -2/R): the slow pairs' angles drift by about j 2^-22 relative.
  const RopeDescription d = Open(PublishedConfig("qwen2__qwen2.5-7b-instruct"));
  const RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{}).value();
  const std::vector<int64_t> pos = Positions(32000);
  RopeDump dump = Engine(t.config, DType::kF32, 2, pos, Fault{}, 17);
  const RotaryLayout& l = t.config.layout;
  const float scale = std::pow(static_cast<float>(t.config.base), -2.0f / static_cast<float>(l.rotary_dim));
  for (size_t i = 0; i < pos.size(); ++i) {
    float theta = static_cast<float>(pos[i]);
    for (int64_t j = 0; j < l.num_pairs(); ++j, theta *= scale) {
      const float c = std::cos(theta), sn = std::sin(theta);
      for (int64_t h = 0; h < 2; ++h) {
        const size_t b = static_cast<size_t>((static_cast<int64_t>(i) * 2 + h) * l.head_dim);
        const float x1 = dump.before[b + l.first(j)], x2 = dump.before[b + l.second(j)];
        dump.after[b + l.first(j)] = x1 * c - x2 * sn;
        dump.after[b + l.second(j)] = x2 * c + x1 * sn;
      }
    }
  }
  const RopeCheckReport r = CheckRope(t, dump).value();
  EXPECT_TRUE(r.pass) << r.max_ratio << " at pair " << r.worst.pair << " position " << r.worst.position;
}

// MakeRopeDump reads the caller's tensors in place: heads-first through its axes swapped, any strides,
// float16 / bfloat16 / float64 values and int32 positions, into the token-major float32 dump.
TEST(RopeDumpTensors, AreReadInPlaceInEveryOrder) {
  const int64_t T = 2, H = 3, D = 4;
  std::vector<float> heads_first(static_cast<size_t>(H * T * D));  // [H, T, D]
  for (size_t i = 0; i < heads_first.size(); ++i) heads_first[i] = static_cast<float>(i) * 0.5f;
  const auto want = [&](int64_t t, int64_t h, int64_t k) { return heads_first[static_cast<size_t>((h * T + t) * D + k)]; };
  const std::vector<int32_t> pos = {7, 9};
  RopeDumpTensors a;
  a.before = a.after = RopeDumpTensor{.data = heads_first.data(), .dtype = DType::kF32, .shape = {H, T, D}, .strides = {}, .name = "after"};
  a.heads_first = true;
  a.positions = RopeDumpTensor{.data = pos.data(), .dtype = DType::kI32, .shape = {T}, .strides = {}, .name = "positions"};
  // The same memory described as a tokens-first view [T, H, D] with strides.
  RopeDumpTensors b = a;
  b.heads_first = false;
  b.before.shape = b.after.shape = {T, H, D};
  b.before.strides = b.after.strides = {D, T * D, 1};
  // bfloat16 values, [H, T, D].
  std::vector<bf16_t> bf(heads_first.size());
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = F32ToBF16(heads_first[i]);
  RopeDumpTensors c = a;
  c.before.data = c.after.data = bf.data();
  c.before.dtype = c.after.dtype = DType::kBF16;
  for (const RopeDumpTensors* in : {&a, &b, &c}) {
    const Result<RopeDump> d = MakeRopeDump(*in);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->tokens, T);
    EXPECT_EQ(d->heads, H);
    EXPECT_EQ(d->width, D);
    EXPECT_EQ(d->dtype, in == &c ? DType::kBF16 : DType::kF32);
    EXPECT_EQ(d->positions, (std::vector<int64_t>{7, 9}));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t k = 0; k < D; ++k) EXPECT_EQ(d->after[static_cast<size_t>((t * H + h) * D + k)], want(t, h, k));
  }
}

TEST(RopeDumpTensors, BadTensorsAreRefusedNamingThem) {
  std::vector<float> v(24, 0.25f);
  const std::vector<int64_t> pos = {0, 1};
  RopeDumpTensors t;
  t.before = RopeDumpTensor{.data = v.data(), .dtype = DType::kF32, .shape = {2, 3, 4}, .strides = {}, .name = "before"};
  t.after = RopeDumpTensor{.data = v.data(), .dtype = DType::kF32, .shape = {2, 3, 4}, .strides = {}, .name = "after"};
  t.positions = RopeDumpTensor{.data = pos.data(), .dtype = DType::kI64, .shape = {1, 2}, .strides = {}, .name = "positions"};
  ASSERT_TRUE(MakeRopeDump(t).ok());
  EXPECT_EQ(MakeRopeDump(t)->position_rows, 1);
  RopeDumpTensors bad = t;
  bad.after.shape = {2, 2, 4};
  EXPECT_TRUE(HasError(MakeRopeDump(bad).status(), StatusCode::kInvalidArgument, "before is [2, 3, 4] but after is [2, 2, 4]"));
  bad = t;
  bad.after.dtype = DType::kI8;
  EXPECT_TRUE(HasError(MakeRopeDump(bad).status(), StatusCode::kInvalidArgument, "after: dtype int8 is not float32"));
  bad = t;
  bad.positions.dtype = DType::kF32;
  EXPECT_TRUE(HasError(MakeRopeDump(bad).status(), StatusCode::kInvalidArgument, "positions: dtype float32 is not int32"));
  bad = t;
  bad.positions = RopeDumpTensor{};
  EXPECT_TRUE(HasError(MakeRopeDump(bad).status(), StatusCode::kInvalidArgument, "need before, after and positions"));
  bad = t;
  bad.inv_freq = bad.after;
  EXPECT_TRUE(HasError(MakeRopeDump(bad).status(), StatusCode::kInvalidArgument, "give exactly one dump"));
  bad = t;
  bad.dtype = DType::kBF16;  // 0.25 is a bfloat16 value: accepted; 0.1 is not
  EXPECT_TRUE(MakeRopeDump(bad).ok());
  v[5] = 0.1f;
  EXPECT_TRUE(HasError(MakeRopeDump(bad).status(), StatusCode::kInvalidArgument, "after: value 0.100000001 is not a bfloat16 value"));
}

TEST(RopeCauses, TheVocabularyIsStable) {
  EXPECT_EQ(RopeCauseIds(), (std::vector<std::string>{"pairing", "window", "layer_type", "base", "scaling_missing",
                                                      "attention_scaling", "scaling_param", "position_offset",
                                                      "position_reset", "precision", "direction", "cos_sin_swapped",
                                                      "sections"}));
}

}  // namespace
}  // namespace posenc
