// The TLS client context of the media fetcher: peer verification on, system CAs (plus an
// optional extra bundle), TLS 1.2 minimum. Per-connection SNI and hostname checks are set on
// each stream by ConfigureTlsStream.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ssl.hpp>

#include "gateway/net/fetch_options.h"

namespace m3::net {

std::shared_ptr<boost::asio::ssl::context> MakeClientTlsContext(const FetchOptions& options);

// Sets SNI (for host names) and asks OpenSSL to verify that the certificate names `host`
// (DNS name or IP literal). Throws kInternal when OpenSSL refuses the settings.
void ConfigureTlsHost(SSL* ssl, const std::string& host, bool ip_literal);

}  // namespace m3::net
