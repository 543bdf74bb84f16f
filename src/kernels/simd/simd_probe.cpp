// Which target Highway's dispatch actually runs: a per-target function that returns its own
// HWY_TARGET, called through HWY_DYNAMIC_DISPATCH like every kernel. ChosenSimdTarget reports this, so
// what posenc says it runs is what it runs (kernels/simd/simd_probe.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/simd_probe.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {

int64_t ThisTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/simd/simd_probe.hpp"

namespace posenc {
HWY_EXPORT(ThisTarget);

namespace detail {

int64_t DispatchedTarget() { return HWY_DYNAMIC_DISPATCH(ThisTarget)(); }

}  // namespace detail
}  // namespace posenc
#endif  // HWY_ONCE
