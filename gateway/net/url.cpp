// URL parsing for the media fetcher (see url.h).
#include "gateway/net/url.h"

#include <algorithm>
#include <cctype>

#include "shared/error.h"

namespace m3::net {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

[[noreturn]] void Bad(std::string_view text, const std::string& why) {
  std::string shown(text.substr(0, 200));
  throw Error(ErrorCode::kInvalidArgument, "invalid URL '" + shown + "': " + why);
}

bool HostCharOk(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '-' || c == '.' || c == '_';
}

}  // namespace

std::string UrlScheme(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) return "";
  for (size_t i = 0; i < colon; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    bool ok = std::isalpha(c) || (i > 0 && (std::isdigit(c) || c == '+' || c == '-' || c == '.'));
    if (!ok) return "";
  }
  return Lower(text.substr(0, colon));
}

std::string Url::HostForHeader() const {
  std::string h;
  if (ipv6_literal)
    h.append("[").append(host).append("]");
  else
    h.append(host);
  uint16_t default_port = https() ? 443 : 80;
  if (port != default_port) h.append(":").append(std::to_string(port));
  return h;
}

std::string Url::ToString() const {
  return scheme + "://" + HostForHeader() + target;
}

Url ParseHttpUrl(std::string_view text) {
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) Bad(text, "contains a space or control character");
  }
  Url url;
  url.scheme = UrlScheme(text);
  if (url.scheme != "http" && url.scheme != "https") Bad(text, "scheme must be http or https");
  std::string_view rest = text.substr(url.scheme.size() + 1);
  if (rest.substr(0, 2) != "//") Bad(text, "expected '//' after the scheme");
  rest.remove_prefix(2);
  size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view tail = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (authority.find('@') != std::string_view::npos)
    Bad(text, "credentials in URLs are not allowed");
  if (authority.empty()) Bad(text, "missing host");

  std::string_view host, port;
  if (authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) Bad(text, "unterminated IPv6 literal");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') Bad(text, "unexpected characters after IPv6 literal");
      port = after.substr(1);
    }
    if (host.empty()) Bad(text, "empty IPv6 literal");
    for (char c : host) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
        Bad(text, "malformed IPv6 literal");
    }
    url.ipv6_literal = true;
  } else {
    size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    if (host.empty()) Bad(text, "missing host");
    for (char c : host) {
      if (!HostCharOk(c)) Bad(text, "invalid character in host");
    }
  }
  url.host = Lower(host);
  if (!url.ipv6_literal && url.host.back() == '.') url.host.pop_back();  // FQDN form
  if (url.host.empty()) Bad(text, "missing host");
  if (port.empty()) {
    url.port = url.https() ? 443 : 80;
  } else {
    if (port.size() > 5) Bad(text, "invalid port");
    uint32_t p = 0;
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) Bad(text, "invalid port");
      p = p * 10 + static_cast<uint32_t>(c - '0');
    }
    if (p == 0 || p > 65535) Bad(text, "port out of range");
    url.port = static_cast<uint16_t>(p);
  }
  size_t hash = tail.find('#');
  if (hash != std::string_view::npos) tail = tail.substr(0, hash);
  url.target = std::string(tail);
  if (url.target.empty() || url.target.front() != '/') url.target = "/" + url.target;
  return url;
}

Url ResolveRedirect(const Url& base, std::string_view location) {
  if (location.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "redirect from " + base.ToString() + " has an empty Location");
  }
  if (!UrlScheme(location).empty()) return ParseHttpUrl(location);
  if (location.substr(0, 2) == "//") return ParseHttpUrl(base.scheme + ":" + std::string(location));
  std::string origin = base.scheme + "://" + base.HostForHeader();
  if (location.front() == '/') return ParseHttpUrl(origin + std::string(location));
  // A relative path replaces the last segment of the base path (query dropped).
  std::string path = base.target.substr(0, base.target.find('?'));
  path = path.substr(0, path.rfind('/') + 1);
  return ParseHttpUrl(origin + path + std::string(location));
}

}  // namespace m3::net
