// ggml's CPU backend (llama.cpp's graph for one layer's RoPE + KV-cache write), compiled against a
// snapshot of github.com/ggml-org/ggml by bench/peers/build.sh.
//
// The graph is llama.cpp's for a Llama layer with a fused QKV projection and a non-transposed V cache
// (flash attention): q, k and v are views of the [T, 6144] float32 projection output; ggml_rope_ext
// (NeoX, theta 500000, no YaRN) of q and of k into new tensors; ggml_set_rows of the rotated k and of v
// into [1024, slots] caches (float32 or float16) at int64 row indices. Built once per case; the timed
// call is ggml_graph_compute with a plan made once (OpenMP threads as llama.cpp's default build, a
// persistent ggml threadpool object). ggml computes each token's cos/sin inside the rope op from its
// int32 position (float32 theta, sinf/cosf); posenc reads them from its precomputed table.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include <ggml-cpu.h>  // the snapshot's include/ (build.sh passes -I): a third-party header like fmt's
#include <ggml.h>

#include "omp_threads.hpp"
#include "peers.hpp"

namespace sbs {

std::string GgmlInfo() {
  std::string s = "ggml ";
  s += ggml_version();
  s += " (commit ";
  s += ggml_commit();
  s += "), CPU backend, OpenMP";
  if (ggml_cpu_has_avx512()) s += ", AVX512";
  else if (ggml_cpu_has_avx2()) s += ", AVX2";
  if (ggml_cpu_has_f16c()) s += ", F16C";
  return s;
}

namespace {

// One case's graph, plans and buffers, kept alive by the rows that run it.
struct State {
  ggml_context* ctx = nullptr;
  ggml_cgraph* graph = nullptr;
  ggml_cgraph* rope_graph = nullptr;  // the two rope ops alone (where ggml's time goes)
  ggml_threadpool* tp = nullptr;
  ggml_cplan plan{}, rope_plan{};
  std::shared_ptr<void> in, q_out, k_rot, kc, vc, pos, idx, work, wq, wk, qn, kn, qm, km;
  ggml_type cache_type = GGML_TYPE_F32;
  int64_t row = 0;
  std::vector<int64_t> slots;
  ~State() {
    if (tp) ggml_threadpool_free(tp);
    if (ctx) ggml_free(ctx);
  }
};

ggml_type CacheType(const CaseData& c) {
  return c.f16_cache ? GGML_TYPE_F16 : c.bf16_cache ? GGML_TYPE_BF16 : GGML_TYPE_F32;
}

// Value i of token t's cache row in `cache` (the case's cache type), as float.
float CacheAt(const State& s, const void* cache, int64_t t, int64_t i) {
  const int64_t e = s.slots[static_cast<size_t>(t)] * s.row + i;
  if (s.cache_type == GGML_TYPE_F16) return ggml_fp16_to_fp32(static_cast<const ggml_fp16_t*>(cache)[e]);
  if (s.cache_type == GGML_TYPE_BF16) return ggml_bf16_to_fp32(static_cast<const ggml_bf16_t*>(cache)[e]);
  return static_cast<const float*>(cache)[e];
}

// A timed pass: one ggml_graph_compute; a failure ends the program (nothing would be timed).
void MustCompute(ggml_cgraph* graph, ggml_cplan* plan) {
  if (ggml_graph_compute(graph, plan) != GGML_STATUS_SUCCESS) {
    std::fprintf(stderr, "ggml_graph_compute failed\n");
    std::exit(1);
  }
}

// The timed graph (`outs`) and the rope-only one (`rope_outs`), their threadpool, plans and work buffer.
void MakePlans(State* s, int threads, std::initializer_list<ggml_tensor*> outs,
               std::initializer_list<ggml_tensor*> rope_outs) {
  s->graph = ggml_new_graph(s->ctx);
  for (ggml_tensor* t : outs) ggml_build_forward_expand(s->graph, t);
  s->rope_graph = ggml_new_graph(s->ctx);
  for (ggml_tensor* t : rope_outs) ggml_build_forward_expand(s->rope_graph, t);
  ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
  s->tp = ggml_threadpool_new(&tpp);
  s->plan = ggml_graph_plan(s->graph, threads, s->tp);
  s->rope_plan = ggml_graph_plan(s->rope_graph, threads, s->tp);
  const size_t work = std::max(s->plan.work_size, s->rope_plan.work_size);
  if (work > 0) {
    s->work = AlignedZeroed(work);
    s->plan.work_data = s->rope_plan.work_data = static_cast<uint8_t*>(s->work.get());
  }
}

// The compared row `ggml` (q from s->q_out; the caller sets k_at / v_at) and the rope-only row.
std::vector<Row> GraphRows(const std::shared_ptr<State>& s, int threads, const char* rope_name) {
  Row r;
  r.name = "ggml";
  r.versus = "posenc.fused";
  r.run = [s] { MustCompute(s->graph, &s->plan); };
  r.on_threads = OnOmpThreads(threads);
  r.q_out = [s] { return static_cast<const float*>(s->q_out.get()); };
  r.keep = s;
  Row rope;
  rope.name = rope_name;
  rope.run = [s] { MustCompute(s->rope_graph, &s->rope_plan); };
  rope.on_threads = r.on_threads;
  rope.keep = s;
  return {r, rope};
}

}  // namespace

std::vector<Row> GgmlRows(const CaseData& c, int threads) {
  auto s = std::make_shared<State>();
  const int64_t T = c.T, Hq = c.Hq, Hkv = c.Hkv, D = c.D, W = c.W();
  s->row = c.kv_row();
  s->slots = c.slots;
  const ggml_type ct = s->cache_type = CacheType(c);
  const size_t es = ggml_type_size(ct);

  ggml_init_params ip{size_t{16} << 20, nullptr, /*no_alloc=*/true};
  s->ctx = ggml_init(ip);
  // Buffers are ours (64-byte aligned, zeroed); tensors point into them.
  s->in = AlignedZeroed(static_cast<size_t>(T * W) * 4);
  std::memcpy(s->in.get(), c.qkv.get(), static_cast<size_t>(T * W) * 4);
  s->q_out = AlignedZeroed(static_cast<size_t>(T * Hq * D) * 4);
  s->k_rot = AlignedZeroed(static_cast<size_t>(T * Hkv * D) * 4);
  s->kc = AlignedZeroed(static_cast<size_t>(c.cache_slots * s->row) * es);
  s->vc = AlignedZeroed(static_cast<size_t>(c.cache_slots * s->row) * es);
  s->pos = AlignedZeroed(static_cast<size_t>(T) * 4);
  s->idx = AlignedZeroed(static_cast<size_t>(T) * 8);
  for (int64_t t = 0; t < T; ++t) {
    static_cast<int32_t*>(s->pos.get())[t] = static_cast<int32_t>(c.pos[static_cast<size_t>(t)]);
    static_cast<int64_t*>(s->idx.get())[t] = c.slots[static_cast<size_t>(t)];
  }

  ggml_context* ctx = s->ctx;
  ggml_tensor* qkv = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, W, T);
  qkv->data = s->in.get();
  ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T);
  pos->data = s->pos.get();
  ggml_tensor* idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, T);
  idx->data = s->idx.get();
  ggml_tensor* kc = ggml_new_tensor_2d(ctx, ct, s->row, c.cache_slots);
  kc->data = s->kc.get();
  ggml_tensor* vc = ggml_new_tensor_2d(ctx, ct, s->row, c.cache_slots);
  vc->data = s->vc.get();

  const size_t f = sizeof(float);
  ggml_tensor* q = ggml_view_3d(ctx, qkv, D, Hq, T, D * f, qkv->nb[1], 0);
  ggml_tensor* k = ggml_view_3d(ctx, qkv, D, Hkv, T, D * f, qkv->nb[1], static_cast<size_t>(Hq * D) * f);
  if (c.qk_norm) {
    // llama.cpp's Qwen3 layer: build_norm(Qcur, attn_q_norm, LLM_NORM_RMS) = ggml_rms_norm, then
    // ggml_mul by the [D] weight (broadcast over heads and tokens), each into a new tensor.
    auto norm = [&](ggml_tensor* x, int64_t H, const std::vector<float>& w, std::shared_ptr<void>* wbuf,
                    std::shared_ptr<void>* nbuf, std::shared_ptr<void>* mbuf) {
      *wbuf = AlignedZeroed(static_cast<size_t>(D) * f);
      std::memcpy(wbuf->get(), w.data(), static_cast<size_t>(D) * f);
      ggml_tensor* wt = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, D);
      wt->data = wbuf->get();
      ggml_tensor* n = ggml_rms_norm(ctx, x, c.eps);
      *nbuf = AlignedZeroed(static_cast<size_t>(T * H * D) * f);
      n->data = nbuf->get();
      ggml_tensor* m = ggml_mul(ctx, n, wt);
      *mbuf = AlignedZeroed(static_cast<size_t>(T * H * D) * f);
      m->data = mbuf->get();
      return m;
    };
    q = norm(q, Hq, c.q_norm_w, &s->wq, &s->qn, &s->qm);
    k = norm(k, Hkv, c.k_norm_w, &s->wk, &s->kn, &s->km);
  }
  ggml_tensor* v = ggml_view_2d(ctx, qkv, s->row, T, qkv->nb[1], static_cast<size_t>((Hq + Hkv) * D) * f);
  const int n_ctx_orig = 8192;
  ggml_tensor* qr = ggml_rope_ext(ctx, q, pos, nullptr, static_cast<int>(D), GGML_ROPE_TYPE_NEOX, n_ctx_orig,
                                  static_cast<float>(c.theta), 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
  qr->data = s->q_out.get();
  ggml_tensor* kr = ggml_rope_ext(ctx, k, pos, nullptr, static_cast<int>(D), GGML_ROPE_TYPE_NEOX, n_ctx_orig,
                                  static_cast<float>(c.theta), 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
  kr->data = s->k_rot.get();
  ggml_tensor* kset = ggml_set_rows(ctx, kc, ggml_reshape_2d(ctx, kr, s->row, T), idx);
  ggml_tensor* vset = ggml_set_rows(ctx, vc, v, idx);

  MakePlans(s.get(), threads, {qr, kset, vset}, {qr, kr});
  // The rope-only row: ggml's two rope ops alone (q and k out of place, no cache write; with QK-norm
  // the norms too), not a comparison, it says how much of ggml's time the rotations take.
  std::vector<Row> rows = GraphRows(s, threads, c.qk_norm ? "ggml.norm_rope_only" : "ggml.rope_only");
  rows[0].k_at = [s](int64_t t, int64_t i) { return CacheAt(*s, s->kc.get(), t, i); };
  rows[0].v_at = [s](int64_t t, int64_t i) { return CacheAt(*s, s->vc.get(), t, i); };
  return rows;
}

// llama.cpp's DeepSeek-V3 (deepseek2, MLA) graph for the same work as posenc's MLA rows: q_pe = a
// view of each q head's last 64 values and k_pe = the latent output's last 64, each ggml_rope_ext
// (GGML_ROPE_TYPE_NORMAL: interleaved pairs, theta 10000) into a new tensor; kv_cmpr = ggml_rms_norm of
// the first 512, ggml_mul by the weight; ggml_concat(kv_cmpr, k_pe) and ggml_set_rows of that [576]
// row into the cache at int64 row indices.
std::vector<Row> GgmlMlaRows(const CaseData& c, int threads) {
  auto s = std::make_shared<State>();
  const int64_t T = c.T, H = c.Hq, rope = c.D, lora = c.kv_lora, R = c.row_values, Dq = c.nope + c.D;
  s->row = R;
  s->slots = c.slots;
  const ggml_type ct = s->cache_type = CacheType(c);
  const size_t es = ggml_type_size(ct), f = sizeof(float);
  ggml_init_params ip{size_t{16} << 20, nullptr, /*no_alloc=*/true};
  s->ctx = ggml_init(ip);
  ggml_context* ctx = s->ctx;
  auto buffer = [](std::shared_ptr<void>* b, size_t bytes, const void* from) {
    *b = AlignedZeroed(bytes);
    if (from != nullptr) std::memcpy(b->get(), from, bytes);
    return b->get();
  };
  ggml_tensor* kv = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, R, T);
  kv->data = buffer(&s->in, static_cast<size_t>(T * R) * f, c.qkv.get());
  ggml_tensor* q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, Dq, H, T);
  q->data = buffer(&s->qn, static_cast<size_t>(T * H * Dq) * f, c.q_mla.get());
  ggml_tensor* w = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, lora);
  w->data = buffer(&s->wq, static_cast<size_t>(lora) * f, c.kv_norm_w.data());
  ggml_tensor* pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T);
  pos->data = buffer(&s->pos, static_cast<size_t>(T) * 4, nullptr);
  ggml_tensor* idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, T);
  idx->data = buffer(&s->idx, static_cast<size_t>(T) * 8, nullptr);
  for (int64_t t = 0; t < T; ++t) {
    static_cast<int32_t*>(s->pos.get())[t] = static_cast<int32_t>(c.pos[static_cast<size_t>(t)]);
    static_cast<int64_t*>(s->idx.get())[t] = c.slots[static_cast<size_t>(t)];
  }
  ggml_tensor* kc = ggml_new_tensor_2d(ctx, ct, R, c.cache_slots);
  kc->data = buffer(&s->kc, static_cast<size_t>(c.cache_slots * R) * es, nullptr);

  ggml_tensor* q_pe = ggml_view_3d(ctx, q, rope, H, T, q->nb[1], q->nb[2], static_cast<size_t>(c.nope) * f);
  ggml_tensor* kv_cmpr = ggml_view_2d(ctx, kv, lora, T, kv->nb[1], 0);
  ggml_tensor* k_pe = ggml_view_3d(ctx, kv, rope, 1, T, kv->nb[1], kv->nb[1], static_cast<size_t>(lora) * f);
  ggml_tensor* qr = ggml_rope_ext(ctx, q_pe, pos, nullptr, static_cast<int>(rope), GGML_ROPE_TYPE_NORMAL, 8192,
                                  static_cast<float>(c.theta), 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
  qr->data = buffer(&s->q_out, static_cast<size_t>(T * H * rope) * f, nullptr);
  ggml_tensor* kr = ggml_rope_ext(ctx, k_pe, pos, nullptr, static_cast<int>(rope), GGML_ROPE_TYPE_NORMAL, 8192,
                                  static_cast<float>(c.theta), 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
  kr->data = buffer(&s->k_rot, static_cast<size_t>(T * rope) * f, nullptr);
  ggml_tensor* n = ggml_rms_norm(ctx, kv_cmpr, c.eps);
  n->data = buffer(&s->kn, static_cast<size_t>(T * lora) * f, nullptr);
  ggml_tensor* m = ggml_mul(ctx, n, w);
  m->data = buffer(&s->qm, static_cast<size_t>(T * lora) * f, nullptr);
  ggml_tensor* row = ggml_concat(ctx, m, ggml_reshape_2d(ctx, kr, rope, T), 0);
  row->data = buffer(&s->km, static_cast<size_t>(T * R) * f, nullptr);
  ggml_tensor* set = ggml_set_rows(ctx, kc, row, idx);

  MakePlans(s.get(), threads, {qr, set}, {qr, kr});
  std::vector<Row> rows = GraphRows(s, threads, "ggml.rope_only");  // q_out: [T, H, 64], as posenc's
  rows[0].k_at = [s](int64_t t, int64_t i) { return CacheAt(*s, s->kc.get(), t, i); };
  rows[0].v_at = rows[0].k_at;
  return rows;
}

}  // namespace sbs
