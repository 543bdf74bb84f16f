// Names of the scheme kinds and fused-QKV layouts.
#include "posenc/config/position_scheme.hpp"

namespace posenc {

std::string_view ToString(PositionKind k) {
  switch (k) {
    case PositionKind::kRope: return "rope";
    case PositionKind::kLearned: return "learned";
    case PositionKind::kSinusoidal: return "sinusoidal";
    case PositionKind::kAlibi: return "alibi";
    case PositionKind::kT5Bucket: return "t5_bucket";
    case PositionKind::kNone: return "none";
  }
  return "unknown";
}

std::string_view ToString(FusedQkvLayout l) {
  switch (l) {
    case FusedQkvLayout::kNone: return "none";
    case FusedQkvLayout::kPerHead: return "per head [q, k, v]";
    case FusedQkvLayout::kPerKvGroup: return "per kv head [q heads, k, v]";
    case FusedQkvLayout::kQThenKThenV: return "[q heads | k heads | v heads]";
  }
  return "unknown";
}

}  // namespace posenc
