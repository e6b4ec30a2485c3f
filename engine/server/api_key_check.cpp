// CheckApiKey: the metadata lookup and a comparison whose time does not depend on where the
// sent key first differs (so the key cannot be guessed byte by byte from response times).
#include "engine/server/api_key_check.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace m3::engine::server {
namespace {

bool SameKey(std::string_view sent, std::string_view key) {
  unsigned char diff = sent.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < sent.size(); ++i)
    diff |= static_cast<unsigned char>(sent[i] ^ key[i % key.size()]);
  return diff == 0;
}

// RFC 9110 11.1: the scheme name is case-insensitive.
bool IsBearer(std::string_view scheme) {
  constexpr std::string_view kBearer = "bearer";
  return scheme.size() == kBearer.size() &&
         std::equal(scheme.begin(), scheme.end(), kBearer.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

}  // namespace

grpc::Status CheckApiKey(const grpc::CallbackServerContext& context, const std::string& key) {
  if (key.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    const std::string_view value(it->second.data(), it->second.size());
    const size_t space = value.find(' ');
    if (space != std::string_view::npos && IsBearer(value.substr(0, space)) &&
        SameKey(value.substr(space + 1), key))
      return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      it == metadata.end()
                          ? "this engine needs an API key: metadata 'authorization: Bearer KEY'"
                          : "the engine API key sent in 'authorization' is not valid");
}

}  // namespace m3::engine::server
