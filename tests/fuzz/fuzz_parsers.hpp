// One entry point per reader, shared by the libFuzzer targets (fuzz_<reader>.cpp, clang only) and the
// gtest replay (fuzz_replay_test.cpp, every compiler): parse the bytes and, when they parse, touch
// everything the reader hands out (every tensor byte, every metadata value, a dequantized row), so a
// sanitizer sees any read the checks let through. Returns the parse status.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "posenc/config/hf_config.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/model/layout_convert.hpp"
#include "posenc/io/llama2c.hpp"
#include "posenc/io/npy.hpp"
#include "posenc/io/quant.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/io/safetensors.hpp"
#include "posenc/config/gguf_config.hpp"
#include "posenc/config/ggml_config.hpp"

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
  // The scheme reader over the same metadata (and rope_freqs tensors): any error is fine, a crash is not.
  if (auto cfg = GgufConfigFromFile(*g); cfg.ok()) sink = sink + static_cast<uint64_t>(cfg->num_heads);
  std::vector<float> row;
  for (const GgufTensorInfo& t : g->tensors()) {
    auto data = g->TensorData(t);
    if (!data.ok()) return InternalError("TensorData refused a tensor that Open accepted: " + data.status().message());
    sink = sink + Touch(*data);
    DType dtype;
    if (DTypeOfGgmlType(t.type, &dtype) && IsDequantizable(dtype) && t.dims[0] > 0 && t.dims[0] <= 4096 &&
        t.num_rows() > 0) {
      row.resize(static_cast<size_t>(t.dims[0]));
      const Status s = DequantizeRows(dtype, *data, t.dims[0], t.num_rows() - 1, 1, row.data());
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
  for (auto v : {w.token_embedding_table, w.rms_att_weight, w.wq, w.wk, w.wv, w.wo, w.rms_ffn_weight, w.w1, w.w2, w.w3,
                 w.rms_final_weight, w.freq_cis_real, w.freq_cis_imag, w.wcls}) {
    sink = sink + Touch(std::as_bytes(v));
  }
  return OkStatus();
}

// A RoPE config that parsed: its frequencies at a short, the configured and a long sequence (dynamic
// NTK and LongRoPE depend on it) must come out finite, and a small table of them finite. Anything
// else is a config the parser let through that the math turns into garbage: kInternal. (Not
// "positive": ggml's YaRN mix with ext_factor > 1 and freq_scale > 1 gives negative frequencies, as
// ggml itself computes them; libFuzzer found that one.)
inline Status ExerciseRope(const RopeConfig& rc, const char* which) {
  const int64_t max_pos = rc.max_position_embeddings > 0 ? rc.max_position_embeddings : 2048;
  // Four times the context, up to the longest sequence posenc positions (2^31; a length-dependent
  // scaling is refused past it). A config may give any int64 context: 2^62 * 4 overflowed here once.
  const int64_t capped = std::min(max_pos, kMaxRopePosition);  // times 4 cannot overflow
  const int64_t past_context = std::max(max_pos, std::min(capped * 4, kMaxRopePosition));
  for (int64_t seq_len : {int64_t{1}, max_pos, past_context}) {
    auto f = ComputeRopeFrequencies(rc, seq_len);
    if (!f.ok())
      return InternalError(std::string(which) + " config parsed, but its frequencies fail: " + f.status().message());
    for (double w : f->inv_freq)
      if (!std::isfinite(w))
        return InternalError(std::string(which) + " config gives a frequency of " + std::to_string(w));
    if (!std::isfinite(f->attention_scaling))
      return InternalError(std::string(which) + " config gives attention_scaling " +
                           std::to_string(f->attention_scaling));
    if (rc.multi_axis.has_value()) {
      // A multi-axis config that parsed has a plan: components in range, finite frequencies.
      auto plan = ComputeMultiAxisRope(rc, seq_len);
      if (!plan.ok())
        return InternalError(std::string(which) +
                             " multi-axis config parsed, but its plan fails: " + plan.status().message());
      for (size_t j = 0; j < plan->pair_component.size(); ++j)
        if (plan->pair_component[j] < 0 || plan->pair_component[j] >= plan->num_components ||
            !std::isfinite(plan->freqs.inv_freq[j]))
          return InternalError(std::string(which) + " multi-axis plan has a bad pair " + std::to_string(j));
    }
    if (f->inv_freq.size() > 4096) continue;  // a table of every pair of a huge head is not the point here
    for (RopePrecision p : {RopePrecision::kReference, RopePrecision::kExact}) {
      auto t = RopeTable::Build(*f, 4, p);
      if (!t.ok()) return InternalError(std::string(which) + " table build failed: " + t.status().message());
      for (int64_t pos = 0; pos < 4; ++pos)
        for (int64_t i = 0; i < t->num_pairs(); ++i)
          if (!std::isfinite(t->cos_row(pos)[i]) || !std::isfinite(t->sin_row(pos)[i]))
            return InternalError(std::string(which) + " table holds a non-finite cos/sin");
    }
  }
  return OkStatus();
}

// A config text: as a Hugging Face config.json (every scheme kind) and as either RoPE spelling posenc
// reads (ggml_rope_ext parameters or a config.json). OK when either reading accepts it; else the
// Hugging Face reading's error, which names the file.
inline Status FuzzConfig(std::span<const std::byte> bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto hf = ParseHfConfig(text, "fuzz.json");
  if (hf.ok() && hf->kind == PositionKind::kRope) {
    const Status s = ExerciseRope(hf->rope, "Hugging Face");
    if (!s.ok()) return s;
  }
  auto any = ParseRopeConfigJson(text, 128, "fuzz.json");
  // A reader's own defect (NoJsonThrow's kInternal) is a finding even when the other reading accepts.
  for (const Status& st : {hf.status(), any.status()})
    if (st.code() == StatusCode::kInternal) return st;
  if (any.ok()) {
    const Status s = ExerciseRope(*any, "RoPE");
    if (!s.ok()) return s;
  }
  if (hf.ok() || any.ok()) return OkStatus();
  return hf.status();
}

// A model file for the layout converter, after one byte that picks the direction (bit 0: from half)
// and where heads come from (bits 1-2: the file; 2 heads of 8; 4 heads, 2 kv heads of 8 with a
// window of 4 at dim 2; 3 heads of 6). The file is named inside a folder that does not exist, so no
// config.json is found beside it. A converted file must have the input's size and convert back to the
// input bit for bit (kInternal otherwise).
inline Status FuzzConvert(std::span<const std::byte> bytes) {
  const std::string name = "/nonexistent-posenc-fuzz/fuzz.model";
  if (bytes.empty()) return InvalidArgumentError(name + ": empty");
  const uint8_t mode = static_cast<uint8_t>(bytes[0]);
  const std::span<const std::byte> file = bytes.subspan(1);
  LayoutConvertOptions o;
  o.from = (mode & 1) != 0 ? RopePairing::kHalf : RopePairing::kInterleaved;
  o.to = (mode & 1) != 0 ? RopePairing::kInterleaved : RopePairing::kHalf;
  switch ((mode >> 1) & 3) {
    case 1: o.num_heads = 2, o.head_dim = 8; break;
    case 2: o.num_heads = 4, o.num_kv_heads = 2, o.head_dim = 8, o.rotary_dim = 4, o.rotary_start = 2; break;
    case 3: o.num_heads = 3, o.head_dim = 6; break;
    default: break;
  }
  std::vector<std::byte> out;
  auto r = ConvertLayoutBytes(file, name, o, &out);
  if (!r.ok()) return r.status();
  if (out.size() != file.size()) return InternalError("convert-layout changed the file size");
  std::swap(o.from, o.to);
  std::vector<std::byte> back;
  auto b = ConvertLayoutBytes(out, name, o, &back);
  if (!b.ok()) return InternalError("convert-layout refused its own output: " + b.status().message());
  if (back.size() != file.size() || std::memcmp(back.data(), file.data(), file.size()) != 0)
    return InternalError("convert-layout round trip did not restore the file");
  return OkStatus();
}

}  // namespace posenc::fuzz
