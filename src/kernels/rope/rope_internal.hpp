// Internal to the RoPE kernels: the resolved job the per-target code runs, and shared validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <hwy/cache_control.h>

#include "kernels/simd/memory.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/kernels/simd.hpp"

namespace posenc::detail {

// Software prefetch distance of the rotation, in bytes ahead of the head being rotated: with it one
// thread streams cold float32 q/k from DRAM at ~0.85-0.95 of an in-place XOR pass instead of ~0.75
// (posenc bench --cache cold; 1024 and 8192 measured no better; 8192 again on zen5, 2026-12-07: fused
// prefill rows 2-10% slower).
inline constexpr size_t kPrefetchAhead = 4096;

// The prefetch distance in elements for heads `stride` elements apart: a whole number of heads, at
// least kPrefetchAhead bytes, so a strided window (MLA's q_pe, a partial rotary window) prefetches the
// window of a head ahead rather than whatever lies kPrefetchAhead bytes on. Dense heads of 256 or 512
// bytes get exactly kPrefetchAhead.
inline int64_t PrefetchDistance(int64_t stride, size_t elem_size) {
  const int64_t bytes = (stride < 0 ? -stride : stride) * static_cast<int64_t>(elem_size);
  if (bytes == 0) return static_cast<int64_t>(kPrefetchAhead / elem_size);
  return (static_cast<int64_t>(kPrefetchAhead) + bytes - 1) / bytes * stride;
}

// How the rotation prefetches a head's window of `window` elements, heads `stride` elements apart:
// `ahead` elements on, into L1, or into L2 (`l2`) where the window is narrower than the stride (MLA's
// q_pe, a partial rotary window). Such a walk skips lines, so the hardware streams do not cover it and
// each window waits on DRAM, with no more L1 prefetches in flight than L1's few miss buffers (the likely
// limit); so those prefetches go to L2, twice as many heads ahead (zen4, cold, 1 thread, 3 rounds
// alternating: mla_prefill bfloat16 9.4 -> 6.7 ms, mla_decode 0.21 -> 0.14; a bare walk of the windows
// alone 11.8 -> 4.8 ms). Whole heads keep L1 and PrefetchDistance (fused rows with L2 prefetches there
// measured within noise).
struct WindowPrefetch {
  int64_t ahead;
  bool l2;
};
inline WindowPrefetch WindowPrefetchOf(int64_t stride, int64_t window, size_t elem_size) {
  const bool l2 = window < (stride < 0 ? -stride : stride);
  return {PrefetchDistance(stride, elem_size) * (l2 ? 2 : 1), l2};
}

// Whether a call writing `bytes` bytes streams `out`'s heads (RopeTensor::stream): a large write
// (StreamStoreMinBytes) out of place, every head whole aligned lines, so each vector store is whole and
// aligned (the forms store vectors of 16 to 64 bytes at offsets that are multiples of their size).
inline bool StreamsHeads(const HeadsView& in, const HeadsView& out, double bytes) {
  const int64_t es = static_cast<int64_t>(SizeOf(out.dtype));
  return bytes >= static_cast<double>(StreamStoreMinBytes()) && in.data != out.data &&
         StreamableRows(out.data, out.head_stride * es, out.head_dim * es) && (out.token_stride * es) % 64 == 0;
}

// One tensor of a RoPE call (queries or keys), strides in elements. With `norm` (the fused kernels'
// QK-norm, validated against these heads; forward calls only) each head is RMS-normalised before it is
// rotated, the whole head written: out = RoPE(RMSNorm(in)), the bits of the norm's output rotated. With
// `stream` (StreamsHeads: out heads 64-byte aligned, whole lines; with a norm, only for windows that are
// the whole head) heads whose window is the whole head and whose rotation runs in registers are written
// with streaming stores.
struct RopeTensor {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t heads = 0;
  int64_t in_token_stride = 0, in_head_stride = 0;
  int64_t out_token_stride = 0, out_head_stride = 0;
  const HeadRmsNorm* norm = nullptr;
  bool stream = false;
};

// Everything a kernel needs, validated: up to two tensors sharing dtype, layout and positions, so the
// cos/sin of each token are fetched once for all heads of both.
struct RopeJob {
  DType dtype = DType::kF32;
  RotaryLayout layout;
  const RopeTable* table = nullptr;
  const int64_t* positions = nullptr;
  bool backward = false;
  bool prefetch_out = false;  // StorePrefetchPolicy().rope_out_of_place
  bool norm_f32_regs = false;  // Float32NormInRegisters(): float32 heads' QK-norm in registers
  int num_tensors = 0;
  RopeTensor tensors[2];
};

// Rotates tokens [begin, end) of every tensor of `job` with the best enabled SIMD target.
void RopeTokens(const RopeJob& job, int64_t begin, int64_t end);

// The cache lines of one of the table's cos (or sin) rows.
inline size_t CosSinRowLines(const RopeTable& table) {
  return (static_cast<size_t>(table.num_pairs()) * sizeof(float) + 63) / 64;
}

// Scattered decode positions defeat the hardware prefetcher: the fast paths fetch the next token's
// cos and sin rows (row_lines cache lines each) while the current one rotates. A position past the
// table (computed on the fly) has no rows to fetch. `l2`: into L2 only (x86 prefetcht1), for a
// prefetch a chunk of tokens ahead (see WindowPrefetch).
inline void PrefetchCosSinRows(const RopeTable& table, int64_t position, size_t row_lines, bool l2 = false) {
  if (position >= table.num_positions()) return;
  const char* c = reinterpret_cast<const char*>(table.cos_row(position));
  const char* s = reinterpret_cast<const char*>(table.sin_row(position));
  for (size_t l = 0; l < row_lines; ++l) {
    if (l2) {
      __builtin_prefetch(c + 64 * l, 0, 2);
      __builtin_prefetch(s + 64 * l, 0, 2);
    } else {
      hwy::Prefetch(c + 64 * l);
      hwy::Prefetch(s + 64 * l);
    }
  }
}

// Out-of-place checks shared by the reference and the fast path: same shape and dtype, and `out`
// is either exactly `in` or does not overlap it at all.
Status ValidateRopeOutput(const HeadsView& in, const HeadsView& out);

// The scalar reference rotation of every token and head: cos_sin(t, c, s) fills token t's cos/sin
// (one value per pair), then float64 arithmetic on those float32 values, one rounding to T. `sign` is
// +1 forward, -1 backward; each head is copied to scratch first, so in == out is safe.
template <typename T, typename CosSinOf>
void RotateTokensReference(const RotaryLayout& L, double sign, const HeadsView& in, const HeadsView& out,
                           CosSinOf& cos_sin) {
  const int64_t n = L.num_pairs();
  std::vector<float> c(static_cast<size_t>(n)), s(static_cast<size_t>(n));
  std::vector<T> row(static_cast<size_t>(L.head_dim));
  for (int64_t t = 0; t < in.tokens; ++t) {
    cos_sin(t, c.data(), s.data());
    for (int64_t h = 0; h < in.heads; ++h) {
      const T* src = in.at<T>(t, h);
      std::memcpy(row.data(), src, sizeof(T) * static_cast<size_t>(L.head_dim));
      T* dst = out.at<T>(t, h);
      if (dst != src) std::memcpy(dst, row.data(), sizeof(T) * static_cast<size_t>(L.head_dim));
      for (int64_t i = 0; i < n; ++i) {
        const double a = LoadAsF32(&row[static_cast<size_t>(L.first(i))]);
        const double b = LoadAsF32(&row[static_cast<size_t>(L.second(i))]);
        const double ci = c[i];
        const double si = sign * s[i];
        StoreFromF32(static_cast<float>(a * ci - b * si), dst + L.first(i));
        StoreFromF32(static_cast<float>(a * si + b * ci), dst + L.second(i));
      }
    }
  }
}

// The scalar reference behind ApplyRopeReference and ApplyMultiAxisRopeReference, which differ only in
// where each token's cos/sin come from (`cos_sin`, as above) and in validating their own arguments
// (done by the caller, `in` included): checks `out` against `in` and rotates in their storage type.
// `what` ("rope", "multi-axis rope") begins the message of an unsupported dtype.
template <typename CosSinOf>
Status ApplyReference(const RotaryLayout& L, RopeDirection direction, const HeadsView& in, const HeadsView& out,
                      const char* what, CosSinOf cos_sin) {
  POSENC_RETURN_IF_ERROR(out.Validate("output"));
  POSENC_RETURN_IF_ERROR(ValidateRopeOutput(in, out));
  if (in.tokens == 0 || in.heads == 0) return OkStatus();
  const double sign = direction == RopeDirection::kForward ? 1.0 : -1.0;
  switch (in.dtype) {
    case DType::kF32: RotateTokensReference<float>(L, sign, in, out, cos_sin); break;
    case DType::kF16: RotateTokensReference<f16_t>(L, sign, in, out, cos_sin); break;
    case DType::kBF16: RotateTokensReference<bf16_t>(L, sign, in, out, cos_sin); break;
    default: return InvalidArgumentError(std::string(what) + ": unsupported dtype");
  }
  return OkStatus();
}

}  // namespace posenc::detail
