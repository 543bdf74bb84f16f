// The variant list of scalings (RopeScalings(), src/math/rope_scaling_table.hpp) from the readers' side:
// for every row, a config giving each of its keys is read by the Hugging Face (or ggml) reader into
// the row's fields and shown by `posenc inspect` under the key's name, so a new row is all a new
// scaling needs. And `posenc rope --config`'s reader parses its JSON text once and validates the
// frequencies once, so the command computes them once.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/math/rope_config.hpp"
#include "config/config_json.hpp"
#include "math/rope_scaling_table.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kPairs = 32;  // head_dim 64

// A value for each key of the row, distinct per key, that every rule accepts (greater keys of the
// ordering rules one above their lesser key).
json RowValues(const RopeScalingSpec& row) {
  json v = json::object();
  double x = 8.0;
  for (const RopeScalingKey& k : row.keys) {
    const std::string name(k.name);
    x -= 0.25;
    switch (k.kind()) {
      case ScalingKeyKind::kNumber:
      case ScalingKeyKind::kOptionalNumber:
        v[name] = k.rule == ScalingKeyRule::kUnitInterval ? 0.5 : k.rule == ScalingKeyRule::kNonNegative ? 0.0 : x;
        break;
      case ScalingKeyKind::kInteger: v[name] = name == "max_position_embeddings" ? 8192 : 4096; break;
      case ScalingKeyKind::kBoolean: v[name] = false; break;
      case ScalingKeyKind::kNumberList: v[name] = std::vector<double>(kPairs, x); break;
    }
  }
  for (const ScalingOrderRule& o : row.orders) v[std::string(o.greater)] = v[std::string(o.lesser)].get<double>() + 1.0;
  return v;
}

// A Llama-shaped config.json whose rope_scaling gives every key of the row.
json HfConfigOf(const RopeScalingSpec& row, const json& values) {
  json scaling = values;
  scaling.erase("max_position_embeddings");  // a top-level key
  scaling["rope_type"] = std::string(row.spellings.front().name);
  return {{"model_type", "llama"},           {"hidden_size", 512},    {"num_attention_heads", 8},
          {"max_position_embeddings", 8192}, {"rope_theta", 10000.0}, {"rope_scaling", scaling}};
}

// The field's value as JSON, read back through the row.
json FieldValue(const RopeConfig& rc, const RopeScalingKey& k) {
  switch (k.kind()) {
    case ScalingKeyKind::kNumber: return *k.In<double>(rc);
    case ScalingKeyKind::kOptionalNumber: {
      const std::optional<double>& o = *k.In<std::optional<double>>(rc);
      return o.has_value() ? json(*o) : json(nullptr);
    }
    case ScalingKeyKind::kInteger: return *k.In<int64_t>(rc);
    case ScalingKeyKind::kBoolean: return *k.In<bool>(rc);
    case ScalingKeyKind::kNumberList: return *k.In<std::vector<double>>(rc);
  }
  return nullptr;
}

TEST(RopeScalingTable, EveryHfRowsKeysAreParsedAndShown) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("posenc_scaling_table_{}", ::getpid());
  fs::create_directories(dir);
  int rows = 0;
  for (const RopeScalingSpec& row : RopeScalings()) {
    if (row.spellings.empty()) continue;  // ggml: RopeConfigFromGgmlParams, below
    SCOPED_TRACE(std::string(row.name));
    ++rows;
    const json values = RowValues(row);
    const json config = HfConfigOf(row, values);
    Result<PositionScheme> s = ParseHfConfig(config.dump(), "table.json");
    ASSERT_TRUE(s.ok()) << s.status().ToString() << "\n" << config.dump();
    EXPECT_EQ(s->rope.scaling.type, row.type);
    for (const RopeScalingKey& k : row.keys) EXPECT_EQ(FieldValue(s->rope, k), values[std::string(k.name)]) << k.name;
    // inspect shows each key under its name with the value read.
    const fs::path file = dir / fmt::format("{}.json", row.name);
    std::ofstream(file) << config.dump();
    std::string out;
    ASSERT_EQ(testing::RunCommand(testing::CliPath() + " inspect --json " + file.string(), &out), 0) << out;
    const json d = json::parse(out);
    EXPECT_EQ(d["scaling"], std::string(row.name));
    EXPECT_EQ(d["scaling_params"].size(), row.keys.size()) << d["scaling_params"].dump();
    for (const RopeScalingKey& k : row.keys)
      EXPECT_EQ(d["scaling_params"][std::string(k.name)], values[std::string(k.name)]) << k.name;
  }
  EXPECT_EQ(rows, 8);
  fs::remove_all(dir);
}

TEST(RopeScalingTable, GgmlRowsKeysAreParsed) {
  const RopeScalingSpec& row = RopeScalingOf(RopeScalingType::kGgml);
  json params = {{"n_dims", 64}, {"mode", 2}, {"freq_base", 10000.0}};
  int read = 0;
  for (const RopeScalingKey& k : row.keys) {
    if (k.read != ScalingKeyRead::kOptional) continue;
    ++read;
    params[std::string(k.name)] = RowValues(row)[std::string(k.name)];
  }
  params["beta_slow"] = 1.0;  // ext_factor 0: the betas are kept, not ordered
  Result<RopeConfig> rc = RopeConfigFromGgmlParams(params.dump(), 64, "ggml.json");
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_TRUE(rc->notes.empty());
  for (const RopeScalingKey& k : row.keys)
    if (k.read == ScalingKeyRead::kOptional) { EXPECT_EQ(FieldValue(*rc, k), params[std::string(k.name)]) << k.name; }
  EXPECT_EQ(read, 7);
  // Absent keys keep ggml's neutral values, each noted.
  Result<RopeConfig> bare =
      RopeConfigFromGgmlParams(R"({"n_dims": 64, "mode": 2, "freq_base": 10000})", 64, "ggml.json");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->notes.size(), 5u);
  EXPECT_EQ(bare->notes[0], "no freq_scale: 1 assumed (ggml's neutral value)");
  EXPECT_EQ(bare->notes[3], "no beta_fast: 32 assumed (ggml's neutral value)");
}

// ParseRopeConfigJson (what `posenc rope --config FILE.json` reads FILE with) parses the text once
// for either spelling (the text_config of a multimodal config included), and the config it returns
// is validated once: ComputeRopeFrequencies on it computes nothing more.
TEST(RopeConfigJson, ParsedOnceAndComputedOnce) {
  const std::string hf = R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 32768,
      "rope_scaling": {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 4096}})";
  const std::string nested = R"({"model_type": "llava", "text_config": )" + hf + "}";
  const std::string ggml = R"({"config": {"n_dims": 64, "mode": 0, "freq_base": 10000, "freq_scale": 0.25}})";
  for (const std::string& text : {hf, nested, ggml}) {
    SCOPED_TRACE(text);
    const int64_t parses = config_json::ConfigJsonParses();
    const int64_t computed = RopeFrequencyComputations();
    Result<RopeConfig> rc = ParseRopeConfigJson(text, 64, "c.json");
    ASSERT_TRUE(rc.ok()) << rc.status().ToString();
    EXPECT_EQ(config_json::ConfigJsonParses() - parses, 1);
    EXPECT_EQ(RopeFrequencyComputations() - computed, 1);  // validation: one regime
    Result<RopeFrequencies> f = ComputeRopeFrequencies(*rc, 20000);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(RopeFrequencyComputations() - computed, 1);  // reused
  }
  // Bad JSON: one parse, the Hugging Face reader's message.
  const int64_t parses = config_json::ConfigJsonParses();
  Result<RopeConfig> bad = ParseRopeConfigJson("{", 64, "c.json");
  EXPECT_EQ(config_json::ConfigJsonParses() - parses, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().message().starts_with("config c.json: not valid JSON at byte 2: "))
      << bad.status().message();
}

}  // namespace
}  // namespace posenc
