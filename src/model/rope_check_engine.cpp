// An EngineModel rendered as the dump it would give, compared with a dump, and an element located
// (rope_check_engine.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "model/rope_check_engine.hpp"

namespace posenc::rope_check_internal {

double UnitRoundoff(DType t) {
  switch (t) {
    case DType::kF16: return 0x1p-11;
    case DType::kBF16: return 0x1p-8;
    default: return 0x1p-24;
  }
}

namespace {

float RoundF16(float v) { return F16ToF32(F32ToF16(v)); }
float RoundBF16(float v) { return BF16ToF32(F32ToBF16(v)); }

// cos and sin (with the scaling) of one pair at one position as the engine computes them, and the angle.
struct CosSin {
  double c, s, angle;
};
CosSin EngineCosSin(const EngineModel& e, int64_t pos, double w) {
  float p = static_cast<float>(pos);
  if (e.precision == Precision::kPosF16) p = RoundF16(p);
  if (e.precision == Precision::kPosBF16) p = RoundBF16(p);
  float a = p * static_cast<float>(w);
  if (e.precision == Precision::kAngleF16) a = RoundF16(a);
  if (e.precision == Precision::kAngleBF16) a = RoundBF16(a);
  const float sc = static_cast<float>(e.scaling);
  float c = static_cast<float>(std::cos(static_cast<double>(a))) * sc;
  float s = static_cast<float>(std::sin(static_cast<double>(a))) * sc;
  if (e.precision == Precision::kCosSinF16) c = RoundF16(c), s = RoundF16(s);
  if (e.precision == Precision::kCosSinBF16) c = RoundBF16(c), s = RoundBF16(s);
  if (e.negate_sin) s = -s;
  if (e.swap_cos_sin) std::swap(c, s);
  return {c, s, static_cast<double>(a)};
}

// The slack for a float32 angle of pair j computed another way than posenc's (radians): 2^-21 (1 +
// |angle|) for the position, the frequency and their product each rounded to float32 and cos/sin
// rounded, plus j 2^-22 |angle| for ggml's frequency powers, theta *= theta_scale once per pair in
// float32 (each step and theta_scale itself rounded: about j 2^-22 relative by pair j).
double AngleSlack(int64_t j, double angle) {
  return 0x1p-21 * (1 + std::abs(angle)) + static_cast<double>(j) * 0x1p-22 * std::abs(angle);
}

}  // namespace

int64_t PositionOf(const EngineModel& e, int64_t tokens, int64_t t, int64_t pair) {
  const int64_t comp = e.pair_component.empty() ? 0 : e.pair_component[static_cast<size_t>(pair)];
  return e.positions[static_cast<size_t>(comp * tokens + t)];
}

Rendered Render(const EngineModel& e, const RopeDump& d) {
  Rendered r;
  const double u = UnitRoundoff(d.dtype);
  const int64_t pairs = e.layout.num_pairs();
  switch (d.kind) {
    case RopeDumpKind::kRotated: {
      const int64_t T = d.tokens, H = d.heads, W = d.width;
      r.want.assign(d.before.begin(), d.before.end());
      r.tol.resize(r.want.size());
      for (size_t i = 0; i < r.want.size(); ++i) r.tol[i] = u * std::abs(r.want[i]);
      std::vector<CosSin> cs(static_cast<size_t>(pairs));
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < pairs; ++j)
          cs[j] = EngineCosSin(e, PositionOf(e, T, t, j), e.inv_freq[static_cast<size_t>(j)]);
        for (int64_t h = 0; h < H; ++h) {
          const size_t base = static_cast<size_t>((t * H + h) * W);
          for (int64_t j = 0; j < pairs; ++j) {
            const size_t i1 = base + static_cast<size_t>(e.layout.first(j));
            const size_t i2 = base + static_cast<size_t>(e.layout.second(j));
            const double x1 = d.before[i1], x2 = d.before[i2];
            const CosSin& k = cs[static_cast<size_t>(j)];
            r.want[i1] = x1 * k.c - x2 * k.s;
            r.want[i2] = x2 * k.c + x1 * k.s;
            const double tol =
                std::sqrt(x1 * x1 + x2 * x2) * std::abs(e.scaling) * (4 * u + AngleSlack(j, k.angle)) + 1e-30;
            r.tol[i1] = r.tol[i2] = tol;
          }
        }
      }
      return r;
    }
    case RopeDumpKind::kCosSin: {
      // cos then sin, each [T, width]; the width is R (both dims of each pair) or R/2.
      const int64_t T = d.tokens, W = d.width;
      r.want.resize(static_cast<size_t>(2 * T * W));
      r.tol.resize(r.want.size());
      const double up = std::max(u, 0x1p-24);
      const bool full = W == 2 * pairs;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < pairs; ++j) {
          const CosSin k = EngineCosSin(e, PositionOf(e, T, t, j), e.inv_freq[static_cast<size_t>(j)]);
          const double tol = std::abs(e.scaling) * (2 * up + AngleSlack(j, k.angle)) + 1e-30;
          std::vector<int64_t> cols;
          if (!full) {
            cols = {j};
          } else if (e.layout.pairing == RopePairing::kHalf) {
            cols = {j, j + pairs};
          } else {
            cols = {2 * j, 2 * j + 1};
          }
          for (int64_t col : cols) {
            const size_t ic = static_cast<size_t>(t * W + col), is = ic + static_cast<size_t>(T * W);
            r.want[ic] = k.c;
            r.want[is] = k.s;
            r.tol[ic] = r.tol[is] = tol;
          }
        }
      return r;
    }
    case RopeDumpKind::kInvFreq: {
      r.want.assign(e.inv_freq.begin(), e.inv_freq.end());
      for (size_t j = 0; j < r.want.size(); ++j)
        r.tol.push_back(std::abs(r.want[j]) * (0x1p-21 + static_cast<double>(j) * 0x1p-22 + 2 * u) + 1e-30);
      return r;
    }
  }
  return r;
}

// The dump's values in the rendered order.
std::vector<double> Got(const RopeDump& d) {
  switch (d.kind) {
    case RopeDumpKind::kRotated: return {d.after.begin(), d.after.end()};
    case RopeDumpKind::kCosSin: {
      std::vector<double> g(d.cos.begin(), d.cos.end());
      g.insert(g.end(), d.sin.begin(), d.sin.end());
      return g;
    }
    case RopeDumpKind::kInvFreq: return {d.inv_freq.begin(), d.inv_freq.end()};
  }
  return {};
}

Comparison Compare(const std::vector<double>& got, const Rendered& r, std::vector<bool>* over_mask) {
  Comparison c;
  if (over_mask) over_mask->assign(got.size(), false);
  for (size_t i = 0; i < got.size(); ++i) {
    const double ratio = std::abs(got[i] - r.want[i]) / r.tol[i];
    if (ratio > 1.0) {
      ++c.over;
      if (over_mask) (*over_mask)[i] = true;
    }
    if (ratio > c.max_ratio || !std::isfinite(ratio)) {
      c.max_ratio = std::isfinite(ratio) ? ratio : std::numeric_limits<double>::infinity();
      c.worst = i;
    }
  }
  return c;
}

Where Locate(const RopeDump& d, const RotaryLayout& layout, size_t i) {
  Where w;
  const int64_t pairs = layout.num_pairs();
  switch (d.kind) {
    case RopeDumpKind::kRotated: {
      const int64_t idx = static_cast<int64_t>(i);
      w.dim = idx % d.width;
      w.head = (idx / d.width) % d.heads;
      w.token = idx / (d.width * d.heads);
      const int64_t k = w.dim - layout.rotary_start;  // within the window when in [0, R)
      if (k >= 0 && k < layout.rotary_dim)
        w.pair = layout.pairing == RopePairing::kHalf ? k % pairs : k / 2;
      return w;
    }
    case RopeDumpKind::kCosSin: {
      const int64_t idx = static_cast<int64_t>(i) % (d.tokens * d.width);
      w.token = idx / d.width;
      const int64_t col = idx % d.width;
      w.dim = col;
      w.pair = d.width == pairs ? col : (layout.pairing == RopePairing::kHalf ? col % pairs : col / 2);
      return w;
    }
    case RopeDumpKind::kInvFreq: w.pair = static_cast<int64_t>(i); return w;
  }
  return w;
}

Result<EngineModel> EngineOf(const RopeConfig& config, const RopeDump& d, int64_t seq_len,
                             std::vector<int64_t> positions) {
  EngineModel e;
  if (d.kind == RopeDumpKind::kRotated) {
    POSENC_ASSIGN_OR_RETURN(e.layout, RotaryLayoutForInput(config.layout, d.width, d.what));
  } else {
    e.layout = config.layout;
  }
  POSENC_ASSIGN_OR_RETURN(SiteFrequencies f, ComputeSiteFrequencies(config, seq_len));
  e.inv_freq = std::move(f.freqs.inv_freq);
  e.scaling = f.freqs.attention_scaling;
  e.pair_component = std::move(f.pair_component);
  e.num_components = f.num_components;
  e.positions = std::move(positions);
  return e;
}

}  // namespace posenc::rope_check_internal
