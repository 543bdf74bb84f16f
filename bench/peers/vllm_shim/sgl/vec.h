// Ours, not vLLM's or SGLang's: stands in for vLLM's csrc/cpu/sgl-kernels/vec.h, covering only what
// sgl-kernels/mla_cache.cpp uses: CPU_CAPABILITY_AVX512 under the same condition as that vec.h
// (AVX512F + AVX512-BF16 + AMX-BF16; elsewhere mla_cache.cpp's copy_stub takes its scalar loop) and
// at::vec::Vectorized. With CPU_CAPABILITY_AVX512, ATen's AVX512 vector headers want sleef.h.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AMX_BF16__)
#define CPU_CAPABILITY_AVX512
#endif

#include <ATen/cpu/vec/vec.h>  // a third-party header (PyTorch's C++ API)
#if defined(CPU_CAPABILITY_AVX512)
#include <immintrin.h>
#endif
