// _posenc: absolute and relative schemes (sinusoidal, ALiBi, T5, Shaw) and vision-language position rows.
#include "binding.hpp"

#include <tuple>

namespace posenc::python {
namespace {}  // namespace

void RegisterBias(py::module_& m) {
  m.def(
      "sinusoidal_table",
      [](const Positions& positions, int64_t d_model, const std::string& layout, double base) {
        SinusoidalLayout l;
        if (!ParseSinusoidalLayout(layout, &l))
          throw py::value_error("layout '" + layout + "' (expected interleaved or concat)");
        return ToNumpy(Take(SinusoidalTable(Span(positions), d_model, l, base)));
      },
      py::arg("positions"), py::arg("d_model"), py::arg("layout"), py::arg("base"));
  m.def(
      "alibi_slopes",
      [](int64_t num_heads, const std::string& variant, double bias_max) {
        AlibiVariant v;
        if (!ParseAlibiVariant(variant, &v)) throw py::value_error("variant '" + variant + "' (expected bloom or mpt)");
        return F64(Take(AlibiSlopes(num_heads, v, bias_max)));
      },
      py::arg("num_heads"), py::arg("variant"), py::arg("bias_max"));
  m.def(
      "alibi_bias",
      [](const std::vector<double>& slopes, int64_t q_len, int64_t k_len, int64_t q_offset) {
        return ToNumpy(Take(AlibiBias(slopes, q_len, k_len, q_offset)));
      },
      py::arg("slopes"), py::arg("query_length"), py::arg("key_length"), py::arg("query_offset"));
  m.def(
      "t5_buckets",
      [](const Positions& rel, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
        return I64(Take(T5RelativeBuckets(Span(rel), T5BucketParams{bidirectional, num_buckets, max_distance})));
      },
      py::arg("relative_positions"), py::arg("bidirectional"), py::arg("num_buckets"), py::arg("max_distance"));
  m.def(
      "t5_bias",
      [](py::array_t<float, py::array::c_style> table, int64_t q_len, int64_t k_len, int64_t q_offset,
         bool bidirectional, int64_t num_buckets, int64_t max_distance) {
        T5RelativeBias bias;
        bias.params = {bidirectional, num_buckets, max_distance};
        if (table.ndim() != 2) throw py::value_error("table: shape is not [num_buckets, heads]");
        bias.table = Take(Array::Zeros(DType::kF32, {table.shape(0), table.shape(1)}));
        std::memcpy(bias.table.bytes(), table.data(), bias.table.nbytes());
        Check(bias.Validate());
        if (q_len < 0 || k_len < 0) throw py::value_error("query_length and key_length must be >= 0");
        const int64_t h = bias.num_heads();
        py::array_t<float> out({h, q_len, k_len});
        float* o = out.mutable_data();
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t i = 0; i < q_len; ++i)
            for (int64_t j = 0; j < k_len; ++j) *o++ = bias.BiasAt(hh, q_offset + i, j);
        return out;
      },
      py::arg("table"), py::arg("query_length"), py::arg("key_length"), py::arg("query_offset"),
      py::arg("bidirectional"), py::arg("num_buckets"), py::arg("max_distance"));
  // vision-language position rows
  m.def(
      "text_vision_positions",
      [](const std::vector<std::tuple<bool, int64_t, int64_t, int64_t, int64_t, float, float>>& spans, int64_t merge,
         int64_t start) {
        std::vector<PositionSpan> v;
        v.reserve(spans.size());
        for (const auto& [vision, n, t, h, w, spt, tps] : spans)
          v.push_back(vision ? PositionSpan::Vision(t, h, w, spt, tps) : PositionSpan::Text(n));
        TextVisionPositions r = Take(BuildTextVisionPositions(v, merge, start));
        py::array_t<int64_t> out({int64_t{3}, r.tokens});
        if (!r.positions.empty()) std::memcpy(out.mutable_data(), r.positions.data(), r.positions.size() * 8);
        return py::make_tuple(out, r.next_position);
      },
      py::arg("spans"), py::arg("spatial_merge_size"), py::arg("start"));
  m.def(
      "vision_patch_positions",
      [](int64_t t, int64_t h, int64_t w, int64_t merge) {
        std::vector<int64_t> p = Take(BuildVisionPatchPositions(t, h, w, merge));
        py::array_t<int64_t> out({int64_t{2}, static_cast<int64_t>(p.size() / 2)});
        if (!p.empty()) std::memcpy(out.mutable_data(), p.data(), p.size() * 8);
        return out;
      },
      py::arg("grid_t"), py::arg("grid_h"), py::arg("grid_w"), py::arg("spatial_merge_size"));
  m.def(
      "shaw_indices",
      [](int64_t q_len, int64_t k_len, int64_t q_offset, int64_t max_relative_position) {
        if (q_len < 0 || k_len < 0) throw py::value_error("query_length and key_length must be >= 0");
        if (max_relative_position < 0)
          throw py::value_error("max_relative_position " + std::to_string(max_relative_position) + " is negative");
        ShawRelativeEmbeddings s;
        s.max_relative_position = max_relative_position;
        py::array_t<int64_t> out({q_len, k_len});
        int64_t* o = out.mutable_data();
        for (int64_t i = 0; i < q_len; ++i)
          for (int64_t j = 0; j < k_len; ++j) *o++ = s.Index(q_offset + i, j);
        return out;
      },
      py::arg("query_length"), py::arg("key_length"), py::arg("query_offset"), py::arg("max_relative_position"));
}

}  // namespace posenc::python
