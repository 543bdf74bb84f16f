// .npy read/write: round trips for every dtype and version, and one test per malformed-file kind.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "posenc/io/npy.hpp"

namespace posenc {
namespace {

std::span<const std::byte> Bytes(const std::string& s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

std::string Header(int major, const std::string& dict) {
  std::string h("\x93NUMPY", 6);
  h += static_cast<char>(major);
  h += '\0';
  const size_t n = dict.size();
  h += static_cast<char>(n & 0xff);
  h += static_cast<char>((n >> 8) & 0xff);
  if (major >= 2) {
    h += static_cast<char>((n >> 16) & 0xff);
    h += static_cast<char>((n >> 24) & 0xff);
  }
  return h + dict;
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kI8}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {0}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 4}}) {
      Array a = Array::Zeros(t, shape).value();
      for (size_t i = 0; i < a.nbytes(); ++i) a.bytes()[i] = static_cast<std::byte>(i * 7 + 3);
      const std::string s = SerializeNpy(a).value();
      EXPECT_EQ((s.size() - a.nbytes()) % 64, 0u) << "header must pad to 64 bytes";
      Result<Array> b = ParseNpy(Bytes(s), "mem");
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(b->dtype(), t);
      EXPECT_EQ(b->shape(), shape);
      ASSERT_EQ(b->nbytes(), a.nbytes());
      EXPECT_EQ(std::memcmp(a.bytes(), b->bytes(), a.nbytes()), 0);
    }
  }
}

TEST(Npy, ReadsVersions2And3) {
  for (int major : {1, 2, 3}) {
    std::string s = Header(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n");
    const float v[2] = {1.5f, -2.0f};
    s.append(reinterpret_cast<const char*>(v), sizeof(v));
    Result<Array> a = ParseNpy(Bytes(s), "v");
    ASSERT_TRUE(a.ok()) << major << ": " << a.status().ToString();
    EXPECT_EQ(a->data<float>()[1], -2.0f);
  }
}

TEST(Npy, BFloat16IsRefusedOnWrite) {
  Array a = Array::Zeros(DType::kBF16, {2}).value();
  Result<std::string> s = SerializeNpy(a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("bfloat16"), std::string::npos);
}

struct BadCase {
  const char* name;
  std::string bytes;
  StatusCode code;
  const char* needle;  // must appear in the message
};

TEST(Npy, RejectsEachMalformedKind) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n";
  const std::string data16(16, '\0');
  const std::vector<BadCase> cases = {
      {"empty", "", StatusCode::kDataLoss, "magic"},
      {"bad magic", "\x93NUMPX\x01\x00\x00\x00", StatusCode::kDataLoss, "magic"},
      {"version 4", Header(4, ok_dict) + data16, StatusCode::kUnimplemented, "version 4.0"},
      {"header past end", std::string("\x93NUMPY\x01\x00\xff\x00{", 11), StatusCode::kDataLoss, "past the end"},
      {"truncated data", Header(1, ok_dict) + std::string(15, '\0'), StatusCode::kDataLoss, "truncated"},
      {"trailing data", Header(1, ok_dict) + std::string(17, '\0'), StatusCode::kDataLoss, "trailing"},
      {"big endian", Header(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }\n") + data16, StatusCode::kUnimplemented, "big-endian"},
      {"fortran order", Header(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n") + data16, StatusCode::kUnimplemented, "Fortran"},
      {"complex dtype", Header(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n") + data16, StatusCode::kUnimplemented, "<c8"},
      {"object dtype", Header(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n") + data16, StatusCode::kUnimplemented, "|O"},
      {"structured dtype", Header(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n") + data16, StatusCode::kUnimplemented, "structured"},
      {"missing shape", Header(1, "{'descr': '<f4', 'fortran_order': False, }\n") + data16, StatusCode::kDataLoss, "lacks"},
      {"not a dict", Header(1, "['descr']\n") + data16, StatusCode::kDataLoss, "not a dict"},
      {"unknown key", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'x': 1}\n") + data16, StatusCode::kDataLoss, "'x'"},
      {"negative dim", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 2), }\n") + data16, StatusCode::kDataLoss, "non-integer"},
      {"overflowing shape", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }\n") + data16, StatusCode::kDataLoss, "overflow"},
      {"huge shape", Header(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }\n") + data16, StatusCode::kDataLoss, "truncated"},
      {"unclosed shape", Header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2\n") + data16, StatusCode::kDataLoss, "shape"},
  };
  for (const BadCase& c : cases) {
    Result<Array> a = ParseNpy(Bytes(c.bytes), "bad.npy");
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_EQ(a.status().code(), c.code) << c.name << ": " << a.status().ToString();
    EXPECT_NE(a.status().message().find("bad.npy"), std::string::npos) << c.name << ": " << a.status().message();
    EXPECT_NE(a.status().message().find(c.needle), std::string::npos) << c.name << ": " << a.status().message();
  }
}

TEST(Npy, MissingFileIsNotFound) {
  Result<Array> a = ReadNpy("/nonexistent/x.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kNotFound);
  EXPECT_NE(a.status().message().find("/nonexistent/x.npy"), std::string::npos);
}

TEST(Npy, EveryTruncationOfAValidFileIsRejected) {
  Array a = Array::Zeros(DType::kF32, {3, 4}).value();
  const std::string s = SerializeNpy(a).value();
  for (size_t n = 0; n < s.size(); ++n) {
    Result<Array> b = ParseNpy(Bytes(s.substr(0, n)), "cut.npy");
    EXPECT_FALSE(b.ok()) << "prefix of " << n << " bytes was accepted";
  }
}

}  // namespace
}  // namespace posenc
