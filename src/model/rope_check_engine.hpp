// Private to src/model: an engine as one value, EngineModel (layout, per-pair frequencies, attention
// scaling, positions, precision, sign and order of cos/sin), rendered as the dump it would give with
// each element's tolerance, compared with a dump, and an element located (rope_check.hpp is the
// public side; the reference is one EngineModel, and each known fault in rope_check_causes.hpp turns
// the reference into the EngineModels an engine with that fault would be).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "posenc/model/rope_check.hpp"

namespace posenc::rope_check_internal {

// The precision an engine computes cos and sin in: float32, or the position, the angle or cos/sin
// rounded to float16 / bfloat16.
enum class Precision { kF32, kPosF16, kPosBF16, kAngleF16, kAngleBF16, kCosSinF16, kCosSinBF16 };

// How one engine computes the dump.
struct EngineModel {
  RotaryLayout layout;  // over the dump's head width
  std::vector<double> inv_freq;
  double scaling = 1.0;
  std::vector<int64_t> pair_component;  // per pair, the row of `positions`
  int64_t num_components = 1;
  std::vector<int64_t> positions;  // [num_components, tokens]
  Precision precision = Precision::kF32;
  bool negate_sin = false;
  bool swap_cos_sin = false;
};

// The engine's dump and each element's tolerance, in the dump's own element order.
struct Rendered {
  std::vector<double> want, tol;
};

struct Comparison {
  double max_ratio = 0.0;
  size_t worst = 0;
  int64_t over = 0;
};

// Where element i of the dump sits: token, head, pair and dim within the head (-1 where none).
struct Where {
  int64_t token = -1, head = -1, pair = -1, dim = -1;
};

// The unit roundoff of a dump dtype: 2^-11 float16, 2^-8 bfloat16, else float32's 2^-24.
double UnitRoundoff(DType t);
// The position of token t's pair `pair` under e (its component's row).
int64_t PositionOf(const EngineModel& e, int64_t tokens, int64_t t, int64_t pair);
Rendered Render(const EngineModel& e, const RopeDump& d);
// The dump's values in the rendered order.
std::vector<double> Got(const RopeDump& d);
Comparison Compare(const std::vector<double>& got, const Rendered& r, std::vector<bool>* over_mask = nullptr);
Where Locate(const RopeDump& d, const RotaryLayout& layout, size_t i);
// The engine model of `config` over the dump's width at `positions`.
Result<EngineModel> EngineOf(const RopeConfig& config, const RopeDump& d, int64_t seq_len,
                             std::vector<int64_t> positions);

}  // namespace posenc::rope_check_internal
