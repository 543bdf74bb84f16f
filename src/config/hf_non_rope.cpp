// Hugging Face config.json: the schemes that are not RoPE.
#include "config/hf_non_rope.hpp"

#include <cstdint>
#include <initializer_list>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config/model_families.hpp"
#include "posenc/core/message.hpp"
#include "config/hf_config_internal.hpp"
#include "config/json_util.hpp"

namespace posenc::hf_json {

using namespace json_util;  // NOLINT: the config readers' shared getters

namespace {

// An absolute position table's width and length: the first of `length_keys` present, > 0.
Status ReadAbsoluteTable(const json& j, const std::string& source, std::initializer_list<const char*> length_keys,
                         PositionScheme* s) {
  std::string dk = FirstKey(j, {"hidden_size", "n_embd", "d_model", "emb_dim"});
  if (!dk.empty()) { POSENC_ASSIGN_OR_RETURN(s->hidden_size, GetInt(j, dk, source)); }
  std::string pk = FirstKey(j, length_keys);
  if (pk.empty()) return KeyError(source, "n_positions", "is missing (an absolute position table needs its length)");
  POSENC_ASSIGN_OR_RETURN(s->max_position_embeddings, GetInt(j, pk, source));
  if (s->max_position_embeddings <= 0)
    return KeyError(source, pk, fmt::format("is {}, must be > 0", s->max_position_embeddings));
  return OkStatus();
}

// What says ALiBi: MPT's attn_config.alibi (its default for mpt), Falcon's alibi, or the hidden size
// of a family that is ALiBi at one size only.
struct AlibiSignals {
  const json* attn = nullptr;  // MPT's attn_config, or nullptr
  bool mpt = false, falcon = false, size = false;
};

Result<AlibiSignals> ReadAlibiSignals(const json& j, const std::string& source, const ModelFamily* family,
                                      PositionScheme* s) {
  const std::string& mt = s->model_type;
  AlibiSignals a;
  POSENC_ASSIGN_OR_RETURN(a.attn, FindObject(j, "attn_config", source));
  if (a.attn != nullptr && Has(*a.attn, "alibi")) {
    POSENC_ASSIGN_OR_RETURN(a.mpt, GetBool(*a.attn, "alibi", source));
  } else if (mt == "mpt") {
    a.mpt = true;
    s->notes.push_back("mpt config without attn_config.alibi: ALiBi assumed (MptAttentionConfig's default)");
  }
  if (Has(j, "alibi")) { POSENC_ASSIGN_OR_RETURN(a.falcon, GetBool(j, "alibi", source)); }
  // A family whose code is ALiBi at one size and RoPE at another (Baichuan 2: 13B ALiBi, 7B RoPE),
  // with nothing in the config saying which.
  if (family != nullptr && family->alibi_hidden_size > 0 && Has(j, "hidden_size")) {
    POSENC_ASSIGN_OR_RETURN(const int64_t hidden, GetInt(j, "hidden_size", source));
    a.size = hidden == family->alibi_hidden_size;
    s->notes.push_back(fmt::format("{}: hidden_size {} is the {} model (its modeling code; no config key states it)",
                                   mt, hidden, a.size ? "ALiBi" : "RoPE"));
  }
  return a;
}

// What a family that chooses by a key between ALiBi and another scheme takes instead of ALiBi.
enum class InsteadOfAlibi { kAlibiOrOther, kLearned, kNoPositions };

// A family whose code chooses between ALiBi and a learned table by a key: JAIS's
// position_embedding_type ("alibi" or "learned", modeling_jais.py), MPT's attn_config.alibi false
// (MosaicML's modeling_mpt.py then adds its learned wpe table, learned_pos_emb default true;
// transformers' MptModel builds ALiBi whatever the key says and has no such table, so it cannot run
// these checkpoints as trained).
Result<InsteadOfAlibi> ReadInsteadOfAlibi(const json& j, const std::string& source, const AlibiSignals& alibi,
                                          PositionScheme* s) {
  const std::string& mt = s->model_type;
  InsteadOfAlibi instead = InsteadOfAlibi::kAlibiOrOther;
  if (mt == "jais" && Has(j, "position_embedding_type")) {
    POSENC_ASSIGN_OR_RETURN(std::string pet, GetString(j, "position_embedding_type", source));
    if (pet == "learned") {
      instead = InsteadOfAlibi::kLearned;
    } else if (pet != "alibi") {
      return KeyError(source, "position_embedding_type",
                      fmt::format("is {}, modeling_jais.py knows alibi and learned", QuoteForMessage(pet)));
    }
  }
  if (mt == "mpt" && alibi.attn != nullptr && Has(*alibi.attn, "alibi") && !alibi.mpt) {
    bool rope = false;
    if (Has(*alibi.attn, "rope")) { POSENC_ASSIGN_OR_RETURN(rope, GetBool(*alibi.attn, "rope", source)); }
    if (rope)
      return UnimplementedError(fmt::format(
          "config {}: key 'attn_config.rope' is true: MosaicML's RoPE variant of MPT (rope_impl) is not implemented",
          source));
    bool learned = true;
    if (Has(j, "learned_pos_emb")) { POSENC_ASSIGN_OR_RETURN(learned, GetBool(j, "learned_pos_emb", source)); }
    if (!learned) {
      s->notes.push_back("mpt: attn_config.alibi and learned_pos_emb false: no positional encoding (modeling_mpt.py)");
      return InsteadOfAlibi::kNoPositions;
    }
    instead = InsteadOfAlibi::kLearned;
    s->notes.push_back(
        "mpt: attn_config.alibi false: the learned wpe table of MosaicML's modeling_mpt.py (learned_pos_emb); "
        "transformers' MptModel would apply ALiBi regardless");
  }
  return instead;
}

// ALiBi: BLOOM's slopes, or MPT's with its alibi_bias_max; the head count is required.
Status FillAlibi(const std::string& source, const AlibiSignals& alibi, const std::string& heads_key,
                 PositionScheme* s) {
  s->kind = PositionKind::kAlibi;
  s->alibi_variant = alibi.mpt ? "mpt" : "bloom";
  if (alibi.mpt) {
    if (alibi.attn != nullptr && Has(*alibi.attn, "alibi_bias_max")) {
      POSENC_ASSIGN_OR_RETURN(s->alibi_bias_max, GetNumber(*alibi.attn, "alibi_bias_max", source));
    } else {
      s->alibi_bias_max = 8.0;
      s->notes.push_back("no attn_config.alibi_bias_max: 8 assumed (MPT's default)");
    }
    if (!(s->alibi_bias_max > 0))
      return KeyError(source, "attn_config.alibi_bias_max", fmt::format("is {}, must be > 0", s->alibi_bias_max));
  }
  if (s->num_heads <= 0)
    return KeyError(source, heads_key.empty() ? "n_head" : heads_key,
                    "is missing or not positive (ALiBi needs the head count)");
  return OkStatus();
}

// T5 relative buckets, with T5Config's defaults; the encoder's self-attention is bidirectional.
Status FillT5Buckets(const json& j, const std::string& source, PositionScheme* s) {
  s->kind = PositionKind::kT5Bucket;
  if (!Has(j, "relative_attention_num_buckets")) {
    s->t5_num_buckets = 32;
    s->notes.push_back("no relative_attention_num_buckets: 32 assumed (T5Config's default)");
  } else {
    POSENC_ASSIGN_OR_RETURN(s->t5_num_buckets, GetInt(j, "relative_attention_num_buckets", source));
  }
  if (!Has(j, "relative_attention_max_distance")) {
    s->t5_max_distance = 128;
    s->notes.push_back("no relative_attention_max_distance: 128 assumed (T5Config's default)");
  } else {
    POSENC_ASSIGN_OR_RETURN(s->t5_max_distance, GetInt(j, "relative_attention_max_distance", source));
  }
  if (s->t5_num_buckets <= 0)
    return KeyError(source, "relative_attention_num_buckets", fmt::format("is {}, must be > 0", s->t5_num_buckets));
  if (s->t5_max_distance <= 0)
    return KeyError(source, "relative_attention_max_distance", fmt::format("is {}, must be > 0", s->t5_max_distance));
  bool is_decoder = false;
  if (Has(j, "is_decoder")) { POSENC_ASSIGN_OR_RETURN(is_decoder, GetBool(j, "is_decoder", source)); }
  // T5's encoder self-attention is bidirectional; its decoder's is causal (unidirectional).
  s->t5_bidirectional = !is_decoder;
  return OkStatus();
}

// Absolute positions (XLM's sinusoidal_embeddings, the family's sinusoidal or learned table), or none;
// false when the family's scheme is none of these.
Result<bool> ParseAbsolute(const json& j, const std::string& source, const ModelFamily* family,
                           PositionKind family_kind, PositionScheme* s) {
  const std::string& mt = s->model_type;
  bool xlm_sin = false;
  if (Has(j, "sinusoidal_embeddings")) {
    POSENC_ASSIGN_OR_RETURN(xlm_sin, GetBool(j, "sinusoidal_embeddings", source));
  }
  if (family_kind == PositionKind::kNone) {
    s->kind = PositionKind::kNone;
    s->notes.push_back(fmt::format("{}: no positional encoding ({})", mt, family->source));
    return true;
  }
  const bool sinusoidal = xlm_sin || family_kind == PositionKind::kSinusoidal;
  const bool learned = !sinusoidal && family_kind == PositionKind::kLearned;
  if (!sinusoidal && !learned) return false;
  s->kind = sinusoidal ? PositionKind::kSinusoidal : PositionKind::kLearned;
  if (sinusoidal) s->sinusoidal_layout = xlm_sin || mt == "xlm" ? "interleaved" : "concat";
  POSENC_RETURN_IF_ERROR(ReadAbsoluteTable(j, source, {"n_positions", "max_position_embeddings"}, s));
  if (mt == "opt") s->notes.push_back("OPT's learned table is indexed by position + 2 (its offset)");
  return true;
}

}  // namespace

Result<bool> ParseNonRope(const json& j, const std::string& source, PositionScheme* s) {
  const ModelFamily* family = FamilyOf(*s);
  const PositionKind family_kind = family != nullptr ? family->scheme : PositionKind::kRope;
  std::string hk = FirstKey(j, {"num_attention_heads", "n_head", "n_heads", "num_heads"});
  if (!hk.empty()) { POSENC_ASSIGN_OR_RETURN(s->num_heads, GetInt(j, hk, source)); }
  POSENC_ASSIGN_OR_RETURN(const AlibiSignals alibi, ReadAlibiSignals(j, source, family, s));
  POSENC_ASSIGN_OR_RETURN(const InsteadOfAlibi instead, ReadInsteadOfAlibi(j, source, alibi, s));
  if (instead == InsteadOfAlibi::kNoPositions) {
    s->kind = PositionKind::kNone;
    return true;
  }
  if (instead == InsteadOfAlibi::kLearned) {
    s->kind = PositionKind::kLearned;
    POSENC_RETURN_IF_ERROR(ReadAbsoluteTable(j, source, {"n_positions", "max_position_embeddings", "max_seq_len"}, s));
    return true;
  }
  if ((family_kind == PositionKind::kAlibi && s->model_type != "mpt") || alibi.mpt || alibi.falcon || alibi.size) {
    POSENC_RETURN_IF_ERROR(FillAlibi(source, alibi, hk, s));
    return true;
  }
  if (Has(j, "relative_attention_num_buckets") || family_kind == PositionKind::kT5Bucket) {
    POSENC_RETURN_IF_ERROR(FillT5Buckets(j, source, s));
    return true;
  }
  return ParseAbsolute(j, source, family, family_kind, s);
}

}  // namespace posenc::hf_json
