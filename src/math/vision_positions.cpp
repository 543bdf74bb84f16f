// Position ids of vision-language models from the token layout (posenc/math/vision_positions.hpp).
#include "posenc/math/vision_positions.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "posenc/math/rope_types.hpp"

namespace posenc {

namespace {

// Grid sides >= 1 and h, w multiples of the merge; the token count of the grid after the merge.
Result<int64_t> GridTokens(int64_t t, int64_t h, int64_t w, int64_t merge, const std::string& what) {
  if (t < 1 || h < 1 || w < 1)
    return InvalidArgumentError(fmt::format("{}: grid {} x {} x {} has a side < 1", what, t, h, w));
  if (h % merge != 0 || w % merge != 0)
    return InvalidArgumentError(
        fmt::format("{}: grid h {} x w {} is not a multiple of spatial_merge_size {}", what, h, w, merge));
  // Each factor <= the cap before the product, so the product cannot overflow.
  const int64_t hm = h / merge, wm = w / merge;
  if (t > kMaxVisionTextTokens || hm > kMaxVisionTextTokens || wm > kMaxVisionTextTokens ||
      t * hm > kMaxVisionTextTokens || t * hm * wm > kMaxVisionTextTokens)
    return OutOfRangeError(fmt::format("{}: grid {} x {} x {} is more than {} tokens", what, t, h, w,
                                       kMaxVisionTextTokens));
  return t * hm * wm;
}

Status CheckMerge(int64_t merge) {
  if (merge < 1 || merge > kMaxVisionTextTokens)
    return InvalidArgumentError(fmt::format("spatial_merge_size = {} must be >= 1", merge));
  return OkStatus();
}

}  // namespace

Result<TextVisionPositions> BuildTextVisionPositions(std::span<const PositionSpan> spans,
                                                     int64_t spatial_merge_size, int64_t start) {
  POSENC_RETURN_IF_ERROR(CheckMerge(spatial_merge_size));
  if (start < 0 || start >= kMaxRopePosition)
    return OutOfRangeError(fmt::format("start position {} is outside [0, {})", start, kMaxRopePosition));
  // First pass: validate every span and count the tokens, so nothing is allocated for a bad layout.
  int64_t total = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const PositionSpan& s = spans[i];
    const std::string what = fmt::format("span {}", i);
    int64_t n = 0;
    if (s.kind == PositionSpan::Kind::kText) {
      if (s.tokens < 0) return InvalidArgumentError(fmt::format("{}: text tokens = {} is negative", what, s.tokens));
      n = s.tokens;
    } else if (s.kind == PositionSpan::Kind::kVision) {
      POSENC_ASSIGN_OR_RETURN(n, GridTokens(s.grid_t, s.grid_h, s.grid_w, spatial_merge_size, what));
      if (!std::isfinite(s.seconds_per_t) || s.seconds_per_t < 0.0f)
        return InvalidArgumentError(fmt::format("{}: seconds_per_t = {} is not finite and >= 0", what, s.seconds_per_t));
      if (!std::isfinite(s.tokens_per_second) || s.tokens_per_second < 0.0f)
        return InvalidArgumentError(
            fmt::format("{}: tokens_per_second = {} is not finite and >= 0", what, s.tokens_per_second));
    } else {
      return InvalidArgumentError(fmt::format("{}: unknown kind {}", what, static_cast<int>(s.kind)));
    }
    if (n > kMaxVisionTextTokens - total)
      return OutOfRangeError(fmt::format("{}: the layout is more than {} tokens", what, kMaxVisionTextTokens));
    total += n;
  }
  TextVisionPositions out;
  out.tokens = total;
  out.positions.assign(static_cast<size_t>(3 * total), 0);
  int64_t* rt = out.positions.data();
  int64_t* rh = rt + total;
  int64_t* rw = rh + total;
  int64_t next = start, tok = 0;
  // Every position is below next + (the span's extent) with next < 2^31 and extents <= 2^24 (time: checked).
  for (size_t i = 0; i < spans.size(); ++i) {
    const PositionSpan& s = spans[i];
    if (s.kind == PositionSpan::Kind::kText) {
      for (int64_t j = 0; j < s.tokens; ++j, ++tok) rt[tok] = rh[tok] = rw[tok] = next + j;
      next += s.tokens;
    } else {
      const int64_t hm = s.grid_h / spatial_merge_size, wm = s.grid_w / spatial_merge_size;
      int64_t last = next;  // the largest position of the span
      for (int64_t f = 0; f < s.grid_t; ++f) {
        // torch: arange * second_per_grid_t * tokens_per_second in float32, then .long() (truncation)
        const float tf = (static_cast<float>(f) * s.seconds_per_t) * s.tokens_per_second;
        if (!(tf < static_cast<float>(kMaxRopePosition)))
          return OutOfRangeError(fmt::format("span {}: frame {} time position {} is not below {}", i, f, tf,
                                             kMaxRopePosition));
        const int64_t tp = next + static_cast<int64_t>(tf);
        for (int64_t r = 0; r < hm; ++r)
          for (int64_t c = 0; c < wm; ++c, ++tok) rt[tok] = tp, rh[tok] = next + r, rw[tok] = next + c;
        last = std::max({last, tp, next + hm - 1, next + wm - 1});
      }
      next = last + 1;
    }
    if (next > kMaxRopePosition)
      return OutOfRangeError(fmt::format("span {}: positions reach {}, past {}", i, next - 1, kMaxRopePosition - 1));
  }
  out.next_position = next;
  return out;
}

Result<std::vector<int64_t>> BuildVisionPatchPositions(int64_t grid_t, int64_t grid_h, int64_t grid_w,
                                                       int64_t spatial_merge_size) {
  POSENC_RETURN_IF_ERROR(CheckMerge(spatial_merge_size));
  const int64_t m = spatial_merge_size;
  POSENC_ASSIGN_OR_RETURN(const int64_t windows, GridTokens(grid_t, grid_h, grid_w, m, "vision patches"));
  if (windows > kMaxVisionTextTokens / (m * m))
    return OutOfRangeError(fmt::format("vision patches: grid {} x {} x {} is more than {} patches", grid_t, grid_h,
                                       grid_w, kMaxVisionTextTokens));
  const int64_t n = grid_t * grid_h * grid_w;
  std::vector<int64_t> p(static_cast<size_t>(2 * n));
  int64_t k = 0;
  for (int64_t f = 0; f < grid_t; ++f)
    for (int64_t wr = 0; wr < grid_h / m; ++wr)
      for (int64_t wc = 0; wc < grid_w / m; ++wc)
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < m; ++c, ++k) {
            p[static_cast<size_t>(k)] = wr * m + r;
            p[static_cast<size_t>(n + k)] = wc * m + c;
          }
  return p;
}

}  // namespace posenc
