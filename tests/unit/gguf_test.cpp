// GGUF reader: the real files in shared/models checked against their README dumps, and in-memory
// files exercising every metadata value type and the typed getters.
#include "posenc/io/gguf.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "posenc/core/dtype.hpp"
#include "test_support.hpp"

namespace posenc {
namespace {

using ::posenc::testing::AsBytes;
using ::posenc::testing::GgufBuilder;

// What a model's README dump states about its GGUF file: header fields (unset: not stated) and scalar
// metadata by getter. ExpectDump checks each statement, naming the field or key that differs.
struct Dump {
  std::optional<uint32_t> version = {};
  std::optional<size_t> metadata = {}, tensors = {};
  std::optional<uint64_t> alignment = {}, data_offset = {}, file_size = {};
  std::vector<std::pair<const char*, std::string>> strings = {};
  std::vector<std::pair<const char*, int64_t>> ints = {};
  std::vector<std::pair<const char*, double>> floats = {};
  std::vector<std::pair<const char*, bool>> bools = {};
};

template <typename T, typename U>
void ExpectStated(const std::optional<T>& want, const U& got, const char* field) {
  if (want.has_value()) { EXPECT_EQ(got, *want) << field; }
}

template <typename T, typename Get>
void ExpectKeys(const std::vector<std::pair<const char*, T>>& want, const Get& get) {
  for (const auto& [key, value] : want) {
    const auto got = get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, value) << key;
  }
}

void ExpectDump(const GgufFile& f, const Dump& d) {
  ExpectStated(d.version, f.version(), "version");
  ExpectStated(d.metadata, f.metadata().size(), "metadata count");
  ExpectStated(d.tensors, f.tensors().size(), "tensor count");
  ExpectStated(d.alignment, f.alignment(), "alignment");
  ExpectStated(d.data_offset, f.data_offset(), "data_offset");
  ExpectStated(d.file_size, f.file_size(), "file_size");
  ExpectKeys(d.strings, [&](const char* key) { return f.GetString(key); });
  ExpectKeys(d.ints, [&](const char* key) { return f.GetInt(key); });
  ExpectKeys(d.floats, [&](const char* key) { return f.GetFloat(key); });
  ExpectKeys(d.bools, [&](const char* key) { return f.GetBool(key); });
}

// The GGUF file at `path`, its dump checked against `d`; none, with a failure, where it does not open.
std::optional<GgufFile> OpenWithDump(const std::string& path, const Dump& d) {
  Result<GgufFile> f = GgufFile::Open(path);
  if (!f.ok()) {
    ADD_FAILURE() << f.status().ToString();
    return std::nullopt;
  }
  ExpectDump(*f, d);
  return std::move(f).value();
}

const std::vector<std::string_view> kFirstTokens = {"<unk>",  "<s>",    "</s>",   "<0x00>",
                                                    "<0x01>", "<0x02>", "<0x03>", "<0x04>"};

TEST(GgufRealFile, TinyRandomLlamaMatchesReadmeDump) {
  POSENC_REQUIRE_DATA(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  const std::optional<GgufFile> f = OpenWithDump(
      path,
      {.version = 3,
       .metadata = 18,
       .tensors = 12,
       .alignment = 32,
       .data_offset = 724416,
       .file_size = 1750560,
       .strings = {{"general.architecture", "llama"}, {"general.name", "LLaMA v2"}, {"tokenizer.ggml.model", "llama"}},
       .ints = {{"llama.context_length", 4096},
                {"llama.embedding_length", 8},
                {"llama.block_count", 1},
                {"llama.feed_forward_length", 32},
                {"llama.rope.dimension_count", 4},
                {"llama.attention.head_count", 2},
                {"llama.attention.head_count_kv", 2},
                {"general.file_type", 1},
                {"tokenizer.ggml.bos_token_id", 1},
                {"tokenizer.ggml.eos_token_id", 2},
                {"tokenizer.ggml.unknown_token_id", 0}},
       .floats = {{"llama.attention.layer_norm_rms_epsilon", 9.999999747378752e-06}}});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->Find("llama.attention.layer_norm_rms_epsilon")->type, GgufValueType::kFloat32);
  EXPECT_EQ(f->Find("general.file_type")->type, GgufValueType::kUint32);
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 32000u);
  for (size_t i = 0; i < kFirstTokens.size(); ++i) EXPECT_EQ(tokens[i], kFirstTokens[i]);
  auto scores = f->GetFloatArray("tokenizer.ggml.scores").value();
  ASSERT_EQ(scores.size(), 32000u);
  EXPECT_EQ(f->Find("tokenizer.ggml.scores")->elem_type, GgufValueType::kFloat32);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(scores[i], 0.0);
  auto types = f->GetIntArray("tokenizer.ggml.token_type").value();
  ASSERT_EQ(types.size(), 32000u);
  EXPECT_EQ(f->Find("tokenizer.ggml.token_type")->elem_type, GgufValueType::kInt32);
  EXPECT_EQ(std::vector<int64_t>(types.begin(), types.begin() + 8), (std::vector<int64_t>{2, 3, 3, 6, 6, 6, 6, 6}));
  EXPECT_EQ(f->Find("llama.rope.freq_base"), nullptr);

  struct Want {
    const char* name;
    std::vector<int64_t> dims;
    GgmlType type;
    uint64_t offset, nbytes;
  };
  const std::vector<Want> want = {
      {"token_embd.weight", {8, 32000}, GgmlType::kF16, 0, 512000},
      {"blk.0.attn_q.weight", {8, 8}, GgmlType::kF16, 512000, 128},
      {"blk.0.attn_k.weight", {8, 8}, GgmlType::kF16, 512128, 128},
      {"blk.0.attn_v.weight", {8, 8}, GgmlType::kF16, 512256, 128},
      {"blk.0.attn_output.weight", {8, 8}, GgmlType::kF16, 512384, 128},
      {"blk.0.ffn_gate.weight", {8, 32}, GgmlType::kF16, 512512, 512},
      {"blk.0.ffn_up.weight", {8, 32}, GgmlType::kF16, 513024, 512},
      {"blk.0.ffn_down.weight", {32, 8}, GgmlType::kF16, 513536, 512},
      {"blk.0.attn_norm.weight", {8}, GgmlType::kF32, 514048, 32},
      {"blk.0.ffn_norm.weight", {8}, GgmlType::kF32, 514080, 32},
      {"output_norm.weight", {8}, GgmlType::kF32, 514112, 32},
      {"output.weight", {8, 32000}, GgmlType::kF16, 514144, 512000},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    const GgufTensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, want[i].name);
    EXPECT_EQ(t.dims, want[i].dims);
    EXPECT_EQ(t.ggml_type(), want[i].type);
    EXPECT_EQ(t.offset, want[i].offset);
    EXPECT_EQ(t.nbytes, want[i].nbytes);
    auto found = f->FindTensor(want[i].name);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, &t);
  }
  // The last tensor ends exactly at the end of the file.
  const GgufTensorInfo& out = f->tensors().back();
  EXPECT_EQ(f->data_offset() + out.offset + out.nbytes, f->file_size());
  EXPECT_EQ(GgmlTypeName(out.type), "F16");
  EXPECT_EQ(out.num_rows(), 32000);
  EXPECT_EQ(out.row_bytes(), 16u);

  // Norm weights are all 1.0 (README); F16 matrices are within +-0.08.
  auto norm = f->TensorData(*f->FindTensor("output_norm.weight").value()).value();
  ASSERT_EQ(norm.size(), 32u);
  for (int i = 0; i < 8; ++i) {
    float v;
    std::memcpy(&v, norm.data() + 4 * i, 4);
    EXPECT_EQ(v, 1.0f);
  }
  auto emb = f->TensorData(f->tensors()[0]).value();
  ASSERT_EQ(emb.size(), 512000u);
  double max_abs = 0.0;
  for (size_t i = 0; i < emb.size(); i += 2) {
    f16_t h;
    std::memcpy(&h.bits, emb.data() + i, 2);
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(F16ToF32(h))));
  }
  EXPECT_GT(max_abs, 0.05);
  EXPECT_LT(max_abs, 0.08);

  auto missing = f->FindTensor("pos_embd.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("pos_embd.weight"), std::string::npos);
}

TEST(GgufRealFile, VocabLlamaSpm) {
  POSENC_REQUIRE_DATA(path, "models/ggml-vocab/ggml-vocab-llama-spm.gguf");
  // data_offset is past the end: the writer adds no padding without tensors.
  const std::optional<GgufFile> f =
      OpenWithDump(path, {.version = 3,
                          .metadata = 22,
                          .tensors = 0,
                          .data_offset = 723872,
                          .file_size = 723869,
                          .strings = {{"general.name", "llama-spm"}, {"tokenizer.ggml.pre", "default"}},
                          .ints = {{"llama.embedding_length", 4096},
                                   {"llama.feed_forward_length", 11008},
                                   {"llama.vocab_size", 32000},
                                   {"llama.rope.dimension_count", 128}},
                          .bools = {{"tokenizer.ggml.add_bos_token", true}, {"tokenizer.ggml.add_eos_token", false}}});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens").value().size(), 32000u);
}

TEST(GgufRealFile, VocabPhi3) {
  POSENC_REQUIRE_DATA(path, "models/ggml-vocab/ggml-vocab-phi-3.gguf");
  const std::optional<GgufFile> f = OpenWithDump(path, {.metadata = 26,
                                                        .data_offset = 726048,
                                                        .strings = {{"general.architecture", "phi3"}},
                                                        .ints = {{"phi3.rope.scaling.original_context_length", 4096},
                                                                 {"phi3.embedding_length", 3072},
                                                                 {"phi3.rope.dimension_count", 96},
                                                                 {"tokenizer.ggml.eos_token_id", 32000},
                                                                 {"tokenizer.ggml.padding_token_id", 32000},
                                                                 {"general.quantization_version", 2}},
                                                        .floats = {{"phi3.rope.freq_base", 10000.0}}});
  ASSERT_TRUE(f.has_value());
  auto scores = f->GetFloatArray("tokenizer.ggml.scores").value();
  ASSERT_EQ(scores.size(), 32064u);
  EXPECT_EQ(scores[0], -1000.0);
  EXPECT_EQ(scores[2], -1000.0);
  EXPECT_EQ(scores[3], 0.0);
  auto types = f->GetIntArray("tokenizer.ggml.token_type").value();
  EXPECT_EQ(std::vector<int64_t>(types.begin(), types.begin() + 4), (std::vector<int64_t>{3, 3, 4, 6}));
  const std::string tmpl = f->GetString("tokenizer.chat_template").value();
  EXPECT_EQ(tmpl.rfind("{{ bos_token }}{% for message in messages %}", 0), 0u);
  EXPECT_EQ(tmpl.substr(tmpl.size() - 12), "{% endfor %}");
}

TEST(GgufInMemory, EveryValueTypeAndGetters) {
  GgufBuilder b;
  b.version = 2;
  b.Kv<uint8_t>("u8", 0, 200).Kv<int8_t>("i8", 1, -5).Kv<uint16_t>("u16", 2, 60000).Kv<int16_t>("i16", 3, -30000);
  b.KvU32("u32", 4000000000u).KvI32("i32", -7).KvF32("f32", 0.25f).KvBool("b", true).KvString("s", "h\xc3\xa9llo");
  b.Kv<uint64_t>("u64", 10, 18446744073709551615ull)
      .Kv<int64_t>("i64", 11, -9000000000ll)
      .Kv<double>("f64", 12, 1e-300);
  b.KvArray<int16_t>("ai16", 3, {-1, 2, -3}).KvArray<double>("af64", 12, {1.5, -2.5});
  b.KvArray<uint8_t>("abool", 7, {1, 0, 1}).KvStringArray("astr", {"a", "", "ccc"});
  b.KvArray<uint64_t>("au64", 10, {});
  const std::string bytes = b.Build();
  auto f = GgufFile::FromBytes(AsBytes(bytes), "mem.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->GetInt("u8").value(), 200);
  EXPECT_EQ(f->GetInt("i8").value(), -5);
  EXPECT_EQ(f->GetInt("u16").value(), 60000);
  EXPECT_EQ(f->GetInt("i16").value(), -30000);
  EXPECT_EQ(f->GetInt("u32").value(), 4000000000ll);
  EXPECT_EQ(f->GetInt("i32").value(), -7);
  EXPECT_EQ(f->GetFloat("f32").value(), 0.25);
  EXPECT_EQ(f->GetFloat("i32").value(), -7.0);  // integers widen to float
  EXPECT_EQ(f->GetBool("b").value(), true);
  EXPECT_EQ(f->GetString("s").value(), "h\xc3\xa9llo");
  EXPECT_EQ(f->GetInt("i64").value(), -9000000000ll);
  EXPECT_EQ(f->GetFloat("f64").value(), 1e-300);
  EXPECT_EQ(f->Find("u64")->u, 18446744073709551615ull);
  auto big = f->GetInt("u64");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(big.status().message().find("'u64'"), std::string::npos);
  EXPECT_EQ(f->GetIntArray("ai16").value(), (std::vector<int64_t>{-1, 2, -3}));
  EXPECT_EQ(f->GetFloatArray("af64").value(), (std::vector<double>{1.5, -2.5}));
  EXPECT_EQ(f->GetArray("abool").value()->count, 3u);
  EXPECT_EQ(f->GetArray("abool").value()->elem_type, GgufValueType::kBool);
  EXPECT_EQ(f->GetStringArray("astr").value(), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_TRUE(f->GetIntArray("au64").value().empty());

  auto nf = f->GetInt("nope.key");
  ASSERT_FALSE(nf.ok());
  EXPECT_EQ(nf.status().code(), StatusCode::kNotFound);
  EXPECT_NE(nf.status().message().find("'nope.key'"), std::string::npos);
  EXPECT_NE(nf.status().message().find("mem.gguf"), std::string::npos);
  auto wt = f->GetInt("s");
  ASSERT_FALSE(wt.ok());
  EXPECT_EQ(wt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wt.status().message().find("'s' is string"), std::string::npos) << wt.status().message();
  auto ws = f->GetString("f32");
  ASSERT_FALSE(ws.ok());
  EXPECT_NE(ws.status().message().find("is float32"), std::string::npos);
  auto wb = f->GetBool("u8");
  EXPECT_EQ(wb.status().code(), StatusCode::kInvalidArgument);
  auto wa = f->GetStringArray("ai16");
  ASSERT_FALSE(wa.ok());
  EXPECT_NE(wa.status().message().find("array of int16"), std::string::npos) << wa.status().message();
  auto na = f->GetArray("i32");
  EXPECT_EQ(na.status().code(), StatusCode::kInvalidArgument);
}

TEST(GgufInMemory, CustomAlignmentAndTensorData) {
  GgufBuilder b;
  b.alignment = 64;
  b.KvU32("general.alignment", 64);
  std::string a(12, '\x11'), c(6, '\x22');
  b.Tensor("a", {3}, 0, a).Tensor("b", {3, 1}, 1, c);
  const std::string bytes = b.Build();
  auto f = GgufFile::FromBytes(AsBytes(bytes), "align.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 64u);
  auto d = f->TensorData(f->tensors()[1]).value();
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(static_cast<char>(d[0]), '\x22');
  // An info that does not belong to this file is refused, not read.
  GgufTensorInfo bogus = f->tensors()[1];
  bogus.offset = 1 << 20;
  EXPECT_EQ(f->TensorData(bogus).status().code(), StatusCode::kOutOfRange);
}

TEST(GgufTypes, TraitsOfSupportedTypes) {
  GgmlTypeTraits t;
  ASSERT_TRUE(GetGgmlTypeTraits(12, &t));
  EXPECT_EQ(t.name, "Q4_K");
  EXPECT_EQ(t.block_size, 256);
  EXPECT_EQ(t.type_size, 144u);
  ASSERT_TRUE(GetGgmlTypeTraits(14, &t));
  EXPECT_EQ(t.type_size, 210u);
  ASSERT_TRUE(GetGgmlTypeTraits(8, &t));
  EXPECT_EQ(t.type_size, 34u);
  EXPECT_FALSE(GetGgmlTypeTraits(4, &t));   // removed Q4_2
  EXPECT_FALSE(GetGgmlTypeTraits(31, &t));  // removed Q4_0_4_4
  EXPECT_EQ(GgmlTypeName(99), "unknown type 99");
}

}  // namespace
}  // namespace posenc
