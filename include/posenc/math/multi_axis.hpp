// Multi-axis RoPE: the rotary pairs of a head divided among several position components (M-RoPE of
// Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 text, ggml_rope_multi's MROPE / IMROPE / VISION modes, and
// the 2-D (h, w) RoPE of vision encoders).
//
// One rotary formula covers every case (golden/FORMAT.md, "One rotary formula"): for token t and pair j,
//
//     angle[t, j] = positions[pair_component[j], t] * inv_freq[j]
//
// with positions of shape [C, T] (C components, component-major). 1-D RoPE is C = 1, pair_component = 0.
// A MultiAxisRope says how pair_component and the per-pair frequency index follow from a section list;
// ComputeMultiAxisRope turns a RopeConfig that carries one into RopeFrequencies (so ComputeCosSin's two
// precisions apply unchanged) and pair_component. Applying it: posenc/kernels/multi_axis_rope.hpp.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/core/status.hpp"
#include "posenc/math/rope_types.hpp"

namespace posenc {

struct RopeConfig;  // posenc/math/rope_config.hpp (which holds an optional MultiAxisRope)

// How pairs are divided among the components.
enum class SectionLayout {
  kChunked,         // consecutive blocks of sections[c] pairs (HF apply_multimodal_rotary_pos_emb, ggml MROPE);
                    // pair j keeps the frequency of index j
  kInterleaved,     // round-robin t h w t h w ... (HF apply_interleaved_mrope, ggml IMROPE); frequency index j
  kChunkedRestart,  // blocks as kChunked whose frequency index restarts at 0 in each block (ggml VISION,
                    // HF Qwen2-VL vision): inv_freq = base^(-2k / (R/2)), k = j - start of the block
  kChunkedStrided,  // blocks as kChunked, the k-th pair of block c taking frequency index k*C + c of the
                    // whole-head table base^(-2i / R) (HF Pixtral vision: h even, w odd frequencies)
  kHwAlternating,   // ERNIE-4.5-VL: sections [s_h, s_w, s_t]; pair j < s_h + s_w takes h (component 1) when j
                    // is even and w (component 2) when odd, pairs from s_h + s_w on take t (component 0);
                    // frequency index j
};
// "chunked", "interleaved", "chunked_restart", "chunked_strided", "hw_alternating"
std::string_view ToString(SectionLayout l);
bool ParseSectionLayout(std::string_view s, SectionLayout* out);

// Whose rules turn sections into components.
enum class SectionRules {
  // Hugging Face: sections (one per component) sum to the pair count R/2. kInterleaved needs 3
  // components (t, h, w): pair j takes h if j % 3 == 1 and j < 3*s_h, w if j % 3 == 2 and j < 3*s_w,
  // otherwise t.
  kHf,
  // ggml_rope_multi: 4 components (p0..p3) and 4 sections; sector = j % sum(sections). Chunked and
  // chunked_restart: sectors [0, s0) p0, [s0, s0+s1) p1, [.., +s2) p2, the rest p3. Interleaved
  // (IMROPE): p1 if sector % 3 == 1 and sector < 3*s1, p2 if % 3 == 2 and < 3*s2, p0 if % 3 == 0 and
  // < 3*s0, otherwise p3.
  kGgml,
};
std::string_view ToString(SectionRules r);

// The multi-axis part of a RoPE config. Sections are counted in rotary pairs.
struct MultiAxisRope {
  SectionLayout layout = SectionLayout::kChunked;
  SectionRules rules = SectionRules::kHf;
  std::vector<int64_t> sections;
  int64_t num_components = 3;  // rows of the positions: hf text 3 (t, h, w), hf vision 2 (h, w), ggml 4
};

// Largest number of position components accepted (real models use 2 to 4).
inline constexpr int64_t kMaxRopeComponents = 16;

// kInvalidArgument naming `what` and the value: num_components outside [1, kMaxRopeComponents], a
// section count that does not match the rules (hf: one per component, interleaved: 3; ggml: 4), a
// negative section or one beyond kMaxRopeHeadDim, hf sections that do not sum to num_pairs, ggml
// sections that sum to 0, kChunkedStrided with ggml rules, a component index out of range.
Status ValidateMultiAxisRope(const MultiAxisRope& m, int64_t num_pairs, std::string_view what);

// The position component of each of num_pairs pairs (values in [0, num_components)). Errors as
// ValidateMultiAxisRope.
Result<std::vector<int64_t>> PairComponents(const MultiAxisRope& m, int64_t num_pairs, std::string_view what);

// The frequency index of each pair: j for kChunked / kInterleaved, j - (start of its block) for
// kChunkedRestart (ggml: of the sector's block, so it restarts at each wrap of sum(sections)),
// k*C + c for kChunkedStrided. Errors as ValidateMultiAxisRope.
Result<std::vector<int64_t>> PairFrequencyIndices(const MultiAxisRope& m, int64_t num_pairs, std::string_view what);

// Everything the apply step needs: per-pair frequencies (with the config's attention scaling) and
// the component of each pair.
struct MultiAxisPlan {
  RopeFrequencies freqs;
  std::vector<int64_t> pair_component;
  int64_t num_components = 0;
};

// The plan of a config with `multi_axis` set (kInvalidArgument naming config.source when it is not).
// kChunked / kInterleaved: ComputeRopeFrequencies(config, seq_len) unchanged (every scaling applies),
// pair j at frequency j. kChunkedRestart: base^(-2k / (R/2)); kChunkedStrided: base^(-2i / R) at index
// i = k*C + c; both only unscaled (kNone) or with ggml's plain freq_scale / attn_factor (kGgml with
// ext_factor 0 and no freq_factors); other scalings are kUnimplemented naming them.
Result<MultiAxisPlan> ComputeMultiAxisRope(const RopeConfig& config, int64_t seq_len);

// Positions of shape [C, T] for C = num_components: kInvalidArgument naming `what` and the shape when
// it is not 2-D with C rows, kOutOfRange naming the component, token and value of a position outside
// [0, kMaxRopePosition). `values` has C*T entries, component-major.
Status ValidateMultiAxisPositions(std::span<const int64_t> shape, std::span<const int64_t> values,
                                  int64_t num_components, std::string_view what);

}  // namespace posenc
