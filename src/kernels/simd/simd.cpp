// Target listing and forcing on top of Highway's dispatch (hwy/targets.h). This file is compiled
// with the same HWY_TARGETS as the kernels (no per-file overrides), so the lists match.
#include "posenc/kernels/simd.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <fmt/format.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include "kernels/rope/rope_cos_sin_f16.hpp"
#include "kernels/simd/memory.hpp"
#include "kernels/simd/simd_probe.hpp"

namespace posenc {

namespace {

// HWY_TARGETS bits from best (lowest bit) to worst.
std::vector<int64_t> CompiledBits() {
  std::vector<int64_t> bits;
  for (int64_t t = HWY_TARGETS; t != 0; t &= t - 1) bits.push_back(t & ~(t - 1));
  return bits;
}

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

// The CPUID vendor string ("GenuineIntel", "AuthenticAMD", ...), empty where there is none.
std::string CpuVendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return {};
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return vendor;
#else
  return {};
#endif
}

// The display family (CPUID leaf 1: base family, plus the extended family where the base is 0xF):
// AMD Zen 3 and Zen 4 are 0x19, Zen 5 0x1A. 0 where there is no CPUID.
unsigned CpuFamily() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
#else
  return 0;
#endif
}

// The fused QK-norm of float32 heads runs in registers on AMD from Zen 5 (family 0x1A) on; see
// Float32NormInRegisters in posenc/kernels/simd.hpp for the measurements.
bool Float32NormInRegistersPays() { return CpuVendor() == "AuthenticAMD" && CpuFamily() >= 0x1A; }

// Out-of-place RoPE prefetches its destination on Intel and on AMD from Zen 5 (family 0x1A) on; see
// StorePrefetch in posenc/kernels/simd.hpp for the measurements.
bool RopeOutOfPlacePrefetchPays() {
  const std::string vendor = CpuVendor();
  return vendor == "GenuineIntel" || (vendor == "AuthenticAMD" && CpuFamily() >= 0x1A);
}

// AVX512-FP16 (CPUID.(EAX=7, ECX=0):EDX bit 23), with the OS saving the opmask and zmm state (XCR0
// bits 1, 2, 5, 6, 7).
bool CpuHasAvx512Fp16() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;  // OSXSAVE
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || (edx & (1u << 23)) == 0) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0xe6u) == 0xe6u;
#else
  return false;
#endif
}

std::atomic<bool> g_allow_native_f16{true};

// The targets this CPU runs, read before any cap: ForceSimdTarget caps Highway's own list (which then
// shows only the forced target and worse ones), so a list read from it after a cap would silently
// drop the better targets from every per-target loop that asks again.
int64_t CpuTargetBits() {
  static const int64_t bits = [] {
    hwy::DisableTargets(0);
    return hwy::SupportedTargets();
  }();
  return bits;
}

}  // namespace

std::vector<std::string> CompiledSimdTargets() {
  std::vector<std::string> names;
  for (int64_t b : CompiledBits()) names.emplace_back(hwy::TargetName(b));
  return names;
}

std::vector<std::string> AvailableSimdTargets() {
  std::vector<std::string> names;
  const int64_t supported = CpuTargetBits();
  for (int64_t b : CompiledBits())
    if (supported & b) names.emplace_back(hwy::TargetName(b));
  return names;
}

// What dispatch runs, asked of dispatch itself: hwy::SupportedTargets() is not a safe way to ask, it
// resets Highway 1.0.3's chosen target to every detected target (before its mask is applied), and the
// next kernel call then ran the best target whatever the cap said.
std::string ChosenSimdTarget() { return hwy::TargetName(detail::DispatchedTarget()); }

Status ForceSimdTarget(std::string_view name) {
  const std::string want = Upper(name);
  CpuTargetBits();  // read before the first cap
  if (want.empty() || want == "BEST" || want == "AUTO") {
    hwy::SetSupportedTargetsForTest(0);
    hwy::DisableTargets(0);
    return OkStatus();
  }
  const std::vector<int64_t> bits = CompiledBits();
  for (int64_t b : bits) {
    if (Upper(hwy::TargetName(b)) != want) continue;
    if ((CpuTargetBits() & b) == 0)
      return UnimplementedError(fmt::format("simd: target {} is compiled but this CPU cannot run it", want));
    // The cap is a fixed target set (every better target, the lower bits, removed), not
    // hwy::DisableTargets: under that, any later hwy::SupportedTargets() call (a target listing, a
    // log line) re-chose the best detected target for the next dispatch. With a fixed set,
    // SupportedTargets returns it without re-detecting, and dispatch chooses within it.
    hwy::DisableTargets(0);
    hwy::SetSupportedTargetsForTest(CpuTargetBits() & ~(b - 1));
    return OkStatus();
  }
  std::string list;
  for (int64_t b : bits) list += std::string(list.empty() ? "" : ", ") + hwy::TargetName(b);
  return InvalidArgumentError(
      fmt::format("simd: target '{}' is not compiled into posenc (compiled: {}; or 'best')", name, list));
}

bool NativeF16Arithmetic() {
  static const bool has = POSENC_HAVE_AVX512FP16 && CpuHasAvx512Fp16();  // (and compiled in)
  return has && g_allow_native_f16.load(std::memory_order_relaxed);
}

void AllowNativeF16Arithmetic(bool allow) { g_allow_native_f16.store(allow, std::memory_order_relaxed); }

StorePrefetch StorePrefetchPolicy() {
  static const StorePrefetch policy = [] {
    if (const char* env = std::getenv("POSENC_PREFETCH_STORES"); env != nullptr && *env != '\0') {
      const bool on = std::strcmp(env, "0") != 0;
      return StorePrefetch{on, on};
    }
    return StorePrefetch{true, RopeOutOfPlacePrefetchPays()};
  }();
  return policy;
}

bool Float32NormInRegisters() {
  static const bool regs = [] {
    if (const char* env = std::getenv("POSENC_QKNORM_F32_REGS"); env != nullptr && *env != '\0')
      return std::strcmp(env, "0") != 0;
    return Float32NormInRegistersPays();
  }();
  return regs;
}

size_t StreamStoreMinBytes() {
  static const size_t min_bytes = [] {
    const char* env = std::getenv("POSENC_STREAM_STORES");
    if (env == nullptr || *env == '\0') return detail::kStreamOutputBytes;
    return std::strcmp(env, "0") != 0 ? size_t{0} : std::numeric_limits<size_t>::max();
  }();
  return min_bytes;
}

}  // namespace posenc
