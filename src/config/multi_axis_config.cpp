// Multi-axis RoPE from configs: Hugging Face text M-RoPE (mrope_section), ggml_rope_multi's modes,
// and the 2-D RoPE of Hugging Face vision encoders.
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config_json.hpp"
#include "config/json_util.hpp"
#include "config/multi_axis_json.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/config/multi_axis_config.hpp"
#include "core/enum_names.hpp"
#include "posenc/io/json_guard.hpp"
#include "posenc/core/checked_math.hpp"
#include "posenc/math/multi_axis.hpp"

namespace posenc {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {

// A list for a message: its first 16 values, then how many it has.
std::string ListString(const std::vector<int64_t>& v) {
  constexpr size_t kShown = 16;
  std::string out = "[";
  for (size_t i = 0; i < v.size() && i < kShown; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > kShown) out += fmt::format(", ... ({} values)", v.size());
  return out + "]";
}

void Note(PositionScheme* s, std::string note) {
  s->rope.notes.push_back(note);
  s->notes.push_back(std::move(note));
}

}  // namespace

namespace multi_axis_json {

Status ReadHfMultiAxis(const json& /*j*/, const json& params, const std::string& source, PositionScheme* s) {
  RopeConfig& rc = s->rope;
  // The section layout is the family's (model_families.hpp; a "_text" model_type is its family's), as
  // is Qwen3.5's default partial factor 0.25 (read with the rotary window, hf_config.cpp).
  const ModelFamily* family = FindModelFamily(s->model_type);
  const FamilySections layout = family != nullptr ? family->sections : FamilySections::kNone;
  const bool chunked = layout == FamilySections::kChunked;
  const bool interleaved = layout == FamilySections::kInterleaved;
  const bool hw_alternating = layout == FamilySections::kHwAlternating;
  if (!Has(params, "mrope_section")) {
    if (chunked || interleaved || hw_alternating)
      Note(s, fmt::format("{} config without mrope_section: 1-D RoPE (the same rotation for text tokens, t = h = w)",
                          s->model_type));
    return OkStatus();
  }
  if (!chunked && !interleaved && !hw_alternating) {
    std::string known;
    for (const ModelFamily& f : ModelFamilies())
      if (f.sections != FamilySections::kNone)
        known += fmt::format("{}{}: {}", known.empty() ? "" : ", ", f.model_type, ToString(f.sections));
    return UnimplementedError(fmt::format(
        "config {}: key 'mrope_section' given, but model_type '{}' is not one whose section layout posenc knows ({})",
        source, s->model_type, known));
  }
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> sections, GetIntList(params, "mrope_section", source));
  MultiAxisRope m;
  m.layout = chunked          ? SectionLayout::kChunked
             : hw_alternating ? SectionLayout::kHwAlternating
                              : SectionLayout::kInterleaved;
  m.rules = SectionRules::kHf;
  m.sections = sections;
  m.num_components = 3;
  Status st = ValidateMultiAxisRope(m, rc.layout.num_pairs(), fmt::format("config {}: key 'mrope_section'", source));
  if (!st.ok()) return st;
  if (Has(params, "mrope_interleaved"))
    Note(s, fmt::format("mrope_interleaved is not read: {} is {} by its model class (as Hugging Face)", s->model_type,
                        ToString(m.layout)));
  Note(s, fmt::format("multi-axis rope: {} sections {} over (t, h, w) ({})", ToString(m.layout), ListString(sections),
                      s->model_type));
  rc.multi_axis = std::move(m);
  return OkStatus();
}

bool IsGgmlMultiAxisMode(int64_t mode) { return mode == 8 || mode == 24 || mode == 40; }

namespace {
// ggml_rope_multi's sections: 4 integers whose (non-negative) sum does not pass head_dim (ggml
// asserts sum <= ne0).
Status CheckGgmlSections(const std::vector<int64_t>& sections, int64_t head_dim, const std::string& what) {
  if (sections.size() != 4)
    return InvalidArgumentError(fmt::format("{} is {}, ggml_rope_multi takes 4 integers", what, ListString(sections)));
  int64_t sum = 0;
  for (int64_t v : sections)
    if (v >= 0 && !CheckedAdd(sum, v, &sum)) sum = INT64_MAX;
  if (sum > head_dim)
    return InvalidArgumentError(fmt::format("{} = {} sums to {}, beyond head_dim {} (ggml asserts sum <= ne0)", what,
                                            ListString(sections), sum, head_dim));
  return OkStatus();
}
}  // namespace

Status ReadGgmlMultiAxis(const json& j, int64_t mode, int64_t n_dims, int64_t head_dim, const std::string& source,
                         RopeConfig* rc) {
  if (!Has(j, "sections"))
    return NotFoundError(
        fmt::format("ggml params {}: key 'sections' is missing (mode {} is ggml_rope_multi's)", source, mode));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> sections, GetIntList(j, "sections", source));
  if (mode != 24)
    return SetGgmlTextMultiAxis(std::move(sections), mode, n_dims, head_dim,
                                fmt::format("ggml params {}: key 'sections'", source), rc);
  POSENC_RETURN_IF_ERROR(CheckGgmlSections(sections, head_dim, fmt::format("ggml params {}: key 'sections'", source)));
  rc->layout.pairing = RopePairing::kHalf;  // every ggml_rope_multi mode rotates NEOX pairs
  rc->layout.rotary_start = 0;
  MultiAxisRope m;
  m.rules = SectionRules::kGgml;
  m.num_components = 4;
  m.sections = sections;
  {
    // VISION: n_dims pairs (j, j + n_dims) over a head of 2 * n_dims.
    if (head_dim != 2 * n_dims)
      return InvalidArgumentError(
          fmt::format("ggml params {}: mode 24 (vision) needs head_dim = 2 * n_dims, got head_dim {} and n_dims {}",
                      source, head_dim, n_dims));
    // Its restarted frequency indices are only computed without YaRN's ramp and per-pair factors.
    if (Has(j, "ext_factor")) {
      POSENC_ASSIGN_OR_RETURN(double ext, GetNumber(j, "ext_factor", source, Precision::kFloat32));
      if (ext != 0.0)
        return UnimplementedError(
            fmt::format("ggml params {}: key 'ext_factor' = {} with mode 24 (vision) is not supported "
                        "(its restarted frequencies take no YaRN ramp here)",
                        source, ext));
    }
    if (Has(j, "freq_factors"))
      return UnimplementedError(
          fmt::format("ggml params {}: key 'freq_factors' with mode 24 (vision) is not supported", source));
    rc->layout.rotary_dim = 2 * n_dims;
    m.layout = SectionLayout::kChunkedRestart;
  }
  POSENC_RETURN_IF_ERROR(
      ValidateMultiAxisRope(m, rc->layout.num_pairs(), fmt::format("ggml params {}: key 'sections'", source)));
  rc->multi_axis = std::move(m);
  return OkStatus();
}

Status SetGgmlTextMultiAxis(std::vector<int64_t> sections, int64_t mode, int64_t n_dims, int64_t head_dim,
                            const std::string& what, RopeConfig* rc) {
  if (mode != 8 && mode != 40)
    return InvalidArgumentError(fmt::format("{}: mode {} is not ggml's MROPE (8) or IMROPE (40)", what, mode));
  POSENC_RETURN_IF_ERROR(CheckGgmlSections(sections, head_dim, what));
  rc->layout.pairing = RopePairing::kHalf;  // every ggml_rope_multi mode rotates NEOX pairs
  rc->layout.rotary_start = 0;
  rc->layout.rotary_dim = n_dims;
  MultiAxisRope m;
  m.rules = SectionRules::kGgml;
  m.num_components = 4;
  m.sections = std::move(sections);
  m.layout = mode == 40 ? SectionLayout::kInterleaved : SectionLayout::kChunked;
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRope(m, rc->layout.num_pairs(), what));
  rc->multi_axis = std::move(m);
  return OkStatus();
}

}  // namespace multi_axis_json

constexpr detail::EnumName<Vision2dVariant> kVariantNames[] = {{Vision2dVariant::kQwen2Vl, "qwen2vl"},
                                                               {Vision2dVariant::kPixtral, "pixtral"}};

std::string_view ToString(Vision2dVariant v) { return detail::NameOf(v, kVariantNames); }
bool ParseVision2dVariant(std::string_view s, Vision2dVariant* out) { return detail::ValueOf(s, kVariantNames, out); }

Result<RopeConfig> ParseHfVision2dConfig(std::string_view json_text, Vision2dVariant variant,
                                         const std::string& source) {
  POSENC_ASSIGN_OR_RETURN(json root, config_json::ParseText(json_text, fmt::format("config {}", source)));
  if (!root.is_object()) return InvalidArgumentError(fmt::format("config {}: top level is not a JSON object", source));
  POSENC_ASSIGN_OR_RETURN(const json* vision, FindObject(root, "vision_config", source));
  const json& j = vision != nullptr ? *vision : root;
  RopeConfig rc;
  rc.source = source;
  int64_t head_dim = 0;
  if (Has(j, "head_dim")) {
    POSENC_ASSIGN_OR_RETURN(head_dim, GetInt(j, "head_dim", source));
    if (head_dim <= 0) return KeyError(source, "head_dim", fmt::format("is {}, must be positive", head_dim));
  } else {
    const std::string wk = Has(j, "embed_dim") ? "embed_dim" : "hidden_size";
    const std::string hk = Has(j, "num_heads") ? "num_heads" : "num_attention_heads";
    if (!Has(j, wk)) return KeyError(source, wk, "is missing (the vision head dimension is width / heads)");
    if (!Has(j, hk)) return KeyError(source, hk, "is missing (the vision head dimension is width / heads)");
    POSENC_ASSIGN_OR_RETURN(int64_t width, GetInt(j, wk, source));
    POSENC_ASSIGN_OR_RETURN(int64_t heads, GetInt(j, hk, source));
    if (width <= 0) return KeyError(source, wk, fmt::format("is {}, must be positive", width));
    if (heads <= 0) return KeyError(source, hk, fmt::format("is {}, must be positive", heads));
    if (width % heads != 0)
      return KeyError(source, hk, fmt::format("= {} does not divide {} = {} evenly", heads, wk, width));
    head_dim = width / heads;
  }
  if (head_dim % 4 != 0 || head_dim > kMaxRopeHeadDim)
    return InvalidArgumentError(
        fmt::format("config {}: vision head_dim {} must be a multiple of 4 (h and w take D/4 pairs "
                    "each) and at most {}",
                    source, head_dim, kMaxRopeHeadDim));
  rc.layout = RotaryLayout{RopePairing::kHalf, head_dim, 0, head_dim};
  rc.scaling.type = RopeScalingType::kNone;
  if (variant == Vision2dVariant::kQwen2Vl) {
    rc.base = 10000.0;
    rc.notes.push_back("qwen2vl vision rope: theta 10000 (VisionRotaryEmbedding's default; no config key)");
    if (Has(j, "rope_theta")) rc.notes.push_back("rope_theta in the vision config is not read (as Hugging Face)");
  } else if (Has(j, "rope_theta")) {
    POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(j, "rope_theta", source));
    if (!(rc.base > 0) || !std::isfinite(rc.base))
      return KeyError(source, "rope_theta", fmt::format("is {}, must be finite and positive", rc.base));
  } else {
    rc.base = 10000.0;
    rc.notes.push_back("pixtral vision rope without rope_theta: 10000 assumed (PixtralVisionConfig's default)");
  }
  MultiAxisRope m;
  m.layout = variant == Vision2dVariant::kQwen2Vl ? SectionLayout::kChunkedRestart : SectionLayout::kChunkedStrided;
  m.rules = SectionRules::kHf;
  m.sections = {head_dim / 4, head_dim / 4};
  m.num_components = 2;
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRope(m, rc.layout.num_pairs(), fmt::format("config {}", source)));
  rc.multi_axis = std::move(m);
  POSENC_RETURN_IF_ERROR(ValidateRopeConfig(rc));
  return rc;
}

}  // namespace posenc
