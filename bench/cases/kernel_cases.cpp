// The kernel case list (kernel_cases.hpp): the model shapes and the odd sizes, each stated once.
#include "kernel_cases.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace posenc::cases {
namespace {

// The models' attention shapes, from their config.json.
struct Model {
  const char* name;
  int64_t heads, kv_heads, head_dim;
  double rope_theta;
};
constexpr Model kLlama3_8B{"Llama-3-8B", 32, 8, 128, 500000.0};
constexpr Model kQwen3_8B{"Qwen3-8B", 32, 8, 128, 1000000.0};
constexpr Model kQwen25VL_7B{"Qwen2.5-VL-7B", 28, 4, 128, 1000000.0};  // mrope_section [16, 24, 24], chunked
constexpr Model kQwen3VL_8B{"Qwen3-VL-8B", 32, 8, 128, 5000000.0};     // [24, 20, 20], interleaved
// DeepSeek-V3: 128 heads of qk_nope_head_dim 128 + qk_rope_head_dim 64, kv_lora_rank 512.
constexpr int64_t kDeepSeekHeads = 128, kDeepSeekNope = 128, kDeepSeekRope = 64, kDeepSeekLora = 512;
// Benchmark sizes: a 4096-token prefill, 64 sequences decoding one token each.
constexpr int64_t kPrefillTokens = 4096, kDecodeTokens = 64;

constexpr DType kActivations[] = {DType::kF32, DType::kBF16, DType::kF16};
constexpr DType kTestDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr RopePairing kPairings[] = {RopePairing::kHalf, RopePairing::kInterleaved};

KernelCase ModelCase(KernelFamily f, const char* op, const Model& m, bool decode, DType dt, RopePairing pr) {
  KernelCase c;
  c.family = f;
  c.op = op;
  c.model = m.name;
  c.tokens = decode ? kDecodeTokens : kPrefillTokens;
  c.heads = m.heads;
  c.head_dim = c.rotary_dim = m.head_dim;
  c.pairing = pr;
  c.dtype = dt;
  c.decode = decode;
  c.rope_theta = m.rope_theta;
  return c;
}

void AddModelRope(std::vector<KernelCase>* out) {
  for (DType dt : kActivations)
    for (RopePairing pr : kPairings) {
      out->push_back(ModelCase(KernelFamily::kRope, "rope_prefill_q", kLlama3_8B, false, dt, pr));
      KernelCase k = ModelCase(KernelFamily::kRope, "rope_prefill_k", kLlama3_8B, false, dt, pr);
      k.heads = kLlama3_8B.kv_heads;
      out->push_back(k);
      KernelCase qk = ModelCase(KernelFamily::kRope, "rope_prefill_qk", kLlama3_8B, false, dt, pr);
      qk.kv_heads = kLlama3_8B.kv_heads;  // ApplyRopeQK: q and k in one call
      out->push_back(qk);
      KernelCase oop = ModelCase(KernelFamily::kRope, "rope_prefill_q_oop", kLlama3_8B, false, dt, pr);
      oop.in_place = false;
      out->push_back(oop);
      out->push_back(ModelCase(KernelFamily::kRope, "rope_decode", kLlama3_8B, true, dt, pr));
    }
  for (DType dt : kActivations) {
    const auto f = KernelFamily::kMultiAxisRope;
    auto mrope = [&](const char* op, const Model& m, bool decode) {
      KernelCase c = ModelCase(f, op, m, decode, dt, RopePairing::kHalf);
      c.mrope_interleaved = &m == &kQwen3VL_8B;
      c.mrope_sections = c.mrope_interleaved ? std::vector<int64_t>{24, 20, 20} : std::vector<int64_t>{16, 24, 24};
      out->push_back(c);
    };
    mrope("mrope_prefill_q", kQwen25VL_7B, false);
    mrope("imrope_prefill_q", kQwen3VL_8B, false);
    mrope("mrope_decode", kQwen25VL_7B, true);
    mrope("mrope_prefill_q_build", kQwen25VL_7B, false);
  }
}

void AddModelGather(std::vector<KernelCase>* out) {
  // Llama-3-8B's embedding table [128256, 4096], 4096 distinct ids.
  auto gather = [](const char* op, DType dt) {
    KernelCase c;
    c.family = KernelFamily::kGather;
    c.op = op;
    c.model = kLlama3_8B.name;
    c.tokens = kPrefillTokens;
    c.vocab = 128256;
    c.head_dim = 4096;
    c.dtype = dt;
    c.in_place = false;
    return c;
  };
  for (DType dt : kActivations) out->push_back(gather("gather", dt));
  out->push_back(gather("gather_bf16out", DType::kBF16));
}

void AddModelFused(std::vector<KernelCase>* out) {
  for (const char* op : {"fused_prefill", "fused_decode"})
    for (DType dt : kActivations)
      for (KvCacheType ct : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kBF16, KvCacheType::kQ8_0,
                             KvCacheType::kF8E4M3, KvCacheType::kF8E5M2}) {
        const bool f8 = ct == KvCacheType::kF8E4M3 || ct == KvCacheType::kF8E5M2;
        KernelCase c = ModelCase(f8 ? KernelFamily::kFloat8Kv : KernelFamily::kFusedRopeKv, op, kLlama3_8B,
                                 op == std::string("fused_decode"), dt, RopePairing::kHalf);
        c.kv_heads = kLlama3_8B.kv_heads;
        c.cache_type = ct;
        c.in_place = false;
        out->push_back(c);
      }
  for (const char* op : {"qknorm_prefill", "qknorm_decode"})
    for (DType dt : {DType::kBF16, DType::kF32})
      for (KvCacheType ct : {KvCacheType::kBF16, KvCacheType::kF16, KvCacheType::kQ8_0, KvCacheType::kF32})
        if (dt == DType::kBF16 || ct == KvCacheType::kF32) {
          KernelCase c = ModelCase(KernelFamily::kQkNormFused, op, kQwen3_8B, op == std::string("qknorm_decode"), dt,
                                   RopePairing::kHalf);
          c.kv_heads = kQwen3_8B.kv_heads;
          c.cache_type = ct;
          c.in_place = false;
          out->push_back(c);
        }
  for (const char* op : {"mla_prefill", "mla_decode"})
    for (KvCacheType ct : {KvCacheType::kBF16, KvCacheType::kQ8_0}) {
      KernelCase c;
      c.family = KernelFamily::kMla;
      c.op = op;
      c.model = "DeepSeek-V3";
      c.decode = op == std::string("mla_decode");
      c.tokens = c.decode ? kDecodeTokens : kPrefillTokens;
      c.heads = kDeepSeekHeads;
      c.head_dim = kDeepSeekNope + kDeepSeekRope;
      c.rotary_start = kDeepSeekNope;
      c.rotary_dim = kDeepSeekRope;
      c.kv_lora_rank = kDeepSeekLora;
      c.pairing = RopePairing::kInterleaved;  // the checkpoint's order
      c.dtype = DType::kBF16;
      c.cache_type = ct;
      out->push_back(c);
    }
}

KernelCase OddCase(KernelFamily f, int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                   int64_t rotary_start, int64_t rotary_dim, RopePairing pr, DType dt, KvCacheType ct) {
  KernelCase c;
  c.family = f;
  c.op = "odd";
  c.tokens = tokens;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.rotary_start = rotary_start;
  c.rotary_dim = rotary_dim;
  c.pairing = pr;
  c.dtype = dt;
  c.cache_type = ct;
  return c;
}

// RoPE: tokens 0, 1, 2, 17, 4096; heads 1, 3, 32; head_dim 64..256; partial windows with and without an
// offset; odd pair counts; past the kernels' 256 pairs of stack scratch. {tokens, heads, D, R, start}.
void AddOddRope(std::vector<KernelCase>* out) {
  struct S {
    int64_t tokens, heads, head_dim, rotary_dim, rotary_start;
  };
  const S shapes[] = {{0, 3, 64, 64, 0},     {1, 1, 64, 64, 0},   {2, 3, 80, 80, 0},    {17, 3, 96, 96, 0},
                      {17, 32, 128, 128, 0}, {2, 1, 256, 256, 0}, {4096, 1, 64, 64, 0}, {3, 3, 128, 64, 0},
                      {3, 3, 256, 64, 192},  {5, 3, 80, 40, 20},  {4, 1, 96, 26, 2},    {2, 32, 64, 6, 58},
                      {17, 1, 128, 2, 0},    {2, 1, 64, 34, 30},  {7, 2, 640, 640, 0},  {4, 1, 600, 514, 86}};
  for (DType dt : kTestDTypes)
    for (RopePairing pr : kPairings)
      for (const S& s : shapes)
        out->push_back(OddCase(KernelFamily::kRope, s.tokens, s.heads, 0, s.head_dim, s.rotary_start, s.rotary_dim, pr,
                               dt, KvCacheType::kF32));
}

// Fused RoPE + KV write: q/kv heads 1/1, 3/1, 32/8, 32/1 (4/2 with QK-norm), head_dim 64, 80, 96, 128, 256,
// windows full, front half (GPT-J style), back 32 dims (MLA style); 1, 0 and 13 (QK-norm) or 17 tokens.
void AddOddFused(std::vector<KernelCase>* out, KernelFamily f) {
  struct Heads {
    int64_t q, kv;
  };
  const bool norm = f == KernelFamily::kQkNormFused;
  const Heads heads[] = {{1, 1}, {3, 1}, {32, 8}, {32, 1}}, norm_heads[] = {{1, 1}, {4, 2}, {32, 8}, {3, 1}};
  const int64_t dims[] = {64, 80, 128, 256}, norm_dims[] = {64, 80, 128, 96};
  size_t i = 0;
  for (DType dt : kTestDTypes)
    for (KvCacheType ct : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kBF16, KvCacheType::kQ8_0})
      for (RopePairing pr : kPairings)
        for (int64_t D : norm ? norm_dims : dims) {
          const int w = static_cast<int>(i % 3);
          const int64_t rs = w == 2 ? D - 32 : 0, rd = w == 0 ? D : (w == 1 ? D / 2 : 32);
          Heads h = norm ? norm_heads[i % 4] : heads[i % 4];
          if (ct == KvCacheType::kQ8_0 && (h.kv * D) % 32 != 0) h = {32, 8};  // Q8_0 rows of whole blocks
          const int64_t tokens = i % 5 == 0 ? 1 : (i % 7 == 3 ? 0 : (norm ? 13 : 17));
          KernelCase c = OddCase(f, tokens, h.q, h.kv, D, rs, rd, pr, dt, ct);
          c.in_place = norm ? i % 3 == 1 : i % 7 == 3;
          if (norm) c.rope_theta = 1000000.0;
          out->push_back(c);
          ++i;
        }
}

// Float8 caches: 0 and 1 tokens, odd head sizes (10, 34, 80) and windows. {T, Hq, Hkv, D, R, pairing}.
void AddOddFloat8(std::vector<KernelCase>* out) {
  struct S {
    int64_t tokens, heads, kv_heads, head_dim, rotary_dim;
    RopePairing pairing;
  };
  const S shapes[] = {{0, 4, 2, 64, 64, RopePairing::kHalf},       {1, 4, 2, 64, 64, RopePairing::kHalf},
                      {9, 8, 2, 128, 128, RopePairing::kHalf},     {5, 3, 3, 80, 40, RopePairing::kInterleaved},
                      {7, 2, 1, 10, 6, RopePairing::kInterleaved}, {3, 6, 3, 34, 34, RopePairing::kHalf}};
  for (DType dt : kTestDTypes)
    for (KvCacheType ct : {KvCacheType::kF8E4M3, KvCacheType::kF8E5M2})
      for (const S& s : shapes)
        out->push_back(OddCase(KernelFamily::kFloat8Kv, s.tokens, s.heads, s.kv_heads, s.head_dim, 0, s.rotary_dim,
                               s.pairing, dt, ct));
}

// MLA: DeepSeek-V3's row with 16 of its 128 heads, a q-less write, 3 and 12 rope pairs; 1, 0, 9 and 37 tokens
// (37: past two of the kernel's 16-token chunks).
void AddOddMla(std::vector<KernelCase>* out) {
  struct S {
    int64_t heads, nope, rope, lora;
  };
  const S shapes[] = {
      {16, kDeepSeekNope, kDeepSeekRope, kDeepSeekLora}, {0, 128, 64, 512}, {3, 10, 6, 58}, {1, 8, 24, 40}};
  size_t i = 0;
  for (DType dt : kTestDTypes)
    for (KvCacheType ct : {KvCacheType::kF32, KvCacheType::kF16, KvCacheType::kBF16, KvCacheType::kQ8_0,
                           KvCacheType::kF8E4M3, KvCacheType::kF8E5M2})
      for (RopePairing pr : {RopePairing::kInterleaved, RopePairing::kHalf})
        for (const S& s : shapes) {
          ++i;
          if (ct == KvCacheType::kQ8_0 && (s.lora + s.rope) % 32 != 0) continue;
          const int64_t tokens = i % 5 == 0 ? 1 : (i % 7 == 0 ? 0 : (i % 3 == 1 ? 37 : 9));
          KernelCase c = OddCase(KernelFamily::kMla, tokens, s.heads, 0, s.nope + s.rope, s.nope, s.rope, pr, dt, ct);
          c.kv_lora_rank = s.lora;
          c.in_place = i % 3 == 0;
          c.decode = i % 2 == 0;  // the tests' paged slots
          out->push_back(c);
        }
}

std::vector<KernelCase> BuildCases() {
  std::vector<KernelCase> all;
  AddModelRope(&all);
  AddModelGather(&all);
  AddModelFused(&all);
  AddOddRope(&all);
  AddOddFused(&all, KernelFamily::kFusedRopeKv);
  AddOddFloat8(&all);
  AddOddFused(&all, KernelFamily::kQkNormFused);
  AddOddMla(&all);
  return all;
}

}  // namespace

const char* ToString(KernelFamily f) {
  switch (f) {
    case KernelFamily::kRope: return "rope";
    case KernelFamily::kMultiAxisRope: return "multi_axis_rope";
    case KernelFamily::kFusedRopeKv: return "fused_rope_kv";
    case KernelFamily::kFloat8Kv: return "float8_kv";
    case KernelFamily::kQkNormFused: return "qk_norm_fused";
    case KernelFamily::kMla: return "mla";
    case KernelFamily::kGather: return "gather";
  }
  return "?";
}

KernelCase KernelCase::ScaledDown(int64_t max_tokens) const {
  KernelCase c = *this;
  c.tokens = std::min(tokens, max_tokens);
  if (family == KernelFamily::kGather) c.vocab = std::min<int64_t>(vocab, 4 * std::max<int64_t>(max_tokens, 1));
  return c;
}

std::string KernelCase::Label() const {
  return fmt::format("{} {}{}T{} H{}/{} D{} rot[{},+{}) {} {} cache {}{}{}", op, model, model.empty() ? "" : " ",
                     tokens, heads, kv_heads, head_dim, rotary_start, rotary_dim, ToString(pairing), ToString(dtype),
                     ToString(cache_type), decode ? " decode" : "", in_place ? " in-place" : "");
}

const std::vector<KernelCase>& KernelCases() {
  static const std::vector<KernelCase> all = BuildCases();
  return all;
}

std::vector<KernelCase> KernelCases(KernelFamily family) {
  std::vector<KernelCase> out;
  for (const KernelCase& c : KernelCases())
    if (c.family == family) out.push_back(c);
  return out;
}

std::vector<KernelCase> ModelCases() {
  std::vector<KernelCase> out;
  for (const KernelCase& c : KernelCases())
    if (!c.model.empty()) out.push_back(c);
  return out;
}

}  // namespace posenc::cases
