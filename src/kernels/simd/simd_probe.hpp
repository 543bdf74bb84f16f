// Internal: the Highway target that HWY_DYNAMIC_DISPATCH runs now (simd_probe.cpp).
#pragma once

#include <cstdint>

namespace posenc::detail {

// The HWY_TARGET bit of the code a dispatched kernel call runs at this moment.
int64_t DispatchedTarget();

}  // namespace posenc::detail
