// Hugging Face config.json -> PositionScheme.
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/config.hpp"

namespace posenc {

std::string_view ToString(PositionKind k) {
  switch (k) {
    case PositionKind::kRope: return "rope";
    case PositionKind::kLearned: return "learned";
    case PositionKind::kSinusoidal: return "sinusoidal";
    case PositionKind::kAlibi: return "alibi";
    case PositionKind::kT5Bucket: return "t5_bucket";
    case PositionKind::kNone: return "none";
  }
  return "unknown";
}

namespace {

using nlohmann::json;

Status KeyError(const std::string& source, std::string_view key, const std::string& why) {
  return InvalidArgumentError(fmt::format("config {}: key '{}' {}", source, key, why));
}

Result<double> GetNumber(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (!it->is_number()) return KeyError(source, key, fmt::format("is {}, expected a number", it->dump()));
  return it->get<double>();
}

Result<int64_t> GetInt(const json& j, std::string_view key, const std::string& source) {
  const auto it = j.find(std::string(key));
  if (it == j.end()) return NotFoundError(fmt::format("config {}: key '{}' is missing", source, key));
  if (!it->is_number_integer() && !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()))
    return KeyError(source, key, fmt::format("is {}, expected an integer", it->dump()));
  return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

Status ParseRope(const json& j, const std::string& source, PositionScheme* s) {
  RopeConfig& rc = s->rope;
  // Dimensions: head_dim, else hidden_size / num_attention_heads.
  int64_t heads = 0;
  for (const char* k : {"num_attention_heads", "n_head", "n_heads"}) {
    if (j.contains(k)) {
      POSENC_ASSIGN_OR_RETURN(heads, GetInt(j, k, source));
      break;
    }
  }
  s->num_heads = heads;
  if (j.contains("num_key_value_heads")) {
    POSENC_ASSIGN_OR_RETURN(s->num_kv_heads, GetInt(j, "num_key_value_heads", source));
  }
  int64_t hidden = 0;
  for (const char* k : {"hidden_size", "n_embd", "d_model"}) {
    if (j.contains(k)) {
      POSENC_ASSIGN_OR_RETURN(hidden, GetInt(j, k, source));
      break;
    }
  }
  s->hidden_size = hidden;
  int64_t head_dim = 0;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    POSENC_ASSIGN_OR_RETURN(head_dim, GetInt(j, "head_dim", source));
    if (head_dim <= 0) return KeyError(source, "head_dim", fmt::format("is {}, must be positive", head_dim));
  } else {
    if (hidden <= 0) return KeyError(source, "hidden_size", "is missing or not positive, and there is no head_dim");
    if (heads <= 0) return KeyError(source, "num_attention_heads", "is missing or not positive, and there is no head_dim");
    if (hidden % heads != 0)
      return KeyError(source, "num_attention_heads",
                      fmt::format("= {} does not divide hidden_size {} evenly", heads, hidden));
    head_dim = hidden / heads;
  }
  int64_t rotary_dim = head_dim;
  if (j.contains("rotary_dim") && !j["rotary_dim"].is_null()) {
    POSENC_ASSIGN_OR_RETURN(rotary_dim, GetInt(j, "rotary_dim", source));
  } else {
    for (const char* k : {"partial_rotary_factor", "rotary_pct"}) {
      if (!j.contains(k)) continue;
      POSENC_ASSIGN_OR_RETURN(double f, GetNumber(j, k, source));
      if (!(f > 0 && f <= 1)) return KeyError(source, k, fmt::format("is {}, must be in (0, 1]", f));
      rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * f);  // Hugging Face truncates
      break;
    }
  }
  if (rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim)
    return InvalidArgumentError(fmt::format(
        "config {}: rotary dimension {} (of head_dim {}) must be even, positive and at most head_dim", source,
        rotary_dim, head_dim));
  rc.layout.head_dim = head_dim;
  rc.layout.rotary_dim = rotary_dim;
  rc.layout.rotary_start = 0;
  rc.layout.pairing = s->model_type == "gptj" ? RopePairing::kInterleaved : RopePairing::kHalf;

  // Base: rope_theta (legacy top level or inside rope_parameters), rotary_emb_base (GPT-NeoX).
  const json* params = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) params = &j["rope_parameters"];
  bool have_base = false;
  for (const json* scope : {params, &j}) {
    if (scope == nullptr) continue;
    for (const char* k : {"rope_theta", "rotary_emb_base"}) {
      if (scope->contains(k)) {
        POSENC_ASSIGN_OR_RETURN(rc.base, GetNumber(*scope, k, source));
        have_base = true;
        break;
      }
    }
    if (have_base) break;
  }
  if (!have_base) {
    rc.base = 10000.0;
    rc.notes.push_back("no rope_theta in the config: base 10000 assumed (Hugging Face's default)");
  }
  if (!(rc.base > 0) || !std::isfinite(rc.base))
    return KeyError(source, "rope_theta", fmt::format("is {}, must be finite and positive", rc.base));
  if (j.contains("max_position_embeddings")) {
    POSENC_ASSIGN_OR_RETURN(rc.max_position_embeddings, GetInt(j, "max_position_embeddings", source));
  }
  // Scaling.
  const json* scaling = nullptr;
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) scaling = &j["rope_scaling"];
  else if (params != nullptr) scaling = params;
  if (scaling != nullptr) {
    std::string type = "default";
    for (const char* k : {"rope_type", "type"}) {
      if (scaling->contains(k) && (*scaling)[k].is_string()) {
        type = (*scaling)[k].get<std::string>();
        break;
      }
    }
    if (type != "default")
      return UnimplementedError(fmt::format("config {}: rope scaling type '{}' is not supported yet", source, type));
  }
  return OkStatus();
}

}  // namespace

Result<PositionScheme> ParseHfConfig(std::string_view json_text, const std::string& source) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(fmt::format("config {}: not valid JSON", source));
  if (!j.is_object()) return InvalidArgumentError(fmt::format("config {}: top level is not a JSON object", source));
  PositionScheme s;
  if (j.contains("model_type") && j["model_type"].is_string()) s.model_type = j["model_type"].get<std::string>();
  s.kind = PositionKind::kRope;
  POSENC_RETURN_IF_ERROR(ParseRope(j, source, &s));
  return s;
}

Result<PositionScheme> LoadHfConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError(fmt::format("config {}: cannot open file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseHfConfig(ss.str(), path);
}

}  // namespace posenc
