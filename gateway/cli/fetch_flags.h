// FetchFlags: the media-fetching command-line flags (SSRF allowlist, byte limits, timeouts,
// redirects, CA file, local-media directories) shared by `serve` and `preprocess`, so both
// spell, default and validate them the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "gateway/net/fetch_options.h"

namespace m3::cli {

class FetchFlags {
 public:
  // Registers the flags on `app`; the values land in this object, which must outlive parsing.
  void Add(CLI::App& app);
  // The fetcher options after parsing; throws kInvalidArgument for non-positive limits.
  net::FetchOptions Resolve() const;

 private:
  net::FetchOptions fetch_;
  int64_t connect_timeout_ms_ = 5000;
  int64_t fetch_timeout_ms_ = 30000;
  bool no_ssrf_guard_ = false;
};

}  // namespace m3::cli
