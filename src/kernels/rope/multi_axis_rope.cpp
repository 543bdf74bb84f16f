// Multi-axis RoPE: the fast path (a per-token RopeTable through ApplyRope's SIMD kernels) and the
// scalar reference beside it.
#include <cstring>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "kernels/rope/rope_internal.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_table.hpp"

namespace posenc {

Status ValidateMultiAxisRopeArgs(const MultiAxisRopeArgs& args, const HeadsView& x, const char* what) {
  POSENC_RETURN_IF_ERROR(args.layout.Validate());
  POSENC_RETURN_IF_ERROR(x.Validate(what));
  if (args.freqs == nullptr) return InvalidArgumentError("multi-axis rope: no frequencies given");
  POSENC_RETURN_IF_ERROR(ValidateRopeFrequencies(*args.freqs, "multi-axis rope"));
  const int64_t n = args.layout.num_pairs();
  if (static_cast<int64_t>(args.freqs->inv_freq.size()) != n)
    return InvalidArgumentError(fmt::format("multi-axis rope: {} frequencies, layout rotary_dim {} needs {}",
                                            args.freqs->inv_freq.size(), args.layout.rotary_dim, n));
  if (static_cast<int64_t>(args.pair_component.size()) != n)
    return InvalidArgumentError(fmt::format("multi-axis rope: {} pair components, layout rotary_dim {} needs {}",
                                            args.pair_component.size(), args.layout.rotary_dim, n));
  if (args.num_components < 1 || args.num_components > kMaxRopeComponents)
    return InvalidArgumentError(fmt::format("multi-axis rope: {} position components (must be in [1, {}])",
                                            args.num_components, kMaxRopeComponents));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t c = args.pair_component[static_cast<size_t>(j)];
    if (c < 0 || c >= args.num_components)
      return InvalidArgumentError(
          fmt::format("multi-axis rope: pair {} takes component {}, outside [0, {})", j, c, args.num_components));
  }
  if (x.head_dim != args.layout.head_dim)
    return InvalidArgumentError(
        fmt::format("multi-axis rope: {} has head_dim {}, layout says {}", what, x.head_dim, args.layout.head_dim));
  const int64_t shape[2] = {args.num_components, x.tokens};
  if (static_cast<int64_t>(args.positions.size()) != args.num_components * x.tokens)
    return InvalidArgumentError(fmt::format("multi-axis rope: {} positions for {} components x {} tokens of {}",
                                            args.positions.size(), args.num_components, x.tokens, what));
  return ValidateMultiAxisPositions(shape, args.positions, args.num_components, "multi-axis rope");
}

namespace {

Result<RopeTable> TableOf(const MultiAxisRopeArgs& args) {
  return RopeTable::BuildPerToken(*args.freqs, args.pair_component, args.num_components, args.positions, args.precision,
                                  args.parallel);
}

std::vector<int64_t> RowIndices(int64_t tokens) {
  std::vector<int64_t> rows(static_cast<size_t>(tokens));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  return rows;
}

}  // namespace

Status ApplyMultiAxisRope(const MultiAxisRopeArgs& args, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRopeArgs(args, in, "input"));
  POSENC_RETURN_IF_ERROR(out.Validate("output"));
  POSENC_RETURN_IF_ERROR(detail::ValidateRopeOutput(in, out));
  POSENC_ASSIGN_OR_RETURN(RopeTable table, TableOf(args));
  const std::vector<int64_t> rows = RowIndices(in.tokens);
  RopeArgs rope{args.layout, &table, rows, args.direction, args.parallel};
  return ApplyRope(rope, in, out);
}

Status ApplyMultiAxisRope(const MultiAxisRopeArgs& args, HeadsView x) { return ApplyMultiAxisRope(args, x, x); }

Status ApplyMultiAxisRopeQK(const MultiAxisRopeArgs& args, HeadsView q, HeadsView k) {
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRopeArgs(args, q, "queries"));
  const bool k_empty = k.tokens == 0 || k.heads == 0;
  if (!k_empty) POSENC_RETURN_IF_ERROR(ValidateMultiAxisRopeArgs(args, k, "keys"));
  POSENC_ASSIGN_OR_RETURN(RopeTable table, TableOf(args));
  const std::vector<int64_t> rows = RowIndices(q.tokens);
  RopeArgs rope{args.layout, &table, rows, args.direction, args.parallel};
  return ApplyRopeQK(rope, q, k);
}

Status ApplyMultiAxisRopeReference(const MultiAxisRopeArgs& args, HeadsView in, HeadsView out) {
  POSENC_RETURN_IF_ERROR(ValidateMultiAxisRopeArgs(args, in, "input"));
  RopeFrequencies one;
  one.inv_freq.resize(1);
  one.attention_scaling = args.freqs->attention_scaling;
  // angle[t, j] = positions[pair_component[j], t] * inv_freq[j], one pair at a time.
  return detail::ApplyReference(
      args.layout, args.direction, in, out, "multi-axis rope", [&](int64_t t, float* c, float* s) {
        for (int64_t j = 0; j < args.layout.num_pairs(); ++j) {
          const int64_t comp = args.pair_component[static_cast<size_t>(j)];
          one.inv_freq[0] = args.freqs->inv_freq[static_cast<size_t>(j)];
          ComputeCosSin(one, args.positions[static_cast<size_t>(comp * in.tokens + t)], args.precision, &c[j], &s[j]);
        }
      });
}

}  // namespace posenc
