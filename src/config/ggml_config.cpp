// ggml_rope_ext parameters -> RopeConfig, and a JSON text of either spelling -> RopeConfig.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/json_util.hpp"
#include "config/multi_axis_json.hpp"
#include "posenc/config/ggml_config.hpp"
#include "posenc/config/hf_config.hpp"

namespace posenc {

using namespace json_util;  // NOLINT: the config readers' shared getters

Result<RopeConfig> RopeConfigFromGgmlParams(std::string_view json_text, int64_t head_dim, const std::string& source) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgumentError(fmt::format("ggml params {}: not valid JSON", source));
  if (!root.is_object()) return InvalidArgumentError(fmt::format("ggml params {}: top level is not a JSON object", source));
  const json& j = Has(root, "config") && root["config"].is_object() ? root["config"] : root;
  RopeConfig rc;
  rc.source = source;
  RopeScaling& sc = rc.scaling;
  sc.type = RopeScalingType::kGgml;
  POSENC_ASSIGN_OR_RETURN(int64_t n_dims, GetInt(j, "n_dims", source));
  POSENC_ASSIGN_OR_RETURN(int64_t mode, GetInt(j, "mode", source));
  POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(j, "freq_base", source));
  if (mode == 0) rc.layout.pairing = RopePairing::kInterleaved;
  else if (mode == 2 || multi_axis_json::IsGgmlMultiAxisMode(mode)) rc.layout.pairing = RopePairing::kHalf;
  else
    return UnimplementedError(fmt::format(
        "ggml params {}: key 'mode' = {} is not supported (0 = NORMAL, 2 = NEOX, 8 = MROPE, 24 = VISION, 40 = IMROPE)",
        source, mode));
  if (n_dims <= 0 || n_dims % 2 != 0)
    return KeyError(source, "n_dims", fmt::format("is {}, must be even and positive", n_dims));
  if (head_dim < n_dims)
    return InvalidArgumentError(fmt::format("ggml params {}: head_dim {} is smaller than n_dims {}", source, head_dim, n_dims));
  rc.layout.head_dim = head_dim;
  rc.layout.rotary_dim = n_dims;
  rc.layout.rotary_start = 0;
  if (multi_axis_json::IsGgmlMultiAxisMode(mode)) {
    POSENC_RETURN_IF_ERROR(multi_axis_json::ReadGgmlMultiAxis(j, mode, n_dims, head_dim, source, &rc));
  }
  struct Opt { const char* key; double* dst; double neutral; };
  for (const Opt& o : {Opt{"freq_scale", &sc.freq_scale, 1.0}, Opt{"ext_factor", &sc.ext_factor, 0.0},
                       Opt{"attn_factor", &sc.attn_factor, 1.0}, Opt{"beta_fast", &sc.beta_fast, 32.0},
                       Opt{"beta_slow", &sc.beta_slow, 1.0}}) {
    if (Has(j, o.key)) {
      POSENC_ASSIGN_OR_RETURN(*o.dst, GetNumber(j, o.key, source));
    } else {
      *o.dst = o.neutral;
      rc.notes.push_back(fmt::format("no {}: {} assumed (ggml's neutral value)", o.key, o.neutral));
    }
  }
  if (Has(j, "n_ctx_orig")) {
    POSENC_ASSIGN_OR_RETURN(sc.original_max_position_embeddings, GetInt(j, "n_ctx_orig", source));
  }
  if (Has(j, "freq_factors")) {
    POSENC_ASSIGN_OR_RETURN(sc.freq_factors, GetNumberList(j, "freq_factors", source));
  }
  sc.factor = 1.0 / sc.freq_scale;
  POSENC_RETURN_IF_ERROR(ValidateRopeConfig(rc));
  return rc;
}

Result<RopeConfig> ParseRopeConfigJson(std::string_view json_text, int64_t head_dim, const std::string& source) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* params = &j;
  if (j.is_object() && j.contains("config") && j["config"].is_object()) params = &j["config"];
  if (params->is_object() && params->contains("n_dims") && params->contains("mode"))
    return RopeConfigFromGgmlParams(json_text, head_dim, source);
  POSENC_ASSIGN_OR_RETURN(PositionScheme scheme, ParseHfConfig(json_text, source));
  if (scheme.kind != PositionKind::kRope)
    return InvalidArgumentError(fmt::format("config {}: the model's scheme is {}, not rope", source, ToString(scheme.kind)));
  return scheme.rope;
}

}  // namespace posenc
