// How deeply a JSON value nests, measured without recursion: nlohmann's copy and comparison
// recurse, so a request nested 100k deep must be refused before it is copied or converted.
#pragma once

#include <nlohmann/json.hpp>

namespace m3::tmpl {

// True when `j` holds arrays/objects nested more than `limit` deep (a flat array is 1 deep).
// Stops walking as soon as the limit is passed.
bool JsonNestsDeeperThan(const nlohmann::ordered_json& j, int limit);

}  // namespace m3::tmpl
