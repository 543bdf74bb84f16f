// Internal to core: the row decoders of the ggml block types other than Q8_0 (dtype_blocks.cpp),
// which DTypeTraits::to_float points at. n values, a multiple of the block size.
#pragma once

#include <cstdint>

namespace posenc::detail {

void Q4_0ToFloat(const void* src, float* dst, int64_t n);
void Q4_1ToFloat(const void* src, float* dst, int64_t n);
void Q5_0ToFloat(const void* src, float* dst, int64_t n);
void Q5_1ToFloat(const void* src, float* dst, int64_t n);
void Q4_KToFloat(const void* src, float* dst, int64_t n);
void Q5_KToFloat(const void* src, float* dst, int64_t n);
void Q6_KToFloat(const void* src, float* dst, int64_t n);

}  // namespace posenc::detail
