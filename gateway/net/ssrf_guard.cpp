// Address classification and the allowlist of the SSRF guard (see ssrf_guard.h).
#include "gateway/net/ssrf_guard.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "shared/error.h"

namespace m3::net {
namespace {

bool InV4(uint32_t a, uint32_t net, int prefix) {
  uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (a & mask) == (net & mask);
}

constexpr uint32_t V4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

AddressClass ClassifyV4(uint32_t a) {
  if (a == 0) return AddressClass::kUnspecified;
  if (a == 0xffffffffu) return AddressClass::kBroadcast;
  if (InV4(a, V4(127, 0, 0, 0), 8)) return AddressClass::kLoopback;
  if (InV4(a, V4(10, 0, 0, 0), 8) || InV4(a, V4(172, 16, 0, 0), 12) ||
      InV4(a, V4(192, 168, 0, 0), 16))
    return AddressClass::kPrivate;
  if (InV4(a, V4(100, 64, 0, 0), 10)) return AddressClass::kCgnat;
  if (InV4(a, V4(169, 254, 0, 0), 16)) return AddressClass::kLinkLocal;
  if (InV4(a, V4(224, 0, 0, 0), 4)) return AddressClass::kMulticast;
  if (InV4(a, V4(0, 0, 0, 0), 8) || InV4(a, V4(192, 0, 0, 0), 24) ||
      InV4(a, V4(198, 18, 0, 0), 15) || InV4(a, V4(240, 0, 0, 0), 4))
    return AddressClass::kReserved;
  return AddressClass::kPublic;
}

uint32_t V4At(const std::array<unsigned char, 16>& b, int offset) {
  return (uint32_t{b[offset]} << 24) | (uint32_t{b[offset + 1]} << 16) |
         (uint32_t{b[offset + 2]} << 8) | uint32_t{b[offset + 3]};
}

AddressClass ClassifyV6(const boost::asio::ip::address_v6& v6) {
  auto b = v6.to_bytes();
  bool first10_zero =
      std::all_of(b.begin(), b.begin() + 10, [](unsigned char x) { return x == 0; });
  if (first10_zero && b[10] == 0xff && b[11] == 0xff) return ClassifyV4(V4At(b, 12));  // mapped
  bool first12_zero = first10_zero && b[10] == 0 && b[11] == 0;
  if (first12_zero) {
    uint32_t low = V4At(b, 12);
    if (low == 0) return AddressClass::kUnspecified;
    if (low == 1) return AddressClass::kLoopback;
    return ClassifyV4(low);  // deprecated IPv4-compatible form
  }
  // NAT64 well-known prefix 64:ff9b::/96 carries an IPv4 address in the low 32 bits.
  static constexpr std::array<unsigned char, 12> kNat64 = {0, 0x64, 0xff, 0x9b, 0, 0,
                                                           0, 0,    0,    0,    0, 0};
  if (std::equal(kNat64.begin(), kNat64.end(), b.begin())) return ClassifyV4(V4At(b, 12));
  if (b[0] == 0x20 && b[1] == 0x02) return ClassifyV4(V4At(b, 2));  // 6to4
  if (b[0] == 0xff) return AddressClass::kMulticast;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return AddressClass::kLinkLocal;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return AddressClass::kReserved;  // site-local
  if ((b[0] & 0xfe) == 0xfc) return AddressClass::kUniqueLocal;
  // Only global unicast 2000::/3 is routable on the internet.
  if ((b[0] & 0xe0) != 0x20) return AddressClass::kReserved;
  return AddressClass::kPublic;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string_view AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kCgnat:
      return "carrier-grade NAT";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kBroadcast:
      return "broadcast";
    case AddressClass::kUniqueLocal:
      return "unique-local";
    case AddressClass::kReserved:
      return "reserved";
  }
  return "unknown";
}

AddressClass ClassifyAddress(const boost::asio::ip::address& address) {
  if (address.is_v4()) return ClassifyV4(address.to_v4().to_uint());
  return ClassifyV6(address.to_v6());
}

HostRule ParseHostRule(std::string_view text) {
  auto bad = [&](const char* why) {
    throw Error(ErrorCode::kInvalidArgument,
                "invalid allowed media host '" + std::string(text) + "': " + why);
  };
  HostRule rule;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) bad("unterminated IPv6 literal");
    rule.host = Lower(text.substr(1, close - 1));
    std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad("expected ':' after ']'");
      port = after.substr(1);
    }
  } else {
    size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      rule.host = Lower(text);  // a bare IPv6 address
    } else {
      rule.host = Lower(text.substr(0, colon));
      if (colon != std::string_view::npos) port = text.substr(colon + 1);
    }
  }
  if (rule.host.empty()) bad("empty host");
  if (!port.empty() || (text.size() && text.back() == ':')) {
    uint32_t p = 0;
    if (port.empty() || port.size() > 5) bad("invalid port");
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c))) bad("invalid port");
      p = p * 10 + static_cast<uint32_t>(c - '0');
    }
    if (p == 0 || p > 65535) bad("port out of range");
    rule.port = static_cast<uint16_t>(p);
  }
  return rule;
}

bool SsrfGuard::HostAllowlisted(std::string_view host, uint16_t port) const {
  std::string h = Lower(host);
  for (const auto& rule : allowed_) {
    if (rule.host == h && (!rule.port || *rule.port == port)) return true;
  }
  return false;
}

bool SsrfGuard::Allows(std::string_view host, uint16_t port,
                       const boost::asio::ip::address& address) const {
  if (!enabled_ || HostAllowlisted(host, port)) return true;
  return ClassifyAddress(address) == AddressClass::kPublic;
}

void SsrfGuard::Check(std::string_view host, uint16_t port,
                      const boost::asio::ip::address& address) const {
  if (Allows(host, port, address)) return;
  throw Error(ErrorCode::kPermissionDenied,
              "refusing to fetch media from '" + std::string(host) + "': address " +
                  address.to_string() + " is " +
                  std::string(AddressClassName(ClassifyAddress(address))) +
                  " (allow it with --allow-media-host)");
}

}  // namespace m3::net
