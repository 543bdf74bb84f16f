// Names of the scheme kinds, rotary sites and fused-QKV layouts; which layer types have attention.
#include "posenc/config/position_scheme.hpp"
#include "core/enum_names.hpp"

namespace posenc {

constexpr detail::EnumName<PositionKind> kKindNames[] = {
    {PositionKind::kRope, "rope"},   {PositionKind::kLearned, "learned"},    {PositionKind::kSinusoidal, "sinusoidal"},
    {PositionKind::kAlibi, "alibi"}, {PositionKind::kT5Bucket, "t5_bucket"}, {PositionKind::kNone, "none"}};
constexpr detail::EnumName<FusedQkvLayout> kFusedQkvNames[] = {
    {FusedQkvLayout::kNone, "none"},
    {FusedQkvLayout::kPerHead, "per head [q, k, v]"},
    {FusedQkvLayout::kPerKvGroup, "per kv head [q heads, k, v]"},
    {FusedQkvLayout::kQThenKThenV, "[q heads | k heads | v heads]"}};

constexpr detail::EnumName<RotarySite> kSiteNames[] = {{RotarySite::kAttention, "attention"},
                                                       {RotarySite::kMla, "mla"},
                                                       {RotarySite::kIndexer, "indexer"},
                                                       {RotarySite::kAttentionOutput, "attention_output"},
                                                       {RotarySite::kCompressor, "compressor"}};

constexpr detail::EnumName<QkNorm> kQkNormNames[] = {{QkNorm::kNone, "none"},
                                                     {QkNorm::kPerHead, "per_head"},
                                                     {QkNorm::kPerHeadFloat32, "per_head_float32"},
                                                     {QkNorm::kPerHeadOnePlus, "per_head_one_plus_weight"},
                                                     {QkNorm::kWholeProjection, "whole_projection"},
                                                     {QkNorm::kWholeProjectionCast, "whole_projection_cast"},
                                                     {QkNorm::kPerHeadLayerNorm, "per_head_layernorm"}};

std::string_view ToString(QkNorm q) { return detail::NameOf(q, kQkNormNames); }
bool ParseQkNorm(std::string_view name, QkNorm* out) { return detail::ValueOf(name, kQkNormNames, out); }

bool QkNormAsRmsNorm(QkNorm q, RmsNormStyle* style, RmsNormScope* scope) {
  switch (q) {
    case QkNorm::kPerHead: *style = RmsNormStyle::kCastThenScale, *scope = RmsNormScope::kPerHead; return true;
    case QkNorm::kPerHeadFloat32: *style = RmsNormStyle::kScaleThenCast, *scope = RmsNormScope::kPerHead; return true;
    case QkNorm::kPerHeadOnePlus: *style = RmsNormStyle::kOnePlusWeight, *scope = RmsNormScope::kPerHead; return true;
    case QkNorm::kWholeProjection: *style = RmsNormStyle::kScaleThenCast, *scope = RmsNormScope::kWholeRow; return true;
    case QkNorm::kWholeProjectionCast:
      *style = RmsNormStyle::kCastThenScale, *scope = RmsNormScope::kWholeRow;
      return true;
    default: return false;  // kNone; kPerHeadLayerNorm (a LayerNorm, not an RMSNorm)
  }
}
std::string QkNormRmsNormNames() {
  std::string out;
  RmsNormStyle style;
  RmsNormScope scope;
  for (const auto& n : kQkNormNames) {
    if (!QkNormAsRmsNorm(n.value, &style, &scope)) continue;
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

std::string_view ToString(PositionKind k) { return detail::NameOf(k, kKindNames); }
std::string_view ToString(RotarySite s) { return detail::NameOf(s, kSiteNames); }
bool ParseRotarySite(std::string_view name, RotarySite* out) { return detail::ValueOf(name, kSiteNames, out); }

bool LayerTypeHasAttention(std::string_view t) {
  for (std::string_view none : {"mamba", "mamba2", "linear_attention", "conv", "short_conv", "moe", "mlp"})
    if (t == none) return false;
  return true;
}
std::string_view ToString(FusedQkvLayout l) { return detail::NameOf(l, kFusedQkvNames); }

}  // namespace posenc
