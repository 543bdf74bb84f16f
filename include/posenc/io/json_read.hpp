// The one way posenc parses a JSON text from a file (config.json, ggml parameters, a golden case.json,
// model.safetensors.index.json): read through ReadFileToString (regular files only, never blocking,
// size-bounded), nesting bounded by CheckJsonNesting before the parse, syntax errors reported with
// the byte offset, nlohmann's reason (escaped) and JsonSyntaxHint (NaN / Infinity named).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "posenc/core/status.hpp"
#include "posenc/io/file_io.hpp"
#include "posenc/io/json_guard.hpp"

namespace posenc {

// `text` parsed once. `what` names the source in messages ("config x.json"): kInvalidArgument
// "<what>: JSON nested deeper than 32 levels at byte N" or "<what>: not valid JSON at byte N: <reason>".
Result<nlohmann::json> ParseJsonText(std::string_view text, std::string_view what, int max_depth = kMaxJsonNesting);

// The file read whole (at most `max_bytes`) and parsed by ParseJsonText; read errors name the path.
// `text_out`, when given, receives the text (for readers that keep it).
Result<nlohmann::json> ReadJsonFile(const std::string& path, std::string_view what, std::string* text_out = nullptr,
                                    uint64_t max_bytes = kMaxTextFileBytes);

}  // namespace posenc
