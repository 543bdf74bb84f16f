// Corrupt model files, one per failure kind, built in memory: each must be rejected (never read
// outside the file: run under POSENC_SANITIZE=ON to check) with the expected code and an error that
// names the file and the fault.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_builders.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/safetensors.hpp"

namespace posenc {
namespace {

using namespace ::posenc::testing;  // NOLINT

enum class Format { kGguf, kSafetensors, kLlama2c };

struct CorruptCase {
  const char* name;  // also the file name in messages
  Format format;
  std::function<std::string()> build;
  StatusCode code;
  const char* fault;  // substring the message must contain
};

std::string Str(std::string_view s) { return std::string(s); }

// A valid GGUF with one F32 tensor [4] to start from.
GgufBuilder ValidGguf() {
  GgufBuilder b;
  b.KvString("general.architecture", "llama");
  b.Tensor("t", {4}, 0, std::string(16, '\0'));
  return b;
}

// ValidGguf() with one field changed.
GgufBuilder ValidGgufWith(const std::function<void(GgufBuilder&)>& change) {
  GgufBuilder b = ValidGguf();
  change(b);
  return b;
}

// The file `b` builds, followed by `pad` zero bytes (room for tensors a header only describes).
std::function<std::string()> Built(GgufBuilder b, size_t pad = 0) {
  return [b = std::move(b), pad] { return b.Build() + std::string(pad, '\0'); };
}

std::string Header(const std::string& json, const std::string& data) {
  ByteWriter w;
  w.Put<uint64_t>(json.size()).Raw(json).Raw(data);
  return w.out;
}

// `bytes` less its last `drop` bytes.
std::function<std::string()> Truncated(std::string bytes, size_t drop) {
  return [bytes = std::move(bytes), drop] { return bytes.substr(0, bytes.size() - drop); };
}

// One tensor of a safetensors header, its dtype and its shape and data_offsets as JSON text.
struct Entry {
  std::string name, dtype, shape, offsets;
};

// The header JSON naming `entries`: {"name":{"dtype":..,"shape":..,"data_offsets":..},...}.
std::string HeaderJson(const std::vector<Entry>& entries) {
  std::string json = "{";
  for (const Entry& e : entries) {
    if (json.size() > 1) json += ",";
    json += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":" + e.shape +
            ",\"data_offsets\":" + e.offsets + "}";
  }
  return json + "}";
}

// A safetensors file of the header `json` and the data bytes.
std::function<std::string()> Safetensors(std::string json, std::string data) {
  return [json = std::move(json), data = std::move(data)] { return Header(json, data); };
}

// A llama2.c file of only the seven int32 header values.
std::function<std::string()> Llama2cHeader(std::vector<int32_t> values) {
  return [values = std::move(values)] {
    ByteWriter w;
    for (int32_t v : values) w.Put<int32_t>(v);
    return w.out;
  };
}

std::vector<CorruptCase> Cases() {
  return {
      // ---------------------------------------------------------------- GGUF
      {"gguf_empty", Format::kGguf, [] { return std::string(); }, StatusCode::kDataLoss, "too short for the magic"},
      {"gguf_bad_magic", Format::kGguf, Built(ValidGgufWith([](GgufBuilder& b) { b.magic = "GGML"; })),
       StatusCode::kDataLoss, "bad magic 'GGML'"},
      {"gguf_unknown_version", Format::kGguf, Built(ValidGgufWith([](GgufBuilder& b) { b.version = 7; })),
       StatusCode::kUnimplemented, "unknown GGUF version 7"},
      {"gguf_version_1", Format::kGguf, Built(ValidGgufWith([](GgufBuilder& b) { b.version = 1; })),
       StatusCode::kUnimplemented, "version 1 is obsolete"},
      {"gguf_version_0", Format::kGguf, Built(ValidGgufWith([](GgufBuilder& b) { b.version = 0; })),
       StatusCode::kDataLoss, "invalid GGUF version 0"},
      {"gguf_big_endian", Format::kGguf, Built(ValidGgufWith([](GgufBuilder& b) { b.version = 0x03000000u; })),
       StatusCode::kUnimplemented, "big-endian"},
      {"gguf_truncated_header", Format::kGguf, [] { return ValidGguf().Build().substr(0, 14); }, StatusCode::kDataLoss,
       "header (tensor count) needs 8 bytes"},
      {"gguf_kv_count_past_end", Format::kGguf,
       Built(ValidGgufWith([](GgufBuilder& b) { b.kv_count_override = 1ull << 40; })), StatusCode::kDataLoss,
       "claims 1099511627776 metadata pairs"},
      {"gguf_tensor_count_past_end", Format::kGguf,
       Built(ValidGgufWith([](GgufBuilder& b) { b.tensor_count_override = 1ull << 40; })), StatusCode::kDataLoss,
       "claims 1099511627776 tensors"},
      {"gguf_string_length_past_end", Format::kGguf,
       Built(GgufBuilder().KvRaw("general.name", 8, ByteWriter().Put<uint64_t>(1ull << 50).Raw("abc").out)),
       StatusCode::kDataLoss, "string length 1125899906842624"},
      {"gguf_key_length_past_end", Format::kGguf,
       [] {
         GgufBuilder b;
         b.KvU32("a", 1);
         std::string s = b.Build();
         s[24] = '\x7f';  // the first key's length byte 0 -> 127
         return s;
       },
       StatusCode::kDataLoss, "metadata key #0 has string length 127"},
      {"gguf_array_count_past_end", Format::kGguf,
       Built(GgufBuilder().KvRaw("x.arr", 9,
                                 ByteWriter().Put<uint32_t>(4).Put<uint64_t>(1ull << 61).Put<uint32_t>(1).out)),
       StatusCode::kDataLoss, "claims 2305843009213693952 elements of uint32"},
      {"gguf_string_array_count_past_end", Format::kGguf,
       Built(GgufBuilder().KvRaw("tokenizer.ggml.tokens", 9,
                                 ByteWriter().Put<uint32_t>(8).Put<uint64_t>(1000000).Str("one").out)),
       StatusCode::kDataLoss, "claims 1000000 strings"},
      {"gguf_unknown_value_type", Format::kGguf, Built(GgufBuilder().KvRaw("k", 13, "\0\0\0\0")), StatusCode::kDataLoss,
       "unknown value type 13"},
      {"gguf_nested_array", Format::kGguf,
       Built(GgufBuilder().KvRaw("k", 9, ByteWriter().Put<uint32_t>(9).Put<uint64_t>(0).out)),
       StatusCode::kUnimplemented, "array of arrays"},
      {"gguf_bad_bool", Format::kGguf, Built(GgufBuilder().Kv<uint8_t>("flag", 7, 2)), StatusCode::kDataLoss,
       "bool with byte value 2"},
      {"gguf_duplicate_key", Format::kGguf,
       Built(GgufBuilder().KvU32("general.alignment", 32).KvU32("general.alignment", 32)), StatusCode::kDataLoss,
       "duplicate metadata key #1 'general.alignment'"},
      {"gguf_key_with_control_bytes", Format::kGguf,
       [] {
         const std::string key("k\n\x1b[31m\0z", 9);
         GgufBuilder b;
         b.KvU32(key, 1).KvU32(key, 1);
         return b.Build();
       },
       StatusCode::kDataLoss, "duplicate metadata key #1 'k\\n\\x1b[31m\\0z'"},
      {"gguf_long_key", Format::kGguf,
       Built(GgufBuilder().KvU32(std::string(100000, 'k'), 1).KvU32(std::string(100000, 'k'), 1)),
       StatusCode::kDataLoss, "kkkk... (100000 bytes in all)'"},
      {"gguf_key_bad_utf8", Format::kGguf, Built(GgufBuilder().KvU32("bad\xc3\x28key", 1)), StatusCode::kDataLoss,
       "'bad\\xc3(key' is not valid UTF-8"},
      {"gguf_tensor_name_bad_utf8", Format::kGguf, Built(GgufBuilder().Tensor("t\xff", {4}, 0, std::string(16, '\0'))),
       StatusCode::kDataLoss, "name is not valid UTF-8"},
      {"gguf_duplicate_tensor", Format::kGguf,
       Built(GgufBuilder().Tensor("w", {4}, 0, std::string(16, '\0')).Tensor("w", {4}, 0, std::string(16, '\0'))),
       StatusCode::kDataLoss, "duplicate tensor #1 'w'"},
      {"gguf_alignment_not_power_of_two", Format::kGguf, Built(ValidGguf().KvU32("general.alignment", 48)),
       StatusCode::kDataLoss, "general.alignment = 48 (must be a power of two)"},
      {"gguf_alignment_wrong_type", Format::kGguf, Built(ValidGguf().KvString("general.alignment", "32")),
       StatusCode::kDataLoss, "general.alignment is string"},
      {"gguf_too_many_dims", Format::kGguf, Built(GgufBuilder().TensorInfo("t", {1, 1, 1, 1, 1}, 0, 0), 64),
       StatusCode::kDataLoss, "has 5 dims"},
      {"gguf_dims_product_overflow", Format::kGguf,
       Built(GgufBuilder().TensorInfo("t", {1ull << 32, 1ull << 32}, 0, 0), 64), StatusCode::kDataLoss,
       "have a product past INT64_MAX"},
      {"gguf_dim_past_int64", Format::kGguf, Built(GgufBuilder().TensorInfo("t", {1ull << 63}, 0, 0), 64),
       StatusCode::kDataLoss, "is past INT64_MAX"},
      {"gguf_unknown_tensor_type", Format::kGguf, Built(GgufBuilder().Tensor("t", {4}, 99, std::string(16, '\0'))),
       StatusCode::kUnimplemented, "unknown ggml type 99"},
      {"gguf_removed_tensor_type", Format::kGguf, Built(GgufBuilder().Tensor("t", {32}, 4, std::string(20, '\0'))),
       StatusCode::kUnimplemented, "unknown ggml type 4"},
      {"gguf_row_not_whole_blocks", Format::kGguf, Built(GgufBuilder().Tensor("t", {33}, 2, std::string(36, '\0'))),
       StatusCode::kDataLoss, "row length 33 is not a multiple of the Q4_0 block size 32"},
      {"gguf_misaligned_offset", Format::kGguf, Built(GgufBuilder().TensorInfo("t", {2}, 0, 8), 64),
       StatusCode::kDataLoss, "offset 8 is not a multiple of the alignment 32"},
      {"gguf_tensor_data_past_end", Format::kGguf, Truncated(ValidGguf().Build(), 4), StatusCode::kDataLoss,
       "tensor 't' data [0, 16) lies past the end of the data section (12 bytes"},
      {"gguf_tensor_offset_past_end", Format::kGguf, Built(GgufBuilder().TensorInfo("t", {4}, 0, 1ull << 60), 64),
       StatusCode::kDataLoss, "lies past the end of the data section"},
      {"gguf_data_section_missing", Format::kGguf, Truncated(GgufBuilder().TensorInfo("t", {1}, 0, 0).Build(), 1),
       StatusCode::kDataLoss, "past the end of the file"},
      {"gguf_overlapping_tensors", Format::kGguf,
       Built(GgufBuilder().TensorInfo("a", {8}, 0, 0).TensorInfo("b", {8}, 0, 0), 64), StatusCode::kDataLoss,
       "tensor 'a' [0, 32) overlaps tensor 'b' [0, 32)"},
      // ---------------------------------------------------------------- safetensors
      {"st_too_short", Format::kSafetensors, [] { return Str("\x10\0\0"); }, StatusCode::kDataLoss,
       "too short for the 8-byte header size"},
      {"st_header_size_past_end", Format::kSafetensors,
       [] {
         ByteWriter w;
         w.Put<uint64_t>(1ull << 40).Raw("{}");
         return w.out;
       },
       StatusCode::kDataLoss, "header size 1099511627776 runs past the end of the file"},
      {"st_header_not_json", Format::kSafetensors, Safetensors("{\"a\": [1, 2", ""), StatusCode::kDataLoss,
       "is not valid JSON"},
      {"st_header_not_object", Format::kSafetensors, Safetensors("[1, 2, 3]", ""), StatusCode::kDataLoss,
       "header is a JSON array, not an object"},
      {"st_header_bad_utf8", Format::kSafetensors, Safetensors(HeaderJson({{"w\xff", "F32", "[]", "[0,4]"}}), "abcd"),
       StatusCode::kDataLoss, "not valid UTF-8"},
      {"st_duplicate_name", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", "[1]", "[0,4]"}, {"w", "F32", "[1]", "[4,8]"}}), std::string(8, '\0')),
       StatusCode::kDataLoss, "duplicate tensor name 'w'"},
      // Hostile headers (issue 15): a shape nested 140 000 deep crashed the message's dump(); a shape of
      // 100 000 dims or a 10 000-byte dtype gave a message as long; control bytes reached the terminal.
      {"st_deeply_nested_shape", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", std::string(140000, '[') + std::string(140000, ']'), "[0,4]"}}),
                   std::string(4, '\0')),
       StatusCode::kDataLoss, "JSON nested deeper than 8 levels at byte"},
      {"st_too_many_dims", Format::kSafetensors,
       [] {
         std::string shape = "[1";
         for (int i = 0; i < 100000; ++i) shape += ",1";
         return Header(HeaderJson({{"w", "F32", shape + "]", "[0,4]"}}), std::string(4, '\0'));
       },
       StatusCode::kDataLoss, "has 100001 dims (at most 64)"},
      {"st_shape_of_long_strings", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", "[\"" + std::string(10000, 'x') + "\",[[1]]]", "[0,4]"}}),
                   std::string(4, '\0')),
       StatusCode::kDataLoss, "shape [\"xxxxxxxx"},
      {"st_dtype_with_escapes", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F\\u001b[2J\\n\\u0000" + std::string(10000, 'y'), "[1]", "[0,4]"}}),
                   std::string(4, '\0')),
       StatusCode::kUnimplemented, "unknown dtype 'F\\x1b[2J\\n\\0yyyy"},
      {"st_offsets_nested", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", "[1]", "[[[[0]]],{\"a\":1}]"}}), std::string(4, '\0')),
       StatusCode::kDataLoss, "data_offsets [[...1],{...1}] are not"},
      {"st_lying_size", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", "[2,2]", "[0,12]"}}), std::string(12, '\0')), StatusCode::kDataLoss,
       "tensor 'w' shape [2,2] of F32 needs 16 bytes but data_offsets [0, 12) hold 12"},
      {"st_data_past_end", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F16", "[500]", "[0,1000]"}}), std::string(10, '\0')), StatusCode::kDataLoss,
       "tensor 'w' data [0, 1000) runs past the end of the data buffer (10 bytes)"},
      {"st_offsets_reversed", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", "[0]", "[8,4]"}}), std::string(10, '\0')), StatusCode::kDataLoss,
       "begin after end"},
      {"st_overlap", Format::kSafetensors,
       Safetensors(HeaderJson({{"a", "F32", "[2]", "[0,8]"}, {"b", "F32", "[2]", "[4,12]"}}), std::string(12, '\0')),
       StatusCode::kDataLoss, "tensor 'a' [0, 8) overlaps tensor 'b' [4, 12)"},
      {"st_shape_overflow", Format::kSafetensors,
       Safetensors(HeaderJson({{"w", "F32", "[4294967296,4294967296]", "[0,4]"}}), "abcd"), StatusCode::kDataLoss,
       "the element count overflows"},
      {"st_negative_dim", Format::kSafetensors, Safetensors(HeaderJson({{"w", "F32", "[-1]", "[0,4]"}}), "abcd"),
       StatusCode::kDataLoss, "not a non-negative integer"},
      {"st_missing_offsets", Format::kSafetensors, Safetensors("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", "abcd"),
       StatusCode::kDataLoss, "has no 'data_offsets' pair"},
      {"st_unknown_dtype", Format::kSafetensors, Safetensors(HeaderJson({{"w", "F7", "[1]", "[0,4]"}}), "abcd"),
       StatusCode::kUnimplemented, "unknown dtype 'F7'"},
      // ---------------------------------------------------------------- llama2.c
      {"l2c_too_short", Format::kLlama2c, [] { return std::string(20, '\0'); }, StatusCode::kDataLoss,
       "too short for the 28-byte header"},
      {"l2c_truncated", Format::kLlama2c, Truncated(BuildLlama2c(8, 16, 1, 2, 1, 10, 4), 4), StatusCode::kDataLoss,
       "(truncated)"},
      {"l2c_trailing", Format::kLlama2c, [] { return BuildLlama2c(8, 16, 1, 2, 1, 10, 4, 1); }, StatusCode::kDataLoss,
       "(trailing bytes)"},
      {"l2c_negative_dim", Format::kLlama2c, [] { return BuildLlama2c(-8, 16, 1, 2, 1, 10, 4); }, StatusCode::kDataLoss,
       "dim = -8 (must be positive)"},
      {"l2c_zero_vocab", Format::kLlama2c, [] { return BuildLlama2c(8, 16, 1, 2, 1, 0, 4); }, StatusCode::kDataLoss,
       "vocab_size = 0 (must be non-zero)"},
      {"l2c_heads_do_not_divide", Format::kLlama2c, Llama2cHeader({10, 16, 1, 3, 1, 10, 4}), StatusCode::kDataLoss,
       "dim 10 is not divisible by n_heads 3"},
      {"l2c_kv_heads_do_not_divide", Format::kLlama2c, Llama2cHeader({12, 16, 1, 3, 2, 10, 4}), StatusCode::kDataLoss,
       "n_heads 3 is not divisible by n_kv_heads 2"},
      {"l2c_size_overflow", Format::kLlama2c, Llama2cHeader({1 << 30, 1 << 30, 1 << 30, 1 << 20, 1 << 20, 10, 4}),
       StatusCode::kDataLoss, "overflow"},
      {"l2c_newer_export", Format::kLlama2c,
       [] {
         ByteWriter w;
         w.Put<uint32_t>(0x616b3432).Put<int32_t>(1).Raw(std::string(248, '\0'));
         return w.out;
       },
       StatusCode::kUnimplemented, "'ak42'"},
  };
}

void PrintTo(const CorruptCase& c, std::ostream* os) { *os << c.name; }

class CorruptFile : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(CorruptFile, RejectedNamingFileAndFault) {
  const CorruptCase& c = GetParam();
  const std::string bytes = c.build();
  Status s;
  switch (c.format) {
    case Format::kGguf: s = GgufFile::FromBytes(AsBytes(bytes), c.name).status(); break;
    case Format::kSafetensors: s = SafetensorsFile::FromBytes(AsBytes(bytes), c.name).status(); break;
    case Format::kLlama2c: s = Llama2cFile::FromBytes(AsBytes(bytes), c.name).status(); break;
  }
  ASSERT_FALSE(s.ok()) << c.name << " was accepted";
  EXPECT_EQ(s.code(), c.code) << s.ToString();
  EXPECT_NE(s.message().find(std::string("'") + c.name + "'"), std::string::npos) << "file not named: " << s.message();
  EXPECT_NE(s.message().find(c.fault), std::string::npos) << "fault '" << c.fault << "' not in: " << s.message();
  // Every message is one printable line of bounded length, whatever the file held.
  EXPECT_LT(s.message().size(), 1000u) << s.message().substr(0, 2000);
  for (char ch : s.message()) {
    ASSERT_FALSE(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) << "control byte in: " << s.message();
  }
}

INSTANTIATE_TEST_SUITE_P(All, CorruptFile, ::testing::ValuesIn(Cases()),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

// The valid starting points parse, so each case above fails for its own fault only.
TEST(CorruptFileBaselines, ValidFilesParse) {
  const std::string g = ValidGguf().Build();
  EXPECT_TRUE(GgufFile::FromBytes(AsBytes(g), "ok.gguf").ok());
  const std::string st = Header(HeaderJson({{"w", "F32", "[2,2]", "[0,16]"}}), std::string(16, '\0'));
  EXPECT_TRUE(SafetensorsFile::FromBytes(AsBytes(st), "ok.safetensors").ok());
  const std::string l = BuildLlama2c(8, 16, 1, 2, 1, 10, 4);
  EXPECT_TRUE(Llama2cFile::FromBytes(AsBytes(l), "ok.bin").ok());
}

}  // namespace
}  // namespace posenc
