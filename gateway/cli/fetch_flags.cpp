// The shared media-fetching flags; see fetch_flags.h.
#include "gateway/cli/fetch_flags.h"

#include <chrono>

#include "shared/error.h"

namespace m3::cli {

void FetchFlags::Add(CLI::App& app) {
  app.add_option("--allow-local-media", fetch_.local_media_dirs,
                 "directory local media files (file:// URLs) may be read from");
  app.add_option("--allow-media-host", fetch_.allowed_hosts,
                 "HOST[:PORT] exempt from the SSRF guard (repeatable)");
  app.add_flag("--disable-ssrf-guard", no_ssrf_guard_, "allow fetching from any address (unsafe)");
  app.add_option("--max-image-bytes", fetch_.max_image_bytes, "bytes per image")
      ->capture_default_str();
  app.add_option("--max-video-bytes", fetch_.max_video_bytes, "bytes per video")
      ->capture_default_str();
  app.add_option("--max-request-media-bytes", fetch_.max_request_bytes, "media bytes per request")
      ->capture_default_str();
  app.add_option("--fetch-connect-timeout-ms", connect_timeout_ms_, "media fetch connect timeout")
      ->capture_default_str();
  app.add_option("--fetch-timeout-ms", fetch_timeout_ms_, "media fetch total timeout")
      ->capture_default_str();
  app.add_option("--max-redirects", fetch_.max_redirects, "redirects followed per fetch")
      ->capture_default_str()
      ->check(CLI::Range(0, 20));
  app.add_option("--ca-file", fetch_.extra_ca_file, "extra PEM CA bundle for https media");
}

net::FetchOptions FetchFlags::Resolve() const {
  Require(connect_timeout_ms_ > 0 && fetch_timeout_ms_ > 0 && fetch_.max_image_bytes > 0 &&
              fetch_.max_video_bytes > 0 && fetch_.max_request_bytes > 0,
          ErrorCode::kInvalidArgument, "limits and timeouts must be positive");
  net::FetchOptions out = fetch_;
  out.ssrf_guard = !no_ssrf_guard_;
  out.connect_timeout = std::chrono::milliseconds(connect_timeout_ms_);
  out.total_timeout = std::chrono::milliseconds(fetch_timeout_ms_);
  return out;
}

}  // namespace m3::cli
