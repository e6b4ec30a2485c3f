// Python methods reachable from templates: str (strip, split, startswith, replace, format...),
// dict (get, items, keys, values) and list (index, count). Mutating methods fail as they do in
// transformers' ImmutableSandboxedEnvironment.
#pragma once

#include <optional>
#include <string>

#include "gateway/template/value.h"

namespace m3::tmpl {

// The bound method `obj.name`, or nullopt when obj's type has no method of that name.
std::optional<Value> BoundMethod(const Value& obj, const std::string& name);

}  // namespace m3::tmpl
