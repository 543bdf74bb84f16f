// Reference scaled dot-product attention with an online softmax over key tiles.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/checked_math.hpp"
#include "posenc/math/attention.hpp"

namespace posenc {
namespace {

Status CheckHeads(const Array& a, const char* what) {
  if (a.dtype() != DType::kF32 || a.ndim() != 3)
    return InvalidArgumentError(fmt::format("attention: {} must be float32 [tokens, heads, head_dim], got {} {}", what,
                                            ToString(a.dtype()), ShapeToString(a.shape())));
  return OkStatus();
}

// A T5 or Shaw bias's tables: given (else `missing`), valid, and of q's size where they meet it (T5's
// heads, Shaw's head_dim: `size`), else `mismatch` with the tables' size and q's.
template <typename Tables>
Status CheckBiasTables(const Tables* tables, int64_t (Tables::*size)() const, int64_t q_size, const char* missing,
                       std::string_view mismatch) {
  if (tables == nullptr) return InvalidArgumentError(missing);
  POSENC_RETURN_IF_ERROR(tables->Validate());
  if ((tables->*size)() != q_size)
    return InvalidArgumentError(fmt::format(fmt::runtime(mismatch), (tables->*size)(), q_size));
  return OkStatus();
}

Status Validate(const Array& q, const Array& k, const Array& v, const AttentionOptions& o) {
  POSENC_RETURN_IF_ERROR(CheckHeads(q, "q"));
  POSENC_RETURN_IF_ERROR(CheckHeads(k, "k"));
  POSENC_RETURN_IF_ERROR(CheckHeads(v, "v"));
  const std::string shapes =
      fmt::format("q {} k {} v {}", ShapeToString(q.shape()), ShapeToString(k.shape()), ShapeToString(v.shape()));
  if (k.shape() != v.shape()) return InvalidArgumentError("attention: k and v shapes differ: " + shapes);
  if (q.dim(2) != k.dim(2)) return InvalidArgumentError("attention: q and k head_dim differ: " + shapes);
  if (q.dim(2) < 1) return InvalidArgumentError("attention: head_dim must be >= 1: " + shapes);
  if (k.dim(1) < 1 || q.dim(1) % k.dim(1) != 0)
    return InvalidArgumentError(fmt::format("attention: {} query heads are not a multiple of {} key/value heads: {}",
                                            q.dim(1), k.dim(1), shapes));
  if (q.dim(0) > 0 && k.dim(0) == 0) return InvalidArgumentError("attention: no keys for the queries: " + shapes);
  if (o.query_offset < 0)
    return InvalidArgumentError(fmt::format("attention: query_offset {} must be >= 0", o.query_offset));
  if (!std::isfinite(o.scale) || o.scale < 0.0)
    return InvalidArgumentError(
        fmt::format("attention: scale {} must be finite and >= 0 (0 = 1/sqrt(head_dim))", o.scale));
  if (o.key_tile < 1) return InvalidArgumentError(fmt::format("attention: key_tile {} must be >= 1", o.key_tile));
  const AttentionBias& b = o.bias;
  switch (b.kind) {
    case AttentionBiasKind::kNone: break;
    case AttentionBiasKind::kAlibi:
      if (static_cast<int64_t>(b.alibi_slopes.size()) != q.dim(1))
        return InvalidArgumentError(
            fmt::format("attention: {} alibi slopes for {} query heads", b.alibi_slopes.size(), q.dim(1)));
      break;
    case AttentionBiasKind::kT5:
      return CheckBiasTables(b.t5, &T5RelativeBias::num_heads, q.dim(1), "attention: t5 bias without a table",
                             "attention: t5 table has {} heads, q has {}");
    case AttentionBiasKind::kShaw:
      return CheckBiasTables(b.shaw, &ShawRelativeEmbeddings::head_dim, q.dim(2), "attention: shaw bias without tables",
                             "attention: shaw tables have head_dim {}, q has {}");
  }
  return OkStatus();
}

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

}  // namespace

std::string_view ToString(AttentionBiasKind k) {
  switch (k) {
    case AttentionBiasKind::kNone: return "none";
    case AttentionBiasKind::kAlibi: return "alibi";
    case AttentionBiasKind::kT5: return "t5";
    case AttentionBiasKind::kShaw: return "shaw";
  }
  return "?";
}

Result<Array> AttentionReference(const Array& q, const Array& k, const Array& v, const AttentionOptions& options) {
  POSENC_RETURN_IF_ERROR(Validate(q, k, v, options));
  const int64_t tq = q.dim(0), num_heads = q.dim(1), d = q.dim(2);
  const int64_t tk = k.dim(0), num_kv_heads = k.dim(1);
  const int64_t group = num_heads / num_kv_heads;
  const double scale = options.scale > 0.0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(d));
  const AttentionBias& bias = options.bias;
  const ShawRelativeEmbeddings* shaw = bias.kind == AttentionBiasKind::kShaw ? bias.shaw : nullptr;

  POSENC_ASSIGN_OR_RETURN(Array out, Array::Zeros(DType::kF32, {tq, num_heads, d}));
  const float* qd = q.data<float>();
  const float* kd = k.data<float>();
  const float* vd = v.data<float>();
  float* od = out.data<float>();

  std::vector<double> scores(static_cast<size_t>(options.key_tile));
  std::vector<double> acc(static_cast<size_t>(d));
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t qpos = options.query_offset + i;
    // The causal mask just shortens the key range: key 0 is always visible, so no row is empty.
    const int64_t key_end = options.causal ? std::min(tk, qpos + 1) : tk;
    for (int64_t h = 0; h < num_heads; ++h) {
      const float* qv = qd + (i * num_heads + h) * d;
      const int64_t g = h / group;
      double running_max = -std::numeric_limits<double>::infinity();
      double running_sum = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j0 = 0; j0 < key_end; j0 += options.key_tile) {
        const int64_t j1 = std::min(key_end, j0 + options.key_tile);
        // Scores of this tile, bias included.
        double tile_max = -std::numeric_limits<double>::infinity();
        for (int64_t j = j0; j < j1; ++j) {
          const float* kv = kd + (j * num_kv_heads + g) * d;
          double s = Dot(qv, kv, d);
          if (shaw != nullptr) s += Dot(qv, shaw->key_table.data<float>() + shaw->Index(qpos, j) * d, d);
          s *= scale;
          if (bias.kind == AttentionBiasKind::kAlibi)
            s += AlibiBiasAt(bias.alibi_slopes[static_cast<size_t>(h)], qpos, j);
          if (bias.kind == AttentionBiasKind::kT5) s += bias.t5->BiasAt(h, qpos, j);
          scores[static_cast<size_t>(j - j0)] = s;
          tile_max = std::max(tile_max, s);
        }
        // Online softmax: rescale what was summed under the old maximum to the new one.
        const double new_max = std::max(running_max, tile_max);
        const double correction = std::exp(running_max - new_max);  // 0 on the first tile
        running_sum *= correction;
        for (double& a : acc) a *= correction;
        for (int64_t j = j0; j < j1; ++j) {
          const double p = std::exp(scores[static_cast<size_t>(j - j0)] - new_max);
          running_sum += p;
          const float* vv = vd + (j * num_kv_heads + g) * d;
          for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p * vv[c];
          if (shaw != nullptr) {
            const float* av = shaw->value_table.data<float>() + shaw->Index(qpos, j) * d;
            for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p * av[c];
          }
        }
        running_max = new_max;
      }
      float* o = od + (i * num_heads + h) * d;
      for (int64_t c = 0; c < d; ++c) o[c] = static_cast<float>(acc[static_cast<size_t>(c)] / running_sum);
    }
  }
  return out;
}

Result<Array> ProjectHeads(const Array& x, std::span<const float> w, int64_t heads, int64_t head_dim) {
  if (x.dtype() != DType::kF32 || x.ndim() != 2)
    return InvalidArgumentError(fmt::format("project: x must be float32 [tokens, d_model], got {} {}",
                                            ToString(x.dtype()), ShapeToString(x.shape())));
  const int64_t t_count = x.dim(0), dm = x.dim(1);
  if (heads < 1 || head_dim < 1)
    return InvalidArgumentError(fmt::format("project: heads {} and head_dim {} must be >= 1", heads, head_dim));
  int64_t cols = 0, values = 0;
  if (!CheckedMul(heads, head_dim, &cols) || !CheckedMul(dm, cols, &values) || static_cast<int64_t>(w.size()) != values)
    return InvalidArgumentError(fmt::format("project: w holds {} values, not d_model {} x heads {} x head_dim {}",
                                            w.size(), dm, heads, head_dim));
  POSENC_ASSIGN_OR_RETURN(Array out, Array::Zeros(DType::kF32, {t_count, heads, head_dim}));
  const float* xd = x.data<float>();
  float* od = out.data<float>();
  for (int64_t t = 0; t < t_count; ++t)
    for (int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (int64_t i = 0; i < dm; ++i) s += double{xd[t * dm + i]} * w[static_cast<size_t>(i * cols + c)];
      od[t * cols + c] = static_cast<float>(s);
    }
  return out;
}

}  // namespace posenc
