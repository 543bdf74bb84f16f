// Cache-resident RoPE timings for comparing two builds of the kernels (a code change's A/B), one
// thread, in place, Llama-3 head_dim 128, every dtype and layout:
//   k8     [8, 8, 128] consecutive positions (keys of 8 tokens: L1-resident)
//   k64    [64, 8, 128] consecutive positions (L2-resident)
//   dec64  [64, 32, 128] at scattered positions in an 8192-position table (one decode step)
// Prints `case dtype layout median_us` per line, medians of 15 samples of repeated calls. The host's
// state moves single runs by 10-25%, so compare builds with bench/alternate_builds.py, which runs two
// binaries in turn and takes medians over rounds:
//   python3 bench/alternate_builds.py OLD/bench/rope_resident NEW/bench/rope_resident --rounds 4
// An argument caps the SIMD target (build/bench/rope_resident AVX2; alternate_builds.py --args AVX2).
// These are small calls in cache: a change that wins here must still win on `posenc bench`'s rows
// (rotating float16 heads innermost took 0.93-0.985x the time here and made the 32-head prefill
// rows 25-30% slower there; docs/PERFORMANCE.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/posenc.hpp"
#include "probe_target.hpp"

int main(int argc, char** argv) {
  using namespace posenc;
  // build/bench/rope_resident [TARGET]: cap posenc's SIMD target (AVX2, AVX3, ...; `posenc info`).
  if (!bench::CapSimdTargetFromArgs(argc, argv)) return 2;
  struct Case {
    const char* name;
    int64_t tokens, heads;
    bool scattered;
  };
  const Case cases[] = {{"k8", 8, 8, false}, {"k64", 64, 8, false}, {"dec64", 64, 32, true}};
  constexpr int64_t kD = 128, kPositions = 8192;
  const RopeTable table =
      RopeTable::Build(DefaultRopeFrequencies(kD, 500000.0).value(), kPositions, RopePrecision::kReference).value();
  std::mt19937_64 rng(1);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (RopePairing pairing : {RopePairing::kHalf, RopePairing::kInterleaved})
      for (const Case& c : cases) {
        const size_t count = static_cast<size_t>(c.tokens * c.heads * kD), es = SizeOf(dtype);
        std::vector<uint8_t> buf(count * es);
        for (size_t i = 0; i < count; ++i) {  // values in [0.5, 1.5): no subnormals, no overflow
          const float v = 0.5f + static_cast<float>(rng() % 1000) / 1000.0f;
          if (dtype == DType::kF32) std::memcpy(&buf[i * 4], &v, 4);
          if (dtype == DType::kF16) {
            const f16_t h = F32ToF16(v);
            std::memcpy(&buf[i * 2], &h, 2);
          }
          if (dtype == DType::kBF16) {
            const bf16_t h = F32ToBF16(v);
            std::memcpy(&buf[i * 2], &h, 2);
          }
        }
        std::vector<int64_t> positions(static_cast<size_t>(c.tokens));
        for (size_t t = 0; t < positions.size(); ++t)
          positions[t] = c.scattered ? static_cast<int64_t>(rng() % kPositions) : static_cast<int64_t>(t);
        RopeArgs args{RotaryLayout{pairing, kD, 0, kD}, &table, positions};
        args.parallel = &SerialRunner();
        const HeadsView view = HeadsView::Dense(buf.data(), dtype, c.tokens, c.heads, kD);
        const int reps = static_cast<int>(std::max<int64_t>(20, 400000 / (c.tokens * c.heads)));
        std::vector<double> us;
        for (int sample = 0; sample < 15; ++sample) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int r = 0; r < reps; ++r) {
            // Forward then backward keeps the values where they started.
            args.direction = (r % 2 == 0) ? RopeDirection::kForward : RopeDirection::kBackward;
            if (!ApplyRope(args, view).ok()) {
              std::fprintf(stderr, "ApplyRope failed\n");
              return 1;
            }
          }
          us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps);
        }
        std::sort(us.begin(), us.end());
        std::printf("%s %s %s %.3f\n", c.name, ToString(dtype).data(),
                    pairing == RopePairing::kHalf ? "half" : "interleaved", us[us.size() / 2]);
      }
  return 0;
}
