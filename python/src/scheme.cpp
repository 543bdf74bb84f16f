// _posenc: schemes: Scheme, a model's positional scheme as the library reads it from a config.json,
// a GGUF, ggml parameters or a model folder, with what it computes (frequencies, schedules, plans).
#include "binding.hpp"

#include <optional>

#include "posenc/math/rope_scaling_facts.hpp"

namespace posenc::python {
namespace {

py::dict ScalingDict(const RopeScaling& s) {
  py::dict d;
  d["type"] = std::string(ToString(s.type));
  d["factor"] = s.factor;
  d["original_max_position_embeddings"] = s.original_max_position_embeddings;
  d["beta_fast"] = s.beta_fast;
  d["beta_slow"] = s.beta_slow;
  d["attention_factor"] = s.attention_factor ? py::cast(*s.attention_factor) : py::none();
  d["mscale"] = s.mscale ? py::cast(*s.mscale) : py::none();
  d["mscale_all_dim"] = s.mscale_all_dim ? py::cast(*s.mscale_all_dim) : py::none();
  d["truncate"] = s.truncate;
  d["low_freq_factor"] = s.low_freq_factor;
  d["high_freq_factor"] = s.high_freq_factor;
  d["short_factor"] = s.short_factor;
  d["long_factor"] = s.long_factor;
  d["freq_scale"] = s.freq_scale;
  d["ext_factor"] = s.ext_factor;
  d["attn_factor"] = s.attn_factor;
  d["freq_factors"] = s.freq_factors;
  d["partial_rotary_factor"] = s.partial_rotary_factor;
  return d;
}

// (name, value) of each parameter the scaling uses, from its row (ScalingParamsOf): what inspect lists.
py::list ScalingParamsList(const RopeConfig& rc) {
  py::list out;
  for (const ScalingParam& p : ScalingParamsOf(rc)) {
    py::object v;
    switch (p.kind) {
      case ScalingKeyKind::kNumber:
      case ScalingKeyKind::kOptionalNumber: v = py::float_(p.number); break;
      case ScalingKeyKind::kInteger: v = py::int_(p.integer); break;
      case ScalingKeyKind::kBoolean: v = py::bool_(p.boolean); break;
      case ScalingKeyKind::kNumberList: v = py::cast(p.list); break;
    }
    out.append(py::make_tuple(std::string(p.name), v));
  }
  return out;
}

py::object MultiAxisDict(const RopeConfig& rc) {
  if (!rc.multi_axis) return py::none();
  py::dict d;
  d["section_layout"] = std::string(ToString(rc.multi_axis->layout));
  d["rules"] = std::string(ToString(rc.multi_axis->rules));
  d["sections"] = rc.multi_axis->sections;
  d["num_components"] = rc.multi_axis->num_components;
  return d;
}

PositionScheme SchemeOfRopeConfig(RopeConfig rc) {
  PositionScheme s;
  s.kind = PositionKind::kRope;
  s.rope = std::move(rc);
  s.rope_spelling = "ggml params";
  return s;
}

// A model file or folder's scheme, as ModelScheme reads it from what OpenModel found (GGUF metadata,
// the config.json beside the weights, a llama2.c header).
// assume_layout: "" (none), or "half" / "interleaved" for a config.json of a model_type posenc does not
// know (HfConfigOptions::assume_layout); anything else is a ValueError naming it.
std::optional<RopePairing> AssumedLayout(const std::string& text) {
  if (text.empty()) return std::nullopt;
  RopePairing p;
  if (!ParseRopePairing(text, &p))
    throw py::value_error("assume_layout '" + text + "': expected 'half' or 'interleaved'");
  return p;
}

PositionScheme SchemeOfModel(const std::string& path, bool allow_default_freq_base, const std::string& layer_type,
                             const std::string& assume_layout) {
  ModelFile model = Take(OpenModel(path));
  ModelSchemeOptions o;
  o.allow_default_freq_base = allow_default_freq_base;
  o.layer_type = layer_type;
  o.assume_layout = AssumedLayout(assume_layout);
  return Take(ModelScheme(model, o));
}

void ApplyMultiAxisBatch(const RopeConfig& rc, int64_t seq_len, const py::list& x_views, const py::list& positions,
                         const std::string& precision, const std::string& what) {
  std::vector<HeadsView> x = Views(x_views, what.c_str());
  std::vector<Positions> pos = PositionRows(positions);
  if (pos.size() != x.size()) throw py::value_error("positions: batch size differs from " + what);
  MultiAxisPlan plan = Take(ComputeMultiAxisRope(rc, seq_len));
  auto pool = CurrentPool();
  MultiAxisRopeArgs args{rc.layout, &plan.freqs,          plan.pair_component,     plan.num_components,
                         {},        Precision(precision), RopeDirection::kForward, pool.get()};
  for (size_t b = 0; b < x.size(); ++b) {
    args.positions = Span(pos[b]);
    Check(ValidateMultiAxisRopeArgs(args, x[b], what.c_str()));
  }
  Status s;
  {
    py::gil_scoped_release release;
    for (size_t b = 0; b < x.size() && s.ok(); ++b) {
      args.positions = Span(pos[b]);
      s = ApplyMultiAxisRope(args, x[b]);
    }
  }
  Check(s);
}

using SchemeClass = py::class_<PositionScheme>;

// Scheme.from_*: a scheme from each reader.
void RegisterSchemeConstructors(SchemeClass& cls) {
  cls.def_static(
         "from_hf_json",
         [](const std::string& text, const std::string& source, const std::string& layer_type,
            const std::string& assume_layout, int64_t layer, const std::string& site) {
           HfConfigOptions o;
           o.layer_type = layer_type;
           o.assume_layout = AssumedLayout(assume_layout);
           o.layer = layer;
           o.site = site;
           return Take(ParseHfConfig(text, source, o));
         },
         py::arg("text"), py::arg("source"), py::arg("layer_type") = "", py::arg("assume_layout") = "",
         py::arg("layer") = -1, py::arg("site") = "")
      .def_static(
          "from_hf_config",
          [](const std::string& path, const std::string& layer_type, const std::string& assume_layout, int64_t layer,
             const std::string& site) {
            ModelSchemeOptions o;
            o.layer_type = layer_type;
            o.assume_layout = AssumedLayout(assume_layout);
            o.layer = layer;
            o.site = site;
            return Take(ConfigFileScheme(path, o));
          },
          py::arg("path"), py::arg("layer_type") = "", py::arg("assume_layout") = "", py::arg("layer") = -1,
          py::arg("site") = "")
      .def_static(
          "from_gguf",
          [](const std::string& path, bool allow_default) {
            GgufConfigOptions o;
            o.allow_default_freq_base = allow_default;
            return Take(LoadGgufConfig(path, o));
          },
          py::arg("path"), py::arg("allow_default_freq_base") = true)
      .def_static(
          "from_rope_json",
          [](const std::string& text, int64_t head_dim, const std::string& source) {
            return SchemeOfRopeConfig(Take(ParseRopeConfigJson(text, head_dim, source)));
          },
          py::arg("text"), py::arg("head_dim"), py::arg("source"))
      .def_static("from_model", &SchemeOfModel, py::arg("path"), py::arg("allow_default_freq_base") = true,
                  py::arg("layer_type") = "", py::arg("assume_layout") = "");
}

// The scheme's own fields (whatever its kind).
void RegisterSchemeFields(SchemeClass& cls) {
  cls.def_property_readonly("kind", [](const PositionScheme& s) { return std::string(ToString(s.kind)); })
      .def_readonly("model_type", &PositionScheme::model_type)
      .def_property_readonly("site", [](const PositionScheme& s) { return std::string(ToString(s.site)); })
      .def_property_readonly("sites",
                             [](const PositionScheme& s) {
                               std::vector<std::string> out;
                               for (RotarySite site : s.sites) out.emplace_back(ToString(site));
                               return out;
                             })
      .def_readonly("rotation_sign", &PositionScheme::rotation_sign)
      .def_property_readonly("qk_norm", [](const PositionScheme& s) { return std::string(ToString(s.qk_norm)); })
      .def_readonly("rope_keys", &PositionScheme::rope_keys)
      .def_readonly("rope_key", &PositionScheme::rope_key)
      .def_readonly("num_heads", &PositionScheme::num_heads)
      .def_readonly("num_kv_heads", &PositionScheme::num_kv_heads)
      .def_readonly("hidden_size", &PositionScheme::hidden_size)
      .def_readonly("max_position_embeddings", &PositionScheme::max_position_embeddings)
      .def_readonly("alibi_variant", &PositionScheme::alibi_variant)
      .def_readonly("alibi_bias_max", &PositionScheme::alibi_bias_max)
      .def_readonly("t5_num_buckets", &PositionScheme::t5_num_buckets)
      .def_readonly("t5_max_distance", &PositionScheme::t5_max_distance)
      .def_readonly("t5_bidirectional", &PositionScheme::t5_bidirectional)
      .def_readonly("sinusoidal_layout", &PositionScheme::sinusoidal_layout)
      .def_readonly("rope_spelling", &PositionScheme::rope_spelling)
      .def_readonly("num_layers", &PositionScheme::num_layers)
      .def_readonly("notes", &PositionScheme::notes);
}

// The RoPE of the scheme's site: layout, base, scaling, and a copy with another pairing.
void RegisterSchemeRope(SchemeClass& cls) {
  cls.def_property_readonly("pairing",
                            [](const PositionScheme& s) { return std::string(ToString(s.rope.layout.pairing)); })
      .def_property_readonly("head_dim", [](const PositionScheme& s) { return s.rope.layout.head_dim; })
      .def_property_readonly("rotary_start", [](const PositionScheme& s) { return s.rope.layout.rotary_start; })
      .def_property_readonly("rotary_dim", [](const PositionScheme& s) { return s.rope.layout.rotary_dim; })
      .def_property_readonly("base", [](const PositionScheme& s) { return s.rope.base; })
      .def_property_readonly("rope_max_position_embeddings",
                             [](const PositionScheme& s) { return s.rope.max_position_embeddings; })
      .def_property_readonly("scaling", [](const PositionScheme& s) { return ScalingDict(s.rope.scaling); })
      .def_property_readonly("scaling_params", [](const PositionScheme& s) { return ScalingParamsList(s.rope); })
      .def_property_readonly("frequencies_depend_on_seq_len",
                             [](const PositionScheme& s) { return FrequenciesDependOnSeqLen(s.rope); })
      .def_property_readonly("multi_axis", [](const PositionScheme& s) { return MultiAxisDict(s.rope); })
      .def_property_readonly("rope_notes", [](const PositionScheme& s) { return s.rope.notes; })
      .def_property_readonly("source", [](const PositionScheme& s) { return s.rope.source; })
      .def(
          "with_pairing",
          [](const PositionScheme& s, const std::string& p) {
            PositionScheme c = s;
            c.rope.layout.pairing = Pairing(p);
            return c;
          },
          py::arg("pairing"))
      .def("validate", [](const PositionScheme& s) { Check(ValidateRopeConfig(s.rope)); });
}

// Per layer: the RoPE / NoPE schedule and the query temperature.
void RegisterSchemeLayers(SchemeClass& cls) {
  cls.def("layer_schedule",
          [](const PositionScheme& s) {
            LayerSchedule l = Take(LayerRopeSchedule(s));
            std::vector<bool> rope(l.rope.begin(), l.rope.end());
            std::vector<bool> temp;
            for (int64_t i = 0; i < l.num_layers(); ++i) temp.push_back(QueryTemperatureApplies(s, l, i));
            return py::make_tuple(rope, l.rule, temp);
          })
      .def_property_readonly("attn_temperature",
                             [](const PositionScheme& s) {
                               py::dict d;
                               d["tuning"] = s.attn_temperature.tuning;
                               d["floor_scale"] = s.attn_temperature.floor_scale;
                               d["attn_scale"] = s.attn_temperature.attn_scale;
                               d["offset"] = s.attn_temperature.offset;
                               d["every_layer"] = s.attn_temperature.every_layer;
                               return d;
                             })
      .def(
          "attn_temperature_scales",
          [](const PositionScheme& s, const Positions& positions, bool exact) -> py::object {
            if (exact) return F64(Take(AttnTemperatureScalesExact(s.attn_temperature, Span(positions))));
            std::vector<float> v = Take(AttnTemperatureScales(s.attn_temperature, Span(positions)));
            py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
            if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
            return a;
          },
          py::arg("positions"), py::arg("exact") = false);
}

// The frequencies at a length, per pair, and multi-axis RoPE applied.
void RegisterSchemeFrequencies(SchemeClass& cls) {
  cls.def(
         "frequencies",
         [](const PositionScheme& s, int64_t seq_len) {
           RopeFrequencies f = Take(ComputeRopeFrequencies(s.rope, seq_len));
           return py::make_tuple(F64(f.inv_freq), f.attention_scaling);
         },
         py::arg("seq_len"))
      .def(
          "pairs",
          [](const PositionScheme& s, int64_t seq_len) {  // DescribeRopePairs: inspect's per-pair table
            RopePairTable t = Take(DescribeRopePairs(s.rope, seq_len));
            py::list out;
            for (const RopePairInfo& q : t.pairs) {
              py::dict p;
              p["pair"] = q.pair;
              p["dims"] = py::make_tuple(q.first_dim, q.second_dim);
              p["frequency"] = q.frequency;
              p["wavelength"] = q.wavelength ? py::cast(*q.wavelength) : py::none();
              if (q.divisor) p["divisor"] = *q.divisor;
              p["regime"] = std::string(ToString(q.regime));
              if (q.component >= 0) p["component"] = q.component;
              out.append(p);
            }
            return py::make_tuple(out, t.attention_scaling);
          },
          py::arg("seq_len"))
      .def("unscaled_frequencies", [](const PositionScheme& s) { return F64(UnscaledFrequencies(s.rope)); })
      .def("nominal_factor", [](const PositionScheme& s) { return NominalScalingFactor(s.rope); })
      .def(
          "pair_regimes",
          [](const PositionScheme& s, int64_t seq_len) {
            RopeFrequencies f = Take(ComputeRopeFrequencies(s.rope, seq_len));
            std::vector<std::string> out;
            for (PairRegime r : ClassifyPairs(s.rope, f)) out.emplace_back(ToString(r));
            return out;
          },
          py::arg("seq_len"))
      .def(
          "multi_axis_plan",
          [](const PositionScheme& s, int64_t seq_len) {
            MultiAxisPlan p = Take(ComputeMultiAxisRope(s.rope, seq_len));
            return py::make_tuple(F64(p.freqs.inv_freq), p.freqs.attention_scaling, I64(p.pair_component),
                                  p.num_components);
          },
          py::arg("seq_len"))
      .def(
          "apply_multi_axis",
          [](const PositionScheme& s, int64_t seq_len, const py::list& x, const py::list& positions,
             const std::string& precision,
             const std::string& what) { ApplyMultiAxisBatch(s.rope, seq_len, x, positions, precision, what); },
          py::arg("seq_len"), py::arg("views"), py::arg("positions"), py::arg("precision"), py::arg("what"));
}

}  // namespace

void RegisterScheme(py::module_& m) {
  SchemeClass cls(m, "Scheme");
  RegisterSchemeConstructors(cls);
  RegisterSchemeFields(cls);
  RegisterSchemeRope(cls);
  RegisterSchemeLayers(cls);
  RegisterSchemeFrequencies(cls);
}

}  // namespace posenc::python
