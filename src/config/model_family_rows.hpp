// Internal to the model-family registry: its rows (model_family_rows.cpp, a table and nothing else),
// which model_families.cpp looks up and ModelFamilies() hands out.
#pragma once

#include <span>

#include "posenc/config/model_families.hpp"

namespace posenc::detail {

// Every family, in model_type order.
std::span<const ModelFamily> ModelFamilyRows();

}  // namespace posenc::detail
