// Internal to the Hugging Face reader (hf_config_internal.hpp): whether a family's config turns its
// positions on, the RoPE sites of its attention layers (and the DSA indexer's layers), the site asked
// for, and the config as the generic RoPE reader must see it for the chosen layer and site.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/config/hf_config.hpp"
#include "posenc/config/model_families.hpp"
#include "posenc/config/position_scheme.hpp"
#include "posenc/core/status.hpp"

namespace posenc::hf_json {

// The family's positions switch (PositionSwitch): false when the config turns positions off, noted.
Result<bool> PositionsOn(const nlohmann::json& j, const std::string& source, const ModelFamily& f, PositionScheme* s);

// The RoPE sites of the family's attention layers (SiteRule).
std::vector<RotarySite> FamilySites(const ModelFamily* f, const nlohmann::json& j);

// A DSA family's indexer site on the layer asked for: gone where that layer reuses the previous layer's
// top-k (indexer_types / index_topk_pattern / index_topk_freq), refused by name when it is the site asked
// for; without a layer, a note says how many layers have it.
Status ApplyIndexerLayers(const nlohmann::json& j, const std::string& source, const ModelFamily& f,
                          const HfConfigOptions& options, PositionScheme* s);

// The site asked for (options.site; empty: the family's first), refused naming the sites there are.
Status SelectSite(const HfConfigOptions& options, const std::string& source, PositionScheme* s);

// The config as the generic RoPE reader must see it for the chosen layer and site: the family's keyed
// sets and defaults resolved, and a second site's head and window spelled as the reader knows them
// (head_dim + rotary_dim for a front window, qk_nope_head_dim + qk_rope_head_dim for a back one).
// *pairing: a site whose pairing is fixed by the family rather than the row (the DSA indexer).
Result<nlohmann::json> SiteView(const nlohmann::json& j, const std::string& source, const ModelFamily& f,
                                HfConfigOptions* options, std::optional<RopePairing>* pairing, PositionScheme* s);

}  // namespace posenc::hf_json
