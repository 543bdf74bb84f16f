// Every value of every real config (tests/conformance/configs) and of the fuzz corpus, one at a time,
// replaced by a value of each other JSON type: the reader must answer with its one-line error naming
// the file, or read it, and never let nlohmann throw inside it (a Gemma 4 rope_type of 8.0 once
// terminated the process; the readers now turn such a throw into kInternal, which fails here).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<fs::path> ConfigFiles() {
  std::vector<fs::path> files;
  for (const char* dir : {"tests/conformance/configs", "tests/fuzz/corpus/config"}) {
    const fs::path d = fs::path(POSENC_SOURCE_DIR) / dir;
    if (!fs::is_directory(d)) continue;
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The pointers of the values to replace: every member of every object, and an array's first element,
// down to `depth` levels.
void CollectPointers(const json& v, const json::json_pointer& at, int depth, std::vector<json::json_pointer>* out) {
  if (depth == 0) return;
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      const json::json_pointer p = at / it.key();
      out->push_back(p);
      CollectPointers(it.value(), p, depth - 1, out);
    }
  } else if (v.is_array() && !v.empty()) {
    const json::json_pointer p = at / 0;
    out->push_back(p);
    CollectPointers(v[0], p, depth - 1, out);
  }
}

TEST(ConfigTypeSweep, EveryValueOfAnotherTypeGetsAnErrorOrAReading) {
  const std::vector<json> others = {json("x"), json(8.5), json(-3), json(true), json(nullptr), json::array(),
                                    json::array({1, "a"}), json::object(), json{{"rope_type", 7}}};
  const std::vector<fs::path> files = ConfigFiles();
  ASSERT_GT(files.size(), 100u) << "the conformance configs are part of the repository";
  size_t tried = 0, refused = 0;
  for (const fs::path& file : files) {
    json root = json::parse(testing::ReadFile(file), nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) continue;  // a fuzz seed that is not JSON
    // A conformance record holds the published config under "config" (tests/conformance/README.md).
    // Its "expect" says whether posenc reads the unedited config or refuses it.
    if (root.contains("hub_id") && root.contains("config")) {
      const bool refused_as_published = root["expect"].is_object() && root["expect"].contains("error");
      root = json(root["config"]);
      ASSERT_EQ(ParseHfConfig(root.dump(), file.filename().string()).ok(), !refused_as_published) << file;
    }
    std::vector<json::json_pointer> pointers;
    CollectPointers(root, json::json_pointer(), 4, &pointers);
    const std::string name = file.filename().string();
    for (const json::json_pointer& p : pointers) {
      const json& original = root.at(p);
      for (const json& other : others) {
        if (other.type() == original.type()) continue;
        json edited = root;
        edited.at(p) = other;
        const std::string edited_text = edited.dump();
        const auto scheme = ParseHfConfig(edited_text, name);
        ++tried;
        if (scheme.ok()) continue;
        ++refused;
        const std::string m = scheme.status().message();
        ASSERT_NE(scheme.status().code(), StatusCode::kInternal) << name << " " << p.to_string() << " = "
                                                                  << other.dump() << ": " << m;
        ASSERT_NE(m.find(name), std::string::npos) << p.to_string() << ": " << m;
        ASSERT_EQ(m.find('\n'), std::string::npos) << p.to_string() << ": " << m;
        const auto rope = ParseRopeConfigJson(edited_text, 128, name);
        if (!rope.ok()) {
          ASSERT_NE(rope.status().code(), StatusCode::kInternal) << rope.status().message();
        }
      }
    }
  }
  std::printf("%zu edited configs, %zu refused\n", tried, refused);
  EXPECT_GT(refused, tried / 4);  // many edits hit keys the reader takes (else this sweep proves little)
  EXPECT_LT(refused, tried);     // and many others are keys it ignores: the unedited configs are read
}

}  // namespace
}  // namespace posenc
