// safetensors reader. Rules follow the format's own validation (huggingface/safetensors): header size
// within the file, JSON object of tensors, offsets inside the buffer, byte size equal to shape times
// dtype size, no overlaps. Duplicate names are caught with nlohmann's parse callback (the plain parse
// would keep the last one silently).
#include "posenc/io/safetensors.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/io_util.hpp"
#include "posenc/io/json_guard.hpp"

namespace posenc {
namespace {

using io::Printable;

bool DtypeSize(const std::string& d, size_t* size) {
  static const std::pair<const char*, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  for (const auto& [name, s] : kSizes) {
    if (d == name) {
      *size = s;
      return true;
    }
  }
  return false;
}

Status Fail(const std::string& file, const std::string& what) {
  return DataLossError(fmt::format("reading safetensors '{}': {}", Printable(file), what));
}

// The format's own bound (huggingface/safetensors MAX_HEADER_SIZE): the JSON header is parsed into
// a tree, so its size bounds that allocation too. Headers nest three levels; allow a few more.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kMaxHeaderNesting = 8;
constexpr size_t kMaxDims = 64;

}  // namespace

Result<SafetensorsFile> SafetensorsFile::Parse(MappedFile mapped) {
  SafetensorsFile s;
  s.file_ = std::move(mapped);
  const std::string& file = s.file_.name();
  const auto bytes = s.file_.bytes();
  if (bytes.size() < 8)
    return Fail(file, fmt::format("file has {} bytes, too short for the 8-byte header size", bytes.size()));
  s.header_size_ = io::LoadLE<uint64_t>(bytes.data());
  if (s.header_size_ > bytes.size() - 8) {
    return Fail(file, fmt::format("header size {} runs past the end of the file ({} bytes after the size field)",
                                  s.header_size_, bytes.size() - 8));
  }
  if (s.header_size_ < 2)
    return Fail(file, fmt::format("header size {} is too small for a JSON object", s.header_size_));
  if (s.header_size_ > kMaxHeaderBytes) {
    return Fail(file,
                fmt::format("header size {} is past the format's limit of {} bytes", s.header_size_, kMaxHeaderBytes));
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  const std::string_view header(text, static_cast<size_t>(s.header_size_));
  if (!IsValidUtf8(header)) return Fail(file, "header is not valid UTF-8");
  if (Status depth = CheckJsonNesting(header, kMaxHeaderNesting, "header"); !depth.ok()) {
    return Fail(file, depth.message());
  }

  nlohmann::json j;
  std::set<std::string> seen;
  std::string duplicate;
  try {
    auto cb = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
        if (!seen.insert(parsed.get<std::string>()).second && duplicate.empty()) duplicate = parsed.get<std::string>();
      }
      return true;
    };
    j = nlohmann::json::parse(header.begin(), header.end(), cb);
  } catch (const nlohmann::json::parse_error& e) {
    return Fail(file, fmt::format("header ({} bytes) is not valid JSON at byte {}: {}{}", s.header_size_, e.byte,
                                  Printable(e.what()), JsonSyntaxHint(header, e.byte)));
  } catch (const std::exception& e) {
    return Fail(file, fmt::format("header ({} bytes) is not valid JSON: {}", s.header_size_, Printable(e.what())));
  }
  if (!duplicate.empty())
    return Fail(file, fmt::format("duplicate tensor name '{}' in the header", Printable(duplicate)));
  if (!j.is_object()) return Fail(file, fmt::format("header is a JSON {}, not an object", j.type_name()));

  const uint64_t data_size = bytes.size() - 8 - s.header_size_;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Fail(file, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return Fail(file, fmt::format("__metadata__ value of '{}' is not a string", Printable(m.key())));
        s.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string label = fmt::format("tensor '{}'", Printable(name));
    if (!v.is_object()) return Fail(file, label + " entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) return Fail(file, label + " has no string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) return Fail(file, label + " has no 'shape' array");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      return Fail(file, label + " has no 'data_offsets' pair");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = v["dtype"].get<std::string>();
    if (!DtypeSize(t.dtype, &t.element_size)) {
      return UnimplementedError(
          fmt::format("reading safetensors '{}': {} has unknown dtype '{}'", file, label, Printable(t.dtype)));
    }
    uint64_t elements = 1;
    const std::string shape_text = JsonForMessage(v["shape"]);
    if (v["shape"].size() > kMaxDims) {
      return Fail(file,
                  fmt::format("{} shape {} has {} dims (at most {})", label, shape_text, v["shape"].size(), kMaxDims));
    }
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned())
        return Fail(file, fmt::format("{} shape {} has a dim that is not a non-negative integer", label, shape_text));
      const uint64_t n = d.get<uint64_t>();
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || io::MulOverflows(elements, n, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Fail(file, fmt::format("{} shape {}: the element count overflows", label, shape_text));
      }
      t.shape.push_back(static_cast<int64_t>(n));
    }
    t.num_elements = static_cast<int64_t>(elements);
    const auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return Fail(file, fmt::format("{} data_offsets {} are not non-negative integers", label, JsonForMessage(off)));
    }
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end)
      return Fail(file, fmt::format("{} data_offsets [{}, {}]: begin after end", label, t.begin, t.end));
    if (t.end > data_size) {
      return Fail(file, fmt::format("{} data [{}, {}) runs past the end of the data buffer ({} bytes)", label, t.begin,
                                    t.end, data_size));
    }
    uint64_t want = 0;
    if (io::MulOverflows(elements, t.element_size, &want) || want != t.end - t.begin) {
      return Fail(file, fmt::format("{} shape {} of {} needs {} bytes but data_offsets [{}, {}) hold {}", label,
                                    shape_text, Printable(t.dtype),
                                    io::MulOverflows(elements, t.element_size, &want) ? std::string("too many")
                                                                                      : std::to_string(want),
                                    t.begin, t.end, t.end - t.begin));
    }
    s.tensors_.push_back(std::move(t));
  }
  std::vector<size_t> order(s.tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.tensors_[a].begin < s.tensors_[b].begin; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& a = s.tensors_[order[k - 1]];
    const auto& b = s.tensors_[order[k]];
    if (a.end > b.begin && a.end > a.begin && b.end > b.begin) {
      return Fail(file, fmt::format("tensor '{}' [{}, {}) overlaps tensor '{}' [{}, {})", Printable(a.name), a.begin,
                                    a.end, Printable(b.name), b.begin, b.end));
    }
  }
  return s;
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& tensor) const {
  for (const auto& t : tensors_) {
    if (t.name == tensor) return &t;
  }
  return nullptr;
}

Result<const SafetensorsTensor*> SafetensorsFile::FindTensor(const std::string& tensor) const {
  if (const auto* t = Find(tensor)) return t;
  return NotFoundError(
      fmt::format("safetensors '{}': tensor '{}' not found ({} tensors)", name(), tensor, tensors_.size()));
}

std::span<const std::byte> SafetensorsFile::TensorData(const SafetensorsTensor& t) const {
  return file_.bytes().subspan(static_cast<size_t>(data_offset() + t.begin), static_cast<size_t>(t.end - t.begin));
}

}  // namespace posenc
