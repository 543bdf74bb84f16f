// The model-family registry (model_families.hpp): the lookups over the family rows (model_family_rows.cpp),
// the enum names, and llama.cpp's rope type per GGUF architecture (kGgufArchitectures).
#include "posenc/config/model_families.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "config/model_family_rows.hpp"
#include "core/enum_names.hpp"

namespace posenc {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

const ModelFamily* FindExact(std::string_view model_type) {
  for (const ModelFamily& f : detail::ModelFamilyRows())
    if (f.model_type == model_type) return &f;
  return nullptr;
}

}  // namespace

constexpr detail::EnumName<RotaryWindow> kRotaryWindowNames[] = {{RotaryWindow::kWholeHead, "whole"},
                                                                 {RotaryWindow::kFrontPartial, "front"},
                                                                 {RotaryWindow::kBackOfHead, "back"},
                                                                 {RotaryWindow::kNone, "none"}};
std::string_view ToString(RotaryWindow v) { return detail::NameOf(v, kRotaryWindowNames); }

constexpr detail::EnumName<FamilySections> kFamilySectionsNames[] = {{FamilySections::kNone, "none"},
                                                                     {FamilySections::kChunked, "chunked"},
                                                                     {FamilySections::kInterleaved, "interleaved"},
                                                                     {FamilySections::kHwAlternating, "hw_alternating"}};
std::string_view ToString(FamilySections v) { return detail::NameOf(v, kFamilySectionsNames); }

constexpr detail::EnumName<PositionSwitch> kPositionSwitchNames[] = {
    {PositionSwitch::kAlways, "always"},
    {PositionSwitch::kPositionEmbeddingTypeRope, "position_embedding_type == \"rope\""},
    {PositionSwitch::kMlaUseNope, "off when mla_use_nope"},
    {PositionSwitch::kNever, "never"}};
std::string_view ToString(PositionSwitch v) { return detail::NameOf(v, kPositionSwitchNames); }

constexpr detail::EnumName<LayerTypesRule> kLayerTypesRuleNames[] = {
    {LayerTypesRule::kConfigOnly, "layer_types"},
    {LayerTypesRule::kGemma4Pattern, "layer_types, else every 6th full; last layer full"},
    {LayerTypesRule::kCompressRatios, "compress_ratios (0 sliding, 4 compressed sparse, 128 heavily compressed)"},
    {LayerTypesRule::kHybridOverride, "hybrid_override_pattern (M mamba, E moe, - mlp, * attention)"},
    {LayerTypesRule::kMambaUnlessListed, "layer_types (mamba / attention), else all mamba"},
    {LayerTypesRule::kHybridLayerPattern, "hybrid_layer_pattern (1 sliding, 0 full)"},
    {LayerTypesRule::kKdaLayers, "linear_attn_config.kda_layers (1-based linear attention)"},
    {LayerTypesRule::kSlidingWindowPattern, "layer_types, else full where (i + 1) % sliding_window_pattern == 0"},
    {LayerTypesRule::kEveryNthFull, "layer_types, else full every full_layer_period-th layer"}};
std::string_view ToString(LayerTypesRule v) { return detail::NameOf(v, kLayerTypesRuleNames); }

constexpr detail::EnumName<SiteRule> kSiteRuleNames[] = {
    {SiteRule::kAttention, "attention"},
    {SiteRule::kDsa, "mla, indexer"},
    {SiteRule::kDeepseekV4, "attention, attention_output, indexer, compressor"}};
std::string_view ToString(SiteRule v) { return detail::NameOf(v, kSiteRuleNames); }

std::span<const ModelFamily> ModelFamilies() { return detail::ModelFamilyRows(); }

const ModelFamily* FindModelFamily(std::string_view model_type) {
  if (model_type.empty()) return nullptr;
  if (const ModelFamily* f = FindExact(model_type); f != nullptr) return f;
  // Multimodal text_configs: qwen3_vl_text, llama4_text, gemma3_text, ...
  if (EndsWith(model_type, "_text")) return FindExact(model_type.substr(0, model_type.size() - 5));
  // Omni models' thinker: qwen3_omni_moe_thinker.
  if (EndsWith(model_type, "_thinker")) return FindExact(model_type.substr(0, model_type.size() - 8));
  // Mllama's text_config: mllama_text_model.
  if (EndsWith(model_type, "_text_model")) return FindExact(model_type.substr(0, model_type.size() - 11));
  return nullptr;
}

namespace {

// Lower case without '_' and '-': "gpt_neox" and "GPTNeoX" both read "gptneox".
std::string Folded(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

// transformers names a family's classes <Family><Head>: the family part of an in-library class name
// ("" when the name has none of the heads).
std::string_view ClassFamilyPart(std::string_view name) {
  static constexpr std::string_view kHeads[] = {
      "ForConditionalGeneration",  "ForCausalLM",          "LMHeadModel", "ForMaskedLM",
      "ForSequenceClassification", "ForQuestionAnswering", "Model"};
  if (const size_t dot = name.rfind('.'); dot != std::string_view::npos) return {};  // remote code: module.Class
  for (std::string_view h : kHeads)
    if (name.size() > h.size() && EndsWith(name, h)) return name.substr(0, name.size() - h.size());
  return {};
}

}  // namespace

const ModelFamily* FindModelFamilyByClass(std::string_view class_name) {
  if (class_name.empty()) return nullptr;
  for (const ModelFamily& f : detail::ModelFamilyRows()) {
    std::string_view list = f.classes;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      if (item == class_name) return &f;
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
  }
  // An in-library class: its family part equals a row's model_type, folded.
  const std::string part = Folded(ClassFamilyPart(class_name));
  if (part.empty()) return nullptr;
  for (const ModelFamily& f : detail::ModelFamilyRows())
    if (!f.remote_code && Folded(f.model_type) == part) return &f;
  return nullptr;
}

// llama_model_rope_type (llama.cpp src/llama-model.cpp), case by case: LLAMA_ROPE_TYPE_NORM, _NEOX,
// _MROPE (qwen2vl: Qwen2-VL and Qwen2.5-VL text models), _IMROPE (qwen3vl, qwen3vlmoe), _NONE.
constexpr GgufArchitecture kGgufArchitectures[] = {
    {"llama", GgmlRopeType::kNorm},
    {"llada", GgmlRopeType::kNorm},
    {"llama4", GgmlRopeType::kNorm},
    {"deci", GgmlRopeType::kNorm},
    {"baichuan", GgmlRopeType::kNorm},
    {"starcoder", GgmlRopeType::kNorm},
    {"internlm2", GgmlRopeType::kNorm},
    {"minicpm", GgmlRopeType::kNorm},
    {"xverse", GgmlRopeType::kNorm},
    {"command-r", GgmlRopeType::kNorm},
    {"cohere2", GgmlRopeType::kNorm},
    {"olmo", GgmlRopeType::kNorm},
    {"arctic", GgmlRopeType::kNorm},
    {"deepseek", GgmlRopeType::kNorm},
    {"deepseek2", GgmlRopeType::kNorm},
    {"plm", GgmlRopeType::kNorm},
    {"chatglm", GgmlRopeType::kNorm},
    {"glm4", GgmlRopeType::kNorm},
    {"granite", GgmlRopeType::kNorm},
    {"granitemoe", GgmlRopeType::kNorm},
    {"granitehybrid", GgmlRopeType::kNorm},
    {"chameleon", GgmlRopeType::kNorm},
    {"bailingmoe", GgmlRopeType::kNorm},
    {"neo-bert", GgmlRopeType::kNorm},
    {"smollm3", GgmlRopeType::kNorm},
    {"arcee", GgmlRopeType::kNorm},
    {"ernie4_5", GgmlRopeType::kNorm},
    {"gemma4", GgmlRopeType::kNeox},
    {"ernie4_5-moe", GgmlRopeType::kNorm},
    {"mistral3", GgmlRopeType::kNorm},
    {"llama-embed", GgmlRopeType::kNorm},
    {"falcon", GgmlRopeType::kNeox},
    {"falcon-h1", GgmlRopeType::kNeox},
    {"grok", GgmlRopeType::kNeox},
    {"dbrx", GgmlRopeType::kNeox},
    {"bert", GgmlRopeType::kNeox},
    {"jina-bert-v3", GgmlRopeType::kNeox},
    {"modern-bert", GgmlRopeType::kNeox},
    {"nomic-bert", GgmlRopeType::kNeox},
    {"nomic-bert-moe", GgmlRopeType::kNeox},
    {"eurobert", GgmlRopeType::kNeox},
    {"stablelm", GgmlRopeType::kNeox},
    {"bitnet", GgmlRopeType::kNeox},
    {"qwen", GgmlRopeType::kNeox},
    {"qwen2", GgmlRopeType::kNeox},
    {"dream", GgmlRopeType::kNeox},
    {"qwen2moe", GgmlRopeType::kNeox},
    {"qwen3", GgmlRopeType::kNeox},
    {"qwen3moe", GgmlRopeType::kNeox},
    {"llada-moe", GgmlRopeType::kNeox},
    {"olmo2", GgmlRopeType::kNeox},
    {"olmoe", GgmlRopeType::kNeox},
    {"phi2", GgmlRopeType::kNeox},
    {"phi3", GgmlRopeType::kNeox},
    {"phimoe", GgmlRopeType::kNeox},
    {"plamo", GgmlRopeType::kNeox},
    {"plamo2", GgmlRopeType::kNeox},
    {"gemma", GgmlRopeType::kNeox},
    {"gemma2", GgmlRopeType::kNeox},
    {"gemma3", GgmlRopeType::kNeox},
    {"gemma3n", GgmlRopeType::kNeox},
    {"gemma-embedding", GgmlRopeType::kNeox},
    {"starcoder2", GgmlRopeType::kNeox},
    {"openelm", GgmlRopeType::kNeox},
    {"gptneox", GgmlRopeType::kNeox},
    {"codeshell", GgmlRopeType::kNeox},
    {"orion", GgmlRopeType::kNeox},
    {"nemotron", GgmlRopeType::kNeox},
    {"exaone", GgmlRopeType::kNeox},
    {"exaone4", GgmlRopeType::kNeox},
    {"minicpm3", GgmlRopeType::kNeox},
    {"bailingmoe2", GgmlRopeType::kNeox},
    {"dots1", GgmlRopeType::kNeox},
    {"hunyuan-moe", GgmlRopeType::kNeox},
    {"gpt-oss", GgmlRopeType::kNeox},
    {"hunyuan-dense", GgmlRopeType::kNeox},
    {"lfm2", GgmlRopeType::kNeox},
    {"lfm2moe", GgmlRopeType::kNeox},
    {"smallthinker", GgmlRopeType::kNeox},
    {"seed_oss", GgmlRopeType::kNeox},
    {"grovemoe", GgmlRopeType::kNeox},
    {"apertus", GgmlRopeType::kNeox},
    {"minimax-m2", GgmlRopeType::kNeox},
    {"cogvlm", GgmlRopeType::kNeox},
    {"pangu-embedded", GgmlRopeType::kNeox},
    {"afmoe", GgmlRopeType::kNeox},
    {"qwen3next", GgmlRopeType::kNeox},
    {"glm4moe", GgmlRopeType::kNeox},
    {"qwen2vl", GgmlRopeType::kMrope},
    {"qwen3vl", GgmlRopeType::kImrope},
    {"qwen3vlmoe", GgmlRopeType::kImrope},
    {"qwen35", GgmlRopeType::kImrope},
    {"qwen35moe", GgmlRopeType::kImrope},
    {"paddleocr", GgmlRopeType::kMrope},
    {"cohere2moe", GgmlRopeType::kNorm},
    {"maincoder", GgmlRopeType::kNorm},
    {"deepseek32", GgmlRopeType::kNorm},
    {"glm-dsa", GgmlRopeType::kNorm},
    {"exaone-moe", GgmlRopeType::kNeox},
    {"hy_v3", GgmlRopeType::kNeox},
    {"jais2", GgmlRopeType::kNeox},
    {"laguna", GgmlRopeType::kNeox},
    {"mellum", GgmlRopeType::kNeox},
    {"mimo2", GgmlRopeType::kNeox},
    {"plamo3", GgmlRopeType::kNeox},
    {"step35", GgmlRopeType::kNeox},
    {"rnd1", GgmlRopeType::kNeox},
    {"talkie", GgmlRopeType::kNeox},
    {"gemma4-assistant", GgmlRopeType::kNeox},
    {"kimi-linear", GgmlRopeType::kNone},
    {"nemotron_h", GgmlRopeType::kNone},
    {"nemotron_h_moe", GgmlRopeType::kNone},
    {"clip", GgmlRopeType::kNone},
    {"gpt2", GgmlRopeType::kNone},
    {"gptj", GgmlRopeType::kNone},
    {"mpt", GgmlRopeType::kNone},
    {"refact", GgmlRopeType::kNone},
    {"bloom", GgmlRopeType::kNone},
    {"mamba", GgmlRopeType::kNone},
    {"mamba2", GgmlRopeType::kNone},
    {"jamba", GgmlRopeType::kNone},
    {"jina-bert-v2", GgmlRopeType::kNone},
    {"t5", GgmlRopeType::kNone},
    {"t5encoder", GgmlRopeType::kNone},
    {"jais", GgmlRopeType::kNone},
    {"rwkv6", GgmlRopeType::kNone},
    {"rwkv6qwen2", GgmlRopeType::kNone},
    {"rwkv7", GgmlRopeType::kNone},
    {"arwkv7", GgmlRopeType::kNone},
    {"wavtokenizer-dec", GgmlRopeType::kNone},
};

std::span<const GgufArchitecture> GgufArchitectures() { return kGgufArchitectures; }

const GgufArchitecture* FindGgufArchitecture(std::string_view name) {
  for (const GgufArchitecture& a : kGgufArchitectures)
    if (a.name == name) return &a;
  return nullptr;
}

constexpr detail::EnumName<GgmlRopeType> kGgmlRopeTypeNames[] = {{GgmlRopeType::kNorm, "norm"},
                                                                 {GgmlRopeType::kNeox, "neox"},
                                                                 {GgmlRopeType::kMrope, "mrope"},
                                                                 {GgmlRopeType::kImrope, "imrope"},
                                                                 {GgmlRopeType::kNone, "none"}};
std::string_view ToString(GgmlRopeType v) { return detail::NameOf(v, kGgmlRopeTypeNames); }

const ModelFamily* FindModelFamilyByGguf(std::string_view arch) {
  if (arch.empty()) return nullptr;
  for (const ModelFamily& f : detail::ModelFamilyRows())
    if (f.gguf_architecture == arch) return &f;
  return nullptr;
}

}  // namespace posenc
