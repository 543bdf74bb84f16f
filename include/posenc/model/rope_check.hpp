// Holding an engine's RoPE to posenc's reference (`posenc check`): a dump of what the engine computed
// for one layer (rotated q or k, its cos/sin cache, or its per-pair frequencies) against what the
// model's description says that layer computes, with a tolerance derived from the dump's dtype, the
// worst element, and when it fails a diagnosis: each known way engines go wrong re-computed from the
// reference with that one fault applied, kept when it matches the dump within the same tolerance.
//
// Tolerance (per element; u = unit roundoff of the dump's dtype: 2^-24 float32, 2^-11 float16, 2^-8
// bfloat16; s = attention scaling; r = |(x_a, x_b)| the pair's input norm; theta the pair's angle, j
// its index; slack(j, theta) = 2^-21 (1 + |theta|) + j 2^-22 |theta|):
//   rotated    s*r*(4u + slack): the output's rounding, cos/sin rounded to the dtype and the two
//              products and the sum rounded in it (HF's q*cos + rotate_half(q)*sin in that dtype),
//              plus a float32 angle computed another way (position, frequency and product rounded,
//              cos/sin from a differently rounded angle; ggml's frequencies as theta *= theta_scale
//              once per pair in float32, about j 2^-22 relative by pair j); dims outside the rotary
//              window must come back within u*|x|.
//   cos/sin    s*(2u' + slack), u' = max(u, 2^-24).
//   inv_freq   |w|*(2^-21 + j 2^-22 + 2u).
// A dump passes when every element is within its tolerance.
//
// Example:
//   RopeDescription d = OpenRopeDescription("config.json").value();
//   RopeCheckTarget t = RopeCheckTargetOf(d, RopeCheckSelect{.layer = 3}).value();
//   RopeDumpTensors in;   // the caller's before/after [T, H, W] and positions [T], read in place
//   in.before = {.data = q, .dtype = DType::kBF16, .shape = {T, H, W}, .strides = {}, .name = "q"}; ...
//   RopeDump dump = MakeRopeDump(in).value();
//   RopeCheckReport r = CheckRope(t, dump).value();
//   if (!r.pass) puts(RopeCheckReportText(r).c_str());   // or RopeCheckReportJson(r): `posenc check --json`
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "posenc/core/dtype.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/model/rope_diff.hpp"

namespace posenc {

enum class RopeDumpKind { kRotated, kCosSin, kInvFreq };
std::string_view ToString(RopeDumpKind k);

// What an engine computed, as values (the dump's dtype says what they were stored in).
struct RopeDump {
  RopeDumpKind kind = RopeDumpKind::kRotated;
  DType dtype = DType::kF32;  // kF32, kF16 or kBF16
  std::string what;           // names the dump in messages ("--after q.npy")
  // kRotated: before and after, token-major [tokens, heads, width]; width is the head size, or the
  // rotary window alone (DeepSeek MLA's q_pe).
  int64_t tokens = 0, heads = 0, width = 0;
  std::vector<float> before, after;
  // Positions, component-major [num_components, tokens] (1-D RoPE: [tokens]); empty: row i is
  // position i (cos/sin caches).
  std::vector<int64_t> positions;
  int64_t position_rows = 0;  // the rows of a [C, T] positions tensor, checked against the model's C; 0: flat
  // kCosSin: [tokens, width], width R (HF's cache: both members of a pair) or R/2 (one per pair).
  std::vector<float> cos, sin;
  // kInvFreq: R/2 values.
  std::vector<float> inv_freq;
  // The sequence length the engine computed frequencies for; 0: the largest position + 1 (rotated,
  // cos/sin), the model's max_position_embeddings (inv_freq).
  int64_t seq_len = 0;
};

// One tensor of a dump as the caller holds it (a .npy, a safetensors tensor, a numpy array, a torch
// tensor), read in place: values float32, float16, bfloat16 or float64 (read as float32); positions
// int32 or int64. Not given: no data and no shape.
struct RopeDumpTensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty: C-contiguous
  std::string name;              // names it in messages ("--after q.npy", "after")
};

// A dump in one of the three forms, as tensors: before/after with positions, cos/sin (positions
// optional), or inv_freq.
struct RopeDumpTensors {
  RopeDumpTensor before, after;  // [T, H, D]; heads_first: [H, T, D]; [T, D]: one head
  bool heads_first = false;
  RopeDumpTensor cos, sin;       // [T, R] or [T, R/2]
  RopeDumpTensor inv_freq;       // [R/2]
  RopeDumpTensor positions;      // [T] or [components, T]
  // The engine's dtype when the values are stored wider (a bfloat16 dump saved as float32); unset: the
  // values' own (float64: float32).
  std::optional<DType> dtype;
  int64_t seq_len = 0;  // RopeDump::seq_len
};

// The dump of `t`, converted once into RopeDump's float32 values (token-major). Errors (kInvalidArgument,
// one line naming the tensor): not exactly one form, a form's tensor missing, before and after (cos and
// sin) of different shapes, a rank the form does not take, a dtype other than the above, a value that is
// not bfloat16 when the engine's dtype is said to be.
Result<RopeDump> MakeRopeDump(const RopeDumpTensors& t);

// Which layer and site of the model the dump is of.
struct RopeCheckSelect {
  int64_t layer = -1;      // -1: by layer_type, else the first layer that applies RoPE
  std::string layer_type;  // "": any
  std::string site;        // "": the layer's only site
};

// What posenc says the selected site computes, and the other layer types' parameters (a cause).
struct RopeCheckTarget {
  RopeConfig config;
  std::string label;  // "layer 0 (sliding_attention), site rope"
  std::vector<std::pair<std::string, RopeConfig>> other_layer_types;
};

// Errors (kOutOfRange / kInvalidArgument / kNotFound, one line): a layer past the model's, a NoPE
// layer, a layer type or site the model does not have, a model whose scheme is not RoPE.
Result<RopeCheckTarget> RopeCheckTargetOf(const RopeDescription& d, const RopeCheckSelect& select);

struct RopeWorstElement {
  int64_t token = -1, position = -1, head = -1, pair = -1, dim = -1;
  double got = 0.0, want = 0.0, error = 0.0, tolerance = 0.0;
};

// One cause that explains the dump: the reference re-computed with one fault applied matches it.
struct RopeCause {
  std::string id;      // stable: pairing, window, base, scaling_missing, scaling_param, attention_scaling,
                       // position_offset, position_reset, precision, direction, cos_sin_swapped, sections,
                       // layer_type; not_explained when none does
  std::string detail;  // what exactly ("interleaved pairs instead of half", "base 10000 fits (model: 500000)")
  double max_ratio = 0.0;  // largest error / tolerance of the re-computed output (<= 1 when it explains)
};

struct RopeCheckReport {
  bool pass = false;
  std::string target;     // RopeCheckTarget::label
  std::string form;       // ToString(RopeDumpKind)
  std::string tolerance;  // the rule applied, in words
  int64_t seq_len = 0;
  int64_t elements = 0, elements_over = 0;
  double max_ratio = 0.0;  // largest error / tolerance against the reference
  RopeWorstElement worst;
  // Failing dumps: every cause that explains, best (smallest max_ratio) first; or one not_explained
  // entry whose detail says where the error starts (which pairs, from which position).
  std::vector<RopeCause> diagnosis;
  int64_t error_first_position = -1;  // not_explained: the smallest position with an element over
  std::vector<int64_t> error_pairs;   // not_explained: the pairs with an element over
};

// Checks `dump` against `target`. Errors (kInvalidArgument, one line naming the dump): a shape that
// does not fit the model (a head width that is neither the head size nor the rotary window, a cache
// width other than R or R/2, an inv_freq length other than R/2, positions of the wrong count), a
// position outside [0, 2^31), a NaN or infinity in the dump, a dtype other than f32/f16/bf16.
Result<RopeCheckReport> CheckRope(const RopeCheckTarget& target, const RopeDump& dump);

// The report as `posenc check --json` prints it (keys: verdict, target, form, tolerance, seq_len,
// elements, elements_over_tolerance, max_error_over_tolerance, worst{token, position, head, pair, dim,
// got, want, error, tolerance}, diagnosis[{cause, detail, max_error_over_tolerance}], and for a
// not_explained failure error_first_position and error_pairs), and as its text; Python reads the same.
std::string RopeCheckReportJson(const RopeCheckReport& r);
std::string RopeCheckReportText(const RopeCheckReport& r);

// The known causes, in tie-break order (tests and docs list them from here).
std::vector<std::string> RopeCauseIds();

}  // namespace posenc
