// The benchmark rows (bench_cases.hpp) built from the kernel case list and prepared: buffers, the
// timed kernel, the unfused sequence, the roofline pass and the L1-resident core slice of each row.
#include "bench_cases.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <random>
#include <span>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>
#include <hwy/cache_control.h>

#include "posenc/kernels/embedding.hpp"
#include "posenc/kernels/fused_rope.hpp"
#include "posenc/kernels/mla_cache.hpp"
#include "posenc/kernels/multi_axis_rope.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/kernels/simd.hpp"
#include "posenc/math/multi_axis.hpp"
#include "posenc/math/vision_positions.hpp"
#include "roofline.hpp"

namespace posenc::bench {
namespace {

// Buffers start on a 64-byte line, as PyTorch's CPU allocator and ggml's buffers place tensors (a
// plain `new[]` of this size returns an mmap'd block 16 bytes past a page, as numpy's large arrays are).
// POSENC_BENCH_OFFSET=16 moves every buffer 16 bytes on, to time that case (docs/PERFORMANCE.md).
size_t BufferOffset() {
  static const size_t off = [] {
    const char* e = std::getenv("POSENC_BENCH_OFFSET");
    return e != nullptr ? static_cast<size_t>(std::strtoul(e, nullptr, 10) % 64) & ~size_t{3} : size_t{0};
  }();
  return off;
}

template <typename T>
std::shared_ptr<T[]> Buffer(size_t n) {  // uninitialized: only what a case touches is committed
  const size_t off = BufferOffset();
  auto* raw = static_cast<std::byte*>(::operator new(n * sizeof(T) + off, std::align_val_t{64}));
  return std::shared_ptr<T[]>(reinterpret_cast<T*>(raw + off),
                              [raw](T*) { ::operator delete(raw, std::align_val_t{64}); });
}

void FillBytes(void* p, size_t bytes, uint32_t seed) {
  // Finite values of every storage type: 16-bit words 0x3c00..0x3fff are f16/bf16 numbers in [1, 2).
  auto* u = static_cast<uint16_t*>(p);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < bytes / 2; ++i) u[i] = static_cast<uint16_t>(0x3c00 | (rng() & 0x3ff));
}

// The RoPE table of `rotary_dim` dims and `theta` over 8192 positions, built once per (dims, theta) and
// kept alive across cases, as an engine would.
const RopeTable& CachedTable(int64_t rotary_dim, double theta) {
  static std::map<std::pair<int64_t, double>, RopeTable> tables;
  auto it = tables.find({rotary_dim, theta});
  if (it == tables.end())
    it = tables.emplace(std::make_pair(rotary_dim, theta),
                        RopeTable::Build(DefaultRopeFrequencies(rotary_dim, theta).value(), 8192, RopePrecision::kReference).value())
             .first;
  return it->second;
}

// Bytes of the cos/sin rows a 1-D RoPE kernel reads for `tokens` tokens of `pairs` pairs (float32 cos and
// sin per pair; every token reads its own row, as scattered decode positions do).
double CosSinBytes(int64_t tokens, int64_t pairs) { return 8.0 * static_cast<double>(tokens * pairs); }

// The bare access patterns' steps: `bytes` of src read into a checksum; a cache row written from an
// input row (a copy of the bytes both have, the rest of a longer input row read, the rest of a longer
// cache row filled).
void ReadBytes(const std::byte* src, size_t bytes, uint64_t* acc) {
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, src + i, 8);
    *acc ^= w;
  }
}
void RowFrom(std::byte* dst, size_t dst_bytes, const std::byte* src, size_t src_bytes, uint64_t* acc, bool stream) {
  const size_t n = std::min(dst_bytes, src_bytes);
  detail::CopyBytes(dst, src, n, stream);
  if (dst_bytes > n) std::memset(dst + n, 0x5a, dst_bytes - n);
  ReadBytes(src + n, src_bytes - n, acc);
}

// A bare pattern's tokens, split over the threads as the kernels split them: per token its cos/sin rows
// read, then rows(t, end of the thread's range, slot, &checksum); the checksum kept, so no read is dropped.
// `flush`: the rows streamed (hwy::FlushStream at the end of each range).
template <class Rows>
void PatternTokens(ParallelRunner* runner, const RopeTable& table, const std::vector<int64_t>& pos,
                   const std::vector<int64_t>& slot, int64_t touched, bool flush, const Rows& rows) {
  const size_t pairs = static_cast<size_t>(table.num_pairs());
  std::atomic<uint64_t> sink{0};
  ParallelFor(runner, static_cast<int64_t>(slot.size()), touched, [&](int64_t b, int64_t e) {
    uint64_t acc = 0;
    for (int64_t t = b; t < e; ++t) {
      const int64_t ps = pos[static_cast<size_t>(t)];
      ReadBytes(reinterpret_cast<const std::byte*>(table.cos_row(ps)), 4 * pairs, &acc);
      ReadBytes(reinterpret_cast<const std::byte*>(table.sin_row(ps)), 4 * pairs, &acc);
      rows(t, e, slot[static_cast<size_t>(t)], &acc);
    }
    if (flush) hwy::FlushStream();
    sink.fetch_xor(acc, std::memory_order_relaxed);
  });
  static std::atomic<uint64_t> keep{0};
  keep.store(sink.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

// The fused kernel's memory traffic without its arithmetic: per token, the cos/sin rows read, q's input
// copied to its output row, and each cache row written from k's (v's) input row: a copy of the bytes
// both have, the rest of a longer input row read, the rest of a longer cache row filled. Every byte of
// `bytes_all` is read or written once, tokens split over the threads as the kernel splits them.
struct FusedPattern {
  const RopeTable* table;
  QkvViews qkv;
  HeadsView q_out;
  std::shared_ptr<KvCacheView> cache;
  std::shared_ptr<std::vector<int64_t>> pos, slot;
  ParallelRunner* runner;

  static const std::byte* At(const HeadsView& v, int64_t t) {
    return static_cast<const std::byte*>(v.data) + t * v.token_stride * static_cast<int64_t>(SizeOf(v.dtype));
  }
  void operator()() const {
    const size_t es = SizeOf(qkv.q.dtype);
    const size_t qb = static_cast<size_t>(qkv.q.heads * qkv.q.head_dim) * es;
    const size_t kb = static_cast<size_t>(qkv.k.heads * qkv.k.head_dim) * es;
    const size_t sb = static_cast<size_t>(cache->slot_bytes());
    const auto T = static_cast<int64_t>(slot->size());
    // Rows streamed as the kernel streams them in a large call (StreamsHeads, StreamsCacheRows: the
    // buffers here are aligned): q rows, and cache rows of a float type.
    const bool stream = static_cast<size_t>(T) * (qb + 2 * sb) >= StreamStoreMinBytes();
    const KvCacheType ct = cache->type;
    const bool stream_kv = stream && (ct == KvCacheType::kF32 || ct == KvCacheType::kF16 || ct == KvCacheType::kBF16);
    PatternTokens(runner, *table, *pos, *slot, T * static_cast<int64_t>(2 * qb + 2 * kb + 2 * sb), stream,
                  [&](int64_t t, int64_t, int64_t sl, uint64_t* acc) {
                    RowFrom(const_cast<std::byte*>(At(q_out, t)), qb, At(qkv.q, t), qb, acc, stream);
                    RowFrom(cache->k_row(0, sl), sb, At(qkv.k, t), kb, acc, stream_kv);
                    RowFrom(cache->v_row(0, sl), sb, At(qkv.v, t), kb, acc, stream_kv);
                  });
  }
};

// The MLA kernel's memory traffic without its arithmetic: per token, the cos/sin rows read, the cache
// row written from the latent input row (RowFrom), and each q head's rope window read and written back
// in place (RewriteWindows; its nope dims untouched); tokens split over the threads as the kernel splits
// them. Every byte of the MLA rows' `bytes_all` is read or written once; nothing is streamed, as in the
// kernel.
struct MlaPattern {
  const RopeTable* table;
  HeadsView latent;  // [T, 1, kv_lora_rank + rope_dim]: the projection output the kernel reads
  HeadsView q;       // [T, H, nope + rope], the windows at rotary_start
  int64_t rotary_start = 0, rotary_dim = 0;
  std::shared_ptr<MlaCacheView> cache;
  std::shared_ptr<std::vector<int64_t>> pos, slot;
  ParallelRunner* runner;
  uint32_t key = 0;  // 0: the windows keep their values

  void operator()() const {
    const size_t es = SizeOf(latent.dtype);
    const size_t rb = static_cast<size_t>(latent.head_dim) * es, sb = static_cast<size_t>(cache->slot_bytes());
    const size_t wb = static_cast<size_t>(rotary_dim) * es;
    const auto T = static_cast<int64_t>(slot->size());
    PatternTokens(runner, *table, *pos, *slot, T * static_cast<int64_t>(rb + sb + 2 * q.heads * wb), false,
                  [&](int64_t t, int64_t e, int64_t sl, uint64_t* acc) {
                    RowFrom(
                        cache->row(0, sl), sb,
                        static_cast<const std::byte*>(latent.data) + static_cast<size_t>(t * latent.token_stride) * es,
                        rb, acc, false);
                    // The windows, each prefetched into L2 as many heads ahead as the kernel's rotation does
                    // (twice the whole heads in 4 KiB: rope_internal.hpp's WindowPrefetch; past the token's last
                    // head into the next token's, q being dense). Prefetched into L1 11-32 heads ahead, as the
                    // kernel did before, this walk took 1.25-1.5x the kernel's time (zen4).
                    const size_t hs = static_cast<size_t>(q.head_stride) * es, ahead = 2 * ((4096 + hs - 1) / hs);
                    detail::RewriteWindows(
                        static_cast<std::byte*>(q.data) + static_cast<size_t>(t * q.token_stride + rotary_start) * es,
                        static_cast<size_t>(q.heads), hs, wb, ahead, static_cast<size_t>((e - t) * q.heads), key);
                  });
  }
};

// A timed call that fails would time nothing: the QK-norm and MLA rows stop at the first error.
void MustOk(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "posenc bench: a timed call failed: %s\n", s.ToString().c_str());
    std::abort();
  }
}

// Norm weights of n values around 1 (bfloat16 values, as a checkpoint holds them), kept alive.
std::shared_ptr<std::vector<float>> NormWeight(size_t n, uint32_t seed) {
  auto w = std::make_shared<std::vector<float>>(n);
  std::mt19937 rng(seed);
  for (auto& x : *w) x = BF16ToF32(F32ToBF16(0.5f + static_cast<float>(rng() % 1024) / 1024.0f));
  return w;
}

// Positions and cache slots of T tokens: prefill, tokens 0..T-1 into slots 0..T-1; decode, one token per
// sequence at a scattered position < 8192, its page a distinct random page of the `slots / page` pool.
void DecodeOrPrefillSlots(int64_t T, int64_t slots, int64_t page, bool decode, std::vector<int64_t>* pos,
                          std::vector<int64_t>* slot) {
  pos->assign(static_cast<size_t>(T), 0);
  slot->assign(static_cast<size_t>(T), 0);
  if (!decode) {
    for (int64_t t = 0; t < T; ++t) (*pos)[static_cast<size_t>(t)] = (*slot)[static_cast<size_t>(t)] = t;
    return;
  }
  std::mt19937 rng(3);
  const int64_t pages = slots / page, max_pages = 8192 / page;
  std::vector<int32_t> pool(static_cast<size_t>(pages)), table(static_cast<size_t>(T * max_pages), -1);
  for (int64_t i = 0; i < pages; ++i) pool[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int64_t> seq(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pp = static_cast<int64_t>(rng() % 8192);
    (*pos)[static_cast<size_t>(t)] = pp;
    seq[static_cast<size_t>(t)] = t;
    table[static_cast<size_t>(t * max_pages + pp / page)] = pool[static_cast<size_t>(t)];
  }
  *slot = PagedKvSlots(PagedKvTable{page, pages, max_pages, table}, seq, *pos).value();
}

// The fused and MLA rows' roofline: a memcpy of bytes_all / 2, so that it moves bytes_all bytes, half
// read, half written (its buffers kept in p->keep).
void MemcpyRoofline(Prepared* p, ParallelRunner* runner) {
  const size_t half = static_cast<size_t>(p->bytes_all / 2) / 64 * 64;
  auto src = Buffer<uint8_t>(half), dst = Buffer<uint8_t>(half);
  FillBytes(src.get(), half, 12);
  std::memset(dst.get(), 0, half);
  p->roofline = [src, dst, half, runner] { detail::RooflineCopy(dst.get(), src.get(), half, runner); };
  p->roofline_bytes = 2.0 * static_cast<double>(half);
  p->roofline_kind = detail::RooflineCopyStreams(half) ? "stream copy" : "memcpy";
  p->keep.push_back(src);
  p->keep.push_back(dst);
}

// The fused and MLA rows' byte counts for T tokens moving token_bytes each (bytes_all adds the cos/sin
// rows of `pairs` pairs), their memcpy roofline, and the tokens of the `core` slice (about 16 KiB, at
// least 1), which it returns.
int64_t FusedBytes(Prepared* p, double token_bytes, int64_t T, int64_t pairs, ParallelRunner* runner) {
  p->bytes = static_cast<double>(T) * token_bytes;
  p->bytes_all = p->bytes + CosSinBytes(T, pairs);
  MemcpyRoofline(p, runner);
  const int64_t Ts = std::clamp<int64_t>(static_cast<int64_t>(16384 / token_bytes), 1, T);
  p->core_bytes = static_cast<double>(Ts) * token_bytes;
  return Ts;
}

// The `core` slice's arguments: the first `tokens` positions, on one thread.
RopeArgs CoreArgs(const RopeArgs& args, const std::vector<int64_t>& pos, int64_t tokens) {
  RopeArgs core_args = args;
  core_args.positions = std::span<const int64_t>(pos.data(), static_cast<size_t>(tokens));
  core_args.parallel = &SerialRunner();
  return core_args;
}

std::unique_ptr<Prepared> PrepareFused(const CaseSpec& c, ParallelRunner* runner) {
  auto p = std::make_unique<Prepared>();
  const size_t es = SizeOf(c.dtype);
  const cases::KernelCase& k = c.kernel;
  const bool decode = k.decode, qk_norm = k.family == cases::KernelFamily::kQkNormFused;
  const RopeTable& rope_table = CachedTable(k.rotary_dim, k.rope_theta);
  const int64_t T = k.tokens, Hq = k.heads, Hkv = k.kv_heads, D = k.head_dim, W = (Hq + 2 * Hkv) * D;
  const int64_t slots = decode ? 16384 : 8192, page = 16;
  auto in = Buffer<uint8_t>(static_cast<size_t>(T * W) * es + 64);
  FillBytes(in.get(), static_cast<size_t>(T * W) * es, 11);
  const size_t q_bytes = static_cast<size_t>(T * Hq * D) * es, k_bytes = static_cast<size_t>(T * Hkv * D) * es;
  auto q_out = Buffer<uint8_t>(q_bytes + 64), k_tmp = Buffer<uint8_t>(k_bytes + 64);
  std::memset(q_out.get(), 0, q_bytes);
  std::memset(k_tmp.get(), 0, k_bytes);
  auto cache = std::make_shared<KvCacheView>(KvCacheView{nullptr, nullptr, c.cache_type, 1, slots, Hkv, D});
  const size_t cache_bytes = static_cast<size_t>(cache->bytes());
  auto kc = Buffer<uint8_t>(cache_bytes), vc = Buffer<uint8_t>(cache_bytes);  // rows touched on first write
  cache->k = kc.get();
  cache->v = vc.get();
  // Float8 caches: a per-head key scale and a per-tensor value scale (vLLM's k_scale / v_scale).
  auto scales = std::make_shared<std::vector<float>>(static_cast<size_t>(Hkv + 1), 0.5f);
  if (c.cache_type == KvCacheType::kF8E4M3 || c.cache_type == KvCacheType::kF8E5M2) {
    for (int64_t h = 0; h < Hkv; ++h) (*scales)[static_cast<size_t>(h)] = 0.25f + 0.125f * static_cast<float>(h);
    cache->k_scale = std::span<const float>(scales->data(), static_cast<size_t>(Hkv));
    cache->v_scale = std::span<const float>(scales->data() + Hkv, 1);
  }
  auto pos = std::make_shared<std::vector<int64_t>>(), slot = std::make_shared<std::vector<int64_t>>();
  DecodeOrPrefillSlots(T, slots, page, decode, pos.get(), slot.get());
  RopeArgs args{{c.layout, D, k.rotary_start, k.rotary_dim}, &rope_table, *pos};
  args.parallel = runner;
  const QkvViews qkv = SplitFusedQkv(in.get(), c.dtype, T, Hq, Hkv, D).value();
  const HeadsView qov = HeadsView::Dense(q_out.get(), c.dtype, T, Hq, D);
  const HeadsView ktv = HeadsView::Dense(k_tmp.get(), c.dtype, T, Hkv, D);
  auto qw = NormWeight(static_cast<size_t>(D), 21), kw = NormWeight(static_cast<size_t>(D), 22);
  HeadRmsNorm qn, kn;
  if (qk_norm) {
    qn = {*qw, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead};
    kn = {*kw, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead};
  }
  const FusedRopeArgs fa{args, *slot, 0, {}, qn, kn};
  p->run = [fa, qkv, qov, cache] { MustOk(ApplyRopeKvCache(fa, qkv, qov, *cache)); };
  if (qk_norm) {  // norm, then RoPE in place, then the cache write: posenc's separate calls
    p->unfused = [args, qkv, qov, ktv, cache, slot, runner, qn, kn] {
      MustOk(ApplyHeadRmsNorm(qn, qkv.q, qov, runner));
      MustOk(ApplyRope(args, qov));
      MustOk(ApplyHeadRmsNorm(kn, qkv.k, ktv, runner));
      MustOk(ApplyRope(args, ktv));
      MustOk(StoreKvCache(*cache, 0, *slot, ktv, qkv.v, runner));
    };
  } else {
    p->unfused = [args, qkv, qov, ktv, cache, slot, runner] {
      (void)ApplyRope(args, qkv.q, qov);
      (void)ApplyRope(args, qkv.k, ktv);
      (void)StoreKvCache(*cache, 0, *slot, ktv, qkv.v, runner);
    };
  }
  p->pattern = FusedPattern{&rope_table, qkv, qov, cache, pos, slot, runner};
  const double token_bytes =
      static_cast<double>(W * static_cast<int64_t>(es) + Hq * D * static_cast<int64_t>(es) + 2 * cache->slot_bytes());
  const int64_t Ts = FusedBytes(p.get(), token_bytes, T, D / 2, runner);
  const RopeArgs core_args = CoreArgs(args, *pos, Ts);
  const FusedRopeArgs core_fa{core_args, std::span<const int64_t>(slot->data(), static_cast<size_t>(Ts)), 0, {}, qn,
                              kn};
  const QkvViews qs = SplitFusedQkv(in.get(), c.dtype, Ts, Hq, Hkv, D).value();
  const HeadsView qos = HeadsView::Dense(q_out.get(), c.dtype, Ts, Hq, D);
  p->core = [core_fa, qs, qos, cache] { (void)ApplyRopeKvCache(core_fa, qs, qos, *cache); };
  p->keep.insert(p->keep.end(), {in, q_out, k_tmp, cache, kc, vc, pos, slot, scales, qw, kw});
  return p;
}

// DeepSeek-V3's MLA cache row (mla_prefill, mla_decode): kv_lora_rank 512, qk_rope_head_dim 64,
// qk_nope_head_dim 128, 128 q heads, interleaved pairs (the checkpoint's order), bfloat16 activations.
std::unique_ptr<Prepared> PrepareMla(const CaseSpec& c, ParallelRunner* runner) {
  auto p = std::make_unique<Prepared>();
  const size_t es = SizeOf(c.dtype);
  const cases::KernelCase& k = c.kernel;
  const bool decode = k.decode;
  const int64_t T = k.tokens, H = k.heads, nope = k.rotary_start, rope = k.rotary_dim, lora = k.kv_lora_rank;
  const int64_t D = nope + rope, R = lora + rope;
  const int64_t slots = decode ? 16384 : 8192, page = 64;
  const RopeTable& table = CachedTable(rope, k.rope_theta);
  auto kv = Buffer<uint8_t>(static_cast<size_t>(T * R) * es + 64),
       q = Buffer<uint8_t>(static_cast<size_t>(T * H * D) * es + 64);
  FillBytes(kv.get(), static_cast<size_t>(T * R) * es, 31);
  FillBytes(q.get(), static_cast<size_t>(T * H * D) * es, 32);
  auto rows = Buffer<uint8_t>(static_cast<size_t>(T * R) * es + 64);
  std::memset(rows.get(), 0, static_cast<size_t>(T * R) * es);
  auto cache = std::make_shared<MlaCacheView>(MlaCacheView{nullptr, c.cache_type, 1, slots, lora, rope});
  const size_t cache_bytes = static_cast<size_t>(cache->bytes());
  auto mem = Buffer<uint8_t>(cache_bytes), v_unused = Buffer<uint8_t>(cache_bytes);  // v: StoreKvCache's view only
  cache->data = mem.get();
  auto pos = std::make_shared<std::vector<int64_t>>(), slot = std::make_shared<std::vector<int64_t>>();
  DecodeOrPrefillSlots(T, slots, page, decode, pos.get(), slot.get());
  auto w = NormWeight(static_cast<size_t>(lora), 23);
  RopeArgs args{{c.layout, D, nope, rope}, &table, *pos};
  args.parallel = runner;
  const HeadRmsNorm norm{*w, 1e-6f, RmsNormStyle::kCastThenScale, RmsNormScope::kPerHead};
  const HeadsView kv_c{kv.get(), c.dtype, T, 1, lora, R, lora};
  const HeadsView k_pe{kv.get() + static_cast<size_t>(lora) * es, c.dtype, T, 1, rope, R, rope};
  const HeadsView qv = HeadsView::Dense(q.get(), c.dtype, T, H, D);
  const MlaRopeArgs ma{args, *slot, 0, norm};
  p->run = [ma, kv_c, k_pe, qv, cache] { MustOk(ApplyMlaRopeCache(ma, kv_c, k_pe, qv, qv, *cache)); };
  const HeadsView latent{rows.get(), c.dtype, T, 1, lora, R, lora};
  const HeadsView pe{rows.get() + static_cast<size_t>(lora) * es, c.dtype, T, 1, rope, R, rope};
  const HeadsView row_view = HeadsView::Dense(rows.get(), c.dtype, T, 1, R);
  const KvCacheView kc = cache->AsKvCache(v_unused.get());
  RopeArgs ka = args;
  ka.layout = {c.layout, rope, 0, rope};
  p->unfused = [norm, kv_c, k_pe, qv, latent, pe, row_view, kc, ka, args, slot, runner] {
    MustOk(ApplyHeadRmsNorm(norm, kv_c, latent, runner));
    MustOk(ApplyRope(ka, k_pe, pe));
    MustOk(ApplyRope(args, qv));
    MustOk(StoreKvCache(
        kc, 0, *slot, row_view,
        HeadsView{nullptr, row_view.dtype, 0, 1, row_view.head_dim, row_view.head_dim, row_view.head_dim}, runner));
  };
  p->pattern =
      MlaPattern{&table, HeadsView::Dense(kv.get(), c.dtype, T, 1, R), qv, nope, rope, cache, pos, slot, runner};
  // Bytes: the latent input read, the cache row written, each q head's rope window read and written
  // (in place: the nope dims are not touched), the cos/sin rows.
  const double token_bytes =
      static_cast<double>(R * static_cast<int64_t>(es) + cache->slot_bytes() + 2 * H * rope * static_cast<int64_t>(es));
  const int64_t Ts = FusedBytes(p.get(), token_bytes, T, rope / 2, runner);
  const RopeArgs core_args = CoreArgs(args, *pos, Ts);
  const MlaRopeArgs core_ma{core_args, std::span<const int64_t>(slot->data(), static_cast<size_t>(Ts)), 0, norm};
  const HeadsView kcs{kv.get(), c.dtype, Ts, 1, lora, R, lora};
  const HeadsView kps{kv.get() + static_cast<size_t>(lora) * es, c.dtype, Ts, 1, rope, R, rope};
  const HeadsView qs = HeadsView::Dense(q.get(), c.dtype, Ts, H, D);
  p->core = [core_ma, kcs, kps, qs, cache] { (void)ApplyMlaRopeCache(core_ma, kcs, kps, qs, qs, *cache); };
  p->keep.insert(p->keep.end(), {kv, q, rows, cache, mem, v_unused, pos, slot, w});
  return p;
}

// Multi-axis rows: Qwen2.5-VL (chunked) and Qwen3-VL (interleaved) text shapes, q in place.
std::unique_ptr<Prepared> PrepareMultiAxis(const CaseSpec& c, ParallelRunner* runner) {
  auto p = std::make_unique<Prepared>();
  const size_t es = SizeOf(c.dtype);
  const cases::KernelCase& k = c.kernel;
  const bool decode = k.decode;
  const int64_t T = k.tokens, D = k.head_dim, H = k.heads;
  MultiAxisRope m;
  m.layout = k.mrope_interleaved ? SectionLayout::kInterleaved : SectionLayout::kChunked;
  m.sections = k.mrope_sections;
  auto freqs = std::make_shared<RopeFrequencies>(DefaultRopeFrequencies(D, k.rope_theta).value());
  auto comp = std::make_shared<std::vector<int64_t>>(PairComponents(m, D / 2, "bench").value());
  auto pos = std::make_shared<std::vector<int64_t>>();
  if (decode) {
    std::mt19937 rng(3);
    std::vector<int64_t> one(static_cast<size_t>(T));
    for (auto& v : one) v = static_cast<int64_t>(rng() % 8192);
    for (int r = 0; r < 3; ++r) pos->insert(pos->end(), one.begin(), one.end());
  } else {
    // T / 4 text tokens, one image of 64 x 128 patches (32 x 64 tokens after the 2 x 2 merge), T / 4 text
    // (1024 each side at 4096 tokens).
    const std::vector<PositionSpan> spans{PositionSpan::Text(T / 4), PositionSpan::Vision(1, 64, 128),
                                          PositionSpan::Text(T / 4)};
    *pos = BuildTextVisionPositions(spans, 2).value().positions;
  }
  auto table = std::make_shared<RopeTable>(
      RopeTable::BuildPerToken(*freqs, *comp, 3, *pos, RopePrecision::kReference, runner).value());
  auto rows = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) (*rows)[static_cast<size_t>(t)] = t;
  const size_t n = static_cast<size_t>(T * H * D);
  auto q = Buffer<uint8_t>(n * es + 64);
  FillBytes(q.get(), n * es, 1);
  const RotaryLayout layout{c.layout, D, 0, D};
  RopeArgs args{layout, table.get(), *rows};
  args.parallel = runner;
  const HeadsView qv = HeadsView::Dense(q.get(), c.dtype, T, H, D);
  MultiAxisRopeArgs margs{layout, freqs.get(), *comp, 3, *pos};
  margs.parallel = runner;
  if (c.op == "mrope_prefill_q_build")
    p->run = [margs, qv] { (void)ApplyMultiAxisRope(margs, qv); };
  else
    p->run = [args, qv] { MustOk(ApplyRope(args, qv)); };
  p->bytes = 2.0 * static_cast<double>(n * es);
  p->roofline_bytes = p->bytes;
  p->bytes_all = p->bytes + CosSinBytes(T, D / 2);  // each token's own cos/sin row
  p->roofline = [q, n, es, runner] { detail::RooflineRmw(q.get(), n * es, 0, runner); };
  const int64_t token_bytes = H * D * static_cast<int64_t>(es);
  const int64_t Ts = std::clamp<int64_t>(16384 / token_bytes, 1, T);
  const RopeArgs core_args = CoreArgs(args, *rows, Ts);
  const HeadsView qs = HeadsView::Dense(q.get(), c.dtype, Ts, H, D);
  p->core = [core_args, qs] { (void)ApplyRope(core_args, qs); };
  p->core_bytes = 2.0 * static_cast<double>(Ts * token_bytes);
  p->keep = {q, freqs, comp, pos, table, rows};
  return p;
}

// RoPE rows (rope_prefill_q, _k, _qk, _q_oop, rope_decode): q (and k) in place, or q out of place.
std::unique_ptr<Prepared> PrepareRope(const CaseSpec& c, ParallelRunner* runner) {
  auto p = std::make_unique<Prepared>();
  const size_t es = SizeOf(c.dtype);
  const cases::KernelCase& kc = c.kernel;
  const bool decode = kc.decode;
  const int64_t T = kc.tokens, D = kc.head_dim, Hq = kc.heads, Hk = kc.kv_heads;
  const size_t nq = static_cast<size_t>(T * Hq * D), nk = static_cast<size_t>(T * Hk * D);
  auto q = Buffer<uint8_t>(nq * es + 64), k = Buffer<uint8_t>(nk * es + 64);
  FillBytes(q.get(), nq * es, 1);
  FillBytes(k.get(), nk * es, 2);
  auto pos = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(T));
  std::mt19937 rng(3);
  for (int64_t t = 0; t < T; ++t) (*pos)[static_cast<size_t>(t)] = decode ? static_cast<int64_t>(rng() % 8192) : t;
  RotaryLayout layout{c.layout, D, kc.rotary_start, kc.rotary_dim};
  RopeArgs args{layout, &CachedTable(kc.rotary_dim, kc.rope_theta), *pos};
  args.parallel = runner;
  HeadsView qv = HeadsView::Dense(q.get(), c.dtype, T, Hq, D);
  HeadsView kv = HeadsView::Dense(k.get(), c.dtype, T, Hk, D);
  const size_t tensor_bytes = (nq + nk) * es;
  p->bytes = 2.0 * static_cast<double>(tensor_bytes);
  p->roofline_bytes = p->bytes;
  p->bytes_all = p->bytes + CosSinBytes(T, D / 2);
  const int64_t token_bytes = (Hq + Hk) * D * static_cast<int64_t>(es);
  const int64_t Ts = std::clamp<int64_t>(16384 / token_bytes, 1, T);  // the L1 slice for `core`
  const RopeArgs core_args = CoreArgs(args, *pos, Ts);
  HeadsView qs = HeadsView::Dense(q.get(), c.dtype, Ts, Hq, D);
  HeadsView ks = HeadsView::Dense(k.get(), c.dtype, Hk > 0 ? Ts : 0, Hk, D);
  p->core_bytes = 2.0 * static_cast<double>(Ts * token_bytes);
  if (!c.inplace) {
    auto out = Buffer<uint8_t>(nq * es + 64);
    std::memset(out.get(), 0, nq * es);
    HeadsView ov = HeadsView::Dense(out.get(), c.dtype, T, Hq, D);
    p->run = [args, qv, ov] { (void)ApplyRope(args, qv, ov); };
    HeadsView os = HeadsView::Dense(out.get(), c.dtype, Ts, Hq, D);
    p->core = [core_args, qs, os] { (void)ApplyRope(core_args, qs, os); };
    p->roofline = [q, out, nq, es, runner] { detail::RooflineCopy(out.get(), q.get(), nq * es, runner); };
    p->roofline_kind = detail::RooflineCopyStreams(nq * es) ? "stream copy" : "memcpy";
    p->keep.push_back(out);
  } else if (Hk > 0) {
    p->run = [args, qv, kv] { (void)ApplyRopeQK(args, qv, kv); };
    p->core = [core_args, qs, ks] { (void)ApplyRopeQK(core_args, qs, ks); };
    p->roofline = [q, k, nq, nk, es, runner] {
      detail::RooflineRmw(q.get(), nq * es, 0, runner);
      detail::RooflineRmw(k.get(), nk * es, 0, runner);
    };
  } else {
    p->run = [args, qv] { MustOk(ApplyRope(args, qv)); };
    p->core = [core_args, qs] { (void)ApplyRope(core_args, qs); };
    p->roofline = [q, nq, es, runner] { detail::RooflineRmw(q.get(), nq * es, 0, runner); };
  }
  p->keep.push_back(q);
  p->keep.push_back(k);
  p->keep.push_back(pos);
  return p;
}

// Embedding gather rows: `tokens` distinct random ids of a [vocab, head_dim] table.
std::unique_ptr<Prepared> PrepareGather(const CaseSpec& c, ParallelRunner* runner) {
  auto p = std::make_unique<Prepared>();
  const size_t es = SizeOf(c.dtype);
  const int64_t vocab = c.kernel.vocab, d_model = c.kernel.head_dim, n = c.kernel.tokens;
  const DType out_dtype = c.op == "gather_bf16out" ? DType::kBF16 : DType::kF32;
  const size_t row_bytes = static_cast<size_t>(d_model) * es;
  auto table = Buffer<uint8_t>(static_cast<size_t>(vocab) * row_bytes);
  auto ids = std::make_shared<std::vector<int64_t>>();
  std::mt19937_64 rng(5);
  std::vector<bool> used(static_cast<size_t>(vocab));
  while (ids->size() < static_cast<size_t>(n)) {
    const int64_t id = static_cast<int64_t>(rng() % vocab);
    if (used[static_cast<size_t>(id)]) continue;
    used[static_cast<size_t>(id)] = true;
    ids->push_back(id);
    FillBytes(table.get() + static_cast<size_t>(id) * row_bytes, row_bytes, static_cast<uint32_t>(id));
  }
  const size_t out_bytes = static_cast<size_t>(n * d_model) * SizeOf(out_dtype);
  auto out = Buffer<uint8_t>(out_bytes), copy_src = Buffer<uint8_t>(out_bytes);
  std::memset(out.get(), 0, out_bytes);
  FillBytes(copy_src.get(), out_bytes, 9);
  EmbeddingTable t = EmbeddingTable::View(table.get(), c.dtype, vocab, d_model);
  LookupOptions o;
  o.out_dtype = out_dtype;
  o.parallel = runner;
  p->run = [t, ids, o, out] { (void)LookupEmbeddingsInto(t, *ids, o, out.get()); };
  const size_t out_row = static_cast<size_t>(d_model) * SizeOf(out_dtype);
  const size_t ns = std::clamp<size_t>(16384 / out_row, 1, static_cast<size_t>(n));
  LookupOptions core_o = o;
  core_o.parallel = &SerialRunner();
  p->core = [t, ids, core_o, out, ns] {
    (void)LookupEmbeddingsInto(t, std::span<const int64_t>(ids->data(), ns), core_o, out.get());
  };
  p->core_bytes = static_cast<double>(ns * (row_bytes + out_row));
  p->roofline = [out, copy_src, out_bytes, runner] {
    detail::RooflineCopy(out.get(), copy_src.get(), out_bytes, runner);
  };
  p->roofline_kind = detail::RooflineCopyStreams(out_bytes) ? "stream copy" : "memcpy";
  p->bytes = static_cast<double>(static_cast<size_t>(n) * row_bytes + out_bytes);
  p->roofline_bytes = 2.0 * static_cast<double>(out_bytes);
  p->keep.push_back(table);
  p->keep.push_back(out);
  p->keep.push_back(copy_src);
  p->keep.push_back(ids);
  return p;
}

}  // namespace

std::string CaseSpec::Name() const {
  if (fused) return fmt::format("{}/{}/{}/cache_{}", op, ToString(dtype), ToString(layout), ToString(cache_type));
  return fmt::format("{}/{}/{}{}", op, ToString(dtype), op.rfind("gather", 0) == 0 ? "rows" : ToString(layout),
                     inplace ? "" : "/oop");
}

namespace {
size_t evict_bytes = 0;  // 0: from LargestCacheBytes()

// The largest cache the machine reports (glibc's sysconf, from cpuid on x86); 0 where it does not say.
size_t LargestCacheBytes() {
  long largest = 0;
  for (int name : {_SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL4_CACHE_SIZE})
    largest = std::max(largest, sysconf(name));
  return static_cast<size_t>(largest);
}
}  // namespace

void SetEvictBytes(size_t bytes) { evict_bytes = bytes; }

size_t EvictBytes() {
  if (evict_bytes == 0) evict_bytes = std::clamp(2 * LargestCacheBytes(), size_t{256} << 20, size_t{4} << 30);
  return evict_bytes;
}

void EvictCaches(ParallelRunner& pool) {
  static const size_t bytes = EvictBytes();
  static uint64_t* buf = [] {
    auto* b = new uint64_t[bytes / 8];
    for (size_t i = 0; i < bytes / 8; ++i) b[i] = i;
    return b;
  }();
  constexpr int64_t kChunks = 256;
  std::atomic<uint64_t> total{0};
  pool.For(kChunks, [&](int64_t b, int64_t e) {
    uint64_t sum = 0;
    const size_t w0 = bytes / 8 * static_cast<size_t>(b) / kChunks, w1 = bytes / 8 * static_cast<size_t>(e) / kChunks;
    for (size_t i = w0; i < w1; i += 8) sum += buf[i];  // one word per 64-byte line
    total.fetch_add(sum, std::memory_order_relaxed);
  });
  static volatile uint64_t sink;
  sink = sink + total.load();  // keeps the reads
  // A worker that finished its share early may have gone to sleep meanwhile: one empty round makes
  // every worker run (and return to polling) right before the timed pass.
  pool.For(pool.num_threads(), [](int64_t, int64_t) {});
}

// The display shape of a row, as `posenc bench` prints it.
std::string ShapeText(const cases::KernelCase& k) {
  const std::string T = k.decode ? fmt::format("{}x1", k.tokens) : fmt::format("{}", k.tokens);
  const char* to_cache = k.decode ? "paged cache [16384" : "cache [8192";
  switch (k.family) {
    case cases::KernelFamily::kRope:
      if (k.kv_heads > 0)
        return fmt::format("q [{}, {}, {}] + k [{}, {}, {}]", T, k.heads, k.head_dim, T, k.kv_heads, k.head_dim);
      return fmt::format("[{}, {}, {}]", T, k.heads, k.head_dim);
    case cases::KernelFamily::kMultiAxisRope: return fmt::format("[{}, {}, {}] (t, h, w)", T, k.heads, k.head_dim);
    case cases::KernelFamily::kGather: return fmt::format("{} of [{}, {}]", k.tokens, k.vocab, k.head_dim);
    case cases::KernelFamily::kMla:
      return fmt::format("kv [{}, {} + {}] + q [{}, {}, {}] -> {}, {}]", T, k.kv_lora_rank, k.rotary_dim, T, k.heads,
                         k.head_dim, to_cache, k.kv_lora_rank + k.rotary_dim);
    default:
      return fmt::format("qkv [{}, {} x {}] -> q + {}, {}, {}]", T, k.heads + 2 * k.kv_heads, k.head_dim, to_cache,
                         k.kv_heads, k.head_dim);
  }
}

std::vector<CaseSpec> AllCases() {
  std::vector<CaseSpec> rows;
  for (const cases::KernelCase& k : cases::ModelCases()) {
    const bool fused = k.family == cases::KernelFamily::kFusedRopeKv || k.family == cases::KernelFamily::kFloat8Kv ||
                       k.family == cases::KernelFamily::kQkNormFused || k.family == cases::KernelFamily::kMla;
    rows.push_back({k.op, ShapeText(k), k.dtype, k.pairing, k.in_place, fused, k.cache_type, k});
  }
  return rows;
}

std::unique_ptr<Prepared> Prepare(const CaseSpec& c, ParallelRunner* runner) {
  switch (c.kernel.family) {
    case cases::KernelFamily::kMla: return PrepareMla(c, runner);
    case cases::KernelFamily::kMultiAxisRope: return PrepareMultiAxis(c, runner);
    case cases::KernelFamily::kGather: return PrepareGather(c, runner);
    case cases::KernelFamily::kRope: return PrepareRope(c, runner);
    default: return PrepareFused(c, runner);
  }
}

}  // namespace posenc::bench
