// PrintableExcerpt: untrusted bytes made safe to put in an error message or a log line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace m3::net {

// The first `max_bytes` of `s`: printable ASCII as is, every other byte as \xNN (a NUL would
// cut a message short in C APIs and logs, control bytes could forge log lines), then "..." when
// `s` was longer.
std::string PrintableExcerpt(std::string_view s, size_t max_bytes);

}  // namespace m3::net
