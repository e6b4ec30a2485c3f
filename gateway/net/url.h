// Parsing of http(s) URLs for media fetching, and resolution of redirect Location values
// against the URL that produced them. Deliberately strict: credentials, control characters,
// spaces and malformed ports are refused so the host we check is the host we connect to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace m3::net {

struct Url {
  std::string scheme;  // "http" or "https" (lower case)
  std::string host;    // lower case; IPv6 literals without brackets
  uint16_t port = 0;   // explicit or the scheme default
  std::string target;  // path + query, always starting with '/'; fragment dropped
  bool ipv6_literal = false;

  bool https() const { return scheme == "https"; }
  std::string HostForHeader() const;  // Host header value: host[:port], IPv6 in brackets
  std::string ToString() const;
};

// Parses an absolute http:// or https:// URL; throws kInvalidArgument naming the problem.
Url ParseHttpUrl(std::string_view text);

// Resolves a redirect Location (absolute, scheme-relative, absolute-path or relative-path
// reference) against `base`; throws kInvalidArgument when it is not an http(s) URL.
Url ResolveRedirect(const Url& base, std::string_view location);

// Lower-cased scheme of `text` ("" when it has none), e.g. "data", "file", "http".
std::string UrlScheme(std::string_view text);

}  // namespace m3::net
