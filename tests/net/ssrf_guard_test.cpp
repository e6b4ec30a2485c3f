// SSRF guard: classification of addresses and the allowlist.
#include <doctest/doctest.h>

#include "gateway/net/ssrf_guard.h"
#include "shared/error.h"

using m3::net::AddressClass;
using m3::net::ClassifyAddress;

namespace {
AddressClass Classify(const char* text) {
  return ClassifyAddress(boost::asio::ip::make_address(text));
}
}  // namespace

TEST_CASE("non-public addresses are classified") {
  CHECK(Classify("127.0.0.1") == AddressClass::kLoopback);
  CHECK(Classify("127.255.1.2") == AddressClass::kLoopback);
  CHECK(Classify("169.254.169.254") == AddressClass::kLinkLocal);
  CHECK(Classify("10.0.0.1") == AddressClass::kPrivate);
  CHECK(Classify("172.16.5.4") == AddressClass::kPrivate);
  CHECK(Classify("172.31.255.255") == AddressClass::kPrivate);
  CHECK(Classify("192.168.1.1") == AddressClass::kPrivate);
  CHECK(Classify("100.64.0.1") == AddressClass::kCgnat);
  CHECK(Classify("100.127.255.255") == AddressClass::kCgnat);
  CHECK(Classify("0.0.0.0") == AddressClass::kUnspecified);
  CHECK(Classify("0.1.2.3") == AddressClass::kReserved);
  CHECK(Classify("224.0.0.1") == AddressClass::kMulticast);
  CHECK(Classify("239.255.255.250") == AddressClass::kMulticast);
  CHECK(Classify("255.255.255.255") == AddressClass::kBroadcast);
  CHECK(Classify("240.0.0.1") == AddressClass::kReserved);
  CHECK(Classify("::1") == AddressClass::kLoopback);
  CHECK(Classify("::") == AddressClass::kUnspecified);
  CHECK(Classify("fe80::1") == AddressClass::kLinkLocal);
  CHECK(Classify("febf::1") == AddressClass::kLinkLocal);
  CHECK(Classify("fc00::1") == AddressClass::kUniqueLocal);
  CHECK(Classify("fd12:3456::1") == AddressClass::kUniqueLocal);
  CHECK(Classify("ff02::1") == AddressClass::kMulticast);
  CHECK(Classify("::ffff:127.0.0.1") == AddressClass::kLoopback);
  CHECK(Classify("::ffff:169.254.169.254") == AddressClass::kLinkLocal);
  CHECK(Classify("::ffff:10.1.2.3") == AddressClass::kPrivate);
  CHECK(Classify("::127.0.0.1") == AddressClass::kLoopback);
  CHECK(Classify("64:ff9b::a00:1") == AddressClass::kPrivate);  // NAT64 of 10.0.0.1
  CHECK(Classify("2002:7f00:1::") == AddressClass::kLoopback);  // 6to4 of 127.0.0.1
}

TEST_CASE("public addresses pass") {
  for (const char* ok :
       {"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "169.253.1.1",
        "2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8"}) {
    CAPTURE(ok);
    CHECK(Classify(ok) == AddressClass::kPublic);
  }
}

TEST_CASE("the guard refuses non-public addresses unless the host is allowlisted") {
  using boost::asio::ip::make_address;
  m3::net::SsrfGuard guard(
      true, {m3::net::ParseHostRule("localhost:8080"), m3::net::ParseHostRule("127.0.0.1"),
             m3::net::ParseHostRule("[::1]:9000")});
  CHECK(guard.Allows("example.com", 80, make_address("93.184.216.34")));
  CHECK_FALSE(guard.Allows("evil.example", 80, make_address("169.254.169.254")));
  CHECK(guard.Allows("localhost", 8080, make_address("127.0.0.1")));
  CHECK_FALSE(guard.Allows("localhost", 8081, make_address("127.0.0.1")));
  CHECK(guard.Allows("127.0.0.1", 1234, make_address("127.0.0.1")));
  CHECK(guard.Allows("::1", 9000, make_address("::1")));
  CHECK_FALSE(guard.Allows("::1", 9001, make_address("::1")));
  try {
    guard.Check("evil.example", 80, make_address("10.0.0.1"));
    FAIL("expected a refusal");
  } catch (const m3::Error& e) {
    CHECK(e.code() == m3::ErrorCode::kPermissionDenied);
    CHECK(std::string(e.what()).find("private") != std::string::npos);
  }
  m3::net::SsrfGuard off(false, {});
  CHECK(off.Allows("x", 80, make_address("127.0.0.1")));
}

TEST_CASE("allowlist rules parse") {
  auto r = m3::net::ParseHostRule("Example.com:443");
  CHECK(r.host == "example.com");
  CHECK(r.port == 443);
  CHECK_FALSE(m3::net::ParseHostRule("example.com").port.has_value());
  CHECK(m3::net::ParseHostRule("[::1]").host == "::1");
  CHECK(m3::net::ParseHostRule("fe80::1").host == "fe80::1");
  CHECK_THROWS_AS(m3::net::ParseHostRule("host:"), m3::Error);
  CHECK_THROWS_AS(m3::net::ParseHostRule("host:99999"), m3::Error);
  CHECK_THROWS_AS(m3::net::ParseHostRule(""), m3::Error);
}
