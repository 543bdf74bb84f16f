// ModelScheme: an opened model's positional scheme, from the format's own reader (model_scheme.hpp).
#include "posenc/model/model_scheme.hpp"

#include <fmt/format.h>

#include "posenc/config/gguf_config.hpp"
#include "posenc/config/hf_config.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/core/message.hpp"
#include "posenc/io/gguf.hpp"
#include "posenc/io/llama2c.hpp"

namespace posenc {
namespace {

HfConfigOptions HfOptions(const ModelSchemeOptions& o) {
  return HfConfigOptions{.layer_type = o.layer_type,
                         .layer = o.layer,
                         .site = o.site,
                         .assume_layout = o.assume_layout,
                         .understood_keys = o.understood_keys};
}

// A layer type asked of llama2.c (one fixed scheme) is refused: answering with the one scheme the file
// has would ignore the request. GGUF answers sliding_attention from its SWA keys and refuses the rest
// itself (GgufConfigOptions::layer_type).
Status CheckLayerTypeAsked(const ModelFile& m, const ModelSchemeOptions& o) {
  if (o.layer_type.empty() || m.format() != ModelFormat::kLlama2c) return OkStatus();
  return InvalidArgumentError(fmt::format("{}: layer type {} asked for, but its format has one set of RoPE parameters "
                                          "for every layer",
                                          m.path(), QuoteForMessage(o.layer_type)));
}

// The scheme as the file's format gives it, before what the caller states.
Result<PositionScheme> FormatScheme(const ModelFile& m, const ModelSchemeOptions& o) {
  POSENC_RETURN_IF_ERROR(CheckLayerTypeAsked(m, o));
  switch (m.format()) {
    case ModelFormat::kGguf:
      if (o.layer >= 0 || !o.site.empty())
        return InvalidArgumentError(fmt::format(
            "{}: a layer index or RoPE site was asked for, but a GGUF holds one rotation for every attention layer "
            "(use --layer-type sliding_attention for an SWA model's sliding layers)",
            m.path()));
      return GgufConfigFromFile(*m.gguf(), GgufConfigOptions{.allow_default_freq_base = o.allow_default_freq_base,
                                                             .layer_type = o.layer_type});
    case ModelFormat::kLlama2c: return Llama2cScheme(m.llama2c()->config(), m.path());
    case ModelFormat::kHuggingFaceFolder:
    case ModelFormat::kSafetensors:
      if (!m.config_path().empty()) return ParseHfConfig(m.config_text(), m.config_path(), HfOptions(o));
      break;
    case ModelFormat::kNpy: break;
  }
  return NotFoundError(
      fmt::format("{}: no positional scheme: the file has no RoPE metadata and no config.json beside it", m.path()));
}

// The caller's statements over the format's: the pair layout (RoPE only), noted where it changes it.
PositionScheme WithCallerOptions(PositionScheme s, const ModelSchemeOptions& o) {
  if (o.pairing.has_value() && s.kind == PositionKind::kRope && *o.pairing != s.rope.layout.pairing) {
    const std::string note = fmt::format("pairing {} stated by the caller (the file's format gives {})",
                                         ToString(*o.pairing), ToString(s.rope.layout.pairing));
    s.rope.layout.pairing = *o.pairing;
    s.rope.notes.push_back(note);
    s.notes.push_back(note);
  }
  return s;
}

}  // namespace

Result<PositionScheme> ModelScheme(const ModelFile& model, const ModelSchemeOptions& options) {
  POSENC_ASSIGN_OR_RETURN(PositionScheme s, FormatScheme(model, options));
  return WithCallerOptions(std::move(s), options);
}

Result<PositionScheme> ConfigFileScheme(const std::string& config_path, const ModelSchemeOptions& options) {
  POSENC_ASSIGN_OR_RETURN(PositionScheme s, LoadHfConfig(config_path, HfOptions(options)));
  return WithCallerOptions(std::move(s), options);
}

Result<PositionScheme> ConfigTextScheme(std::string_view json_text, const std::string& source,
                                        const ModelSchemeOptions& options) {
  POSENC_ASSIGN_OR_RETURN(PositionScheme s, ParseHfConfig(json_text, source, HfOptions(options)));
  return WithCallerOptions(std::move(s), options);
}

PositionScheme Llama2cScheme(const Llama2cConfig& c, const std::string& source) {
  // run.c: freq = 1 / 10000^(head_dim / head_size) for head_dim = 0, 2, 4, ... of each head, rotating
  // (x[i], x[i+1]); head_size = dim / n_heads.
  const int64_t head_size = c.head_size();
  PositionScheme s;
  s.kind = PositionKind::kRope;
  s.model_type = "llama2c";
  s.num_heads = c.n_heads;
  s.num_kv_heads = c.n_kv_heads;
  s.hidden_size = c.dim;
  s.rope_spelling = "llama2.c (fixed by run.c)";
  s.rope.source = source;
  s.rope.layout = {RopePairing::kInterleaved, head_size, 0, head_size};
  s.rope.base = 10000.0;
  s.rope.max_position_embeddings = c.seq_len;
  s.notes.push_back("llama2.c files hold no RoPE parameters: run.c's base 10000 and adjacent pairs assumed");
  return s;
}

ModelRopeInfo RopeInfoOf(const ModelFile& m, const PositionScheme& s) {
  ModelRopeInfo r;
  if (s.kind != PositionKind::kRope) return r;
  const RopeConfig& rc = s.rope;
  r.present = true;
  r.head_dim = rc.layout.head_dim;
  switch (m.format()) {
    case ModelFormat::kLlama2c:
      r.theta = rc.base;
      r.rotary_dim = rc.layout.rotary_dim;
      r.pairing = rc.layout.pairing;
      r.note = fmt::format("llama2.c run.c: theta {} (fixed in the code), {} within each head", rc.base,
                           rc.layout.pairing == RopePairing::kInterleaved ? "adjacent pairs" : "halves");
      break;
    case ModelFormat::kGguf: {
      // What the metadata states; the pairing is llama.cpp's for the architecture (the scheme's).
      const GgufFile& g = *m.gguf();
      const std::string& arch = s.model_type;
      if (auto b = g.GetFloat(arch + ".rope.freq_base"); b.ok()) r.theta = *b;
      if (auto d = g.GetInt(arch + ".rope.dimension_count"); d.ok()) r.rotary_dim = *d;
      r.pairing = rc.layout.pairing;
      r.note = r.theta > 0 ? "from GGUF metadata" : fmt::format("{}.rope.freq_base absent: llama.cpp uses 10000", arch);
      r.note += rc.layout.pairing == RopePairing::kInterleaved
                    ? fmt::format("; llama.cpp rotates adjacent pairs (LLAMA_ROPE_TYPE_NORM) for '{}'", arch)
                    : fmt::format("; llama.cpp rotates halves (LLAMA_ROPE_TYPE_NEOX) for '{}'", arch);
      break;
    }
    case ModelFormat::kHuggingFaceFolder:
    case ModelFormat::kSafetensors:
    case ModelFormat::kNpy:
      // A config.json states no pairing: Hugging Face's rotate_half unless the family's modeling code
      // fixes another (the family registry ParseHfConfig reads, model_families.hpp).
      r.theta = rc.base;
      if (rc.layout.rotary_dim != rc.layout.head_dim) r.rotary_dim = rc.layout.rotary_dim;
      r.note = "from config.json (Hugging Face pairs x[i] with x[i + d/2] unless the family says otherwise)";
      if (const ModelFamily* family = FindModelFamily(s.model_type);
          family != nullptr && family->pairing != RopePairing::kHalf) {
        r.pairing = family->pairing;
        // The one-line summary names the modeling file and function, not the folder it sits in.
        std::string_view source = family->source;
        if (const size_t slash = source.rfind('/', source.find(".py")); slash != std::string_view::npos)
          source = source.substr(slash + 1);
        r.note += fmt::format("; '{}' pairs {}: {}", family->model_type, ToString(family->pairing), source);
      }
      break;
  }
  return r;
}

}  // namespace posenc
