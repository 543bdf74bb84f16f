// Side by side with the CPU engines, in one process (bench/peers/README.md).
//
// For each case (Llama-3-8B: prefill 512 and 4096 tokens, decode 64 sequences x 1 token; float32
// activations; float32 or float16 cache) and thread count, every row does the same work: rotate q and
// k (NeoX pairing, theta 500000) and write k and v into the cache rows named by the slots:
//   posenc.fused          ApplyRopeKvCache, q out of place (the row ggml is compared with)
//   posenc.separate       ApplyRope(q -> q_out), ApplyRope(k -> k_tmp), StoreKvCache(k_tmp, v)
//                         (--model qwen3: Qwen3-8B, theta 1e6, q and k RMS-normed per head first: the
//                         fused rows with q_norm / k_norm, the separate row ApplyHeadRmsNorm first)
//   posenc.fused_inplace  ApplyRopeKvCache with q rotated in place (for peers that rotate in place)
//   ggml                  rope_ext(q), rope_ext(k), set_rows(k), set_rows(v): one graph, built once
//   ggml.rope_only        the same graph's two rope ops alone (not compared: the rotations' share)
//   vllm                  vLLM's rotary_embedding (q, k in place) + reshape_and_cache (peer_vllm.cpp),
//                         compared with posenc.fused_inplace, or in the cache_f16 cases (vLLM then runs on
//                         float16 activations) with posenc.inplace_f16in on the same float16 input
//   vllm.rope_only        rotary_embedding alone (not compared)
//                         qwen3: vllm = rms_norm of the q and k heads, rotary_embedding, reshape_and_cache
//                         (vllm.norm_rope: without the cache write); deepseek3 (f16/bf16): rms_norm(kv_c),
//                         rotary_embedding (GPT-J pairs) of the gathered q_pe and k_pe, concat_and_cache_mla_cpu;
//                         the 16-bit cases are compared with posenc.inplace_f16in / inplace_bf16in
// Rows take turns within each round (the order rotates every round), so the host's state hits all of
// them alike; each timed call is preceded by the cold pass (1 GiB read on the row's own threads)
// or, with --mode warm, by one untimed call of the same row. Medians are printed with the ratio
// posenc time / peer time. Before timing, each row runs once from fresh inputs and its outputs are
// compared with posenc.fused's (max abs difference of q, of the k rows and of the v rows).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "peers.hpp"
#include "posenc/core/dtype.hpp"
#include "posenc/core/parallel.hpp"
#include "posenc/kernels/fused_rope.hpp"
#include "posenc/kernels/kv_cache.hpp"
#include "posenc/kernels/mla_cache.hpp"
#include "posenc/kernels/rms_norm.hpp"
#include "posenc/kernels/rope.hpp"
#include "posenc/math/rope_table.hpp"

namespace sbs {

std::shared_ptr<void> AlignedZeroed(size_t bytes) {
  const size_t n = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, n == 0 ? 64 : n);
  if (p == nullptr) {
    std::fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    std::exit(1);
  }
  std::memset(p, 0, n == 0 ? 64 : n);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

#ifndef SBS_WITH_GGML
std::vector<Row> GgmlRows(const CaseData&, int) { return {}; }
std::vector<Row> GgmlMlaRows(const CaseData&, int) { return {}; }
std::string GgmlInfo() { return ""; }
#endif
#ifndef SBS_WITH_VLLM
std::vector<Row> VllmRows(const CaseData&, int, posenc::ParallelRunner*) { return {}; }
std::string VllmInfo() { return ""; }
#endif
#ifndef SBS_WITH_SGLANG
std::vector<Row> SglangRows(const CaseData&, int) { return {}; }
std::string SglangInfo() { return ""; }
#endif

namespace {

using namespace posenc;

// The cos/sin table of `dims` rotary dims at theta (Llama 3's 500000, Qwen3's 1e6, DeepSeek's 10000).
const RopeTable& Table(double theta, int64_t dims = 128) {
  static std::map<std::pair<double, int64_t>, RopeTable> tables;
  auto it = tables.find({theta, dims});
  if (it == tables.end())
    it = tables.emplace(std::pair{theta, dims}, RopeTable::Build(DefaultRopeFrequencies(dims, theta).value(), 8192,
                                                                 RopePrecision::kReference)
                                                    .value())
             .first;
  return it->second;
}

CaseData MakeCase(const std::string& shape, const std::string& cache, const std::string& model) {
  CaseData c;
  c.name = (model == "llama3" ? "" : model + "/") + shape + "/cache_" + cache;
  c.f16_cache = cache == "f16";
  c.bf16_cache = cache == "bf16";
  std::mt19937 wr(7);
  std::uniform_real_distribution<float> w(0.5f, 1.5f);
  if (model == "deepseek3") {  // DeepSeek-V3: 128 q heads of 128 + 64, kv_lora_rank 512, 64 rope dims
    c.mla = true;
    c.Hq = 128, c.Hkv = 1, c.D = 64, c.theta = 10000.0;
    c.row_values = c.kv_lora + c.D;
    for (int64_t i = 0; i < c.kv_lora; ++i) c.kv_norm_w.push_back(w(wr));
  }
  if (model == "qwen3") {  // Qwen3-8B: QK-norm (weights around 1, as trained ones are) and theta 1e6
    c.qk_norm = true;
    c.theta = 1000000.0;
    for (auto* v : {&c.q_norm_w, &c.k_norm_w})
      for (int64_t i = 0; i < c.D; ++i) v->push_back(w(wr));
  }
  const bool decode = shape == "decode64";
  c.T = decode ? 64 : shape == "prefill512" ? 512 : 4096;
  c.cache_slots = decode ? 16384 : 8192;
  std::mt19937 rng(3);
  c.pos.resize(static_cast<size_t>(c.T));
  if (decode) {
    // 64 sequences, one token each at a random position < 8192, each in a distinct random 16-row page
    // of a paged cache (as posenc bench's fused_decode rows).
    const int64_t page = 16, pages = c.cache_slots / page, max_pages = 8192 / page;
    std::vector<int32_t> pool(static_cast<size_t>(pages)), table(static_cast<size_t>(c.T * max_pages), -1);
    for (int64_t i = 0; i < pages; ++i) pool[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int64_t> seq(static_cast<size_t>(c.T));
    for (int64_t t = 0; t < c.T; ++t) {
      const int64_t p = static_cast<int64_t>(rng() % 8192);
      c.pos[static_cast<size_t>(t)] = p;
      seq[static_cast<size_t>(t)] = t;
      table[static_cast<size_t>(t * max_pages + p / page)] = pool[static_cast<size_t>(t)];
    }
    c.slots = PagedKvSlots(PagedKvTable{page, pages, max_pages, table}, seq, c.pos).value();
  } else {
    // Prefill of one sequence into the first rows of an 8192-row cache.
    c.slots.resize(static_cast<size_t>(c.T));
    for (int64_t t = 0; t < c.T; ++t) c.pos[static_cast<size_t>(t)] = c.slots[static_cast<size_t>(t)] = t;
  }
  const size_t n = static_cast<size_t>(c.T * (c.mla ? c.row_values : c.W()));
  c.qkv = std::shared_ptr<float[]>(new float[n]);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (size_t i = 0; i < n; ++i) c.qkv[i] = u(rng);
  if (c.mla) {
    const size_t nq = static_cast<size_t>(c.T * c.Hq * (c.nope + c.D));
    c.q_mla = std::shared_ptr<float[]>(new float[nq]);
    for (size_t i = 0; i < nq; ++i) c.q_mla[i] = u(rng);
  }
  return c;
}

// The cold pass: reads (never writes) g_evict_bytes, one word per 64-byte line, split over the caller's
// threads. The default, 1 GiB, is twice the largest L3 of the machines in docs/PERFORMANCE.md.
size_t g_evict_bytes = size_t{1} << 30;

void Evict(int ith, int nth) {
  static const size_t words = g_evict_bytes / 8;
  static uint64_t* buf = [] {
    auto* b = new uint64_t[words];
    for (size_t i = 0; i < words; ++i) b[i] = i;
    return b;
  }();
  static std::atomic<uint64_t> sink{0};
  uint64_t s = 0;
  const size_t w0 = words * static_cast<size_t>(ith) / static_cast<size_t>(nth);
  const size_t w1 = words * static_cast<size_t>(ith + 1) / static_cast<size_t>(nth);
  for (size_t i = w0; i < w1; i += 8) s += buf[i];
  sink.fetch_add(s, std::memory_order_relaxed);
}

OnThreads PoolThreads(ParallelRunner* pool) {
  return [pool](const std::function<void(int, int)>& fn) {
    const int n = pool->num_threads();
    pool->For(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(static_cast<int>(i), n);
    });
  };
}

KvCacheType CacheType(const CaseData& c) {
  return c.f16_cache ? KvCacheType::kF16 : c.bf16_cache ? KvCacheType::kBF16 : KvCacheType::kF32;
}

float CacheValue(const KvCacheView& cache, bool k, int64_t slot, int64_t i) {
  const std::byte* row = k ? cache.k_row(0, slot) : cache.v_row(0, slot);
  if (cache.type == KvCacheType::kF16) return F16ToF32(reinterpret_cast<const f16_t*>(row)[i]);
  if (cache.type == KvCacheType::kBF16) return BF16ToF32(reinterpret_cast<const bf16_t*>(row)[i]);
  return reinterpret_cast<const float*>(row)[i];
}

void Check(Status s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// posenc's rows over the case's input; each row has its own outputs (and fused_inplace its own copy of
// the input, which it rotates in place).
std::vector<Row> PosencRows(const CaseData& c, std::shared_ptr<ParallelRunner> pool) {
  const int64_t T = c.T, Hq = c.Hq, Hkv = c.Hkv, D = c.D;
  const KvCacheType ct = CacheType(c);
  const size_t es = c.f16_cache || c.bf16_cache ? 2 : 4;
  const size_t cache_bytes = static_cast<size_t>(c.cache_slots * Hkv * D) * es;
  const size_t in_bytes = static_cast<size_t>(T * c.W()) * 4;
  struct State {
    std::shared_ptr<ParallelRunner> pool;
    std::vector<int64_t> pos, slots;
    std::vector<float> qw, kw;
    HeadRmsNorm qn, kn;  // empty unless c.qk_norm
    RopeArgs args;
    FusedRopeArgs fa;
    std::shared_ptr<void> q_out[2], k_tmp, kc[3], vc[3], in_ip;
    KvCacheView cache[3];
    QkvViews qkv, qkv_ip;
    HeadsView qov[2], ktv;
  };
  auto s = std::make_shared<State>();
  s->pool = pool;
  s->pos = c.pos;
  s->slots = c.slots;
  s->args = RopeArgs{{RopePairing::kHalf, D, 0, D}, &Table(c.theta), s->pos};
  s->args.parallel = pool.get();
  s->qw = c.q_norm_w;
  s->kw = c.k_norm_w;
  if (c.qk_norm) {
    s->qn = HeadRmsNorm{s->qw, c.eps};
    s->kn = HeadRmsNorm{s->kw, c.eps};
  }
  s->fa = FusedRopeArgs{s->args, s->slots, 0, {}, s->qn, s->kn};
  for (int i = 0; i < 2; ++i) {
    s->q_out[i] = AlignedZeroed(static_cast<size_t>(T * Hq * D) * 4);
    s->qov[i] = HeadsView::Dense(s->q_out[i].get(), DType::kF32, T, Hq, D);
  }
  s->k_tmp = AlignedZeroed(static_cast<size_t>(T * Hkv * D) * 4);
  s->ktv = HeadsView::Dense(s->k_tmp.get(), DType::kF32, T, Hkv, D);
  for (int i = 0; i < 3; ++i) {
    s->kc[i] = AlignedZeroed(cache_bytes);
    s->vc[i] = AlignedZeroed(cache_bytes);
    s->cache[i] = KvCacheView{s->kc[i].get(), s->vc[i].get(), ct, 1, c.cache_slots, Hkv, D};
  }
  s->qkv = SplitFusedQkv(c.qkv.get(), DType::kF32, T, Hq, Hkv, D).value();
  s->in_ip = AlignedZeroed(in_bytes);
  s->qkv_ip = SplitFusedQkv(s->in_ip.get(), DType::kF32, T, Hq, Hkv, D).value();
  const float* src = c.qkv.get();

  std::vector<Row> rows(3);
  const OnThreads threads = PoolThreads(pool.get());
  auto k_of = [s](int i) {
    return [s, i](int64_t t, int64_t j) { return CacheValue(s->cache[i], true, s->slots[static_cast<size_t>(t)], j); };
  };
  auto v_of = [s](int i) {
    return [s, i](int64_t t, int64_t j) { return CacheValue(s->cache[i], false, s->slots[static_cast<size_t>(t)], j); };
  };

  rows[0].name = "posenc.fused";
  rows[0].run = [s] { Check(ApplyRopeKvCache(s->fa, s->qkv, s->qov[0], s->cache[0]), "ApplyRopeKvCache"); };
  rows[0].q_out = [s] { return static_cast<const float*>(s->q_out[0].get()); };
  rows[0].k_at = k_of(0);
  rows[0].v_at = v_of(0);

  rows[1].name = "posenc.separate";
  rows[1].run = [s] {
    if (s->qn.enabled()) {  // the norms, then the rotations in place
      Check(ApplyHeadRmsNorm(s->qn, s->qkv.q, s->qov[1], s->pool.get()), "ApplyHeadRmsNorm q");
      Check(ApplyHeadRmsNorm(s->kn, s->qkv.k, s->ktv, s->pool.get()), "ApplyHeadRmsNorm k");
      Check(ApplyRope(s->args, s->qov[1]), "ApplyRope q");
      Check(ApplyRope(s->args, s->ktv), "ApplyRope k");
    } else {
      Check(ApplyRope(s->args, s->qkv.q, s->qov[1]), "ApplyRope q");
      Check(ApplyRope(s->args, s->qkv.k, s->ktv), "ApplyRope k");
    }
    Check(StoreKvCache(s->cache[1], 0, s->slots, s->ktv, s->qkv.v, s->pool.get()), "StoreKvCache");
  };
  rows[1].q_out = [s] { return static_cast<const float*>(s->q_out[1].get()); };
  rows[1].k_at = k_of(1);
  rows[1].v_at = v_of(1);

  rows[2].name = "posenc.fused_inplace";
  rows[2].run = [s] { Check(ApplyRopeKvCache(s->fa, s->qkv_ip, s->qkv_ip.q, s->cache[2]), "ApplyRopeKvCache in place"); };
  rows[2].reset = [s, src, in_bytes] { std::memcpy(s->in_ip.get(), src, in_bytes); };
  rows[2].q_out = [s] { return static_cast<const float*>(s->in_ip.get()); };  // q rows of the fused buffer
  rows[2].q_stride = c.W();
  rows[2].k_at = k_of(2);
  rows[2].v_at = v_of(2);
  for (auto& r : rows) {
    r.on_threads = threads;
    r.keep = s;
  }
  return rows;
}

// posenc's MLA rows (c.mla): `posenc.fused` = ApplyMlaRopeCache with the q windows rotated in place
// (as ggml rotates only q_pe); `posenc.separate` = the norm into a row, RoPE of k_pe into it, RoPE of
// q in place, StoreKvCache of the row. Each row has its own q copy and cache.
std::vector<Row> PosencMlaRows(const CaseData& c, std::shared_ptr<ParallelRunner> pool) {
  const int64_t T = c.T, H = c.Hq, rope = c.D, lora = c.kv_lora, R = c.row_values, Dq = c.nope + c.D;
  struct State {
    std::shared_ptr<ParallelRunner> pool;
    std::vector<int64_t> pos, slots;
    std::vector<float> w, qg;
    RopeArgs args, ka;
    MlaRopeArgs ma;
    std::shared_ptr<void> q[2], row, mem[2], v_unused;
    MlaCacheView cache[2];
    HeadsView kv_c, k_pe, qv[2], latent, pe, row_view;
  };
  auto s = std::make_shared<State>();
  s->pool = pool;
  s->pos = c.pos;
  s->slots = c.slots;
  s->w = c.kv_norm_w;
  s->args = RopeArgs{{RopePairing::kInterleaved, Dq, c.nope, rope}, &Table(c.theta, rope), s->pos};
  s->args.parallel = pool.get();
  s->ka = s->args;
  s->ka.layout = {RopePairing::kInterleaved, rope, 0, rope};
  s->ma = MlaRopeArgs{s->args, s->slots, 0, HeadRmsNorm{s->w, c.eps}};
  float* kv = c.qkv.get();
  s->kv_c = HeadsView{kv, DType::kF32, T, 1, lora, R, lora};
  s->k_pe = HeadsView{kv + lora, DType::kF32, T, 1, rope, R, rope};
  s->row = AlignedZeroed(static_cast<size_t>(T * R) * 4);
  s->latent = HeadsView{s->row.get(), DType::kF32, T, 1, lora, R, lora};
  s->pe = HeadsView{static_cast<float*>(s->row.get()) + lora, DType::kF32, T, 1, rope, R, rope};
  s->row_view = HeadsView::Dense(s->row.get(), DType::kF32, T, 1, R);
  const KvCacheType ct = CacheType(c);
  for (int i = 0; i < 2; ++i) {
    s->q[i] = AlignedZeroed(static_cast<size_t>(T * H * Dq) * 4);
    s->qv[i] = HeadsView::Dense(s->q[i].get(), DType::kF32, T, H, Dq);
    s->cache[i] = MlaCacheView{nullptr, ct, 1, c.cache_slots, lora, rope};
    s->mem[i] = AlignedZeroed(static_cast<size_t>(s->cache[i].bytes()));
    s->cache[i].data = s->mem[i].get();
  }
  s->v_unused = AlignedZeroed(static_cast<size_t>(s->cache[0].bytes()));
  const float* src = c.q_mla.get();
  const size_t q_bytes = static_cast<size_t>(T * H * Dq) * 4;
  std::vector<Row> rows(2);
  rows[0].name = "posenc.fused";
  rows[0].run = [s] { Check(ApplyMlaRopeCache(s->ma, s->kv_c, s->k_pe, s->qv[0], s->qv[0], s->cache[0]), "MLA"); };
  rows[1].name = "posenc.separate";
  rows[1].run = [s] {
    Check(ApplyHeadRmsNorm(s->ma.kv_norm, s->kv_c, s->latent, s->pool.get()), "ApplyHeadRmsNorm");
    Check(ApplyRope(s->ka, s->k_pe, s->pe), "ApplyRope k_pe");
    Check(ApplyRope(s->args, s->qv[1]), "ApplyRope q");
    const HeadsView no_v{nullptr, DType::kF32, 0, 1, s->row_view.head_dim, s->row_view.head_dim, s->row_view.head_dim};
    Check(StoreKvCache(s->cache[1].AsKvCache(s->v_unused.get()), 0, s->slots, s->row_view, no_v, s->pool.get()),
          "StoreKvCache");
  };
  for (int i = 0; i < 2; ++i) {
    Row& r = rows[static_cast<size_t>(i)];
    r.reset = [s, i, src, q_bytes] { std::memcpy(s->q[i].get(), src, q_bytes); };
    r.q_out = [s, i, T, H, rope, Dq, nope = c.nope] {  // the rotated windows, [T, H, rope]
      s->qg.resize(static_cast<size_t>(T * H * rope));
      const float* q = static_cast<const float*>(s->q[i].get());
      for (int64_t th = 0; th < T * H; ++th)
        std::memcpy(&s->qg[static_cast<size_t>(th * rope)], q + th * Dq + nope, static_cast<size_t>(rope) * 4);
      return static_cast<const float*>(s->qg.data());
    };
    r.k_at = [s, i](int64_t t, int64_t j) {
      return CacheValue(s->cache[i].AsKvCache(s->v_unused.get()), true, s->slots[static_cast<size_t>(t)], j);
    };
    r.v_at = r.k_at;
    r.on_threads = PoolThreads(pool.get());
    r.keep = s;
  }
  return rows;
}

// posenc on the 16-bit input the vllm and sglang rows read in the cache_f16 / cache_bf16 cases (the
// float32 case's projection output rounded to float16 / bfloat16): ApplyRopeKvCache (qwen3: with
// q_norm / k_norm) with q rotated in place into the cache of that type; "posenc.inplace_f16in" /
// "posenc.inplace_bf16in".
void RoundTo(DType dt, const float* src, int64_t n, void* dst) {
  for (int64_t i = 0; i < n; ++i) {
    if (dt == DType::kF16) static_cast<f16_t*>(dst)[i] = F32ToF16(src[i]);
    else static_cast<bf16_t*>(dst)[i] = F32ToBF16(src[i]);
  }
}

float HalfAt(DType dt, const void* p, int64_t i) {
  return dt == DType::kF16 ? F16ToF32(static_cast<const f16_t*>(p)[i]) : BF16ToF32(static_cast<const bf16_t*>(p)[i]);
}

Row PosencHalfIn(const CaseData& c, ParallelRunner* pool) {
  struct State {
    RopeTable table;
    std::vector<int64_t> pos, slots;
    std::vector<float> qw, kw;
    RopeArgs args;
    FusedRopeArgs fa;
    std::shared_ptr<void> src, in, kc, vc;
    std::vector<float> q;
    KvCacheView cache;
    QkvViews qkv;
    DType dt = DType::kF16;
    int64_t T = 0, W = 0, qn = 0;
  };
  auto s = std::make_shared<State>();
  const int64_t T = c.T, D = c.D;
  s->dt = c.f16_cache ? DType::kF16 : DType::kBF16;
  s->table = RopeTable::Build(DefaultRopeFrequencies(D, c.theta).value(), c.max_positions, RopePrecision::kReference)
                 .value();
  s->pos = c.pos;
  s->slots = c.slots;
  s->qw = c.q_norm_w;
  s->kw = c.k_norm_w;
  s->args = RopeArgs{{RopePairing::kHalf, D, 0, D}, &s->table, s->pos};
  s->args.parallel = pool;
  s->fa = FusedRopeArgs{s->args, s->slots, 0, {}};
  if (c.qk_norm) {
    s->fa.q_norm = HeadRmsNorm{s->qw, c.eps};
    s->fa.k_norm = HeadRmsNorm{s->kw, c.eps};
  }
  s->T = T;
  s->W = c.W();
  s->qn = c.Hq * D;
  s->src = AlignedZeroed(static_cast<size_t>(T * c.W()) * 2);
  RoundTo(s->dt, c.qkv.get(), T * c.W(), s->src.get());
  s->in = AlignedZeroed(static_cast<size_t>(T * c.W()) * 2);
  std::memcpy(s->in.get(), s->src.get(), static_cast<size_t>(T * c.W()) * 2);
  const size_t cache_bytes = static_cast<size_t>(c.cache_slots * c.kv_row()) * 2;
  s->kc = AlignedZeroed(cache_bytes);
  s->vc = AlignedZeroed(cache_bytes);
  s->cache = KvCacheView{s->kc.get(), s->vc.get(), CacheType(c), 1, c.cache_slots, c.Hkv, D};
  s->qkv = SplitFusedQkv(s->in.get(), s->dt, T, c.Hq, c.Hkv, D).value();
  Row r;
  r.name = c.f16_cache ? "posenc.inplace_f16in" : "posenc.inplace_bf16in";
  r.run = [s] {
    const Status st = ApplyRopeKvCache(s->fa, s->qkv, s->qkv.q, s->cache);
    Check(st, "ApplyRopeKvCache 16-bit in place");
  };
  r.on_threads = PoolThreads(pool);
  r.reset = [s] { std::memcpy(s->in.get(), s->src.get(), static_cast<size_t>(s->T * s->W) * 2); };
  r.q_out = [s] {
    s->q.resize(static_cast<size_t>(s->T * s->qn));
    for (int64_t t = 0; t < s->T; ++t)
      for (int64_t i = 0; i < s->qn; ++i) s->q[static_cast<size_t>(t * s->qn + i)] = HalfAt(s->dt, s->in.get(), t * s->W + i);
    return static_cast<const float*>(s->q.data());
  };
  auto at = [s](bool k) {
    return [s, k](int64_t t, int64_t i) {
      const std::byte* row = k ? s->cache.k_row(0, s->slots[static_cast<size_t>(t)])
                               : s->cache.v_row(0, s->slots[static_cast<size_t>(t)]);
      return HalfAt(s->dt, row, i);
    };
  };
  r.k_at = at(true);
  r.v_at = at(false);
  r.keep = s;
  return r;
}

// The MLA analogue (c.mla): ApplyMlaRopeCache on the latent output and queries rounded to float16 /
// bfloat16 (what the vllm row reads), the q windows rotated in place, into the cache of that type.
Row PosencMlaHalfIn(const CaseData& c, ParallelRunner* pool) {
  const int64_t T = c.T, H = c.Hq, rope = c.D, lora = c.kv_lora, R = c.row_values, Dq = c.nope + c.D;
  struct State {
    std::vector<int64_t> pos, slots;
    std::vector<float> w, qg;
    MlaRopeArgs ma;
    std::shared_ptr<void> kv, q_src, q, mem, v_unused;
    MlaCacheView cache;
    HeadsView kv_c, k_pe, qv;
    DType dt = DType::kF16;
    size_t q_bytes = 0;
  };
  auto s = std::make_shared<State>();
  s->dt = c.f16_cache ? DType::kF16 : DType::kBF16;
  s->pos = c.pos;
  s->slots = c.slots;
  s->w = c.kv_norm_w;
  RopeArgs args{{RopePairing::kInterleaved, Dq, c.nope, rope}, &Table(c.theta, rope), s->pos};
  args.parallel = pool;
  s->ma = MlaRopeArgs{args, s->slots, 0, HeadRmsNorm{s->w, c.eps}};
  s->kv = AlignedZeroed(static_cast<size_t>(T * R) * 2);
  RoundTo(s->dt, c.qkv.get(), T * R, s->kv.get());
  auto* kv = static_cast<std::byte*>(s->kv.get());
  s->kv_c = HeadsView{kv, s->dt, T, 1, lora, R, lora};
  s->k_pe = HeadsView{kv + lora * 2, s->dt, T, 1, rope, R, rope};
  s->q_bytes = static_cast<size_t>(T * H * Dq) * 2;
  s->q_src = AlignedZeroed(s->q_bytes);
  RoundTo(s->dt, c.q_mla.get(), T * H * Dq, s->q_src.get());
  s->q = AlignedZeroed(s->q_bytes);
  s->qv = HeadsView::Dense(s->q.get(), s->dt, T, H, Dq);
  s->cache = MlaCacheView{nullptr, CacheType(c), 1, c.cache_slots, lora, rope};
  s->mem = AlignedZeroed(static_cast<size_t>(s->cache.bytes()));
  s->cache.data = s->mem.get();
  s->v_unused = AlignedZeroed(static_cast<size_t>(s->cache.bytes()));
  Row r;
  r.name = c.f16_cache ? "posenc.inplace_f16in" : "posenc.inplace_bf16in";
  r.run = [s] { Check(ApplyMlaRopeCache(s->ma, s->kv_c, s->k_pe, s->qv, s->qv, s->cache), "MLA 16-bit"); };
  r.reset = [s] { std::memcpy(s->q.get(), s->q_src.get(), s->q_bytes); };
  r.q_out = [s, T, H, rope, Dq, nope = c.nope] {
    s->qg.resize(static_cast<size_t>(T * H * rope));
    for (int64_t th = 0; th < T * H; ++th)
      for (int64_t i = 0; i < rope; ++i)
        s->qg[static_cast<size_t>(th * rope + i)] = HalfAt(s->dt, s->q.get(), th * Dq + nope + i);
    return static_cast<const float*>(s->qg.data());
  };
  r.k_at = [s](int64_t t, int64_t j) {
    return CacheValue(s->cache.AsKvCache(s->v_unused.get()), true, s->slots[static_cast<size_t>(t)], j);
  };
  r.v_at = r.k_at;
  r.on_threads = PoolThreads(pool);
  r.keep = s;
  return r;
}

struct Diff {
  double q = 0, k = 0, v = 0;
};

// Max abs differences of a row's outputs from the reference row's.
Diff Compare(const CaseData& c, const Row& ref, const Row& row) {
  Diff d;
  const int64_t qn = c.Hq * c.D;
  const float* a = ref.q_out();
  const float* b = row.q_out();
  const int64_t sa = ref.q_stride ? ref.q_stride : qn, sb = row.q_stride ? row.q_stride : qn;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t i = 0; i < qn; ++i) d.q = std::max(d.q, std::fabs(double(a[t * sa + i]) - double(b[t * sb + i])));
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t i = 0; i < c.kv_row(); ++i) {
      d.k = std::max(d.k, std::fabs(double(ref.k_at(t, i)) - double(row.k_at(t, i))));
      d.v = std::max(d.v, std::fabs(double(ref.v_at(t, i)) - double(row.v_at(t, i))));
    }
  return d;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

void Usage() {
  std::printf(
      "side_by_side [--shapes prefill512,prefill4096,decode64] [--caches f32,f16,bf16] [--threads 1,2]\n"
      "             [--mode cold|warm] [--rounds N] [--peers ggml,vllm,sglang] [--evict-mib 1024]\n"
      "             [--model llama3|qwen3|deepseek3]   (qwen3: QK-norm before RoPE; deepseek3: the MLA\n"
      "             cache row; both against ggml and vLLM (deepseek3 vLLM: f16/bf16 caches))\n"
      "Rounds default to 15 (prefill4096), 31 (prefill512), 51 (decode64); --rounds N sets all.\n");
}

}  // namespace
}  // namespace sbs

int main(int argc, char** argv) {
  using namespace sbs;
  std::vector<std::string> shapes{"prefill512", "prefill4096", "decode64"}, caches{"f32", "f16"};
  std::vector<int> thread_counts{1, 2};
  std::string mode = "cold";
  int rounds = 0;
  std::vector<std::string> peers{"ggml", "vllm", "sglang"};
  std::string model = "llama3";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--shapes") shapes = Split(next());
    else if (a == "--caches") caches = Split(next());
    else if (a == "--threads") {
      thread_counts.clear();
      for (const auto& t : Split(next())) thread_counts.push_back(std::atoi(t.c_str()));
    } else if (a == "--mode") mode = next();
    else if (a == "--rounds") rounds = std::atoi(next().c_str());
    else if (a == "--peers") peers = Split(next());
    else if (a == "--model") model = next();
    else if (a == "--evict-mib") g_evict_bytes = static_cast<size_t>(std::atoll(next().c_str())) << 20;
    else {
      Usage();
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (model != "llama3" && model != "qwen3" && model != "deepseek3") {
    Usage();
    return 2;
  }
  if (model != "llama3")  // SGLang's rope here has neither QK-norm nor MLA (vLLM's rows: its rms_norm, MLA cache writer)
    peers.erase(std::remove_if(peers.begin(), peers.end(), [](const std::string& p) { return p == "sglang"; }),
                peers.end());
  if (mode == "cold") Evict(0, 1);  // fills the cold pass's buffer before anything is timed
  auto want = [&](const char* p) { return std::find(peers.begin(), peers.end(), p) != peers.end(); };
  std::printf("# side_by_side: mode %s (cold pass %zu MiB); ratio = posenc median / peer median (< 1: posenc faster)\n",
              mode.c_str(), g_evict_bytes >> 20);
  if (!GgmlInfo().empty()) std::printf("# %s\n", GgmlInfo().c_str());
  if (!VllmInfo().empty()) std::printf("# %s\n", VllmInfo().c_str());
  if (!SglangInfo().empty()) std::printf("# %s\n", SglangInfo().c_str());
  std::printf("%-24s %3s %-21s %9s %9s %7s %9s %9s %9s\n", "case", "thr", "row", "median_ms", "min_ms", "ratio",
              "maxdiff_q", "maxdiff_k", "maxdiff_v");
  for (const auto& shape : shapes) {
    for (const auto& cache : caches) {
      if (cache != "f32" && cache != "f16" && cache != "bf16") {
        Usage();
        return 2;
      }
      const CaseData c = MakeCase(shape, cache, model);
      for (int nt : thread_counts) {
        std::shared_ptr<posenc::ParallelRunner> pool(posenc::ThreadPool::Create(nt).value().release());
        std::vector<Row> rows = c.mla ? PosencMlaRows(c, pool) : PosencRows(c, pool);
        if (want("ggml"))
          for (auto& r : c.mla ? GgmlMlaRows(c, nt) : GgmlRows(c, nt)) rows.push_back(std::move(r));
        // The 16-bit-input posenc row the vLLM / SGLang rows are compared with (SGLang: llama3 f16 only).
        const bool torch_peer = (want("vllm") && !VllmInfo().empty()) ||
                                (want("sglang") && !SglangInfo().empty() && c.f16_cache);
        if ((c.f16_cache || c.bf16_cache) && torch_peer)
          rows.push_back(c.mla ? PosencMlaHalfIn(c, pool.get()) : PosencHalfIn(c, pool.get()));
        if (want("vllm"))
          for (auto& r : VllmRows(c, nt, pool.get())) rows.push_back(std::move(r));
        if (want("sglang") && c.f16_cache)
          for (auto& r : SglangRows(c, nt)) rows.push_back(std::move(r));
        // One run of each row from fresh inputs, compared with posenc.fused.
        std::vector<Diff> diffs(rows.size());
        for (auto& r : rows) {
          if (r.reset) r.reset();
          r.run();
        }
        for (size_t i = 1; i < rows.size(); ++i)
          if (rows[i].q_out) diffs[i] = Compare(c, rows[0], rows[i]);
        const int n = rounds > 0 ? rounds : shape == "prefill4096" ? 15 : shape == "prefill512" ? 31 : 51;
        std::vector<std::vector<double>> ms(rows.size());
        for (int round = 0; round < n; ++round) {
          for (size_t j = 0; j < rows.size(); ++j) {
            Row& r = rows[(j + static_cast<size_t>(round)) % rows.size()];
            // Every thread pool (posenc's, OpenMP's) idles into sleep before the next row wakes its own.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (mode == "cold") r.on_threads(Evict);
            else r.run();
            const auto t0 = std::chrono::steady_clock::now();
            r.run();
            const auto t1 = std::chrono::steady_clock::now();
            ms[(j + static_cast<size_t>(round)) % rows.size()].push_back(
                std::chrono::duration<double, std::milli>(t1 - t0).count());
          }
        }
        std::map<std::string, double> med;
        for (size_t i = 0; i < rows.size(); ++i) med[rows[i].name] = Median(ms[i]);
        for (size_t i = 0; i < rows.size(); ++i) {
          const Row& r = rows[i];
          char ratio[16] = "";
          if (!r.versus.empty()) std::snprintf(ratio, sizeof ratio, "%.2f", med[r.versus] / med[r.name]);
          char diff[40] = "        -         -         -";
          if (r.q_out) std::snprintf(diff, sizeof diff, "%9.2e %9.2e %9.2e", diffs[i].q, diffs[i].k, diffs[i].v);
          std::printf("%-24s %3d %-21s %9.4f %9.4f %7s %s\n", c.name.c_str(), nt, r.name.c_str(), med[r.name],
                      *std::min_element(ms[i].begin(), ms[i].end()), ratio, diff);
        }
        for (const Row& r : rows)
          if (r.name == "vllm")
            std::printf("%-24s %3d ratios: %s/vllm %.2f\n", c.name.c_str(), nt, r.versus.substr(7).c_str(),
                        med[r.versus] / med["vllm"]);
        if (med.count("sglang"))
          std::printf("%-24s %3d ratios: inplace_f16in/sglang %.2f\n", c.name.c_str(), nt,
                      med["posenc.inplace_f16in"] / med["sglang"]);
        if (med.count("ggml"))
          std::printf("%-24s %3d ratios: fused/ggml %.2f  separate/ggml %.2f\n", c.name.c_str(), nt,
                      med["posenc.fused"] / med["ggml"], med["posenc.separate"] / med["ggml"]);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
