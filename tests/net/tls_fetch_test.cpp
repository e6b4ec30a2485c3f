// https fetching verifies certificates: a loopback TLS origin with a self-signed certificate
// (made here with OpenSSL) is refused with the system CAs alone, accepted once its
// certificate is configured as a CA, and refused again when the name does not match.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "gateway/net/media_fetcher.h"
#include "shared/error.h"
#include "tests/test_util.h"

namespace {

// Writes key.pem and cert.pem (self-signed, SAN IP:127.0.0.1) into dir.
void MakeSelfSignedCert(const std::string& dir) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  REQUIRE(key != nullptr);
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 4242);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600 * 24);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("m3 test origin"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    REQUIRE(ext != nullptr);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
  FILE* f = std::fopen((dir + "/key.pem").c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  f = std::fopen((dir + "/cert.pem").c_str(), "w");
  PEM_write_X509(f, cert);
  std::fclose(f);
  X509_free(cert);
  EVP_PKEY_free(key);
}

// Serves one fixed body over TLS on 127.0.0.1 to each connection until destroyed.
class TlsOrigin {
 public:
  TlsOrigin(const std::string& dir, std::string body) : body_(std::move(body)) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    REQUIRE(SSL_CTX_use_certificate_file(ctx_, (dir + "/cert.pem").c_str(), SSL_FILETYPE_PEM) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, (dir + "/key.pem").c_str(), SSL_FILETYPE_PEM) == 1);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TlsOrigin() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  uint16_t port() const { return port_; }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, c);
      if (SSL_accept(ssl) == 1) {
        char buf[4096];
        std::string req;
        while (req.find("\r\n\r\n") == std::string::npos) {
          int n = SSL_read(ssl, buf, sizeof buf);
          if (n <= 0) break;
          req.append(buf, static_cast<size_t>(n));
        }
        std::string res = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) +
                          "\r\nConnection: close\r\n\r\n" + body_;
        SSL_write(ssl, res.data(), static_cast<int>(res.size()));
        SSL_shutdown(ssl);
      }
      SSL_free(ssl);
      ERR_clear_error();
      ::close(c);
    }
  }

  std::string body_;
  SSL_CTX* ctx_ = nullptr;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("https fetches verify the server certificate and its name") {
  std::string dir = m3::test::TempDir();
  MakeSelfSignedCert(dir);
  std::string png = m3::test::ReadFile(m3::test::DataPath("m3-tiny/images/img00_53x37.png"));
  TlsOrigin origin(dir, png);
  std::string port = std::to_string(origin.port());

  m3::net::FetchOptions system_only;
  system_only.allowed_hosts = {"127.0.0.1", "localhost"};
  system_only.total_timeout = std::chrono::milliseconds(5000);
  try {
    m3::net::MediaFetcher(system_only)
        .Fetch("https://127.0.0.1:" + port + "/a.png", m3::content::MediaKind::kImage, nullptr);
    FAIL("a self-signed certificate must not verify against the system CAs");
  } catch (const m3::Error& e) {
    CHECK(e.code() == m3::ErrorCode::kUnavailable);
    CHECK(std::string(e.what()).find("certificate verify failed") != std::string::npos);
  }

  m3::net::FetchOptions with_ca = system_only;
  with_ca.extra_ca_file = dir + "/cert.pem";
  auto got = m3::net::MediaFetcher(with_ca).Fetch("https://127.0.0.1:" + port + "/a.png",
                                                  m3::content::MediaKind::kImage, nullptr);
  CHECK(got.bytes == png);

  // The certificate names 127.0.0.1 only, so "localhost" must fail hostname verification.
  try {
    m3::net::MediaFetcher(with_ca).Fetch("https://localhost:" + port + "/a.png",
                                         m3::content::MediaKind::kImage, nullptr);
    FAIL("a certificate for another name must be refused");
  } catch (const m3::Error& e) {
    CHECK(e.code() == m3::ErrorCode::kUnavailable);
  }
}
