// Row dequantization of ggml block types. Each test builds blocks from chosen values (quants, scales,
// mins, d) with an encoder written here from the format's definition, then checks that the library
// returns value = d * scale * q - dmin * min (or the type's formula) for every element of the rows
// asked for, including a range that ends at the last row.
#include "posenc/io/quant.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/dtype.hpp"
#include "posenc/io/gguf.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

// A tensor built from known values: the bytes, and the value each element must decode to.
struct Built {
  std::vector<std::byte> bytes;
  std::vector<double> want;
};

void PutHalf(std::vector<std::byte>& b, size_t at, float v) {
  const uint16_t h = F32ToF16(v).bits;
  std::memcpy(b.data() + at, &h, 2);
}
float RoundHalf(float v) { return F16ToF32(F32ToF16(v)); }

// Scales that are exact in f16.
float RandomScale(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> m(1, 2047), e(-14, -2);
  return RoundHalf(std::ldexp(static_cast<float>(m(rng)), e(rng) - 10));
}

// Zeroed bytes for the n / block blocks of `type` (*type_size bytes each) and room for the n values.
Built ZeroBlocks(GgmlType type, int64_t n, int64_t block, size_t* type_size) {
  GgmlTypeTraits t;
  GetGgmlTypeTraits(static_cast<uint32_t>(type), &t);
  *type_size = t.type_size;
  Built out;
  out.bytes.resize(static_cast<size_t>(n / block) * t.type_size);
  out.want.resize(static_cast<size_t>(n));
  return out;
}

Built BuildSimple(GgmlType type, int64_t n, std::mt19937_64& rng) {
  size_t type_size = 0;
  Built out = ZeroBlocks(type, n, 32, &type_size);
  for (int64_t b = 0; b < n / 32; ++b) {
    const size_t base = static_cast<size_t>(b) * type_size;
    const float d = RandomScale(rng);
    const float m = -RandomScale(rng);
    std::vector<int> q(32);
    for (int j = 0; j < 32; ++j) {
      switch (type) {
        case GgmlType::kQ8_0: q[j] = std::uniform_int_distribution<int>(-128, 127)(rng); break;
        case GgmlType::kQ4_0:
        case GgmlType::kQ4_1: q[j] = std::uniform_int_distribution<int>(0, 15)(rng); break;
        default: q[j] = std::uniform_int_distribution<int>(0, 31)(rng); break;
      }
    }
    PutHalf(out.bytes, base, d);
    size_t qs = base + 2;
    if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1) {
      PutHalf(out.bytes, base + 2, m);
      qs += 2;
    }
    if (type == GgmlType::kQ5_0 || type == GgmlType::kQ5_1) {
      uint32_t qh = 0;
      for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;  // bit j: 5th bit of element j
      std::memcpy(out.bytes.data() + qs, &qh, 4);
      qs += 4;
    }
    if (type == GgmlType::kQ8_0) {
      for (int j = 0; j < 32; ++j) out.bytes[qs + j] = static_cast<std::byte>(static_cast<int8_t>(q[j]));
    } else {
      // Element j < 16 in the low nibble of byte j, element j + 16 in its high nibble.
      for (int j = 0; j < 16; ++j) out.bytes[qs + j] = static_cast<std::byte>((q[j] & 15) | ((q[j + 16] & 15) << 4));
    }
    for (int j = 0; j < 32; ++j) {
      double v;
      switch (type) {
        case GgmlType::kQ8_0: v = double{d} * q[j]; break;
        case GgmlType::kQ4_0: v = double{d} * (q[j] - 8); break;
        case GgmlType::kQ4_1: v = double{d} * q[j] + m; break;
        case GgmlType::kQ5_0: v = double{d} * (q[j] - 16); break;
        default: v = double{d} * q[j] + m; break;  // Q5_1
      }
      out.want[static_cast<size_t>(b * 32 + j)] = v;
    }
  }
  return out;
}

// K-quants: super-blocks of 256.
Built BuildK(GgmlType type, int64_t n, std::mt19937_64& rng) {
  size_t type_size = 0;
  Built out = ZeroBlocks(type, n, 256, &type_size);
  for (int64_t b = 0; b < n / 256; ++b) {
    std::byte* p = out.bytes.data() + static_cast<size_t>(b) * type_size;
    double* w = out.want.data() + b * 256;
    std::vector<int> q(256);
    if (type == GgmlType::kQ6_K) {
      // ql[128] | qh[64] | int8 scales[16] | f16 d. Element e = half*128 + quarter*32 + l.
      const float d = RandomScale(rng);
      int8_t sc[16];
      for (auto& s : sc) s = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
      for (auto& v : q) v = std::uniform_int_distribution<int>(0, 63)(rng);
      uint8_t ql[128] = {}, qh[64] = {};
      for (int e = 0; e < 256; ++e) {
        const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
        const int byte = half * 64 + l + (quarter % 2) * 32;
        ql[byte] |= static_cast<uint8_t>((q[e] & 15) << (quarter >= 2 ? 4 : 0));
        qh[half * 32 + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * quarter));
        w[e] = double{d} * sc[e / 16] * (q[e] - 32);
      }
      std::memcpy(p, ql, 128);
      std::memcpy(p + 128, qh, 64);
      std::memcpy(p + 192, sc, 16);
      const uint16_t h = F32ToF16(d).bits;
      std::memcpy(p + 208, &h, 2);
      continue;
    }
    // Q4_K / Q5_K: f16 d, f16 dmin, scales[12] (eight 6-bit scales and mins), [qh[32]], qs[128].
    const float d = RandomScale(rng), dmin = RandomScale(rng);
    int sc[8], mn[8];
    for (int s = 0; s < 8; ++s) {
      sc[s] = std::uniform_int_distribution<int>(0, 63)(rng);
      mn[s] = std::uniform_int_distribution<int>(0, 63)(rng);
    }
    uint8_t scales[12];
    for (int s = 0; s < 4; ++s) {
      scales[s] = static_cast<uint8_t>(sc[s] | ((sc[s + 4] >> 4) << 6));
      scales[s + 4] = static_cast<uint8_t>(mn[s] | ((mn[s + 4] >> 4) << 6));
      scales[s + 8] = static_cast<uint8_t>((sc[s + 4] & 15) | ((mn[s + 4] & 15) << 4));
    }
    const bool five = type == GgmlType::kQ5_K;
    for (auto& v : q) v = std::uniform_int_distribution<int>(0, five ? 31 : 15)(rng);
    uint8_t qs[128] = {}, qh[32] = {};
    for (int e = 0; e < 256; ++e) {
      const int sub = e / 32, chunk = e / 64, l = e % 32;
      qs[chunk * 32 + l] |= static_cast<uint8_t>((q[e] & 15) << (sub % 2 ? 4 : 0));
      if (five) qh[l] |= static_cast<uint8_t>(((q[e] >> 4) & 1) << sub);
      w[e] = double{d} * sc[sub] * q[e] - double{dmin} * mn[sub];
    }
    const uint16_t hd = F32ToF16(d).bits, hm = F32ToF16(dmin).bits;
    std::memcpy(p, &hd, 2);
    std::memcpy(p + 2, &hm, 2);
    std::memcpy(p + 4, scales, 12);
    if (five) std::memcpy(p + 16, qh, 32);
    std::memcpy(p + (five ? 48 : 16), qs, 128);
  }
  return out;
}

Built BuildFloat(GgmlType type, int64_t n, std::mt19937_64& rng) {
  Built out;
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    if (type == GgmlType::kF32) {
      const auto* p = reinterpret_cast<const std::byte*>(&v);
      out.bytes.insert(out.bytes.end(), p, p + 4);
      out.want.push_back(v);
    } else {
      const uint16_t h = type == GgmlType::kF16 ? F32ToF16(v).bits : F32ToBF16(v).bits;
      const auto* p = reinterpret_cast<const std::byte*>(&h);
      out.bytes.insert(out.bytes.end(), p, p + 2);
      out.want.push_back(type == GgmlType::kF16 ? F16ToF32(f16_t{h}) : BF16ToF32(bf16_t{h}));
    }
  }
  return out;
}

Built Build(GgmlType type, int64_t n, std::mt19937_64& rng) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: return BuildFloat(type, n, rng);
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K: return BuildK(type, n, rng);
    default: return BuildSimple(type, n, rng);
  }
}

class DequantizeTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DequantizeTest, RowsMatchValuesTheBlocksWereBuiltFrom) {
  const GgmlType type = GetParam();
  const uint32_t id = static_cast<uint32_t>(type);
  GgmlTypeTraits t;
  ASSERT_TRUE(GetGgmlTypeTraits(id, &t));
  DType dtype;
  ASSERT_TRUE(DTypeOfGgmlType(id, &dtype));
  ASSERT_TRUE(IsDequantizable(dtype));
  EXPECT_EQ(TraitsOf(dtype).block_size, t.block_size);
  EXPECT_EQ(TraitsOf(dtype).type_size, t.type_size);
  const uint64_t seed = 1234 + id;
  SCOPED_TRACE(::testing::Message() << GgmlTypeName(id) << " seed " << seed);
  auto rng = ::posenc::testing::MakeRng(seed);
  const int64_t row_length = t.block_size * 2;  // two blocks per row
  const int64_t rows = 7;
  const Built built = Build(type, row_length * rows, rng);
  ASSERT_EQ(built.bytes.size(), static_cast<size_t>(rows) * (row_length / t.block_size) * t.type_size);

  auto check = [&](int64_t begin, int64_t count) {
    std::vector<float> out(static_cast<size_t>(count * row_length), -999.0f);
    ASSERT_TRUE(DequantizeRows(dtype, built.bytes, row_length, begin, count, out.data()).ok());
    for (int64_t i = 0; i < count * row_length; ++i) {
      const double want = built.want[static_cast<size_t>(begin * row_length + i)];
      ASSERT_NEAR(out[static_cast<size_t>(i)], want, 1e-6 * std::fabs(want) + 1e-30)
          << "row " << begin + i / row_length << " element " << i % row_length;
    }
  };
  check(0, rows);      // everything
  check(2, 1);         // one row in the middle
  check(rows - 3, 3);  // the last rows, up to the end of the data
  check(rows, 0);      // an empty range at the end

  std::vector<float> out(static_cast<size_t>(4 * row_length));
  Status past = DequantizeRows(dtype, built.bytes, row_length, rows - 2, 3, out.data());
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange);
  EXPECT_NE(past.message().find(GgmlTypeName(id)), std::string::npos) << past.message();

  // Lookup by ids: rows in any order, repeated, scaled, in float32 and bfloat16.
  const std::vector<int64_t> ids = {6, 0, 3, 6};
  QuantizedTable table{built.bytes, dtype, rows, row_length};
  LookupOptions opts;
  opts.multiplier = 2.0f;
  auto got = LookupRows(table, ids, opts);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->shape(), (std::vector<int64_t>{4, row_length}));
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < row_length; ++j) {
      const double want = 2.0 * built.want[static_cast<size_t>(ids[i] * row_length + j)];
      ASSERT_NEAR(got->data<float>()[i * row_length + j], want, 1e-6 * std::fabs(want) + 1e-30);
    }
  }
  opts.out_dtype = DType::kBF16;
  auto got16 = LookupRows(table, ids, opts);
  ASSERT_TRUE(got16.ok());
  EXPECT_EQ(got16->data<bf16_t>()[5].bits, F32ToBF16(got->data<float>()[5]).bits);

  const std::vector<int64_t> bad = {1, rows};
  auto oob = LookupRows(table, bad, {});
  ASSERT_FALSE(oob.ok());
  EXPECT_EQ(oob.status().code(), StatusCode::kOutOfRange);
}

INSTANTIATE_TEST_SUITE_P(AllSupported, DequantizeTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                                           GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& case_info) { return GgmlTypeName(static_cast<uint32_t>(case_info.param)); });

TEST(Dequantize, UnsupportedTypesAreNamed) {
  std::vector<std::byte> data(1024);
  float out[256];
  // ggml types with no DType stop at the reader's edge; those with one (integers, float64) are named.
  DType d;
  for (uint32_t type : {10u, 11u, 15u, 16u, 23u, 77u}) EXPECT_FALSE(DTypeOfGgmlType(type, &d)) << type;
  for (uint32_t type : {24u, 26u, 27u, 28u}) {
    ASSERT_TRUE(DTypeOfGgmlType(type, &d)) << type;
    uint32_t back = 0;
    ASSERT_TRUE(GgmlTypeOfDType(d, &back));
    EXPECT_EQ(back, type);
    Status s = DequantizeRows(d, data, 256, 0, 1, out);
    ASSERT_EQ(s.code(), StatusCode::kUnimplemented) << type;
    EXPECT_NE(s.message().find(GgmlTypeName(type)), std::string::npos) << s.message();
  }
  Status f8 = DequantizeRows(DType::kF8E4M3, data, 32, 0, 1, out);  // no ggml id: posenc's name
  EXPECT_NE(f8.message().find("float8_e4m3fn"), std::string::npos) << f8.message();
}

TEST(Dequantize, RowLengthMustBeWholeBlocks) {
  std::vector<std::byte> data(1024);
  float out[64];
  Status s = DequantizeRows(DType::kQ4_0, data, 48, 0, 1, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row length 48 is not a positive multiple"), std::string::npos) << s.message();
}

TEST(Dequantize, KnownQ8_0Block) {
  // d = 0.5, q = -3 .. 28: values -1.5, -1.0, ... (a hand-checkable block).
  std::vector<std::byte> b(34);
  const uint16_t d = F32ToF16(0.5f).bits;
  std::memcpy(b.data(), &d, 2);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<std::byte>(static_cast<int8_t>(j - 3));
  float out[32];
  ASSERT_TRUE(DequantizeRows(DType::kQ8_0, b, 32, 0, 1, out).ok());
  EXPECT_EQ(out[0], -1.5f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[31], 14.0f);
}

}  // namespace
}  // namespace posenc
