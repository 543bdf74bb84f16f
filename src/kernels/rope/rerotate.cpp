// Re-rotation of cached keys: one RoPE pass with the difference of two frequency sets (rerotate.hpp).
#include "posenc/kernels/rerotate.hpp"

#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace posenc {

Result<RopeFrequencies> RerotationFrequencies(const RopeFrequencies& old_f, const RopeFrequencies& new_f) {
  if (old_f.inv_freq.size() != new_f.inv_freq.size())
    return InvalidArgumentError(fmt::format("rerotate: old frequencies have {} pairs, new ones {}; they must match",
                                            old_f.inv_freq.size(), new_f.inv_freq.size()));
  if (!std::isfinite(old_f.attention_scaling) || old_f.attention_scaling == 0.0)
    return InvalidArgumentError(
        fmt::format("rerotate: old attention_scaling {} must be finite and non-zero", old_f.attention_scaling));
  if (!std::isfinite(new_f.attention_scaling))
    return InvalidArgumentError(
        fmt::format("rerotate: new attention_scaling {} is not finite", new_f.attention_scaling));
  RopeFrequencies d;
  d.inv_freq.resize(old_f.inv_freq.size());
  for (size_t i = 0; i < d.inv_freq.size(); ++i) {
    const double a = old_f.inv_freq[i];
    const double b = new_f.inv_freq[i];
    if (!std::isfinite(a) || !std::isfinite(b))
      return InvalidArgumentError(fmt::format("rerotate: inv_freq[{}] is not finite (old {}, new {})", i, a, b));
    d.inv_freq[i] = b - a;  // float64: exact when a and b are within a factor 2, else one rounding
  }
  d.attention_scaling = new_f.attention_scaling / old_f.attention_scaling;
  return d;
}

namespace {

// Validates and builds the per-call table of differences (size 0: cos/sin on the fly per token).
// Sets *identity when nothing would change.
Result<RopeTable> Prepare(const RerotateArgs& args, const HeadsView& keys, bool* identity) {
  if (args.old_frequencies == nullptr || args.new_frequencies == nullptr)
    return InvalidArgumentError("rerotate: old and new frequencies must both be given");
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies d, RerotationFrequencies(*args.old_frequencies, *args.new_frequencies));
  POSENC_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Build(std::move(d), 0, args.precision));
  RopeArgs probe{args.layout, &table, args.positions, RopeDirection::kForward, args.parallel};
  POSENC_RETURN_IF_ERROR(ValidateRope(probe, keys, "keys"));
  bool same = table.frequencies().attention_scaling == 1.0;
  for (double v : table.frequencies().inv_freq) same = same && v == 0.0;
  *identity = same;
  return table;
}

}  // namespace

Status RerotateKeys(const RerotateArgs& args, HeadsView keys) {
  bool identity = false;
  POSENC_ASSIGN_OR_RETURN(RopeTable table, Prepare(args, keys, &identity));
  if (identity) return OkStatus();
  RopeArgs rope{args.layout, &table, args.positions, RopeDirection::kForward, args.parallel};
  return ApplyRope(rope, keys);
}

Status RerotateKeysReference(const RerotateArgs& args, HeadsView keys) {
  bool identity = false;
  POSENC_ASSIGN_OR_RETURN(RopeTable table, Prepare(args, keys, &identity));
  if (identity) return OkStatus();
  RopeArgs rope{args.layout, &table, args.positions, RopeDirection::kForward, nullptr};
  return ApplyRopeReference(rope, keys, keys);
}

}  // namespace posenc
