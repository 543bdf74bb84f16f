// Ours, not PyTorch's: vLLM's csrc/cpu/utils.hpp includes <ATen/cpu/Utils.h> for
// at::cpu::L2_cache_size() (PyTorch 2.x; torch 1.13 has neither the header nor the function).
// PyTorch reads the L2 size from cpuinfo; this reads the same number from glibc.
// vLLM's cpu_utils::get_available_l2_size() uses it to size attention tiles only: the cache
// writer the harness times (cpu_attn_reshape_and_cache) never calls it.
#pragma once

#include <unistd.h>

#include <cstdint>

namespace at::cpu {

inline uint32_t L2_cache_size() {
  const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? static_cast<uint32_t>(bytes) : 1024u * 1024u;
}

}  // namespace at::cpu
