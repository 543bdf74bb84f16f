// Names of the scheme kinds and fused-QKV layouts.
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

std::string_view ToString(PositionKind k) { return detail::NameOf(k, kKindNames); }
std::string_view ToString(FusedQkvLayout l) { return detail::NameOf(l, kFusedQkvNames); }

}  // namespace posenc
