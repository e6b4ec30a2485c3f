// TLS client context for https media fetches (see tls_context.h).
#include "gateway/net/tls_context.h"

#include <openssl/x509v3.h>

#include "shared/error.h"

namespace m3::net {

std::shared_ptr<boost::asio::ssl::context> MakeClientTlsContext(const FetchOptions& options) {
  namespace ssl = boost::asio::ssl;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (options.use_system_cas) {
    ctx->set_default_verify_paths(ec);
    if (ec) throw Error(ErrorCode::kInternal, "cannot load the system CA store: " + ec.message());
  }
  if (!options.extra_ca_file.empty()) {
    ctx->load_verify_file(options.extra_ca_file, ec);
    if (ec) {
      throw Error(ErrorCode::kInvalidArgument,
                  "cannot load CA file '" + options.extra_ca_file + "': " + ec.message());
    }
  }
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

void ConfigureTlsHost(SSL* ssl, const std::string& host, bool ip_literal) {
  if (ip_literal) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      throw Error(ErrorCode::kInternal, "cannot set TLS IP verification for " + host);
    }
    return;
  }
  if (SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    throw Error(ErrorCode::kInternal, "cannot set TLS SNI for " + host);
  }
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl, host.c_str()) != 1) {
    throw Error(ErrorCode::kInternal, "cannot set TLS hostname verification for " + host);
  }
}

}  // namespace m3::net
