// Comparing two descriptions of one model: do they induce the same positional computation, layer by
// layer and site by site, and if not, what differs and what it costs (`posenc diff`).
//
// Every comparison goes through one function, ModelRopeLayers: per decoder layer, per RoPE site, the
// RopeConfig (layout, base, scaling, multi-axis sections) that layer's attention rotates with. A
// description read from a config.json, a GGUF, a Hugging Face folder or safetensors beside one gives
// the same value, so two spellings of one model compare field by field and frequency by frequency.
//
// Example:
//   RopeDescription a = OpenRopeDescription("config.json").value();
//   RopeDescription b = OpenRopeDescription("model.gguf").value();
//   RopeDiffReport r = DiffRope(a, b, RopeDiffOptions{}).value();
//   if (!r.equivalent) for (const auto& d : r.differences) puts(d.text.c_str());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"
#include "posenc/model/model_file.hpp"
#include "posenc/model/model_scheme.hpp"

namespace posenc {

// A model description opened once: a config.json (by name, or any regular file whose text starts
// with '{"'), or a model file OpenModel reads. The scheme of each layer type is read on demand.
struct RopeDescription {
  std::string path;
  std::optional<ModelFile> model;  // absent for a bare config.json
  ModelSchemeOptions options;
  PositionScheme scheme;           // the scheme with no layer type asked (the default one)
  std::optional<std::string> config_text;  // a config.json given as text (`path` names it in messages)
};

// Opens `path`. Errors are the readers' (kNotFound, kInvalidArgument, ...), naming the file.
Result<RopeDescription> OpenRopeDescription(const std::string& path, const ModelSchemeOptions& options = {});

// A config.json given as text (a Python dict), named `source` in messages. Errors: the config reader's.
Result<RopeDescription> RopeDescriptionFromConfigText(std::string text, const std::string& source,
                                                      const ModelSchemeOptions& options = {});

// The scheme of one layer type of `d` (the default scheme for "" or a format that has one RoPE).
Result<PositionScheme> SchemeOfLayerType(const RopeDescription& d, const std::string& layer_type);

// One place in a layer where RoPE is applied. Today every layer has one site, "rope" (q and k of its
// attention); DeepSeek's MLA and indexer would be two.
struct RopeSite {
  std::string name = "rope";
  RopeConfig config;
};

// One decoder layer's positional computation.
struct LayerRope {
  int64_t layer = 0;
  std::string layer_type;       // the config's layer_types entry, "" when it gives none
  bool rope = true;             // false: NoPE (no site)
  std::vector<RopeSite> sites;  // empty for NoPE layers
};

struct ModelRope {
  PositionKind kind = PositionKind::kRope;
  bool layers_known = false;  // false: the description states no layer count; `layers` is one layer 0
                              // standing for every layer
  std::string schedule_rule;  // LayerSchedule::rule, "" when unknown
  std::vector<LayerRope> layers;
};

// Every layer's sites (the one function every comparison reads). A non-RoPE scheme has no layers.
Result<ModelRope> ModelRopeLayers(const RopeDescription& d);

// A site's frequencies at a sequence length (multi-axis configs through their plan), and the position
// component of each pair (all 0 for 1-D RoPE).
struct SiteFrequencies {
  RopeFrequencies freqs;
  std::vector<int64_t> pair_component;
  int64_t num_components = 1;
};
Result<SiteFrequencies> ComputeSiteFrequencies(const RopeConfig& config, int64_t seq_len);

struct RopeDiffOptions {
  // The sequence length the length-dependent scalings (dynamic NTK, LongRoPE) are evaluated up to,
  // and the positions [0, seq_len) the cost is measured over; 0 = the larger context of A and B
  // (max_position_embeddings), else 8192.
  int64_t seq_len = 0;
  // A GGUF's interleaved pairs against a config's half pairs count as a difference. Off: llama.cpp's
  // converter permutes the rows of W_q and W_k to interleaved pairs, so the converted model computes
  // the same; the difference is listed without effect.
  bool strict_pairing = false;
};

// One difference, for a run of consecutive layers with the same one.
struct RopeDifference {
  int64_t first_layer = -1;  // -1: the whole model (scheme, layer count)
  int64_t last_layer = -1;
  std::string site;
  std::string field;  // "scheme", "layers", "rope_applied", "pairing", "head_dim", "rotary_window", "base",
                      // "scaling", "scaling.<key>", "attention_scaling", "sections", "max_position_embeddings"
  std::string a, b;   // the values as text
  bool affects = true;  // false: the field differs but the computation does not (noted, not a fault)
  std::string text;     // one line saying it
};

// What the differences cost over positions [0, seq_len), for the worst layer.
struct RopeDiffCost {
  bool structural = false;          // pairing, window, head size, sections or rope on/off differ
  double max_angle_diff = 0.0;      // radians, largest |angle_A - angle_B| (frequency differences only)
  int64_t max_at_pair = -1, max_at_position = -1, max_at_layer = -1;
  double attention_scaling_a = 1.0, attention_scaling_b = 1.0;
  // The first position where the angle difference exceeds float32 rounding of the angle
  // (2^-23 + 2^-24 * |angle| rad) and 1e-3 rad; -1: never below seq_len.
  int64_t first_position_f32 = -1;
  int64_t first_position_1e3 = -1;
};

struct RopeDiffReport {
  bool equivalent = true;
  int64_t seq_len = 0;
  std::string a_source, b_source;
  std::vector<RopeDifference> differences;
  RopeDiffCost cost;
  std::string summary;  // one sentence: "equivalent" or "identical below position N; beyond it ..."
};

// Compares A and B. Errors: either description's (its layers or frequencies cannot be computed).
Result<RopeDiffReport> DiffRope(const RopeDescription& a, const RopeDescription& b, const RopeDiffOptions& options);

// The report as `posenc diff --json` prints it (keys: equivalent, a, b, seq_len, summary,
// differences[{field, a, b, affects, text, layers?, site?}], cost{structural, max_angle_diff, max_at_pair,
// max_at_position, max_at_layer, attention_scaling_a, attention_scaling_b,
// first_position_over_f32_rounding, first_position_over_1e-3_rad}), and as its text.
std::string RopeDiffReportJson(const RopeDiffReport& r);
std::string RopeDiffReportText(const RopeDiffReport& r);

}  // namespace posenc
