// The ggml block types' row decoders, the to_float of DTypeTraits (dtype.cpp). Layouts
// (ggml-common.h), per block of QK values:
//   Q8_0  (32, 34 B): BlockQ8_0 (posenc/core/dtype.hpp)    x = d * q
//   Q4_0  (32, 18 B): f16 d, u8 qs[16]                     x[j] = d * (lo(qs[j]) - 8), x[j+16] = d * (hi(qs[j]) - 8)
//   Q4_1  (32, 20 B): f16 d, f16 m, u8 qs[16]              x = d * q + m (q = nibble as above)
//   Q5_0  (32, 22 B): f16 d, u32 qh, u8 qs[16]             q = nibble | (bit j of qh) << 4, x = d * (q - 16)
//   Q5_1  (32, 24 B): f16 d, f16 m, u32 qh, u8 qs[16]      x = d * q + m
//   Q4_K (256, 144 B): f16 d, f16 dmin, u8 scales[12], u8 qs[128]: 8 sub-blocks of 32 with 6-bit scale sc
//                      and min mn; x = d*sc*q - dmin*mn
//   Q5_K (256, 176 B): as Q4_K plus u8 qh[32] (the 5th bit) before qs
//   Q6_K (256, 210 B): u8 ql[128], u8 qh[64], int8 scales[16], f16 d: 16 sub-blocks of 16,
//                      x = d * scale * (q - 32) with q = 4 low bits | 2 high bits << 4
#include <cstdint>
#include <cstring>

#include "core/dtype_blocks.hpp"
#include "posenc/core/dtype.hpp"

namespace posenc::detail {
namespace {

template <typename T>
inline T LoadLE(const std::byte* p) {  // little-endian hosts only, as the file readers
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

inline float Half(const std::byte* p) { return F16ToF32(f16_t{LoadLE<uint16_t>(p)}); }
inline uint8_t U8(const std::byte* p) { return static_cast<uint8_t>(*p); }


void RowQ4_0(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 18, y += 32) {
    const float d = Half(b);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = U8(b + 2 + j);
      y[j] = d * static_cast<float>((q & 0x0f) - 8);
      y[j + 16] = d * static_cast<float>((q >> 4) - 8);
    }
  }
}

void RowQ4_1(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 20, y += 32) {
    const float d = Half(b), m = Half(b + 2);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = U8(b + 4 + j);
      y[j] = d * static_cast<float>(q & 0x0f) + m;
      y[j + 16] = d * static_cast<float>(q >> 4) + m;
    }
  }
}

void RowQ5_0(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 22, y += 32) {
    const float d = Half(b);
    const uint32_t qh = LoadLE<uint32_t>(b + 2);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = U8(b + 6 + j);
      const int lo = static_cast<int>((q & 0x0f) | (((qh >> j) & 1u) << 4));
      const int hi = static_cast<int>((q >> 4) | (((qh >> (j + 16)) & 1u) << 4));
      y[j] = d * static_cast<float>(lo - 16);
      y[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

void RowQ5_1(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 24, y += 32) {
    const float d = Half(b), m = Half(b + 2);
    const uint32_t qh = LoadLE<uint32_t>(b + 4);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = U8(b + 8 + j);
      const uint32_t lo = (q & 0x0fu) | (((qh >> j) & 1u) << 4);
      const uint32_t hi = (q >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      y[j] = d * static_cast<float>(lo) + m;
      y[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

// The 6-bit scale and min of sub-block j (0..7) packed in 12 bytes: sub-blocks 0-3 keep theirs in the
// low 6 bits of bytes j and j+4; sub-blocks 4-7 keep the low 4 bits in byte j+4 (scale: low nibble,
// min: high nibble) and the top 2 bits in the spare high bits of bytes j-4 (scale) and j (min).
inline void ScaleMinK4(int j, const std::byte* s, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = U8(s + j) & 63;
    *mn = U8(s + j + 4) & 63;
  } else {
    *sc = static_cast<uint8_t>((U8(s + j + 4) & 0x0f) | ((U8(s + j - 4) >> 6) << 4));
    *mn = static_cast<uint8_t>((U8(s + j + 4) >> 4) | ((U8(s + j) >> 6) << 4));
  }
}

void RowQ4_K(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 144) {
    const float d = Half(b), dmin = Half(b + 2);
    const std::byte* scales = b + 4;
    const std::byte* q = b + 16;
    for (int sub = 0; sub < 8; sub += 2, q += 32) {
      uint8_t sc, mn;
      ScaleMinK4(sub, scales, &sc, &mn);
      const float d1 = d * sc, m1 = dmin * mn;
      ScaleMinK4(sub + 1, scales, &sc, &mn);
      const float d2 = d * sc, m2 = dmin * mn;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(U8(q + l) & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(U8(q + l) >> 4) - m2;
    }
  }
}

void RowQ5_K(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 176) {
    const float d = Half(b), dmin = Half(b + 2);
    const std::byte* scales = b + 4;
    const std::byte* qh = b + 16;
    const std::byte* ql = b + 48;
    uint8_t bit_lo = 1, bit_hi = 2;
    for (int sub = 0; sub < 8; sub += 2, ql += 32, bit_lo <<= 2, bit_hi <<= 2) {
      uint8_t sc, mn;
      ScaleMinK4(sub, scales, &sc, &mn);
      const float d1 = d * sc, m1 = dmin * mn;
      ScaleMinK4(sub + 1, scales, &sc, &mn);
      const float d2 = d * sc, m2 = dmin * mn;
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((U8(ql + l) & 0x0f) + ((U8(qh + l) & bit_lo) ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * static_cast<float>((U8(ql + l) >> 4) + ((U8(qh + l) & bit_hi) ? 16 : 0)) - m2;
      }
    }
  }
}

void RowQ6_K(const std::byte* b, int64_t nblocks, float* y) {
  for (int64_t i = 0; i < nblocks; ++i, b += 210) {
    const float d = Half(b + 208);
    const std::byte* ql = b;
    const std::byte* qh = b + 128;
    const std::byte* sc = b + 192;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const uint8_t h = U8(qh + l);
        const int q1 = static_cast<int>((U8(ql + l) & 0x0f) | ((h & 3) << 4)) - 32;
        const int q2 = static_cast<int>((U8(ql + l + 32) & 0x0f) | (((h >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int>((U8(ql + l) >> 4) | (((h >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int>((U8(ql + l + 32) >> 4) | (((h >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(static_cast<int8_t>(U8(sc + is))) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(static_cast<int8_t>(U8(sc + is + 2))) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(static_cast<int8_t>(U8(sc + is + 4))) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(static_cast<int8_t>(U8(sc + is + 6))) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

#define POSENC_BLOCK_ROW(Name, QK)                                                   \
  void Name##ToFloat(const void* src, float* dst, int64_t n) {                       \
    Row##Name(static_cast<const std::byte*>(src), n / (QK), dst);                    \
  }
POSENC_BLOCK_ROW(Q4_0, 32)
POSENC_BLOCK_ROW(Q4_1, 32)
POSENC_BLOCK_ROW(Q5_0, 32)
POSENC_BLOCK_ROW(Q5_1, 32)
POSENC_BLOCK_ROW(Q4_K, 256)
POSENC_BLOCK_ROW(Q5_K, 256)
POSENC_BLOCK_ROW(Q6_K, 256)
#undef POSENC_BLOCK_ROW

}  // namespace posenc::detail
