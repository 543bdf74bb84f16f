// Shared by the multi-axis tests (multi_axis_rules_test.cpp, multi_axis_test.cpp): a MultiAxisRope
// under Hugging Face's section rules (any component count) or ggml's (four components).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "posenc/math/multi_axis.hpp"

namespace posenc::testing {

inline MultiAxisRope Hf(SectionLayout layout, std::vector<int64_t> sections, int64_t components) {
  return MultiAxisRope{layout, SectionRules::kHf, std::move(sections), components};
}
inline MultiAxisRope Ggml(SectionLayout layout, std::vector<int64_t> sections) {
  return MultiAxisRope{layout, SectionRules::kGgml, std::move(sections), 4};
}

}  // namespace posenc::testing
