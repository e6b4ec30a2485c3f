// data: URIs (RFC 2397): data:[<media type>][;param=value]*[;base64],<data>. The payload is
// base64 or percent-encoded; the declared media type is kept for messages only, since media
// formats are detected from the bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace m3::net {

struct DataUri {
  std::string media_type;  // lower case, "text/plain" when absent
  bool base64 = false;
  std::string bytes;
};

// Throws kInvalidArgument for malformed URIs or payloads, kTooLarge when the decoded payload
// would exceed max_bytes (checked from the encoded length before decoding).
DataUri ParseDataUri(std::string_view uri, int64_t max_bytes);

// The part before the payload, checked without decoding anything (cheap enough to run before
// a request is queued). Throws kInvalidArgument like ParseDataUri.
struct DataUriHeader {
  std::string media_type;
  bool base64 = false;
  size_t payload_offset = 0;  // in the URI
};
DataUriHeader ParseDataUriHeader(std::string_view uri);
// The decoded size a payload of `payload_bytes` characters can have at most.
int64_t DataUriDecodedEstimate(const DataUriHeader& header, size_t payload_bytes);

}  // namespace m3::net
