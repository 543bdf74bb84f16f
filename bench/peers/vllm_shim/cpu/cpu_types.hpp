// Ours, not vLLM's: the V1 CPU attention files (cpu_attn_impl.hpp via utils.hpp) include
// "cpu/cpu_types.hpp" from vLLM's csrc/ root; this forwards to our stand-in for that header
// (vllm_shim/cpu_types.hpp: the snapshot's cpu_types_x86.hpp).
#pragma once
#include <cpu_types.hpp>
