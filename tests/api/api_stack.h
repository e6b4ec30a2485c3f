// What the API tests run against and send: `m3-engine serve` workers
// (tests/engine_server/server_process.h) and the `m3-gateway serve` process
// (tests/net/loopback_http.h's GatewayProcess), plus helpers for the requests: data: URIs of
// test files, and the reference conversations with their images rewritten as data: URIs or
// http URLs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/engine_server/server_process.h"

namespace m3::test {

std::string DataUri(const std::string& path, const std::string& mime);

// Every image part of `messages` (an OpenAI image_url part or an HF {"type": "image"} part)
// gets the URL `url_for(relative path or "", index)` as an image_url part.
nlohmann::json RewriteImages(nlohmann::json messages,
                             const std::function<std::string(const std::string&, int)>& url_for);

}  // namespace m3::test
