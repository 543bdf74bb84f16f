// Cold copies of the same bytes in different shapes, to check that the fused rows' roofline (one
// memcpy of bytes_all / 2) is not weak for being one stream: one memcpy; memcpy in pieces; the fused
// kernel's token rows split into three output streams (a 16 KiB q row, two 4 KiB cache rows); a plain
// SSE2 load/store loop; and the same loop with non-temporal stores. Then the same bytes read and written
// back in place (as RoPE rotates q in place): dense, and as 128-byte windows at the back of 384-byte
// heads (MLA's q_pe: the last 64 of each 192-value bfloat16 q head), each window prefetched whole heads
// (>= 4 KiB) ahead as the RoPE kernel does. Before every timed pass an untimed pass reads `evict` MiB.
// GB/s count bytes read + written (the windows' bytes only). Medians of 11 alternating rounds.
//   build/bench/copy_shapes [BYTES (default 1600000)] [EVICT_MIB (default 512)]
#include <emmintrin.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

volatile uint64_t g_sink = 0;

void ReadAll(const std::vector<uint64_t>& buf) {
  uint64_t s = 0;
  for (size_t i = 0; i < buf.size(); i += 8) s += buf[i];  // one word per 64-byte line
  g_sink = s;
}

void LoopCopy(char* d, const char* s, size_t n, bool stream) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    if (stream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), v);
    }
  }
  if (stream) _mm_sfence();
}

// Reads and writes back (sign bits flipped) `count` windows of `window` bytes, `stride` bytes apart from p,
// prefetching each window's lines `ahead` bytes on.
void FlipInPlace(char* p, size_t count, size_t stride, size_t window, size_t ahead) {
  const __m128i flip = _mm_set1_epi16(static_cast<int16_t>(0x8000));
  for (size_t w = 0; w < count; ++w, p += stride) {
    for (size_t l = 0; l < window; l += 64) _mm_prefetch(p + ahead + l, _MM_HINT_T0);
    for (size_t i = 0; i < window; i += 16) {
      auto* x = reinterpret_cast<__m128i*>(p + i);
      _mm_storeu_si128(x, _mm_xor_si128(_mm_loadu_si128(x), flip));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t row = 16384 + 2 * 4096;  // a float32 token row of the fused case: q, k, v
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1600000;
  const size_t evict_mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  if (n > (size_t{1} << 32) || evict_mib < 1 || evict_mib > 65536) {
    std::fprintf(stderr, "copy_shapes: BYTES must be at most 2^32 and EVICT_MIB in [1, 65536] (got %zu, %zu)\n", n,
                 evict_mib);
    return 2;
  }
  n = std::max(row, n / row * row);
  std::vector<uint64_t> evict(evict_mib << 17, 1);
  std::vector<char> src(n, 2), dst(n, 3);
  char* d = dst.data();
  const char* s = src.data();
  const size_t tokens = n / row;
  struct Shape {
    std::string name;
    std::function<void()> copy;
  };
  std::vector<Shape> shapes{{"memcpy", [&] { std::memcpy(d, s, n); }}};
  for (size_t piece : {65536, 16384, 4096, 2048})
    shapes.push_back({"memcpy in " + std::to_string(piece / 1024) + " KiB pieces", [&, piece] {
                        for (size_t o = 0; o < n; o += piece) std::memcpy(d + o, s + o, std::min(piece, n - o));
                      }});
  shapes.push_back({"token rows into 3 streams", [&] {
                      char* q = d;
                      char* k = d + tokens * 16384;
                      char* v = k + tokens * 4096;
                      for (size_t t = 0; t < tokens; ++t) {
                        std::memcpy(q + t * 16384, s + t * row, 16384);
                        std::memcpy(k + t * 4096, s + t * row + 16384, 4096);
                        std::memcpy(v + t * 4096, s + t * row + 16384 + 4096, 4096);
                      }
                    }});
  shapes.push_back({"SSE2 load/store loop", [&] { LoopCopy(d, s, n, false); }});
  shapes.push_back({"SSE2 loop, non-temporal stores", [&] { LoopCopy(d, s, n, true); }});
  constexpr size_t kHead = 384, kWindow = 128, kAhead = (4096 + kHead - 1) / kHead * kHead;
  std::vector<char> heads(n / kWindow * kHead, 4);
  shapes.push_back({"in place, dense", [&] { FlipInPlace(d, n / 64, 64, 64, 4096); }});
  shapes.push_back({"in place, 128 B of every 384 B", [&] {
                      FlipInPlace(heads.data() + kHead - kWindow, n / kWindow, kHead, kWindow, kAhead);
                    }});
  std::vector<std::vector<double>> times(shapes.size());
  for (int r = 0; r < 11; ++r)
    for (size_t i = 0; i < shapes.size(); ++i) {
      ReadAll(evict);
      const auto a = std::chrono::steady_clock::now();
      shapes[i].copy();
      times[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
  std::printf("%zu bytes copied cold (evict %zu MiB), medians of 11\n", n, evict_mib);
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::sort(times[i].begin(), times[i].end());
    const double m = times[i][times[i].size() / 2];
    std::printf("%-32s %9.1f us %7.2f GB/s\n", shapes[i].name.c_str(), m * 1e6, 2.0 * static_cast<double>(n) / m / 1e9);
  }
  return 0;
}
