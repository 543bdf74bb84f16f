// Ours, not vLLM's or SGLang's: stands in for vLLM's csrc/cpu/sgl-kernels/common.h, covering only what
// sgl-kernels/mla_cache.cpp takes from it (ATen, at::parallel_for, the dispatch macros) on PyTorch 1.13
// (Debian's libtorch-dev), which lacks AT_DISPATCH_REDUCED_FLOATING_TYPES. build.sh puts this folder
// on the include path of mla_cache.cpp only.
#pragma once

#include <ATen/ATen.h>  // third-party headers (PyTorch's C++ API)
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#ifndef AT_DISPATCH_REDUCED_FLOATING_TYPES  // PyTorch 2.x's macro: bfloat16 and float16
#define AT_DISPATCH_REDUCED_FLOATING_TYPES(TYPE, NAME, ...)                  \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                             \
                     AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__) \
                     AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__))
#endif
