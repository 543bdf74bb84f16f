// RoPE (RoFormer, Su et al. 2021): rotate query and key heads in 2-D planes by position * frequency.
//
// For pair i with frequency w_i (radians per position) at position m, the two coordinates (a, b) of
// the pair become (a cos mw_i - b sin mw_i, a sin mw_i + b cos mw_i), times an attention scaling that
// YaRN and LongRoPE apply to cos and sin. Values are never rotated. Where the pairs sit in a head is a
// `RotaryLayout`: `kHalf` pairs x[s+i] with x[s+i+R/2] (GPT-NeoX, Hugging Face Llama), `kInterleaved`
// pairs x[s+2i] with x[s+2i+1] (GPT-J, Meta's Llama, RoFormer), over a window of R = rotary_dim
// dims starting at s = rotary_start; dims outside the window pass through unchanged.
//
// Example:
//   RotaryLayout layout{RopePairing::kHalf, /*head_dim=*/128, /*rotary_start=*/0, /*rotary_dim=*/128};
//   auto freqs = DefaultRopeFrequencies(128, 500000.0).value();      // theta_i = base^(-2i/R)
//   auto table = RopeTable::Build(freqs, 8192, RopePrecision::kReference).value();
//   Status s = ApplyRopeQK({layout, &table, positions}, q_view, k_view);  // in place
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/array.hpp"
#include "posenc/status.hpp"

namespace posenc {

class ParallelRunner;  // posenc/parallel.hpp

enum class RopePairing { kHalf, kInterleaved };
// "half", "interleaved"
std::string_view ToString(RopePairing p);
// Accepts "half" / "neox" and "interleaved" / "normal" / "gptj".
bool ParseRopePairing(std::string_view s, RopePairing* out);

// How angles become cos/sin. kReference: float32(position) * float32(inv_freq) in float32, then
// float32 cos/sin, as PyTorch (Hugging Face) and ggml compute them, so a model sees what it saw in
// training; the angle error grows like position * 2^-24. kExact: angle = position * inv_freq in
// float64, cos/sin in float64, rounded once to float32 (ComputeCosSin is the definition): within
// 2e-6 * max|x| of the float64 truth for every position below 2^31. A kExact RopeTable builds its rows
// by one float64 angle addition from anchors every 32 positions (cheaper than a cos and sin per entry):
// each entry is within scaling * (2^-52 |pos * w| + 2^-50) plus one float32 ulp of ComputeCosSin's
// (equal at the anchors), which keeps the same bound.
enum class RopePrecision { kReference, kExact };
std::string_view ToString(RopePrecision p);
bool ParseRopePrecision(std::string_view s, RopePrecision* out);

enum class RopeDirection { kForward, kBackward };  // backward rotates by -angle (the gradient)

// Where the rotated pairs sit in one head.
struct RotaryLayout {
  RopePairing pairing = RopePairing::kHalf;
  int64_t head_dim = 0;
  int64_t rotary_start = 0;  // first rotated dim (DeepSeek MLA puts the rotary part last)
  int64_t rotary_dim = 0;    // number of rotated dims, even; num_pairs = rotary_dim / 2

  int64_t num_pairs() const { return rotary_dim / 2; }
  // The two dims (within the head) of pair i.
  int64_t first(int64_t i) const { return rotary_start + (pairing == RopePairing::kHalf ? i : 2 * i); }
  int64_t second(int64_t i) const { return rotary_start + (pairing == RopePairing::kHalf ? i + rotary_dim / 2 : 2 * i + 1); }
  // kInvalidArgument naming the field: head_dim <= 0 or > kMaxRopeHeadDim, odd or non-positive
  // rotary_dim, window past head_dim.
  Status Validate() const;
};

// Per-pair angular frequencies (radians per position, float64) and the factor applied to cos and sin.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_scaling = 1.0;
};

// The seed's formula: inv_freq[i] = base^(-2i / rotary_dim), i = 0 .. rotary_dim/2 - 1.
// kInvalidArgument for an odd or non-positive rotary_dim, or a base that is not finite and > 0.
Result<RopeFrequencies> DefaultRopeFrequencies(int64_t rotary_dim, double base);

// Largest head_dim a RotaryLayout accepts: 2^20, far past any model's (64-576), so that a hostile
// config cannot make frequency and table vectors of billions of entries.
inline constexpr int64_t kMaxRopeHeadDim = int64_t{1} << 20;

// Largest position RoPE accepts (exclusive): 2^31, the range over which kExact keeps its bound.
inline constexpr int64_t kMaxRopePosition = int64_t{1} << 31;

// Largest |inv_freq| (radians per token) RoPE accepts: the float32 angle of every position below
// kMaxRopePosition stays finite (FLT_MAX / 2^31, about 1.6e29; real models are at most ~1).
inline constexpr double kMaxRopeInvFreq = 3.4028234663852886e38 / 2147483648.0;

// OK when every inv_freq is finite with |inv_freq| <= kMaxRopeInvFreq and attention_scaling is
// finite; else kInvalidArgument naming `what`, the pair and its value.
Status ValidateRopeFrequencies(const RopeFrequencies& freqs, std::string_view what);

// cos and sin of every pair at position `pos`, times attention_scaling, in the given precision.
// This is the one definition of both precisions; tables and on-the-fly paths call it.
void ComputeCosSin(const RopeFrequencies& freqs, int64_t pos, RopePrecision precision, float* cos_out, float* sin_out);

namespace detail {
// Storage for RopeTable's rows. Allocations of 2 MiB or more are 2 MiB-aligned and, on Linux, advised
// to transparent huge pages (madvise MADV_HUGEPAGE; advice only, ignored where THP is off), so decode's
// scattered cos/sin rows cost no TLB miss and page walk each (a cold [64, 32, 128] float16 decode step
// at scattered positions took ~10% less time). Smaller ones are 64-byte aligned. Throws
// std::bad_alloc like std::allocator. For trivially constructible T only (it is used for float).
void* AllocateTableBytes(size_t bytes);
void FreeTableBytes(void* p, size_t bytes) noexcept;  // bytes: as given to AllocateTableBytes

template <typename T>
struct TableAllocator {
  static_assert(std::is_trivially_default_constructible_v<T>, "TableAllocator leaves elements uninitialized");
  using value_type = T;
  TableAllocator() = default;
  template <typename U>
  TableAllocator(const TableAllocator<U>& /*other*/) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateTableBytes(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { FreeTableBytes(p, n * sizeof(T)); }
  // resize() default-initializes (no zero fill): Build writes every entry, so the pages are first
  // touched, and faulted in, by the threads that fill them.
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U>
  bool operator==(const TableAllocator<U>& /*other*/) const noexcept { return true; }
};
}  // namespace detail

// cos/sin for positions [0, num_positions), built once and shared by every layer and head
// (immutable after Build: safe to read from many threads). Positions at or past num_positions are
// computed on the fly from the same frequencies and precision, so a table of size 0 is valid.
class RopeTable {
 public:
  static Result<RopeTable> Build(RopeFrequencies freqs, int64_t num_positions, RopePrecision precision);

  int64_t num_pairs() const { return static_cast<int64_t>(freqs_.inv_freq.size()); }
  int64_t num_positions() const { return num_positions_; }
  RopePrecision precision() const { return precision_; }
  const RopeFrequencies& frequencies() const { return freqs_; }
  // Precondition: 0 <= pos < num_positions().
  const float* cos_row(int64_t pos) const { return cos_.data() + pos * num_pairs(); }
  const float* sin_row(int64_t pos) const { return sin_.data() + pos * num_pairs(); }
  // Any position in [0, kMaxRopePosition): from the table or computed.
  void CosSin(int64_t pos, float* cos_out, float* sin_out) const;

 private:
  RopeFrequencies freqs_;
  int64_t num_positions_ = 0;
  RopePrecision precision_ = RopePrecision::kReference;
  std::vector<float, detail::TableAllocator<float>> cos_, sin_;
};

struct RopeArgs {
  RotaryLayout layout;
  const RopeTable* table = nullptr;
  std::span<const int64_t> positions;  // one per token, in [0, kMaxRopePosition)
  RopeDirection direction = RopeDirection::kForward;
  // Threads for the fast path (ApplyRope, ApplyRopeQK): nullptr uses posenc's internal pool. Results
  // are bit-identical for every runner and thread count. The reference ignores it.
  ParallelRunner* parallel = nullptr;
};

// Validates args against a view: layout valid, table pairs == layout pairs, head_dim matches,
// positions.size() == tokens, every position in range (the error names the index and value).
Status ValidateRope(const RopeArgs& args, const HeadsView& x, const char* what);

// Rotates `x` in place. Errors as ValidateRope; nothing is written on error.
Status ApplyRope(const RopeArgs& args, HeadsView x);
// Out of place: out = RoPE(in); `out` may be `in` exactly, and must not partly overlap it.
Status ApplyRope(const RopeArgs& args, HeadsView in, HeadsView out);
// Queries and keys at once (grouped-query attention: k may have fewer heads), both in place.
// An empty k (tokens == 0 or heads == 0) is allowed. Values are never passed here.
Status ApplyRopeQK(const RopeArgs& args, HeadsView q, HeadsView k);

// The scalar reference: plain loops, float64 arithmetic on the table's float32 cos/sin, one rounding
// to the storage type. Same contract as ApplyRope; the oracle every fast kernel is tested against.
Status ApplyRopeReference(const RopeArgs& args, HeadsView in, HeadsView out);

}  // namespace posenc
