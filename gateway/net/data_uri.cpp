// data: URI parsing (see data_uri.h).
#include "gateway/net/data_uri.h"

#include <cctype>

#include "gateway/net/base64.h"
#include "gateway/net/printable_excerpt.h"
#include "gateway/net/url.h"
#include "shared/error.h"

namespace m3::net {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "invalid data: URI: bad percent escape at offset " + std::to_string(i));
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string Printable(std::string_view s) {
  return PrintableExcerpt(s, 80);
}

// RFC 2045 token characters (type, subtype and parameter names).
bool IsMimeToken(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7F ||
        std::string_view("()<>@,;:\\\"/[]?=").find(ch) != std::string_view::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

DataUriHeader ParseDataUriHeader(std::string_view uri) {
  if (UrlScheme(uri) != "data") throw Error(ErrorCode::kInvalidArgument, "not a data: URI");
  std::string_view rest = uri.substr(5);
  size_t comma = rest.find(',');
  if (comma == std::string_view::npos) {
    throw Error(ErrorCode::kInvalidArgument, "invalid data: URI: missing ',' before the payload");
  }
  std::string_view header = rest.substr(0, comma);
  DataUriHeader out;
  out.payload_offset = 5 + comma + 1;
  size_t semi = header.find(';');
  out.media_type = Lower(Trim(header.substr(0, semi)));
  if (out.media_type.empty()) out.media_type = "text/plain";
  const size_t slash = out.media_type.find('/');
  if (slash == std::string::npos ||
      !IsMimeToken(std::string_view(out.media_type).substr(0, slash)) ||
      !IsMimeToken(std::string_view(out.media_type).substr(slash + 1))) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "invalid data: URI: media type '" + Printable(out.media_type) + "' is not type/subtype");
  }
  while (semi != std::string_view::npos) {
    header = header.substr(semi + 1);
    semi = header.find(';');
    std::string param = Lower(Trim(header.substr(0, semi)));
    if (param == "base64") {
      if (semi != std::string_view::npos) {
        throw Error(ErrorCode::kInvalidArgument, "invalid data: URI: ';base64' must come last");
      }
      out.base64 = true;
    } else if (param.find('=') == std::string::npos ||
               !IsMimeToken(std::string_view(param).substr(0, param.find('=')))) {
      throw Error(ErrorCode::kInvalidArgument,
                  "invalid data: URI: parameter '" + Printable(param) + "' is not name=value");
    }
  }
  return out;
}

int64_t DataUriDecodedEstimate(const DataUriHeader& header, size_t payload_bytes) {
  return header.base64 ? static_cast<int64_t>(payload_bytes / 4 * 3)
                       : static_cast<int64_t>(payload_bytes / 3);
}

DataUri ParseDataUri(std::string_view uri, int64_t max_bytes) {
  DataUriHeader h = ParseDataUriHeader(uri);
  std::string_view payload = uri.substr(h.payload_offset);
  DataUri out;
  out.media_type = std::move(h.media_type);
  out.base64 = h.base64;
  int64_t estimate = DataUriDecodedEstimate(h, payload.size());
  if (estimate > max_bytes) {
    throw Error(ErrorCode::kTooLarge, "data: URI payload is about " + std::to_string(estimate) +
                                          " bytes, over the limit of " + std::to_string(max_bytes));
  }
  if (out.base64) {
    // Percent-escaped base64 (e.g. %2B) is legal in URIs; undo it only when present.
    std::string decoded_text =
        payload.find('%') != std::string_view::npos ? PercentDecode(payload) : std::string(payload);
    out.bytes = Base64Decode(decoded_text, "base64 in data: URI");
  } else {
    out.bytes = PercentDecode(payload);
  }
  if (static_cast<int64_t>(out.bytes.size()) > max_bytes) {
    throw Error(ErrorCode::kTooLarge, "data: URI payload is " + std::to_string(out.bytes.size()) +
                                          " bytes, over the limit of " + std::to_string(max_bytes));
  }
  return out;
}

}  // namespace m3::net
