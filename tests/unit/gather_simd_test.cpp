// The fast embedding lookup and its scatter-add gradient on every compiled target, against the scalar
// references: bit-identical (same float32 operations in the same order), for every table dtype,
// output dtype, multiplier, fused position add, row stride, and thread runner.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <hwy/aligned_allocator.h>

#include "posenc/kernels/embedding.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/simd.hpp"
#include "simd_targets.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

std::vector<uint8_t> MakeTable(DType dtype, const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * SizeOf(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32)
      std::memcpy(&b[i * 4], &v[i], 4);
    else if (dtype == DType::kF16) {
      f16_t h = F32ToF16(v[i]);
      std::memcpy(&b[i * 2], &h, 2);
    } else {
      bf16_t h = F32ToBF16(v[i]);
      std::memcpy(&b[i * 2], &h, 2);
    }
  }
  return b;
}

class GatherPerTarget : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(ForceSimdTarget("best").ok()); }
};

TEST_F(GatherPerTarget, LookupMatchesReferenceBitForBit) {
  auto rng = testing::MakeRng(3);
  ThreadPool two(2);
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (DType tdtype : {DType::kF32, DType::kF16, DType::kBF16})
      for (DType odtype : {DType::kF32, DType::kBF16})
        for (int64_t d_model : {1, 7, 64, 100, 4096})
          for (bool fused_add : {false, true})
            for (float mult : {1.0f, 45.254833f}) {
              SCOPED_TRACE(fmt::format("target {} table {} out {} d_model {} add {} multiplier {}", target,
                                       ToString(tdtype), ToString(odtype), d_model, fused_add, mult));
              const int64_t vocab = 37, stride = d_model + 3;  // a strided (padded) table
              auto values = testing::RandomNormal(rng, static_cast<size_t>(vocab * stride));
              auto bytes = MakeTable(tdtype, values);
              const EmbeddingTable table = EmbeddingTable::Strided(bytes.data(), tdtype, vocab, d_model, stride);
              std::vector<int64_t> ids = {0, 36, 5, 5, 17, 1, 0, 36, 2, 9, 33};
              auto add = testing::RandomNormal(rng, ids.size() * static_cast<size_t>(d_model));
              LookupOptions o;
              o.multiplier = mult;
              o.out_dtype = odtype;
              o.add_rows = fused_add ? add.data() : nullptr;
              const size_t out_bytes = ids.size() * static_cast<size_t>(d_model) * SizeOf(odtype);
              std::vector<uint8_t> want(out_bytes), got(out_bytes + 3, 0xee);
              LookupEmbeddingsReference(table, ids, o, want.data());
              o.parallel = &two;
              // +1 byte offset for bf16 would misalign the element type; use +2 (one element) instead.
              uint8_t* dst = got.data() + (odtype == DType::kBF16 ? 2 : 0);
              ASSERT_TRUE(LookupEmbeddingsInto(table, ids, o, dst).ok());
              EXPECT_EQ(0, std::memcmp(want.data(), dst, out_bytes));
              if (fused_add && tdtype == DType::kF32 && odtype == DType::kF32 && mult == 1.0f) {
                // Fused add == lookup then AddPositions (float32 table and output).
                for (size_t i = 0; i < ids.size(); ++i)
                  for (int64_t c = 0; c < d_model; ++c) {
                    const float e = LoadAsF32(reinterpret_cast<const float*>(bytes.data()) + ids[i] * stride + c);
                    float y;
                    std::memcpy(&y, dst + (i * d_model + c) * 4, 4);
                    ASSERT_EQ(y, e + add[i * d_model + c]);
                  }
              }
            }
  });
}

// The gather cases of the kernel list (Llama-3-8B's [128256, 4096] table rows, float32 / float16 /
// bfloat16 into float32, bfloat16 into bfloat16) at 17 ids of a 68-row table: bit for bit the reference.
TEST_F(GatherPerTarget, KernelCaseListMatchesReference) {
  auto rng = testing::MakeRng(7);
  testing::ForEachKernelCase(cases::KernelFamily::kGather, 17, [&](const cases::KernelCase& k, size_t, bool) {
    const DType out_dtype = k.op == "gather_bf16out" ? DType::kBF16 : DType::kF32;
    auto bytes = MakeTable(k.dtype, testing::RandomNormal(rng, static_cast<size_t>(k.vocab * k.head_dim)));
    const EmbeddingTable table = EmbeddingTable::View(bytes.data(), k.dtype, k.vocab, k.head_dim);
    std::vector<int64_t> ids;
    for (int64_t t = 0; t < k.tokens; ++t) ids.push_back((t * 37 + 5) % k.vocab);
    LookupOptions o;
    o.out_dtype = out_dtype;
    const size_t out_bytes = ids.size() * static_cast<size_t>(k.head_dim) * SizeOf(out_dtype);
    std::vector<uint8_t> want(out_bytes), got(out_bytes, 0xee);
    LookupEmbeddingsReference(table, ids, o, want.data());
    ASSERT_TRUE(LookupEmbeddingsInto(table, ids, o, got.data()).ok());
    EXPECT_TRUE(want == got);
  });
}

// Outputs of 16 MiB or more take the streaming-store path (and a bfloat16 table into bfloat16 rows
// the packed two-per-lane path): bit for bit the reference on every target, with every 16-bit pattern
// (NaN payloads, infinities, subnormals, signed zeros) or random float32 bit patterns in the table.
TEST_F(GatherPerTarget, LargeOutputsAndEveryBitPatternMatchReference) {
  auto rng = testing::MakeRng(11);
  ThreadPool two(2);
  const int64_t vocab = 16, d_model = 4096;
  for (DType tdtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<uint8_t> bytes(static_cast<size_t>(vocab * d_model) * SizeOf(tdtype));
    if (tdtype == DType::kF32) {
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(rng());
    } else {
      for (size_t i = 0; i < bytes.size() / 2; ++i) {
        const auto u = static_cast<uint16_t>(i);
        std::memcpy(bytes.data() + 2 * i, &u, 2);
      }
    }
    const EmbeddingTable table = EmbeddingTable::View(bytes.data(), tdtype, vocab, d_model);
    for (DType odtype : {DType::kF32, DType::kBF16}) {
      const int64_t n = (int64_t{17} << 20) / (d_model * static_cast<int64_t>(SizeOf(odtype))) + 1;  // > 16 MiB out
      std::vector<int64_t> ids(static_cast<size_t>(n));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7) % vocab);
      auto add = testing::RandomNormal(rng, ids.size() * static_cast<size_t>(d_model));
      const size_t out_bytes = ids.size() * static_cast<size_t>(d_model) * SizeOf(odtype);
      std::vector<uint8_t> want(out_bytes);
      auto got = hwy::AllocateAligned<uint8_t>(out_bytes);  // aligned: streaming stores apply
      for (bool fused_add : {false, true}) {
        LookupOptions o;
        o.multiplier = 45.254833f;
        o.out_dtype = odtype;
        o.add_rows = fused_add ? add.data() : nullptr;
        LookupEmbeddingsReference(table, ids, o, want.data());
        o.parallel = &two;
        testing::ForEachSimdTarget([&](const std::string& target) {
          SCOPED_TRACE(
              fmt::format("target {} table {} out {} add {}", target, ToString(tdtype), ToString(odtype), fused_add));
          std::memset(got.get(), 0xee, out_bytes);
          ASSERT_TRUE(LookupEmbeddingsInto(table, ids, o, got.get()).ok());
          ASSERT_EQ(0, std::memcmp(want.data(), got.get(), out_bytes));
        });
      }
    }
  }
}

TEST(Gather, LookupEmbeddingsUsesFastPathAndValidates) {
  std::vector<float> t(10 * 4);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i);
  auto table = EmbeddingTable::View(t.data(), DType::kF32, 10, 4);
  std::vector<int64_t> ids = {3, 9, 0};
  auto r = LookupEmbeddings(table, ids);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<float>()[4], 36.0f);  // row 9, column 0
  std::vector<int64_t> bad = {1, 10};
  std::vector<float> out(8);
  Status s = LookupEmbeddingsInto(table, bad, {}, out.data());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("index 1"), std::string::npos) << s.message();
}

TEST_F(GatherPerTarget, ScatterAddGradientIsDeterministicAndMatchesReference) {
  auto rng = testing::MakeRng(4);
  const int64_t vocab = 50;
  testing::ForEachSimdTarget([&](const std::string& target) {
    for (int64_t d_model : {1, 13, 64, 1000}) {
      SCOPED_TRACE(fmt::format("target {} d_model {}", target, d_model));
      std::vector<int64_t> ids(300);
      for (auto& id : ids) id = static_cast<int64_t>(rng() % 7);  // many repeats
      ids[5] = vocab - 1;
      auto g = testing::RandomNormal(rng, ids.size() * static_cast<size_t>(d_model));
      auto init = testing::RandomNormal(rng, static_cast<size_t>(vocab * d_model));
      std::vector<float> want = init;
      EmbeddingBackwardReference(ids, g.data(), d_model, 0.37f, want.data());
      ThreadPool one(1), two(2), three(3);
      for (ParallelRunner* r : std::vector<ParallelRunner*>{&SerialRunner(), &one, &two, &three, nullptr}) {
        std::vector<float> got = init;
        ASSERT_TRUE(EmbeddingBackward(ids, g.data(), d_model, 0.37f, got.data(), vocab, r).ok());
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
      }
    }
  });
  std::vector<int64_t> bad = {0, -1};
  std::vector<float> g(2), t(2);
  Status s = EmbeddingBackward(bad, g.data(), 1, 1.0f, t.data(), 2);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("token id -1 at index 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace posenc
