// Position ids of vision-language models, built from the token layout: the (t, h, w) rows of M-RoPE
// text positions (what Qwen2-VL / Qwen2.5-VL / Qwen3-VL's get_rope_index computes) and the (h, w) rows
// of a vision encoder's 2-D RoPE (Qwen2-VL's block-major patch order, Pixtral's row-major one). The rows
// go to ApplyMultiAxisRope (posenc/kernels/multi_axis_rope.hpp) or RopeTable::BuildPerToken as they are.
//
// Text: a run of n text tokens continues from the next free position p: p, p+1, ..., the same on all
// three rows. Vision: a grid of grid_t x grid_h x grid_w patches (as the processor reports it, before
// the spatial merge) is grid_t * (grid_h / m) * (grid_w / m) tokens, frame-major then row-major, at
//
//     (p + tpos(f), p + row, p + col),   tpos(f) = trunc(float32(float32(f * seconds_per_t) * tokens_per_second))
//
// (float32 arithmetic as torch computes Qwen2.5-VL's time index; Qwen2-VL's is f itself, seconds_per_t
// = tokens_per_second = 1; a Qwen2.5-VL image has seconds_per_t = 0; Qwen3-VL gives each video frame its
// own grid of grid_t = 1 between timestamp text). After any span the next free position is the largest
// position so far + 1.
//
// Example: three text tokens, one 1 x 4 x 4 image (merge 2: 4 tokens), two text tokens:
//   auto p = BuildTextVisionPositions({PositionSpan::Text(3), PositionSpan::Vision(1, 4, 4), PositionSpan::Text(2)}, 2);
//   // t: 0 1 2 3 3 3 3 5 6   h: 0 1 2 3 3 4 4 5 6   w: 0 1 2 3 4 3 4 5 6; p->next_position = 7
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/core/status.hpp"

namespace posenc {

struct PositionSpan {
  enum class Kind : uint8_t { kText, kVision };
  Kind kind = Kind::kText;
  int64_t tokens = 0;  // text tokens (kText)
  // kVision: the grid in patches before the merge (image_grid_thw / video_grid_thw) and its time step.
  int64_t grid_t = 1, grid_h = 0, grid_w = 0;
  float seconds_per_t = 1.0f;      // Qwen2.5-VL second_per_grid_t (0 for an image)
  float tokens_per_second = 1.0f;  // Qwen2.5-VL vision_config.tokens_per_second

  static PositionSpan Text(int64_t n) { return {Kind::kText, n}; }
  static PositionSpan Vision(int64_t t, int64_t h, int64_t w, float seconds_per_t = 1.0f,
                             float tokens_per_second = 1.0f) {
    return {Kind::kVision, 0, t, h, w, seconds_per_t, tokens_per_second};
  }
};

// Largest sequence the builders accept: 2^24 tokens (the rows take 24 bytes per token).
inline constexpr int64_t kMaxVisionTextTokens = int64_t{1} << 24;

struct TextVisionPositions {
  std::vector<int64_t> positions;  // [3, tokens], component-major (t row, h row, w row)
  int64_t tokens = 0;
  // The largest position + 1: the next token (a decode step) is at next_position on all three rows,
  // so HF's rope_deltas = next_position - tokens.
  int64_t next_position = 0;
};

// The M-RoPE rows of a token layout, starting at position `start` (0 for a whole prompt). Errors
// (kInvalidArgument) name the span index and the field: a negative text count, a grid side < 1, h or w
// not a multiple of spatial_merge_size, a time step not finite or negative; more than
// kMaxVisionTextTokens tokens or a position reaching kMaxRopePosition is kOutOfRange.
Result<TextVisionPositions> BuildTextVisionPositions(std::span<const PositionSpan> spans,
                                                     int64_t spatial_merge_size, int64_t start = 0);

// The (h, w) rows [2, grid_t * grid_h * grid_w] of a vision encoder's patches, in the order the encoder
// sees them: spatial_merge_size x spatial_merge_size windows row-major, the patches of each window
// row-major inside it, the whole grid repeated for each of grid_t frames (Qwen2-VL's rot_pos_emb; 1:
// plain row-major, Pixtral). Errors as above.
Result<std::vector<int64_t>> BuildVisionPatchPositions(int64_t grid_t, int64_t grid_h, int64_t grid_w,
                                                       int64_t spatial_merge_size);

}  // namespace posenc
