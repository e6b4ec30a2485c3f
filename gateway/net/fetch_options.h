// Limits and policy of media fetching, all configurable from the command line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace m3::net {

struct FetchOptions {
  int64_t max_image_bytes = 20ll << 20;     // per image
  int64_t max_video_bytes = 256ll << 20;    // per video
  int64_t max_request_bytes = 512ll << 20;  // all media of one request together
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds total_timeout{30000};  // one fetch: DNS, connect, TLS, redirects, body
  int max_redirects = 3;
  bool ssrf_guard = true;
  std::vector<std::string> allowed_hosts;     // HOST[:PORT], exempt from the SSRF guard
  std::vector<std::string> local_media_dirs;  // empty: local files refused
  bool use_system_cas = true;                 // verify servers against the system CA store
  std::string extra_ca_file;                  // PEM CA bundle trusted in addition
  std::string user_agent = "m3serve-media-fetcher/1";
  // The process's fetches share one io_context (see FetchContext): its threads, the DNS
  // resolver's threads and queue, and the fetches allowed in flight at once.
  int network_threads = 2;
  int resolver_threads = 4;
  int resolver_queue_limit = 64;
  int max_inflight_fetches = 256;
};

}  // namespace m3::net
