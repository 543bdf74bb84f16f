// Multi-axis RoPE from configs: the 2-D (h, w) RoPE of Hugging Face vision encoders. (M-RoPE of the
// Qwen-VL text models is read by ParseHfConfig, ggml's MROPE / IMROPE / VISION modes by
// RopeConfigFromGgmlParams; both through src/config/multi_axis_config.cpp.)
#pragma once

#include <string>
#include <string_view>

#include "posenc/core/status.hpp"
#include "posenc/math/rope_config.hpp"

namespace posenc {

// Whose 2-D vision RoPE (golden/FORMAT.md, "From config to pairs").
enum class Vision2dVariant {
  // Qwen2-VL / Qwen2.5-VL / Qwen3-VL encoders: VisionRotaryEmbedding(head_dim / 2) with its default
  // theta 10000 (a family fact, no config key); pairs j < D/4 take h, the rest w, each block's frequency
  // index restarting at 0: theta^(-2k / (D/2)). Section layout chunked_restart, sections [D/4, D/4].
  kQwen2Vl,
  // Pixtral: f_i = rope_theta^(-2i/D), i < D/2; pairs j < D/4 take h at f_{2j}, pairs j >= D/4 take w at
  // f_{2(j - D/4) + 1}. Section layout chunked_strided, sections [D/4, D/4].
  kPixtral,
};
std::string_view ToString(Vision2dVariant v);
// "qwen2vl", "pixtral"
bool ParseVision2dVariant(std::string_view s, Vision2dVariant* out);

// The vision encoder's RoPE from its config (a vision config, or a whole model config with a
// "vision_config" object): D = head_dim if given, else embed_dim (Qwen2-VL) or hidden_size over
// num_heads / num_attention_heads; theta 10000 for kQwen2Vl (noted; a rope_theta key there is noted
// as unused), rope_theta for kPixtral (10000 noted when absent). Layout half over the whole head,
// multi_axis with 2 components (h, w), Hugging Face rules. kInvalidArgument naming `source`, the key
// and its value for missing or non-positive dimensions, a head count that does not divide the width,
// or a D that is not a multiple of 4.
Result<RopeConfig> ParseHfVision2dConfig(std::string_view json_text, Vision2dVariant variant,
                                         const std::string& source);

}  // namespace posenc
