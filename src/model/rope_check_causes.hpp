// Private to src/model: the diagnosis of a failing dump. Each known fault (the list in
// rope_check_causes.cpp) turns the reference EngineModel into the EngineModels an engine with that
// fault would be; Diagnose keeps the causes whose candidates explain the dump, best first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/rope_check_engine.hpp"
#include "posenc/model/rope_check.hpp"

namespace posenc::rope_check_internal {

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

// The causes whose candidates explain the dump (its values `got`, in the rendered order), best first;
// empty when none does.
std::vector<RopeCause> Diagnose(const Context& ctx, const std::vector<double>& got);

}  // namespace posenc::rope_check_internal
