// HttpRequestParser: an incremental HTTP/1.x request parser written to RFC 9112 for an
// endpoint that faces untrusted clients. It owns the framing decisions that decide request
// smuggling and resource use: the request line, header fields (no obs-fold, no whitespace
// before the colon, no CTLs in values), Content-Length (one value, no overflow), the
// Transfer-Encoding list (only "chunked", only on HTTP/1.1, never together with
// Content-Length), chunked bodies with bounded extensions, and bounded trailers (checked, then
// dropped). Every limit is a number the server configures; every refusal carries the HTTP
// status (400, 413, 414, 431, 501, 505) and a message naming the problem, and a connection
// whose request was refused must be closed, since its framing can no longer be trusted.
// Pure and synchronous (no sockets), so the server, the tests and the fuzzers drive it the same
// way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

namespace m3::net {

struct HttpParserLimits {
  size_t max_request_line = 8192;         // 414 when the request line is longer
  size_t max_header_bytes = 64 * 1024;    // request line + fields; 431 when over (<= 65535)
  size_t max_header_fields = 128;         // 431 when more
  size_t max_chunk_line = 4096;           // a chunk-size line with its extensions; 400 when over
  size_t max_trailer_bytes = 8192;        // the trailer section; 431 when over
  uint64_t max_body_bytes = 64ull << 20;  // 413 when the (declared or received) body is over
};

class HttpRequestParser {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  explicit HttpRequestParser(HttpParserLimits limits);

  // Consumes a prefix of `data` and returns how many bytes it took. It stops after the header
  // section (so the caller can look at the header before any body is read: call Feed again to
  // go on), at the end of the request (the rest belongs to the next request on the
  // connection), and at the first error.
  size_t Feed(std::string_view data);

  // The header section is complete: header() is valid and the body length is known
  // (content_length(), or chunked()).
  bool header_done() const { return header_complete_ && state_ != State::kError; }
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  // On failure: the status to answer and a message naming the problem.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  const Request& header() const { return request_; }
  bool chunked() const { return chunked_; }
  uint64_t content_length() const { return content_length_; }  // 0 when chunked
  uint64_t body_bytes() const { return request_.body().size(); }
  // Whether the request asked for "100 Continue" before sending its body.
  bool expects_continue() const { return expect_continue_; }

  // Moves the finished request out (after done()).
  Request Release() { return std::move(request_); }

 private:
  enum class State {
    kRequestLine,
    kFields,
    kBody,  // Content-Length body
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailers,
    kDone,
    kError,
  };

  // Each returns false when it needs more data.
  bool ParseLine(std::string_view data, size_t& used, size_t limit, int over_status,
                 const char* what, std::string_view& line);
  void OnRequestLine(std::string_view line);
  void OnField(std::string_view line);
  void OnHeaderEnd();
  void OnChunkSize(std::string_view line);
  void OnTrailer(std::string_view line);
  void Fail(int status, std::string message);

  HttpParserLimits limits_;
  State state_ = State::kRequestLine;
  Request request_;
  std::string line_;         // the current line, when it arrived in pieces
  size_t header_bytes_ = 0;  // request line + fields so far
  size_t trailer_bytes_ = 0;
  size_t field_count_ = 0;
  int empty_lines_ = 0;  // leading CRLFs before the request line (RFC 9112 2.2)
  std::optional<uint64_t> declared_length_;
  bool has_transfer_encoding_ = false;
  std::string transfer_encoding_;  // all Transfer-Encoding field values, comma-joined
  int host_fields_ = 0;
  bool chunked_ = false;
  bool expect_continue_ = false;
  bool header_complete_ = false;
  std::string absolute_host_;  // from an absolute-form target
  uint64_t content_length_ = 0;
  uint64_t chunk_left_ = 0;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace m3::net
