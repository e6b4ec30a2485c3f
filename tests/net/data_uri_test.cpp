// data: URIs and base64.
#include <doctest/doctest.h>

#include <vector>

#include "gateway/net/base64.h"
#include "gateway/net/data_uri.h"
#include "shared/error.h"

using m3::net::ParseDataUri;

namespace {
m3::ErrorCode CodeOf(const std::string& uri, int64_t limit = 1 << 20) {
  try {
    ParseDataUri(uri, limit);
  } catch (const m3::Error& e) {
    return e.code();
  }
  FAIL("expected an error for " << uri);
  return m3::ErrorCode::kInternal;
}
}  // namespace

TEST_CASE("base64 round trips and rejects garbage") {
  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    CHECK(m3::net::Base64Decode(m3::net::Base64Encode(s)) == s);
  }
  CHECK(m3::net::Base64Encode("hello") == "aGVsbG8=");
  CHECK(m3::net::Base64Decode("aGVsbG8") == "hello");  // padding may be left out
  CHECK_THROWS_AS(m3::net::Base64Decode("aGV*bG8="), m3::Error);
  CHECK_THROWS_AS(m3::net::Base64Decode("a"), m3::Error);
  CHECK_THROWS_AS(m3::net::Base64Decode("aG=sbG8="), m3::Error);
  CHECK_THROWS_AS(m3::net::Base64Decode("aGVsbG8=="), m3::Error);
}

TEST_CASE("good data URIs decode") {
  auto d = ParseDataUri("data:image/png;base64,iVBORw0KGgo=", 100);
  CHECK(d.media_type == "image/png");
  CHECK(d.base64);
  CHECK(d.bytes == std::string("\x89PNG\r\n\x1a\n", 8));
  auto t = ParseDataUri("data:,hello%20world", 100);
  CHECK(t.media_type == "text/plain");
  CHECK(t.bytes == "hello world");
  auto p = ParseDataUri("DATA:Image/JPEG;name=x.jpg;base64,/9j/", 100);
  CHECK(p.media_type == "image/jpeg");
  CHECK(p.bytes == "\xff\xd8\xff");
  CHECK(ParseDataUri("data:image/png;base64,", 100).bytes.empty());  // zero length decodes
}

TEST_CASE("bad data URIs are clear errors") {
  CHECK(CodeOf("data:image/png;base64,@@@@") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf("data:image/png;base64,iVBORw0KG") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf("data:image/png;base64") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf("data:png;base64,AAAA") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf("data:image/png;base64;x=y,AAAA") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf("data:,%zz") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf("data:image/png;base64," + std::string(4000, 'A'), 1000) ==
        m3::ErrorCode::kTooLarge);
  try {
    ParseDataUri("data:image/png;base64,iVBO!w0K", 100);
  } catch (const m3::Error& e) {
    CHECK(std::string(e.what()).find("offset 4") != std::string::npos);
  }
}
