// ggml_rope_ext parameters -> RopeConfig, and a JSON text of either spelling -> RopeConfig, each
// text parsed once.
#include <atomic>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config_json.hpp"
#include "config/json_util.hpp"
#include "config/multi_axis_json.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/io/file_io.hpp"
#include "posenc/io/json_read.hpp"

namespace posenc {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {
std::atomic<int64_t> g_parses{0};
}  // namespace

namespace config_json {

int64_t ConfigJsonParses() { return g_parses.load(std::memory_order_relaxed); }

Result<json> ParseText(std::string_view text, std::string_view what) {
  g_parses.fetch_add(1, std::memory_order_relaxed);
  return ParseJsonText(text, what);
}

Result<json> ReadFileJson(const std::string& path, std::string_view what) {
  POSENC_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseText(text, what);
}

namespace {

Result<RopeConfig> ReadGgmlJson(const json& root, int64_t head_dim, const std::string& source) {
  if (!root.is_object())
    return InvalidArgumentError(fmt::format("ggml params {}: top level is not a JSON object", source));
  POSENC_ASSIGN_OR_RETURN(const json* inner, FindObject(root, "config", source));
  const json& j = inner != nullptr ? *inner : root;
  RopeConfig rc;
  rc.source = source;
  RopeScaling& sc = rc.scaling;
  sc.type = RopeScalingType::kGgml;
  POSENC_ASSIGN_OR_RETURN(int64_t n_dims, GetInt(j, "n_dims", source));
  POSENC_ASSIGN_OR_RETURN(int64_t mode, GetInt(j, "mode", source));
  // ggml_rope_ext takes freq_base and the scaling keys as float: each must be a float32 value.
  POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(j, "freq_base", source, Precision::kFloat32));
  if (mode == 0)
    rc.layout.pairing = RopePairing::kInterleaved;
  else if (mode == 2 || multi_axis_json::IsGgmlMultiAxisMode(mode))
    rc.layout.pairing = RopePairing::kHalf;
  else
    return UnimplementedError(fmt::format(
        "ggml params {}: key 'mode' = {} is not supported (0 = NORMAL, 2 = NEOX, 8 = MROPE, 24 = VISION, 40 = IMROPE)",
        source, mode));
  if (n_dims <= 0 || n_dims % 2 != 0)
    return KeyError(source, "n_dims", fmt::format("is {}, must be even and positive", n_dims));
  if (head_dim < n_dims)
    return InvalidArgumentError(
        fmt::format("ggml params {}: head_dim {} is smaller than n_dims {}", source, head_dim, n_dims));
  rc.layout.head_dim = head_dim;
  rc.layout.rotary_dim = n_dims;
  rc.layout.rotary_start = 0;
  if (multi_axis_json::IsGgmlMultiAxisMode(mode)) {
    POSENC_RETURN_IF_ERROR(multi_axis_json::ReadGgmlMultiAxis(j, mode, n_dims, head_dim, source, &rc));
  }
  // The ggml row's keys (freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, n_ctx_orig,
  // freq_factors); an absent one keeps ggml's neutral value, noted where the row says so.
  for (const RopeScalingKey& k : RopeScalingOf(RopeScalingType::kGgml).keys) {
    if (k.read != ScalingKeyRead::kOptional) continue;
    POSENC_ASSIGN_OR_RETURN(bool present, config_json::ReadScalingKey(j, k, source, &rc, Precision::kFloat32));
    if (!present && k.note_default)
      rc.notes.push_back(fmt::format("no {}: {} assumed (ggml's neutral value)", k.name, k.default_value));
  }
  sc.factor = 1.0 / sc.freq_scale;
  POSENC_RETURN_IF_ERROR(ValidateRopeConfig(rc));
  return rc;
}

}  // namespace

Result<RopeConfig> RopeConfigFromGgmlJson(const json& root, int64_t head_dim, const std::string& source) {
  return NoJsonThrow(fmt::format("ggml params {}", source), [&] { return ReadGgmlJson(root, head_dim, source); });
}

}  // namespace config_json

Result<RopeConfig> RopeConfigFromGgmlParams(std::string_view json_text, int64_t head_dim, const std::string& source) {
  POSENC_ASSIGN_OR_RETURN(const json root, config_json::ParseText(json_text, fmt::format("ggml params {}", source)));
  return config_json::RopeConfigFromGgmlJson(root, head_dim, source);
}

Result<RopeConfig> ParseRopeConfigJson(std::string_view json_text, int64_t head_dim, const std::string& source) {
  // The one parse: both readers take the value.
  POSENC_ASSIGN_OR_RETURN(const json j, config_json::ParseText(json_text, fmt::format("config {}", source)));
  const json* params = &j;
  if (const json* inner = Find(j, "config"); inner != nullptr && inner->is_object()) params = inner;
  if (params->is_object() && params->contains("n_dims") && params->contains("mode"))
    return config_json::RopeConfigFromGgmlJson(j, head_dim, source);
  POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, config_json::ParseHfConfigJson(j, source, HfConfigOptions{}));
  if (scheme.kind != PositionKind::kRope)
    return InvalidArgumentError(
        fmt::format("config {}: the model's scheme is {}, not rope", source, ToString(scheme.kind)));
  return scheme.rope;
}

}  // namespace posenc
