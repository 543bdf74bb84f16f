// In-memory builders of model files (GGUF, safetensors, llama2.c) for reader tests, corrupt-file tests
// and fuzz seeds. Header-only; each builder writes exactly the bytes asked for, so a test can make a
// file break one rule at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::testing {

inline std::span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Appends little-endian values to a byte string.
struct ByteWriter {
  std::string out;
  template <typename T>
  ByteWriter& Put(T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out.append(buf, sizeof(T));
    return *this;
  }
  ByteWriter& Str(std::string_view s) {
    Put<uint64_t>(s.size());
    out.append(s);
    return *this;
  }
  ByteWriter& Raw(std::string_view s) {
    out.append(s);
    return *this;
  }
};

class GgufBuilder {
 public:
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count_override, kv_count_override;
  std::string magic = "GGUF";
  uint64_t alignment = 32;  // used for padding (set general.alignment yourself to change the file's)

  // Metadata: the key, then value type and raw value bytes.
  GgufBuilder& KvRaw(std::string_view key, uint32_t type, std::string_view value) {
    kv_.Str(key).Put<uint32_t>(type).Raw(value);
    ++n_kv_;
    return *this;
  }
  template <typename T>
  GgufBuilder& Kv(std::string_view key, uint32_t type, T v) {
    ByteWriter w;
    w.Put<T>(v);
    return KvRaw(key, type, w.out);
  }
  GgufBuilder& KvU32(std::string_view key, uint32_t v) { return Kv<uint32_t>(key, 4, v); }
  GgufBuilder& KvI32(std::string_view key, int32_t v) { return Kv<int32_t>(key, 5, v); }
  GgufBuilder& KvF32(std::string_view key, float v) { return Kv<float>(key, 6, v); }
  GgufBuilder& KvBool(std::string_view key, bool v) { return Kv<uint8_t>(key, 7, v ? 1 : 0); }
  GgufBuilder& KvString(std::string_view key, std::string_view v) {
    ByteWriter w;
    w.Str(v);
    return KvRaw(key, 8, w.out);
  }
  GgufBuilder& KvStringArray(std::string_view key, const std::vector<std::string>& v) {
    ByteWriter w;
    w.Put<uint32_t>(8).Put<uint64_t>(v.size());
    for (const auto& s : v) w.Str(s);
    return KvRaw(key, 9, w.out);
  }
  template <typename T>
  GgufBuilder& KvArray(std::string_view key, uint32_t elem_type, const std::vector<T>& v) {
    ByteWriter w;
    w.Put<uint32_t>(elem_type).Put<uint64_t>(v.size());
    for (const T& x : v) w.Put<T>(x);
    return KvRaw(key, 9, w.out);
  }

  // A tensor info only (the offset as given; no data appended).
  GgufBuilder& TensorInfo(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    info_.Str(name).Put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) info_.Put<uint64_t>(d);
    info_.Put<uint32_t>(type).Put<uint64_t>(offset);
    ++n_tensors_;
    return *this;
  }
  // A tensor info plus its data, placed at the next aligned offset of the data section.
  GgufBuilder& Tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type, std::string_view data) {
    while (data_.size() % alignment != 0) data_.push_back('\0');
    TensorInfo(name, dims, type, data_.size());
    data_.append(data);
    return *this;
  }

  std::string Build() const {
    ByteWriter w;
    w.Raw(magic).Put<uint32_t>(version);
    w.Put<uint64_t>(tensor_count_override.value_or(n_tensors_));
    w.Put<uint64_t>(kv_count_override.value_or(n_kv_));
    w.Raw(kv_.out).Raw(info_.out);
    if (n_tensors_ > 0 || !data_.empty()) {
      while (w.out.size() % alignment != 0) w.out.push_back('\0');
      w.Raw(data_);
    }
    return w.out;
  }

 private:
  ByteWriter kv_, info_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::string data_;
};

}  // namespace posenc::testing

namespace posenc::testing {

// safetensors: a JSON header (written as given, so tests can make it lie) and a data buffer.
struct SafetensorsBuilder {
  std::string header;  // the JSON text
  std::string data;
  uint64_t header_size_override = 0;  // 0: the real size

  // Appends a tensor entry to the header (call Finish() after the last) with its data.
  SafetensorsBuilder& Tensor(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                             const std::string& bytes) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i > 0) s += ',';
      s += std::to_string(shape[i]);  // appended, not "," + to_string(): g++ 12 warns falsely (-Wrestrict) on that
    }
    s += "]";
    entries_.push_back("\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + s + ",\"data_offsets\":[" +
                       std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}");
    data += bytes;
    return *this;
  }
  SafetensorsBuilder& Finish(const std::string& metadata_json = "") {
    header = "{";
    if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json + (entries_.empty() ? "" : ",");
    for (size_t i = 0; i < entries_.size(); ++i) header += (i ? "," : "") + entries_[i];
    header += "}";
    while ((8 + header.size()) % 8 != 0) header += ' ';
    return *this;
  }
  std::string Build() const {
    ByteWriter w;
    w.Put<uint64_t>(header_size_override ? header_size_override : header.size());
    w.Raw(header).Raw(data);
    return w.out;
  }

 private:
  std::vector<std::string> entries_;
};

// A float32 vector as bytes.
inline std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A llama2.c checkpoint with the given header; weights are filled with value = index * 1e-3.
inline std::string BuildLlama2c(int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv_heads,
                                int32_t vocab, int32_t seq_len, int64_t extra_floats = 0) {
  ByteWriter w;
  for (int32_t v : {dim, hidden, layers, heads, kv_heads, vocab, seq_len}) w.Put<int32_t>(v);
  const int64_t V = vocab < 0 ? -vocab : vocab, D = dim, H = hidden, L = layers, KV = kv_heads * (dim / heads);
  int64_t n = V * D + L * D + L * D * D + 2 * L * KV * D + L * D * D + L * D + 3 * L * H * D + D +
              2 * seq_len * (dim / heads / 2) + (vocab < 0 ? V * D : 0) + extra_floats;
  for (int64_t i = 0; i < n; ++i) w.Put<float>(static_cast<float>(i) * 1e-3f);
  return w.out;
}

}  // namespace posenc::testing
