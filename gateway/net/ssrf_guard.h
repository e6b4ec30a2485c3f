// The SSRF guard: decides whether the fetcher may connect to an address. Every address a
// hostname resolves to is classified (loopback, private, link-local, CGNAT, multicast, ...);
// only public unicast addresses pass, unless the host is on the operator's allowlist
// (--allow-media-host HOST[:PORT]). The fetcher connects only to addresses that passed, so a
// second DNS answer can never slip in between check and connect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace m3::net {

enum class AddressClass {
  kPublic,
  kLoopback,     // 127/8, ::1
  kPrivate,      // 10/8, 172.16/12, 192.168/16
  kCgnat,        // 100.64/10
  kLinkLocal,    // 169.254/16, fe80::/10 (cloud metadata lives here)
  kMulticast,    // 224/4, ff00::/8
  kUnspecified,  // 0.0.0.0, ::
  kBroadcast,    // 255.255.255.255
  kUniqueLocal,  // fc00::/7
  kReserved,     // 0/8, 192.0.0/24, 198.18/15, 240/4, and other non-routable space
};

std::string_view AddressClassName(AddressClass c);
// IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4
// (2002::/16) IPv6 addresses are classified by the IPv4 address they carry.
AddressClass ClassifyAddress(const boost::asio::ip::address& address);

struct HostRule {
  std::string host;              // lower case; IPv6 without brackets
  std::optional<uint16_t> port;  // any port when unset
};
// Parses HOST, HOST:PORT, [V6] or [V6]:PORT; throws kInvalidArgument.
HostRule ParseHostRule(std::string_view text);

class SsrfGuard {
 public:
  SsrfGuard(bool enabled, std::vector<HostRule> allowed_hosts)
      : enabled_(enabled), allowed_(std::move(allowed_hosts)) {}

  bool enabled() const { return enabled_; }
  // True when the URL host (as written in the URL) is allowlisted for this port.
  bool HostAllowlisted(std::string_view host, uint16_t port) const;
  // Throws kPermissionDenied naming the host, the address and its class unless connecting
  // to `address` for `host:port` is allowed.
  void Check(std::string_view host, uint16_t port, const boost::asio::ip::address& address) const;
  bool Allows(std::string_view host, uint16_t port, const boost::asio::ip::address& address) const;

 private:
  bool enabled_;
  std::vector<HostRule> allowed_;
};

}  // namespace m3::net
