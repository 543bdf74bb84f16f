// One embedding lookup for every table type: float tables read in place, ggml block types (Q8_0, Q4_0,
// Q4_K, Q6_K) and float rows at unaligned addresses decoded row by row. For each of them: the fast path
// equals the scalar reference bit for bit (every SIMD target, many shapes, both output dtypes,
// multiplier and fused position add on and off, thread counts 1 and 4 and an uneven runner); the rows
// equal dequantized row * multiplier + p computed here; every option is honoured or refused with an
// error naming the value. And the acceptance test: a float16 table and the same table quantized
// to Q8_0, looked up with add_rows and a multiplier, give the expected rows; a NaN multiplier is refused
// for both.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/dtype.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/quant.hpp"
#include "posenc/kernels/embedding.hpp"
#include "posenc/kernels/simd.hpp"
#include "simd_targets.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

// Every lookup in this binary goes through the thread split, however small (the threshold is read
// once, on first use, so set it before any test runs).
const bool kThreadsForEveryLookup = [] { return ::setenv("POSENC_MIN_BYTES_FOR_THREADS", "0", 1) == 0; }();

uint32_t Id(GgmlType t) { return static_cast<uint32_t>(t); }
// The table's row type: the GGUF id mapped to posenc's vocabulary as the reader does.
DType Dt(GgmlType t) {
  DType d = DType::kI64;
  EXPECT_TRUE(DTypeOfGgmlType(Id(t), &d)) << Id(t);
  return d;
}

void PutF16(std::byte* p, float v) {
  const uint16_t h = F32ToF16(v).bits;
  std::memcpy(p, &h, 2);
}

// ggml's quantize_row_q8_0_ref: per block of 32, d = amax / 127 (stored as float16), q = round(x / d)
// (ggml multiplies by id = 1 / d, as here).
std::vector<std::byte> QuantizeQ8_0(const std::vector<float>& x) {
  std::vector<std::byte> out(x.size() / 32 * 34);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::byte* blk = out.data() + b * 34;
    PutF16(blk, d);
    for (int j = 0; j < 32; ++j)
      blk[2 + j] = static_cast<std::byte>(static_cast<int8_t>(std::lround(x[b * 32 + j] * id)));
  }
  return out;
}

// ggml's quantize_row_q4_0_ref: d = (the value of largest magnitude) / -8, q = min(15, x / d + 8.5).
std::vector<std::byte> QuantizeQ4_0(const std::vector<float>& x) {
  std::vector<std::byte> out(x.size() / 32 * 18);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[b * 32 + j]) > amax) amax = std::fabs(x[b * 32 + j]), max = x[b * 32 + j];
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::byte* blk = out.data() + b * 18;
    PutF16(blk, d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(x[b * 32 + j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[b * 32 + j + 16] * id + 8.5f));
      blk[2 + j] = static_cast<std::byte>(lo | (hi << 4));
    }
  }
  return out;
}

// K-quant super-blocks of random bytes with sane float16 scales (Q4_K: d, dmin at 0 and 2; Q6_K: d at 208).
std::vector<std::byte> RandomKBlocks(GgmlType type, int64_t n, std::mt19937_64& rng) {
  GgmlTypeTraits t;
  GetGgmlTypeTraits(Id(type), &t);
  std::vector<std::byte> out(static_cast<size_t>(n / 256) * t.type_size);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (size_t blk = 0; blk < out.size(); blk += t.type_size) {
    if (type == GgmlType::kQ6_K) {
      PutF16(out.data() + blk + 208, scale(rng));
    } else {
      PutF16(out.data() + blk, scale(rng));
      PutF16(out.data() + blk + 2, scale(rng));
    }
  }
  return out;
}

std::vector<std::byte> FloatRows(GgmlType type, const std::vector<float>& x) {
  const size_t elem = type == GgmlType::kF32 ? 4 : 2;
  std::vector<std::byte> out(x.size() * elem);
  for (size_t i = 0; i < x.size(); ++i) {
    if (type == GgmlType::kF32)
      std::memcpy(out.data() + 4 * i, &x[i], 4);
    else if (type == GgmlType::kF16)
      PutF16(out.data() + 2 * i, x[i]);
    else {
      const uint16_t h = F32ToBF16(x[i]).bits;
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// A table of `rows` rows of `d` values in `type`; `unaligned` places it one byte past an aligned address.
struct TestTable {
  std::vector<std::byte> storage;
  QuantizedTable q;
};
TestTable MakeTable(GgmlType type, int64_t rows, int64_t d, bool unaligned, std::mt19937_64& rng) {
  const std::vector<float> x = testing::RandomNormal(rng, static_cast<size_t>(rows * d));
  std::vector<std::byte> bytes;
  switch (type) {
    case GgmlType::kQ8_0: bytes = QuantizeQ8_0(x); break;
    case GgmlType::kQ4_0: bytes = QuantizeQ4_0(x); break;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: bytes = RandomKBlocks(type, rows * d, rng); break;
    default: bytes = FloatRows(type, x); break;
  }
  TestTable t;
  t.storage.resize(bytes.size() + 64);
  const size_t off = (64 - reinterpret_cast<uintptr_t>(t.storage.data()) % 64) % 64 + (unaligned ? 1 : 0);
  t.storage.resize(bytes.size() + off);
  std::memcpy(t.storage.data() + off, bytes.data(), bytes.size());
  t.q = QuantizedTable{std::span<const std::byte>(t.storage.data() + off, bytes.size()), Dt(type), rows, d};
  return t;
}

// Splits [0, n) into ranges of 1, 2, 3, ... rows, run in order on the calling thread; counts calls.
class UnevenRunner : public ParallelRunner {
 public:
  int num_threads() const override { return 3; }
  void For(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    ++calls;
    int64_t step = 1;
    for (int64_t b = 0; b < n; b += step, ++step) fn(b, std::min(n, b + step));
  }
  std::atomic<int> calls{0};
};

struct TypeCase {
  GgmlType type;
  bool unaligned;
  std::vector<int64_t> d_models;
};

std::vector<TypeCase> AllTypeCases() {
  return {
      {GgmlType::kF32, false, {1, 7, 13, 64, 100}},  {GgmlType::kF16, false, {1, 7, 13, 64, 100}},
      {GgmlType::kBF16, false, {1, 7, 13, 64, 100}}, {GgmlType::kF32, true, {1, 7, 13, 64}},
      {GgmlType::kF16, true, {1, 7, 13, 64}},        {GgmlType::kBF16, true, {1, 7, 100}},
      {GgmlType::kQ8_0, false, {32, 96, 160}},       {GgmlType::kQ4_0, false, {32, 96}},
      {GgmlType::kQ4_K, false, {256, 512}},          {GgmlType::kQ6_K, false, {256}},
  };
}

std::string Name(const TypeCase& c) {
  return fmt::format("{}{}", GgmlTypeName(Id(c.type)), c.unaligned ? " (unaligned)" : "");
}

class LookupPerTarget : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(ForceSimdTarget("best").ok()); }
};

TEST_F(LookupPerTarget, EveryTableTypeMatchesReferenceForEveryOptionAndRunner) {
  ASSERT_TRUE(kThreadsForEveryLookup);
  auto rng = testing::MakeRng(14);
  ThreadPool one(1), four(4);
  UnevenRunner uneven;
  const int64_t vocab = 23;
  std::vector<int64_t> many(200);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>((i * 7 + i / 5) % vocab);
  const std::vector<std::vector<int64_t>> id_sets = {{}, {5}, {3, 3, 0, vocab - 1, 3, 0}, many};
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (const TypeCase& tc : AllTypeCases())
      for (int64_t d : tc.d_models) {
        TestTable t = MakeTable(tc.type, vocab, d, tc.unaligned, rng);
        auto e = t.q.AsEmbeddingTable();
        ASSERT_TRUE(e.ok()) << e.status().ToString();
        const bool float_in_place =
            !tc.unaligned && (tc.type == GgmlType::kF32 || tc.type == GgmlType::kF16 || tc.type == GgmlType::kBF16);
        ASSERT_EQ(e->decoded(), !float_in_place) << Name(tc);
        for (const auto& ids : id_sets)
          for (DType odtype : {DType::kF32, DType::kBF16})
            for (bool fused_add : {false, true})
              for (float mult : {1.0f, 45.254833f}) {
                SCOPED_TRACE(fmt::format("target {} table {} d_model {} ids {} out {} add {} multiplier {}", target,
                                         Name(tc), d, ids.size(), ToString(odtype), fused_add, mult));
                const auto add = testing::RandomNormal(rng, ids.size() * static_cast<size_t>(d));
                LookupOptions o;
                o.multiplier = mult;
                o.out_dtype = odtype;
                o.add_rows = fused_add ? add.data() : nullptr;
                const size_t out_bytes = ids.size() * static_cast<size_t>(d) * SizeOf(odtype);
                std::vector<uint8_t> want(out_bytes + 1, 0xee);
                LookupEmbeddingsReference(*e, ids, o, want.data());
                for (ParallelRunner* r : std::vector<ParallelRunner*>{nullptr, &one, &four, &uneven, &SerialRunner()}) {
                  o.parallel = r;
                  std::vector<uint8_t> got(out_bytes + 1, 0xee);
                  ASSERT_TRUE(LookupEmbeddingsInto(*e, ids, o, got.data()).ok());
                  ASSERT_EQ(want, got);  // the last byte (0xee) checks nothing is written past the end
                  auto rows = LookupRows(t.q, ids, o);
                  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
                  ASSERT_EQ(rows->shape(), (std::vector<int64_t>{static_cast<int64_t>(ids.size()), d}));
                  ASSERT_EQ(0, std::memcmp(rows->bytes(), want.data(), out_bytes));
                }
              }
      }
  });
}

// The rows themselves: dequantized row (DequantizeRows, checked against each format's formula in
// quant_test) * multiplier + p in float32, rounded once to the output type; for every table type.
TEST(Lookup, RowsAreDequantizedTimesMultiplierPlusPositions) {
  auto rng = testing::MakeRng(15);
  const int64_t vocab = 9;
  const std::vector<int64_t> ids = {8, 0, 4, 4, 1};
  for (const TypeCase& tc : AllTypeCases()) {
    const int64_t d = tc.d_models.back();
    TestTable t = MakeTable(tc.type, vocab, d, tc.unaligned, rng);
    std::vector<float> deq(static_cast<size_t>(vocab * d));
    ASSERT_TRUE(DequantizeRows(Dt(tc.type), t.q.data, d, 0, vocab, deq.data()).ok());
    const auto add = testing::RandomNormal(rng, ids.size() * static_cast<size_t>(d));
    for (DType odtype : {DType::kF32, DType::kBF16})
      for (bool fused_add : {false, true}) {
        SCOPED_TRACE(fmt::format("table {} out {} add {}", Name(tc), ToString(odtype), fused_add));
        LookupOptions o;
        o.multiplier = 3.5f;
        o.out_dtype = odtype;
        o.add_rows = fused_add ? add.data() : nullptr;
        auto x = LookupRows(t.q, ids, o);
        ASSERT_TRUE(x.ok()) << x.status().ToString();
        for (size_t i = 0; i < ids.size(); ++i)
          for (int64_t j = 0; j < d; ++j) {
            float want = deq[static_cast<size_t>(ids[i] * d + j)] * 3.5f;
            if (fused_add) want += add[i * static_cast<size_t>(d) + static_cast<size_t>(j)];
            const size_t k = i * static_cast<size_t>(d) + static_cast<size_t>(j);
            if (odtype == DType::kF32)
              ASSERT_EQ(x->data<float>()[k], want) << "row " << i << " col " << j;
            else
              ASSERT_EQ(x->data<bf16_t>()[k].bits, F32ToBF16(want).bits) << "row " << i << " col " << j;
          }
      }
  }
}

// A caller's runner is used for every table type (LookupRows on quantized and unaligned tables used to
// run serially whatever it was given).
TEST(Lookup, TheCallersRunnerIsUsedForEveryTableType) {
  auto rng = testing::MakeRng(16);
  std::vector<int64_t> ids(40);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i % 11);
  for (const TypeCase& tc : AllTypeCases()) {
    SCOPED_TRACE(Name(tc));
    TestTable t = MakeTable(tc.type, 11, tc.d_models.back(), tc.unaligned, rng);
    UnevenRunner runner;
    LookupOptions o;
    o.parallel = &runner;
    auto x = LookupRows(t.q, ids, o);
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    EXPECT_EQ(runner.calls.load(), 1);
    auto serial = LookupRows(t.q, ids);
    ASSERT_TRUE(serial.ok());
    EXPECT_EQ(0, std::memcmp(x->bytes(), serial->bytes(), static_cast<size_t>(x->size()) * 4));
  }
}

// One validation for every table type and entry point: the same code and the same message, naming
// the value; nothing written on error.
TEST(Lookup, BadOptionsAndIdsAreRefusedTheSameWayForEveryTableType) {
  auto rng = testing::MakeRng(17);
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (const TypeCase& tc : AllTypeCases()) {
    SCOPED_TRACE(Name(tc));
    const int64_t d = tc.d_models.front();
    TestTable t = MakeTable(tc.type, 7, d, tc.unaligned, rng);
    const EmbeddingTable e = t.q.AsEmbeddingTable().value();
    const std::vector<int64_t> ids = {2, 1};
    const std::vector<float> add(2 * static_cast<size_t>(d), 1.0f);
    std::vector<float> out(2 * static_cast<size_t>(d), -7.0f);
    auto expect_refused = [&](const LookupOptions& o, const std::vector<int64_t>& which, StatusCode code,
                              const std::string& named) {
      Result<Array> r = LookupRows(t.q, which, o);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), code) << r.status().ToString();
      EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().message();
      Status s = LookupEmbeddingsInto(e, which, o, out.data());
      EXPECT_EQ(s.code(), code) << s.ToString();
      EXPECT_EQ(s.message(), r.status().message());
      for (float v : out) ASSERT_EQ(v, -7.0f);  // nothing written
    };
    for (float m : {kNaN, kInf, -kInf}) {
      LookupOptions o;
      o.multiplier = m;
      o.add_rows = add.data();
      expect_refused(o, ids, StatusCode::kInvalidArgument, fmt::format("multiplier {} is not finite", m));
    }
    for (DType bad : {DType::kF16, DType::kI32, DType::kF64}) {
      LookupOptions o;
      o.out_dtype = bad;
      expect_refused(o, ids, StatusCode::kInvalidArgument, fmt::format("output dtype {}", ToString(bad)));
    }
    for (int64_t bad : {int64_t{7}, int64_t{-1}}) {
      expect_refused({}, {2, bad, 0}, StatusCode::kOutOfRange,
                     fmt::format("token id {} at index 1 is outside the vocabulary [0, 7)", bad));
    }
  }
}

// The acceptance test: the same ids from a float16 table and from that table quantized to
// Q8_0 (as ggml's quantize_row_q8_0 does), with add_rows and a multiplier.
TEST(Lookup, Float16AndQ8_0TablesWithPositionsAndMultiplier) {
  auto rng = testing::MakeRng(18);
  const int64_t vocab = 12, d = 64;
  const std::vector<float> w = testing::RandomNormal(rng, static_cast<size_t>(vocab * d));
  std::vector<std::byte> f16_bytes = FloatRows(GgmlType::kF16, w);
  std::vector<float> w16(w.size());  // the float16 table's values
  for (size_t i = 0; i < w.size(); ++i) w16[i] = F16ToF32(F32ToF16(w[i]));
  const std::vector<std::byte> q8_bytes = QuantizeQ8_0(w16);
  const QuantizedTable f16{f16_bytes, DType::kF16, vocab, d};
  const QuantizedTable q8{q8_bytes, DType::kQ8_0, vocab, d};

  const std::vector<int64_t> ids = {11, 0, 5, 5, 3};
  const std::vector<float> p = testing::RandomNormal(rng, ids.size() * static_cast<size_t>(d));
  const float m = std::sqrt(static_cast<float>(d));  // Gemma's multiplier, 8
  LookupOptions o;
  o.multiplier = m;
  o.add_rows = p.data();
  auto x16 = LookupRows(f16, ids, o);
  auto x8 = LookupRows(q8, ids, o);
  ASSERT_TRUE(x16.ok()) << x16.status().ToString();
  ASSERT_TRUE(x8.ok()) << x8.status().ToString();
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t j = 0; j < d; ++j) {
      const size_t k = i * d + static_cast<size_t>(j), src = static_cast<size_t>(ids[i] * d + j);
      // float16: exact, e * m + p in float32.
      ASSERT_EQ(x16->data<float>()[k], w16[src] * m + p[k]) << "row " << i << " col " << j;
      // Q8_0: the dequantized value d * q (d read back from float16), then * m + p in float32.
      const std::byte* blk = q8_bytes.data() + static_cast<size_t>(ids[i]) * (d / 32) * 34 + (j / 32) * 34;
      uint16_t dh;
      std::memcpy(&dh, blk, 2);
      const float deq = F16ToF32(f16_t{dh}) * static_cast<float>(static_cast<int8_t>(blk[2 + j % 32]));
      ASSERT_EQ(x8->data<float>()[k], deq * m + p[k]) << "row " << i << " col " << j;
      // And Q8_0 is near the float16 row: half a step d / 2 from the rounding of x / d, plus up to
      // 127 * |d - float16(d)| <= 127 * 2^-11 d from storing d in float16 (times m).
      ASSERT_NEAR(x8->data<float>()[k], x16->data<float>()[k],
                  (0.5 + 127.0 / 2048) * F16ToF32(f16_t{dh}) * m * 1.01 + 1e-5);
    }

  o.multiplier = std::nanf("");
  for (const QuantizedTable* t : {&f16, &q8}) {
    Result<Array> r = LookupRows(*t, ids, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("multiplier nan"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace posenc
