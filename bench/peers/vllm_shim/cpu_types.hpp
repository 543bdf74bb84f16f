// Ours, not vLLM's: stands in for vLLM's csrc/cpu/cpu_types.hpp, whose x86 branch is just this include
// (the snapshot holds the x86 header itself; bench/peers/snapshot.sh).
#pragma once
#include <cpu_types_x86.hpp>  // the snapshot's csrc/cpu (build.sh passes -I): a third-party header
