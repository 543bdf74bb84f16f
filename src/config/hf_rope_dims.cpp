// Hugging Face config.json, RoPE: heads and hidden size, the head and its rotary window, the base.
#include "config/hf_rope_dims.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/model_families.hpp"
#include "posenc/core/checked_math.hpp"
#include "config/hf_config_internal.hpp"
#include "config/json_util.hpp"

namespace posenc::hf_json {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {

// Which row order a fused query_key_value weight has (FusedQkvLayout), and Falcon's key/value heads,
// as modeling_falcon.py / modeling_gpt_neox.py / modeling_persimmon.py split the projection.
Status ParseFusedQkv(const json& j, const std::string& source, PositionScheme* s) {
  const std::string& mt = s->model_type;
  if (IsOneOf(mt, {"gpt_neox", "persimmon"})) {
    s->fused_qkv = FusedQkvLayout::kPerHead;
    return OkStatus();
  }
  if (!IsOneOf(mt, {"falcon", "RefinedWeb", "RefinedWebModel"})) return OkStatus();
  // FalconConfig: multi_query defaults to true, new_decoder_architecture to false, num_kv_heads
  // (n_head_kv in RefinedWeb configs) to num_attention_heads; the attention uses num_kv_heads only with
  // the new architecture or without multi-query, else one shared key/value head.
  bool new_arch = false, multi_query = true;
  if (Has(j, "new_decoder_architecture")) {
    POSENC_ASSIGN_OR_RETURN(new_arch, GetBool(j, "new_decoder_architecture", source));
  }
  if (Has(j, "multi_query")) { POSENC_ASSIGN_OR_RETURN(multi_query, GetBool(j, "multi_query", source)); }
  int64_t kv = s->num_heads;
  if (std::string k = FirstKey(j, {"num_kv_heads", "n_head_kv"}); !k.empty()) {
    POSENC_ASSIGN_OR_RETURN(kv, GetInt(j, k, source));
  }
  if (new_arch) {
    s->fused_qkv = FusedQkvLayout::kPerKvGroup;
    s->num_kv_heads = kv;
  } else if (multi_query) {
    s->fused_qkv = FusedQkvLayout::kQThenKThenV;
    s->num_kv_heads = 1;
  } else {
    s->fused_qkv = FusedQkvLayout::kPerHead;
    s->num_kv_heads = s->num_heads;
  }
  return OkStatus();
}

}  // namespace

Result<RopeDims> ReadDims(const json& j, const std::string& source, PositionScheme* s) {
  std::string hk = FirstKey(j, {"num_attention_heads", "n_head", "n_heads"});
  int64_t heads = 0;
  if (!hk.empty()) { POSENC_ASSIGN_OR_RETURN(heads, GetInt(j, hk, source)); }
  s->num_heads = heads;
  if (Has(j, "num_key_value_heads")) {
    POSENC_ASSIGN_OR_RETURN(s->num_kv_heads, GetInt(j, "num_key_value_heads", source));
  }
  POSENC_RETURN_IF_ERROR(ParseFusedQkv(j, source, s));
  std::string dk = FirstKey(j, {"hidden_size", "n_embd", "d_model"});
  int64_t hidden = 0;
  if (!dk.empty()) { POSENC_ASSIGN_OR_RETURN(hidden, GetInt(j, dk, source)); }
  s->hidden_size = hidden;
  RopeDims d;
  std::string head_key = "head_dim";
  const ModelFamily* row = FamilyOf(*s);
  const std::string full_key = row != nullptr && !row->full_head_dim_key.empty() ? std::string(row->full_head_dim_key)
                                                                                 : std::string("global_head_dim");
  if (Has(j, "head_dim")) { POSENC_ASSIGN_OR_RETURN(s->layer_head_dim, GetInt(j, "head_dim", source)); }
  if (Has(j, full_key)) { POSENC_ASSIGN_OR_RETURN(s->full_attention_head_dim, GetInt(j, full_key, source)); }
  if (s->rope_layer_type == "full_attention" && Has(j, full_key)) head_key = full_key;
  // A family's own spelling of the head size (Qwen, ChatGLM: kv_channels).
  if (const ModelFamily* family = FamilyOf(*s);
      family != nullptr && !family->head_dim_key.empty() && Has(j, family->head_dim_key))
    head_key = family->head_dim_key;
  if (Has(j, "qk_rope_head_dim")) {
    // DeepSeek MLA: the query/key head is [nope part | rope part]; only the rope part rotates.
    POSENC_ASSIGN_OR_RETURN(d.rotary_dim, GetInt(j, "qk_rope_head_dim", source));
    int64_t nope = 0;
    if (Has(j, "qk_nope_head_dim")) { POSENC_ASSIGN_OR_RETURN(nope, GetInt(j, "qk_nope_head_dim", source)); }
    if (nope < 0) return KeyError(source, "qk_nope_head_dim", fmt::format("is {}, must be >= 0", nope));
    if (!CheckedAdd(nope, d.rotary_dim, &d.head_dim))
      return KeyError(source, "qk_nope_head_dim",
                      fmt::format("= {} plus qk_rope_head_dim = {} overflows int64", nope, d.rotary_dim));
    d.rotary_start = nope;
    s->layer_head_dim = d.head_dim;
  } else if (Has(j, head_key)) {
    POSENC_ASSIGN_OR_RETURN(d.head_dim, GetInt(j, head_key, source));
    if (d.head_dim <= 0) return KeyError(source, head_key, fmt::format("is {}, must be positive", d.head_dim));
  } else {
    if (hidden <= 0)
      return KeyError(source, dk.empty() ? "hidden_size" : dk, "is missing or not positive, and there is no head_dim");
    if (heads <= 0)
      return KeyError(source, hk.empty() ? "num_attention_heads" : hk,
                      "is missing or not positive, and there is no head_dim");
    if (hidden % heads != 0)
      return KeyError(source, hk, fmt::format("= {} does not divide {} = {} evenly", heads, dk, hidden));
    d.head_dim = hidden / heads;
    s->layer_head_dim = d.head_dim;
  }
  return d;
}

Status ReadRotaryLayout(const json& j, const json& p, const RopeSource& src, const std::string& source, RopeDims d,
                        std::optional<RopePairing> assume_layout, std::optional<RopePairing> site_pairing,
                        PositionScheme* s) {
  RopeConfig& rc = s->rope;
  RopeScaling& sc = rc.scaling;
  std::optional<double> partial;
  std::string partial_key;
  if (Has(p, "partial_rotary_factor")) {
    POSENC_ASSIGN_OR_RETURN(double v, GetNumber(p, "partial_rotary_factor", source));
    partial = v;
    partial_key = "partial_rotary_factor";
  }
  // The same fraction under the names families give it: rotary_pct (GPT-NeoX), rope_pct (StableLM's remote
  // StableLMEpoch), rope_percent (Nemotron's old spelling).
  for (const char* k : {"partial_rotary_factor", "rotary_pct", "rope_pct", "rope_percent"}) {
    if (!Has(j, k)) continue;
    POSENC_ASSIGN_OR_RETURN(double v, GetNumber(j, k, source));
    if (partial.has_value() && *partial != v)
      return KeyError(source, k, fmt::format("= {} disagrees with {}.{} = {}", v, src.spelling, partial_key, *partial));
    if (!partial.has_value()) {
      partial = v;
      partial_key = k;
    }
  }
  const ModelFamily* family = FamilyOf(*s);
  if (!partial.has_value() && family != nullptr && family->window == RotaryWindow::kFrontPartial &&
      family->default_partial_rotary_factor != 1.0 && d.rotary_dim < 0 && !Has(j, "rotary_dim")) {
    partial = family->default_partial_rotary_factor;
    partial_key = "partial_rotary_factor";
    Note(s, fmt::format("no partial_rotary_factor: {} assumed ({}'s config default)", *partial, s->model_type));
  }
  if (partial.has_value() && !(*partial > 0 && *partial <= 1))
    return KeyError(source, partial_key, fmt::format("is {}, must be in (0, 1]", *partial));
  if (sc.type == RopeScalingType::kProportional) {
    // p-RoPE: the layout spans the whole head; the factor decides how many pairs get a frequency.
    d.rotary_dim = d.head_dim;
    sc.partial_rotary_factor = partial.value_or(1.0);
    if (!partial.has_value())
      Note(s, "proportional rope without partial_rotary_factor: 1.0 assumed (Hugging Face's default)");
  } else if (d.rotary_dim < 0 && Has(j, "rotary_dim")) {
    POSENC_ASSIGN_OR_RETURN(d.rotary_dim, GetInt(j, "rotary_dim", source));
    if (partial.has_value()) {
      // Redundant keys that agree (phi-1: rotary_dim 32 and partial_rotary_factor 0.5 of 64) are
      // accepted, as Hugging Face reads either; keys that disagree are refused.
      const auto from_factor = static_cast<int64_t>(static_cast<double>(d.head_dim) * *partial);
      if (from_factor != d.rotary_dim)
        return KeyError(source, "rotary_dim",
                        fmt::format("= {} disagrees with {} = {} (int({} * {}) = {})", d.rotary_dim, partial_key,
                                    *partial, d.head_dim, *partial, from_factor));
      Note(s, fmt::format("rotary_dim {} and {} {} both given; they agree", d.rotary_dim, partial_key, *partial));
    }
  } else if (d.rotary_dim < 0) {
    d.rotary_dim = d.head_dim;
    if (partial.has_value()) {
      // Hugging Face truncates: int(head_dim * factor).
      d.rotary_dim = static_cast<int64_t>(static_cast<double>(d.head_dim) * *partial);
      if (d.rotary_dim <= 0 || d.rotary_dim % 2 != 0)
        return KeyError(source, partial_key,
                        fmt::format("= {} gives rotary dimension int({} * {}) = {}, which must be even and positive",
                                    *partial, d.head_dim, *partial, d.rotary_dim));
    }
  }
  if (d.rotary_dim <= 0 || d.rotary_dim % 2 != 0 || d.rotary_start + d.rotary_dim > d.head_dim)
    return InvalidArgumentError(
        fmt::format("config {}: rotary dimension {} (of head_dim {}) must be even, positive and at most head_dim",
                    source, d.rotary_dim, d.head_dim));
  rc.layout.head_dim = d.head_dim;
  rc.layout.rotary_dim = d.rotary_dim;
  rc.layout.rotary_start = d.rotary_start;
  rc.layout.pairing = family != nullptr ? family->pairing : assume_layout.value_or(RopePairing::kHalf);
  if (Has(j, "qk_rope_head_dim")) {
    // MLA: rope_interleave states the pairing; without it, the family's (DeepSeek: interleaved).
    if (Has(j, "rope_interleave")) {
      POSENC_ASSIGN_OR_RETURN(const bool interleave, GetBool(j, "rope_interleave", source));
      rc.layout.pairing = interleave ? RopePairing::kInterleaved : RopePairing::kHalf;
    } else if (family != nullptr && family->window == RotaryWindow::kBackOfHead &&
               family->pairing == RopePairing::kInterleaved) {
      Note(s, fmt::format("no rope_interleave: true assumed ({}'s default: interleaved pairs)", s->model_type));
    }
  }
  if (site_pairing.has_value()) rc.layout.pairing = *site_pairing;
  return OkStatus();
}

Status ReadBaseAndLength(const json& j, const json& p, const std::string& source,
                         PositionScheme* s) {
  RopeConfig& rc = s->rope;
  bool have_base = false;
  const ModelFamily* family = FamilyOf(*s);
  // The family's own base key (Phi-3-small: rope_embedding_base) wins; then rope_theta, rotary_emb_base.
  // A dotted base_key names a key of a nested object (DBRX: attn_config.rope_theta).
  std::string base_key;
  if (family != nullptr && !family->base_key.empty() && !have_base) {
    const std::string_view key = family->base_key;
    const size_t dot = key.find('.');
    const std::string outer(key.substr(0, dot));
    const json* scope = &j;
    std::string leaf(key);
    std::string where = source;
    if (dot != std::string_view::npos) {
      POSENC_ASSIGN_OR_RETURN(scope, FindObject(j, outer, source));
      leaf = std::string(key.substr(dot + 1));
      where = fmt::format("{} ({})", source, outer);
    }
    if (scope != nullptr && Has(*scope, leaf)) {
      base_key = std::string(key);
      POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(*scope, leaf, where));
      have_base = true;
    }
  }
  for (const json* scope : {&p, &j}) {
    if (have_base) break;
    for (const char* k : {"rope_theta", "rotary_emb_base"}) {
      if (Has(*scope, k)) {
        POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(*scope, k, source));
        have_base = true;
        base_key = k;
        break;
      }
    }
  }
  if (!have_base) {
    base_key = "rope_theta";
    if (family != nullptr && family->fixed_base > 0) {
      rc.base = family->fixed_base;
      Note(s, fmt::format("{} fixes its RoPE base at {} (no key in its config)", s->model_type, rc.base));
    } else {
      rc.base = 10000.0;
      Note(s, "no rope_theta in the config: base 10000 assumed (Hugging Face's default_theta)");
    }
  }
  // A key that multiplies the base (ChatGLM: base = 10000 * rope_ratio).
  if (family != nullptr && !family->base_scale_key.empty() && Has(j, family->base_scale_key)) {
    const std::string k(family->base_scale_key);
    POSENC_ASSIGN_OR_RETURN(const double ratio, GetNumber(j, k, source));
    if (!(ratio > 0) || !std::isfinite(ratio))
      return KeyError(source, k, fmt::format("is {}, must be finite and positive", ratio));
    Note(s, fmt::format("{} {}: base {} * {} = {} ({})", k, ratio, rc.base, ratio, rc.base * ratio, family->source));
    rc.base *= ratio;
    base_key = k;
  }
  if (!(rc.base > 0) || !std::isfinite(rc.base))
    return KeyError(source, base_key, fmt::format("is {}, must be finite and positive", rc.base));
  std::string mk =
      FirstKey(j, {"max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "max_seq_len"});
  if (!mk.empty()) {
    POSENC_ASSIGN_OR_RETURN(rc.max_position_embeddings, GetInt(j, mk, source));
    if (rc.max_position_embeddings < 0)
      return KeyError(source, mk, fmt::format("is {}, must be >= 0", rc.max_position_embeddings));
  }
  s->max_position_embeddings = rc.max_position_embeddings;
  return OkStatus();
}

}  // namespace posenc::hf_json
