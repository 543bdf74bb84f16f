#include "posenc/math/rope_pairs.hpp"

#include <numbers>
#include <utility>

#include "posenc/math/multi_axis.hpp"

namespace posenc {

Result<RopePairTable> DescribeRopePairs(const RopeConfig& config, int64_t seq_len) {
  POSENC_ASSIGN_OR_RETURN(RopeFrequencies f, ComputeRopeFrequencies(config, seq_len));
  std::vector<int64_t> component;
  if (config.multi_axis.has_value()) {
    POSENC_ASSIGN_OR_RETURN(MultiAxisPlan plan, ComputeMultiAxisRope(config, seq_len));
    component = std::move(plan.pair_component);
    f = std::move(plan.freqs);
  }
  const std::vector<PairRegime> regimes = ClassifyPairs(config, f);
  const std::vector<double> plain = UnscaledFrequencies(config);
  RopePairTable t;
  t.attention_scaling = f.attention_scaling;
  t.pairs.reserve(f.inv_freq.size());
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    const auto n = static_cast<int64_t>(i);
    RopePairInfo p;
    p.pair = n;
    p.first_dim = config.layout.first(n);
    p.second_dim = config.layout.second(n);
    p.frequency = f.inv_freq[i];
    if (p.frequency > 0) {
      p.wavelength = 2.0 * std::numbers::pi / p.frequency;
      if (i < plain.size()) p.divisor = plain[i] / p.frequency;
    }
    p.regime = regimes[i];
    if (i < component.size()) p.component = component[i];
    t.pairs.push_back(p);
  }
  return t;
}

}  // namespace posenc
