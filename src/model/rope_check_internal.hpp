// Private to src/model: what the RoPE check's parts share (rope_check.hpp is the public side).
//
// Every form of dump is rendered from one value, an EngineModel (layout, per-pair frequencies,
// attention scaling, positions, precision, sign and order of cos/sin): the reference is one, and each
// cause in Causes() turns the reference into the EngineModels an engine with that fault would be.
//   rope_check_engine.cpp   an EngineModel rendered as a dump, compared with one, located in one
//   rope_check_causes.cpp   the list of known faults and the fits they need
//   rope_check.cpp          the target, CheckRope (compare, then diagnose)
//   rope_dump.cpp           MakeRopeDump, the dump read from the caller's tensors
//   rope_check_report.cpp   the report as JSON and text
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/model/rope_check.hpp"

namespace posenc::rope_check_internal {

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

struct Candidate {
  std::string detail;
  EngineModel engine;
};

// The reference and what the causes need from it.
struct Context {
  const RopeCheckTarget* target = nullptr;
  const RopeDump* dump = nullptr;
  int64_t seq_len = 0;
  RotaryLayout layout;  // the reference layout over the dump's width
  EngineModel reference;
  // Observed angle per (token, pair) under the reference layout; NaN where not observable.
  std::vector<double> observed;
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

using CauseFn = void (*)(const Context&, std::vector<Candidate>*);

struct Cause {
  std::string_view id;
  CauseFn candidates;
  // Costly candidates (a fit over every observation), tried only when no cause's `candidates` explain.
  CauseFn refine = nullptr;
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

// The list of known faults, in the order they are tried (rope_check_causes.cpp).
std::span<const Cause> Causes();

}  // namespace posenc::rope_check_internal
