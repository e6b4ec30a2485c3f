// URL parsing and redirect resolution for the media fetcher.
#include <doctest/doctest.h>

#include "gateway/net/url.h"
#include "shared/error.h"

using m3::net::ParseHttpUrl;
using m3::net::ResolveRedirect;

TEST_CASE("http urls parse into scheme, host, port and target") {
  auto u = ParseHttpUrl("HTTPS://Example.COM/a/b.png?x=1#frag");
  CHECK(u.scheme == "https");
  CHECK(u.host == "example.com");
  CHECK(u.port == 443);
  CHECK(u.target == "/a/b.png?x=1");
  CHECK(u.ToString() == "https://example.com/a/b.png?x=1");

  auto v = ParseHttpUrl("http://127.0.0.1:8080");
  CHECK(v.port == 8080);
  CHECK(v.target == "/");
  CHECK(v.HostForHeader() == "127.0.0.1:8080");

  auto w = ParseHttpUrl("http://[::1]:9000/x");
  CHECK(w.ipv6_literal);
  CHECK(w.host == "::1");
  CHECK(w.HostForHeader() == "[::1]:9000");

  CHECK(ParseHttpUrl("http://host.example./p").host == "host.example");
  CHECK(ParseHttpUrl("http://h?q=1").target == "/?q=1");
}

TEST_CASE("malformed or risky urls are refused") {
  for (const char* bad : {"ftp://x/", "http:/x", "http://", "http://user:pw@host/", "http://a b/",
                          "http://host:0/", "http://host:65536/", "http://host:12a/",
                          "http://[::1/", "http://ho%73t/", "http://[zz::1]/", "http://h/\x01"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(ParseHttpUrl(bad), m3::Error);
  }
}

TEST_CASE("redirect locations resolve against the current url") {
  auto base = ParseHttpUrl("https://a.example:8443/dir/img.png?x=1");
  CHECK(ResolveRedirect(base, "http://b.example/z").ToString() == "http://b.example/z");
  CHECK(ResolveRedirect(base, "//c.example/q").ToString() == "https://c.example/q");
  CHECK(ResolveRedirect(base, "/root").ToString() == "https://a.example:8443/root");
  CHECK(ResolveRedirect(base, "other.png").ToString() == "https://a.example:8443/dir/other.png");
  CHECK_THROWS_AS(ResolveRedirect(base, "file:///etc/passwd"), m3::Error);
  CHECK_THROWS_AS(ResolveRedirect(base, ""), m3::Error);
}

TEST_CASE("scheme detection") {
  CHECK(m3::net::UrlScheme("DATA:image/png;base64,AA==") == "data");
  CHECK(m3::net::UrlScheme("/abs/path") == "");
  CHECK(m3::net::UrlScheme("file:///x") == "file");
  CHECK(m3::net::UrlScheme("1http://x") == "");
}
