// JsonNestsDeeperThan: an explicit-stack walk (see json_depth.h).
#include "gateway/template/json_depth.h"

#include <utility>
#include <vector>

namespace m3::tmpl {

bool JsonNestsDeeperThan(const nlohmann::ordered_json& j, int limit) {
  std::vector<std::pair<const nlohmann::ordered_json*, int>> stack = {{&j, 0}};
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_array() && !v->is_object()) continue;
    if (depth + 1 > limit) return true;
    for (const auto& child : *v) {
      if (child.is_array() || child.is_object()) stack.emplace_back(&child, depth + 1);
    }
  }
  return false;
}

}  // namespace m3::tmpl
