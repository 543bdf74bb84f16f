// One entry point per reader, shared by the libFuzzer targets (fuzz_<reader>.cpp, clang only) and the
// gtest replay (fuzz_replay_test.cpp, every compiler): parse the bytes and, when they parse, touch
// everything the reader hands out (every tensor byte, every metadata value, a dequantized row), so a
// sanitizer sees any read the checks let through. Returns the parse status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "posenc/gguf.hpp"
#include "posenc/llama2c.hpp"
#include "posenc/npy.hpp"
#include "posenc/quant.hpp"
#include "posenc/safetensors.hpp"

namespace posenc::fuzz {

// Sums bytes so the reads cannot be optimised away.
inline uint64_t Touch(std::span<const std::byte> b) {
  uint64_t s = 0;
  for (std::byte x : b) s += static_cast<uint8_t>(x);
  return s;
}

inline Status FuzzNpy(std::span<const std::byte> bytes) {
  auto a = ParseNpy(bytes, "fuzz.npy");
  if (!a.ok()) return a.status();
  volatile uint64_t sink = Touch({a->bytes(), a->nbytes()});
  (void)sink;
  // Round trip: what posenc writes, posenc reads back identically.
  auto text = SerializeNpy(*a);
  if (!text.ok()) return OkStatus();  // e.g. a dtype the writer refuses
  auto b = ParseNpy({reinterpret_cast<const std::byte*>(text->data()), text->size()}, "roundtrip.npy");
  if (!b.ok() || b->shape() != a->shape() || b->dtype() != a->dtype() ||
      std::memcmp(a->bytes(), b->bytes(), a->nbytes()) != 0) {
    return InternalError("npy round trip changed the array");
  }
  return OkStatus();
}

inline Status FuzzGguf(std::span<const std::byte> bytes) {
  auto g = GgufFile::FromBytes(bytes, "fuzz.gguf");
  if (!g.ok()) return g.status();
  volatile uint64_t sink = 0;
  for (const GgufKeyValue& kv : g->metadata()) {
    sink = sink + kv.key.size();
    switch (kv.value.type) {
      case GgufValueType::kString: sink = sink + g->GetString(kv.key).value().size(); break;
      case GgufValueType::kArray:
        if (auto i = g->GetIntArray(kv.key); i.ok()) sink = sink + i->size();
        if (auto f = g->GetFloatArray(kv.key); f.ok()) sink = sink + f->size();
        if (auto s = g->GetStringArray(kv.key); s.ok()) {
          for (std::string_view v : *s) sink = sink + v.size();
        }
        break;
      case GgufValueType::kBool: sink = sink + (g->GetBool(kv.key).value() ? 1 : 0); break;
      default: sink = sink + (g->GetFloat(kv.key).value() > 0.0 ? 1 : 0); break;
    }
  }
  std::vector<float> row;
  for (const GgufTensorInfo& t : g->tensors()) {
    auto data = g->TensorData(t);
    if (!data.ok()) return InternalError("TensorData refused a tensor that Open accepted: " + data.status().message());
    sink = sink + Touch(*data);
    if (IsDequantizable(t.type) && t.dims[0] > 0 && t.dims[0] <= 4096 && t.num_rows() > 0) {
      row.resize(static_cast<size_t>(t.dims[0]));
      const Status s = DequantizeRows(t.type, *data, t.dims[0], t.num_rows() - 1, 1, row.data());
      if (!s.ok()) return InternalError("dequantizing the last row of an accepted tensor: " + s.message());
    }
  }
  return OkStatus();
}

inline Status FuzzSafetensors(std::span<const std::byte> bytes) {
  auto s = SafetensorsFile::FromBytes(bytes, "fuzz.safetensors");
  if (!s.ok()) return s.status();
  volatile uint64_t sink = 0;
  for (const SafetensorsTensor& t : s->tensors()) sink = sink + Touch(s->TensorData(t));
  for (const auto& [k, v] : s->metadata()) sink = sink + k.size() + v.size();
  return OkStatus();
}

inline Status FuzzLlama2c(std::span<const std::byte> bytes) {
  auto f = Llama2cFile::FromBytes(bytes, "fuzz.bin");
  if (!f.ok()) return f.status();
  const Llama2cWeights& w = f->weights();
  volatile uint64_t sink = 0;
  for (auto v : {w.token_embedding_table, w.rms_att_weight, w.wq, w.wk, w.wv, w.wo, w.rms_ffn_weight, w.w1, w.w2,
                 w.w3, w.rms_final_weight, w.freq_cis_real, w.freq_cis_imag, w.wcls}) {
    sink = sink + Touch(std::as_bytes(v));
  }
  return OkStatus();
}

}  // namespace posenc::fuzz
