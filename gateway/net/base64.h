// Standard base64 (RFC 4648, '+' '/' alphabet) encoding and strict decoding, for data: URIs
// and for tensors in JSON responses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace m3::net {

std::string Base64Encode(std::string_view bytes);

// Decodes strictly: only alphabet characters, '=' padding only at the end (it may be left
// out). Throws kInvalidArgument naming the first bad offset. `what` names the input in errors.
std::string Base64Decode(std::string_view text, std::string_view what = "base64 data");
// The same checks without decoding (no allocation); returns the decoded size.
size_t Base64Check(std::string_view text, std::string_view what = "base64 data");

}  // namespace m3::net
