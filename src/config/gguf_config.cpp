// GGUF metadata -> PositionScheme: the numbers llama.cpp passes to ggml_rope_ext for a model.
//
// What llama.cpp does with the keys (src/llama-model.cpp load_hparams, src/llama-context.cpp):
//   freq_base   <arch>.rope.freq_base (llama.cpp: 10000 when absent; posenc: an error unless allowed)
//   n_rot       <arch>.rope.dimension_count, else the head size (key_length, else embedding / heads)
//   freq_scale  1 / <arch>.rope.scaling.factor (old key <arch>.rope.scale_linear), 1 when absent or 0,
//               and 1 when the scaling type is "none"
//   ext_factor  1 for scaling type "yarn", else 0
//   attn_factor with YaRN: mscale(factor) / (1 + 0.1 ln factor), i.e. the kernel's own YaRN factor is
//               cancelled and Hugging Face's 0.1 ln(s) + 1 (or DeepSeek's mscale ratio from
//               <arch>.rope.scaling.yarn_log_multiplier) put in its place; then times
//               <arch>.rope.scaling.attn_factor (default 1)
//   n_ctx_orig  <arch>.rope.scaling.original_context_length, else <arch>.context_length
//   pairing     fixed per architecture (llama_model_rope_type): NORM = interleaved, NEOX = half
//   rope_freqs  tensor "rope_freqs.weight": per-pair divisors (Llama 3.1's scaling, baked in)
//   LongRoPE    tensors "rope_factors_long.weight" / "rope_factors_short.weight"
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/core/checked_math.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/config/gguf_config.hpp"
#include "posenc/core/message.hpp"
#include "config/multi_axis_json.hpp"

namespace posenc {
namespace {

// llama.cpp's rope type of the file's architecture, from the registry's table
// (posenc/config/model_families.hpp); nullopt for an architecture it does not list.
std::optional<GgmlRopeType> RopeTypeOf(std::string_view arch) {
  const GgufArchitecture* a = FindGgufArchitecture(arch);
  if (a == nullptr) return std::nullopt;
  return a->rope;
}

Result<std::vector<double>> F32Tensor(const GgufFile& f, const GgufTensorInfo& t, int64_t want, const char* role) {
  if (t.ggml_type() != GgmlType::kF32)
    return UnimplementedError(fmt::format("gguf {}: tensor '{}' ({}) has type {}, expected F32", f.name(), t.name, role,
                                          GgmlTypeName(t.type)));
  if (t.num_elements != want)
    return InvalidArgumentError(fmt::format("gguf {}: tensor '{}' has {} values, must have n_rot/2 = {}", f.name(),
                                            t.name, t.num_elements, want));
  POSENC_ASSIGN_OR_RETURN(auto bytes, f.TensorData(t));
  std::vector<double> out(static_cast<size_t>(want));
  for (size_t i = 0; i < out.size(); ++i) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    out[i] = v;
  }
  return out;
}

// `<arch>.<key>` metadata of one GGUF file: optional keys read into their destination when present;
// errors name the file and the key.
struct ArchKeys {
  const GgufFile& f;
  std::string arch;

  std::string Key(std::string_view k) const { return fmt::format("{}.{}", arch, k); }
  bool Has(std::string_view k) const { return f.Find(Key(k)) != nullptr; }
  // An integer key within [lo, hi]; out of it: the file, the key, the value and the range.
  Status OptInt(std::string_view k, int64_t* dst, int64_t lo = std::numeric_limits<int64_t>::min(),
                int64_t hi = std::numeric_limits<int64_t>::max()) const {
    if (!Has(k)) return OkStatus();
    POSENC_ASSIGN_OR_RETURN(const int64_t v, f.GetInt(Key(k)));
    if (v < lo || v > hi)
      return InvalidArgumentError(
          hi == std::numeric_limits<int64_t>::max()
              ? fmt::format("gguf {}: key '{}' = {} must be >= {}", f.name(), Key(k), v, lo)
              : fmt::format("gguf {}: key '{}' = {} must be in [{}, {}]", f.name(), Key(k), v, lo, hi));
    *dst = v;
    return OkStatus();
  }
  // A count or length: >= 0.
  Status OptCount(std::string_view k, int64_t* dst) const { return OptInt(k, dst, 0); }
  // A float key as llama.cpp reads it, in float32: a float64 (or integer) value that is not finite or
  // would overflow or flush to 0 there is refused, quoting the file's value, never narrowed silently.
  Result<double> Float32(std::string_view k) const {
    POSENC_ASSIGN_OR_RETURN(double v, f.GetFloat(Key(k)));
    if (!std::isfinite(v))
      return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be finite", f.name(), Key(k), v));
    if (!FitsFloat32(v))
      return InvalidArgumentError(
          fmt::format("gguf {}: key '{}' = {} is outside float32, the type llama.cpp reads it in (magnitude {} to "
                      "{}, or 0)",
                      f.name(), Key(k), v, std::numeric_limits<float>::min(), std::numeric_limits<float>::max()));
    return v;
  }
  Status OptFloat(std::string_view k, double* dst) const {
    if (!Has(k)) return OkStatus();
    POSENC_ASSIGN_OR_RETURN(*dst, Float32(k));
    return OkStatus();
  }
};

// Head counts, width and context length.
Status ReadCounts(const ArchKeys& k, PositionScheme* s) {
  POSENC_RETURN_IF_ERROR(k.OptCount("attention.head_count", &s->num_heads));
  POSENC_RETURN_IF_ERROR(k.OptCount("attention.head_count_kv", &s->num_kv_heads));
  POSENC_RETURN_IF_ERROR(k.OptCount("embedding_length", &s->hidden_size));
  return k.OptCount("context_length", &s->max_position_embeddings);
}

// The scheme of an architecture llama.cpp runs without RoPE (learned, ALiBi), or why posenc cannot
// read it; kOk with s->kind == kRope for the rest.
Status NonRopeScheme(const ArchKeys& k, std::optional<GgmlRopeType> rope_type, PositionScheme* s) {
  const std::string& path = k.f.name();
  const std::string& arch = k.arch;
  if (rope_type == GgmlRopeType::kNone) {
    if (arch == "gpt2")
      s->kind = PositionKind::kLearned;
    else if (arch == "bloom") {
      s->kind = PositionKind::kAlibi;
      s->alibi_variant = "bloom";
    } else if (arch == "mpt") {
      s->kind = PositionKind::kAlibi;
      s->alibi_variant = "mpt";
    } else if (const ModelFamily* f = FindModelFamilyByGguf(arch);
               f != nullptr && (f->scheme == PositionKind::kNone || f->positions == PositionSwitch::kNever ||
                                f->positions == PositionSwitch::kMlaUseNope)) {
      // llama.cpp applies no RoPE, and the family's code has no positions (Mamba, Nemotron-H, Kimi Linear).
      s->kind = PositionKind::kNone;
      s->notes.push_back(fmt::format("{}: no positional transform (llama.cpp's rope type none; {})", arch, f->source));
    } else {
      return UnimplementedError(fmt::format(
          "gguf {}: architecture '{}' uses no RoPE and posenc does not read its scheme from GGUF", path, arch));
    }
    return OkStatus();
  }
  if (!rope_type)
    return UnimplementedError(
        fmt::format("gguf {}: general.architecture = '{}' is not in posenc's copy of llama.cpp's rope type table, so "
                    "its pairing is unknown",
                    path, arch));
  s->kind = PositionKind::kRope;
  return OkStatus();
}

// The pairing llama.cpp fixes for the architecture, the head size (attention.key_length, else
// embedding_length / head_count) and n_rot (rope.dimension_count, else the head size).
Status ReadLayout(const ArchKeys& k, std::optional<GgmlRopeType> rope_type, const PositionScheme& s, RopeConfig* rc) {
  const std::string& path = k.f.name();
  rc->layout.pairing = rope_type == GgmlRopeType::kNorm ? RopePairing::kInterleaved : RopePairing::kHalf;
  rc->notes.push_back(fmt::format("pairing {} is fixed by llama.cpp for architecture '{}' (not stored in the file)",
                                  ToString(rc->layout.pairing), k.arch));
  int64_t head_dim = 0;
  POSENC_RETURN_IF_ERROR(k.OptCount("attention.key_length", &head_dim));
  if (head_dim == 0) {
    if (s.num_heads <= 0)
      return NotFoundError(fmt::format("gguf {}: key '{}' is missing or 0", path, k.Key("attention.head_count")));
    if (s.hidden_size <= 0 || s.hidden_size % s.num_heads != 0)
      return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} is not a positive multiple of head_count {}",
                                              path, k.Key("embedding_length"), s.hidden_size, s.num_heads));
    head_dim = s.hidden_size / s.num_heads;
  }
  int64_t n_rot = head_dim;
  POSENC_RETURN_IF_ERROR(k.OptInt("rope.dimension_count", &n_rot));
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    return InvalidArgumentError(
        fmt::format("gguf {}: key '{}' = {} must be even, positive and at most the head size {}", path,
                    k.Key("rope.dimension_count"), n_rot, head_dim));
  rc->layout.head_dim = head_dim;
  rc->layout.rotary_dim = n_rot;
  // MLA (deepseek2: the registry's families of the architecture rotate the back of the head): the
  // query head is qk_nope + qk_rope (attention.key_length_mla where the file stores MLA in its absorbed
  // form, key_length 576 = kv_lora_rank + n_rot), and llama.cpp's q_pe / k_pe views take its last n_rot
  // dims, as Hugging Face's q_pe slice does.
  const ModelFamily* family = FindModelFamilyByGguf(k.arch);
  if (family != nullptr && family->window == RotaryWindow::kBackOfHead) {
    int64_t q_head = 0;
    POSENC_RETURN_IF_ERROR(k.OptCount("attention.key_length_mla", &q_head));
    if (q_head > 0) {
      if (n_rot > q_head)
        return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} is smaller than {} = {}", path,
                                                k.Key("attention.key_length_mla"), q_head,
                                                k.Key("rope.dimension_count"), n_rot));
      rc->layout.head_dim = q_head;
      rc->notes.push_back(fmt::format("head size {} from '{}' (the query head; '{}' = {} is the absorbed MLA key)",
                                      q_head, k.Key("attention.key_length_mla"), k.Key("attention.key_length"),
                                      head_dim));
    }
    rc->layout.rotary_start = rc->layout.head_dim - n_rot;
  }
  return OkStatus();
}

// The query temperature llama.cpp's load_hparams sets (src/llama-model.cpp; applied by
// llm_graph_input_attn_temp: scale = 1 + f_attn_temp_scale * ln(1 + floor((p + offset) / floor_scale))):
//   llama4 (the registry's Llama 4 row): fixed floor 8192, scale 0.1, offset 1, on NoPE layers, unless
//     attention.sliding_window is present and 0 (then llama.cpp rotates every layer, no temperature);
//   mistral3 (Ministral 3's row): attention.temperature_scale when nonzero, floor n_ctx_orig_yarn
//     (rope.scaling.original_context_length, else context_length), offset 0, every layer;
//   deepseek2 (Mistral Large 3 ships as it): attention.temperature_scale and .temperature_length, offset
//     0, every layer.
Status ReadQueryTemperature(const ArchKeys& k, AttnTemperature* t) {
  // The form of any family row of the architecture (mistral3 is both Ministral 3's row, which has the
  // form, and the mistral3 wrapper's), not only the first row's.
  QueryTemperatureForm form = QueryTemperatureForm::kNone;
  for (const ModelFamily& f : ModelFamilies())
    if (f.gguf_architecture == k.arch && f.query_temperature != QueryTemperatureForm::kNone) form = f.query_temperature;
  if (form == QueryTemperatureForm::kLlama4Tuning) {
    int64_t window = -1;
    POSENC_RETURN_IF_ERROR(k.OptInt("attention.sliding_window", &window));
    if (window != 0) *t = AttnTemperature{.tuning = true, .floor_scale = 8192, .attn_scale = 0.1, .offset = 1};
    return OkStatus();
  }
  const bool scaling_beta = form == QueryTemperatureForm::kScalingBeta;
  if (!scaling_beta && k.arch != "deepseek2") return OkStatus();
  double scale = 0;
  POSENC_RETURN_IF_ERROR(k.OptFloat("attention.temperature_scale", &scale));
  if (scale == 0) return OkStatus();
  int64_t floor_scale = 0;
  std::string floor_key;
  if (scaling_beta) {
    floor_key =
        k.Has("rope.scaling.original_context_length") ? "rope.scaling.original_context_length" : "context_length";
    POSENC_RETURN_IF_ERROR(k.OptCount(floor_key, &floor_scale));
  } else {
    floor_key = "attention.temperature_length";
    POSENC_RETURN_IF_ERROR(k.OptCount(floor_key, &floor_scale));
  }
  if (floor_scale <= 0)
    return InvalidArgumentError(
        fmt::format("gguf {}: key '{}' = {} must be > 0: '{}' = {} scales queries by steps of it", k.f.name(),
                    k.Key(floor_key), floor_scale, k.Key("attention.temperature_scale"), scale));
  *t = AttnTemperature{.tuning = true,
                       .floor_scale = static_cast<double>(floor_scale),
                       .attn_scale = scale,
                       .offset = 0,
                       .every_layer = true};
  return ValidateAttnTemperature(*t);
}

// The layer count (block_count), for the per-layer table: the architecture's family rule applies as
// llama.cpp applies it (cohere2: RoPE on the sliding layers, pattern 4; llama4 / smollm3: NoPE every 4th
// layer). llama4 with attention.sliding_window 0: llama.cpp sets n_no_rope_layer_step to the layer count,
// so only the last layer is NoPE.
Status ReadLayerCount(const ArchKeys& k, PositionScheme* s) {
  POSENC_RETURN_IF_ERROR(k.OptInt("block_count", &s->num_layers));
  if (s->num_layers < 0 || s->num_layers > kMaxLayers)
    return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be in [0, {}]", k.f.name(),
                                            k.Key("block_count"), s->num_layers, kMaxLayers));
  if (k.arch == "llama4" && s->num_layers > 0) {
    int64_t window = -1;
    POSENC_RETURN_IF_ERROR(k.OptInt("attention.sliding_window", &window));
    if (window == 0) s->no_rope_layer_interval = s->num_layers;
  }
  return OkStatus();
}

// M-RoPE architectures: <arch>.rope.dimension_sections (4 integers, llama.cpp's rope_sections) over
// the n_rot rotated dims, in ggml's rules (the pairs no section claims take the fourth row).
Status ReadMultiAxis(const ArchKeys& k, std::optional<GgmlRopeType> rope_type, RopeConfig* rc) {
  const std::string key = k.Key("rope.dimension_sections");
  if (!k.Has("rope.dimension_sections"))
    return NotFoundError(
        fmt::format("gguf {}: key '{}' is missing (architecture '{}' uses M-RoPE, whose sections it "
                    "gives)",
                    k.f.name(), key, k.arch));
  POSENC_ASSIGN_OR_RETURN(std::vector<int64_t> sections, k.f.GetIntArray(key));
  const int64_t mode = rope_type == GgmlRopeType::kMrope ? 8 : 40;
  POSENC_RETURN_IF_ERROR(multi_axis_json::SetGgmlTextMultiAxis(std::move(sections), mode, rc->layout.rotary_dim,
                                                               rc->layout.head_dim,
                                                               fmt::format("gguf {}: key '{}'", k.f.name(), key), rc));
  rc->notes.push_back(fmt::format("M-RoPE: ggml mode {} ({}), positions are 4 rows per token (t, h, w, e)", mode,
                                  mode == 8 ? "MROPE, chunked sections" : "IMROPE, interleaved sections"));
  return OkStatus();
}

// rope.freq_base, held as float as llama.cpp holds it; llama.cpp's 10000 when absent and allowed.
Status ReadBase(const ArchKeys& k, const GgufConfigOptions& options, RopeConfig* rc) {
  const std::string& path = k.f.name();
  if (k.Has("rope.freq_base")) {
    POSENC_ASSIGN_OR_RETURN(rc->base, k.Float32("rope.freq_base"));
  } else if (options.allow_default_freq_base) {
    rc->base = 10000.0;
    rc->notes.push_back(fmt::format("no {}: base 10000 assumed (llama.cpp's default)", k.Key("rope.freq_base")));
  } else {
    return NotFoundError(
        fmt::format("gguf {}: key '{}' is missing (llama.cpp would use 10000; refused because the key was required)",
                    path, k.Key("rope.freq_base")));
  }
  if (!(rc->base > 0) || !std::isfinite(rc->base))
    return InvalidArgumentError(
        fmt::format("gguf {}: key '{}' = {} must be finite and > 0", path, k.Key("rope.freq_base"), rc->base));
  rc->base = static_cast<float>(rc->base);  // llama.cpp holds it as float
  return OkStatus();
}

// llama-context.cpp's attn_factor, in float32: with YaRN, the kernel's own mscale(factor) is cancelled
// and Hugging Face's 0.1 ln(s) + 1 (or DeepSeek's mscale ratio) put in its place; then times
// rope.scaling.attn_factor.
float GgmlAttnFactor(const std::string& arch, const RopeScaling& sc, double log_mul, double rope_attn_factor) {
  float attn = 1.0f;
  if (sc.ext_factor != 0.0) {
    const float fct = 1.0f / static_cast<float>(sc.freq_scale);
    auto mscale = [](float scale, float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
    if (log_mul != 0.0) {
      float m = 1.0f;
      const float all = static_cast<float>(log_mul);
      if (arch == "deepseek2" && all != 1.0f) m = all;
      attn = mscale(fct, m) / mscale(fct, all);
    } else {
      attn = mscale(fct, 1.0f);
    }
    attn *= 1.0f / (1.0f + 0.1f * std::log(fct));
  }
  return attn * static_cast<float>(rope_attn_factor);
}

// The rope.scaling.* keys: type, factor, original context, YaRN's ext_factor and betas, attn_factor.
Status ReadScaling(const ArchKeys& k, int64_t context_length, RopeScaling* sc) {
  const std::string& path = k.f.name();
  std::string type = "linear";
  if (k.Has("rope.scaling.type")) { POSENC_ASSIGN_OR_RETURN(type, k.f.GetString(k.Key("rope.scaling.type"))); }
  if (type != "none" && type != "linear" && type != "yarn" && type != "longrope")
    return UnimplementedError(
        fmt::format("gguf {}: key '{}' = '{}' is not a scaling posenc knows (none, linear, yarn, longrope)", path,
                    k.Key("rope.scaling.type"), type));
  float factor = 0.0f;
  for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (!k.Has(key)) continue;
    POSENC_ASSIGN_OR_RETURN(double v, k.Float32(key));
    if (!(v >= 0) || !std::isfinite(v))
      return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be finite and >= 0", path, k.Key(key), v));
    factor = static_cast<float>(v);
    break;
  }
  sc->freq_scale = factor == 0.0f || type == "none" ? 1.0 : static_cast<double>(1.0f / factor);
  sc->factor = 1.0 / sc->freq_scale;
  int64_t n_ctx_orig = context_length;
  POSENC_RETURN_IF_ERROR(k.OptCount("rope.scaling.original_context_length", &n_ctx_orig));
  sc->original_max_position_embeddings = n_ctx_orig;
  sc->ext_factor = type == "yarn" ? 1.0 : 0.0;
  sc->beta_fast = 32.0;
  sc->beta_slow = 1.0;
  POSENC_RETURN_IF_ERROR(k.OptFloat("rope.scaling.yarn_ext_factor", &sc->ext_factor));
  POSENC_RETURN_IF_ERROR(k.OptFloat("rope.scaling.yarn_beta_fast", &sc->beta_fast));
  POSENC_RETURN_IF_ERROR(k.OptFloat("rope.scaling.yarn_beta_slow", &sc->beta_slow));
  double rope_attn_factor = 1.0, log_mul = 0.0;
  POSENC_RETURN_IF_ERROR(k.OptFloat("rope.scaling.attn_factor", &rope_attn_factor));
  POSENC_RETURN_IF_ERROR(k.OptFloat("rope.scaling.yarn_log_multiplier", &log_mul));
  sc->attn_factor = GgmlAttnFactor(k.arch, *sc, log_mul, rope_attn_factor);
  return OkStatus();
}

// Per-pair divisors: rope_freqs (Llama 3.1's scaling, baked in) and LongRoPE's two factor lists.
Status ReadFactorTensors(const GgufFile& f, int64_t pairs, RopeConfig* rc) {
  RopeScaling& sc = rc->scaling;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name == "rope_freqs.weight") {
      POSENC_ASSIGN_OR_RETURN(sc.freq_factors, F32Tensor(f, t, pairs, "rope_freqs"));
    } else if (t.name == "rope_factors_long.weight") {
      POSENC_ASSIGN_OR_RETURN(sc.long_factor, F32Tensor(f, t, pairs, "LongRoPE long factors"));
    } else if (t.name == "rope_factors_short.weight") {
      POSENC_ASSIGN_OR_RETURN(sc.short_factor, F32Tensor(f, t, pairs, "LongRoPE short factors"));
    }
  }
  if (sc.long_factor.empty() != sc.short_factor.empty())
    return NotFoundError(
        fmt::format("gguf {}: only one of rope_factors_long / rope_factors_short is present", f.name()));
  if (!sc.long_factor.empty())
    rc->notes.push_back(
        "LongRoPE factors: posenc switches to the long list when seq_len > n_ctx_orig; llama.cpp decides by "
        "the context size it was started with");
  return OkStatus();
}

// The layer type asked for (GgufConfigOptions::layer_type): sliding layers take the file's SWA base
// and no frequency scaling where it has them (llama.cpp: rope.freq_base_swa, freq_scale_swa 1), llama.cpp's
// fixed Gemma 3 values where it has not; a file with a sliding window but no SWA rope keys rotates every
// layer alike. Anything else is refused naming what was looked for.
Status ApplyLayerType(const ArchKeys& k, const std::string& layer_type, PositionScheme* s) {
  if (layer_type.empty() || layer_type == "full_attention") return OkStatus();
  const std::string& path = k.f.name();
  if (layer_type != "sliding_attention")
    return InvalidArgumentError(fmt::format(
        "gguf {}: layer type {} asked for; a GGUF distinguishes full_attention and sliding_attention only", path,
        QuoteForMessage(layer_type)));
  RopeConfig& rc = s->rope;
  const std::string base_key = k.Key("rope.freq_base_swa");
  auto unscaled = [&] {
    rc.scaling.freq_scale = 1.0;
    rc.scaling.factor = 1.0;
    rc.scaling.freq_factors.clear();
  };
  if (k.Has("rope.freq_base_swa")) {
    POSENC_ASSIGN_OR_RETURN(rc.base, k.Float32("rope.freq_base_swa"));
    if (!(rc.base > 0))
      return InvalidArgumentError(fmt::format("gguf {}: key '{}' = {} must be > 0", path, base_key, rc.base));
    rc.base = static_cast<float>(rc.base);
    unscaled();
    rc.notes.push_back(fmt::format("sliding_attention layers: base {} from '{}', no frequency scaling (llama.cpp's "
                                   "freq_scale_swa 1)",
                                   rc.base, base_key));
  } else if (k.arch == "gemma3") {
    rc.base = 10000.0;
    unscaled();
    rc.notes.push_back(fmt::format("sliding_attention layers: no '{}': llama.cpp's gemma3 values, base 10000 and no "
                                   "frequency scaling",
                                   base_key));
  } else if (k.Has("attention.sliding_window")) {
    rc.notes.push_back(fmt::format("sliding_attention layers: no '{}': the same rotation as every other layer",
                                   base_key));
  } else {
    return InvalidArgumentError(fmt::format(
        "gguf {}: layer type 'sliding_attention' asked for, but the file has neither '{}' nor '{}' (no per-layer-type RoPE parameters, no sliding "
        "layers)",
        path, base_key, k.Key("attention.sliding_window")));
  }
  s->rope_layer_type = layer_type;
  s->rope_layer_types = {"full_attention", "sliding_attention"};
  return OkStatus();
}

}  // namespace

Result<PositionScheme> LoadGgufConfig(const std::string& path, const GgufConfigOptions& options) {
  POSENC_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  return GgufConfigFromFile(f, options);
}

Result<PositionScheme> GgufConfigFromFile(const GgufFile& f, const GgufConfigOptions& options) {
  POSENC_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  const ArchKeys keys{f, arch};
  PositionScheme s;
  s.model_type = arch;
  s.rope_spelling = "gguf";
  POSENC_RETURN_IF_ERROR(ReadCounts(keys, &s));
  const std::optional<GgmlRopeType> rope_type = RopeTypeOf(arch);
  POSENC_RETURN_IF_ERROR(NonRopeScheme(keys, rope_type, &s));
  if (s.kind != PositionKind::kRope) {
    if (!options.layer_type.empty())
      return InvalidArgumentError(fmt::format("gguf {}: layer type {} asked for, but the model applies no RoPE",
                                              f.name(), QuoteForMessage(options.layer_type)));
    return s;
  }
  RopeConfig& rc = s.rope;
  rc.source = f.name();
  rc.scaling.type = RopeScalingType::kGgml;
  POSENC_RETURN_IF_ERROR(ReadLayout(keys, rope_type, s, &rc));
  if (rope_type == GgmlRopeType::kMrope || rope_type == GgmlRopeType::kImrope)
    POSENC_RETURN_IF_ERROR(ReadMultiAxis(keys, rope_type, &rc));
  POSENC_RETURN_IF_ERROR(ReadBase(keys, options, &rc));
  rc.max_position_embeddings = s.max_position_embeddings;
  POSENC_RETURN_IF_ERROR(ReadScaling(keys, s.max_position_embeddings, &rc.scaling));
  POSENC_RETURN_IF_ERROR(ReadFactorTensors(f, rc.layout.rotary_dim / 2, &rc));
  POSENC_RETURN_IF_ERROR(ApplyLayerType(keys, options.layer_type, &s));
  POSENC_RETURN_IF_ERROR(ReadQueryTemperature(keys, &s.attn_temperature));
  POSENC_RETURN_IF_ERROR(ReadLayerCount(keys, &s));
  for (auto& n : rc.notes) s.notes.push_back(n);
  POSENC_RETURN_IF_ERROR(ValidateRopeConfig(rc));
  return s;
}

}  // namespace posenc
