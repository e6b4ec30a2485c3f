// Request helpers for the API tests (see api_stack.h).
#include "tests/api/api_stack.h"

#include "gateway/net/base64.h"
#include "tests/test_util.h"

namespace m3::test {

std::string DataUri(const std::string& path, const std::string& mime) {
  return "data:" + mime + ";base64," + net::Base64Encode(ReadFile(path));
}

nlohmann::json RewriteImages(nlohmann::json messages,
                             const std::function<std::string(const std::string&, int)>& url_for) {
  int index = 0;
  for (auto& m : messages) {
    if (!m["content"].is_array()) continue;
    for (auto& part : m["content"]) {
      std::string path;
      if (part["type"] == "image_url") {
        path = part["image_url"]["url"].get<std::string>();
      } else if (part["type"] != "image") {
        continue;
      }
      part = {{"type", "image_url"}, {"image_url", {{"url", url_for(path, index++)}}}};
    }
  }
  return messages;
}

}  // namespace m3::test
