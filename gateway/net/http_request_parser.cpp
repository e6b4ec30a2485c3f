// The RFC 9112 request parser (see http_request_parser.h). Section numbers below are RFC 9112's
// unless they say RFC 9110.
#include "gateway/net/http_request_parser.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "gateway/net/printable_excerpt.h"

namespace m3::net {
namespace {

// RFC 9110 5.6.2: token characters.
bool IsTchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return IsTchar(static_cast<unsigned char>(c)); });
}

// RFC 9110 5.5: field-vchar / SP / HTAB; obs-text (0x80-0xFF) is kept as opaque bytes.
bool IsFieldValueChar(unsigned char c) {
  return c == '\t' || c == ' ' || (c >= 0x21 && c != 0x7F);
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// A short, printable rendering of untrusted bytes for an error message.
std::string Quote(std::string_view s) {
  std::string out = "'";  // appended, not "'" + ...: GCC 12 warns falsely (-Wrestrict) on that
  out += PrintableExcerpt(s, 40);
  out += '\'';
  return out;
}

// uri-host [":" port] characters (RFC 3986 reg-name, IP literals, percent escapes).
bool IsHostValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) ||
           std::string_view("-._~!$&'()*+,;=:[]%").find(ch) != std::string_view::npos;
  });
}

}  // namespace

HttpRequestParser::HttpRequestParser(HttpParserLimits limits) : limits_(limits) {
  // Beast's field storage refuses names and values over 65535 bytes by throwing; a header
  // section that can never hold one keeps that from ever happening.
  limits_.max_header_bytes = std::min<size_t>(limits_.max_header_bytes, 65535);
}

void HttpRequestParser::Fail(int status, std::string message) {
  if (state_ == State::kError) return;
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
}

bool HttpRequestParser::ParseLine(std::string_view data, size_t& used, size_t limit,
                                  int over_status, const char* what, std::string_view& line) {
  const size_t start = used;
  const size_t nl = data.find('\n', start);
  const size_t end = nl == std::string_view::npos ? data.size() : nl;
  // +1 leaves room for the CR of a CRLF that arrives split from its LF.
  if (line_.size() + (end - start) > limit + 1) {
    Fail(over_status,
         std::string(what) + " is over the limit of " + std::to_string(limit) + " bytes");
    used = data.size();
    return false;
  }
  line_.append(data.substr(start, end - start));
  if (nl == std::string_view::npos) {
    used = data.size();
    return false;
  }
  used = nl + 1;
  std::string_view got = line_;
  if (!got.empty() && got.back() == '\r') got.remove_suffix(1);
  if (got.size() > limit) {
    Fail(over_status,
         std::string(what) + " is over the limit of " + std::to_string(limit) + " bytes");
    return false;
  }
  // 2.2: a bare CR is not a line ending, and letting it through invites smuggling.
  if (got.find('\r') != std::string_view::npos) {
    Fail(400, std::string("bare CR (not followed by LF) in the ") + what);
    return false;
  }
  line = got;
  return true;
}

void HttpRequestParser::OnRequestLine(std::string_view line) {
  // 3: method SP request-target SP HTTP-version
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(400, "malformed request line " + Quote(line) +
                         " (expected METHOD SP TARGET SP HTTP-VERSION)");
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Fail(400, "invalid request method " + Quote(method));
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(version[5]) ||
      version[6] != '.' || !std::isdigit(version[7])) {
    return Fail(400, "invalid HTTP version " + Quote(version));
  }
  if (version[5] != '1') {
    return Fail(505, "HTTP version " + std::string(version) + " is not supported (use HTTP/1.1)");
  }
  // 2.6: a higher 1.x minor version is answered as 1.1.
  request_.version(version[7] == '0' ? 10 : 11);
  if (target.empty()) return Fail(400, "empty request target");
  for (char ch : target) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7F) {
      return Fail(400, "invalid character in the request target " + Quote(target));
    }
  }
  std::string path(target);
  if (target.front() == '/') {
    // origin-form
  } else if (target == "*") {
    if (method != "OPTIONS") return Fail(400, "the '*' request target is only for OPTIONS");
  } else if (size_t scheme = target.find("://"); scheme != std::string_view::npos && scheme > 0) {
    // 3.2.2 absolute-form: its authority replaces any Host field, its path is the target.
    const std::string_view rest = target.substr(scheme + 3);
    const size_t at = rest.find_first_of("/?");
    absolute_host_ = std::string(rest.substr(0, at));
    if (absolute_host_.empty() || !IsHostValue(absolute_host_)) {
      return Fail(400, "invalid authority in " + Quote(target));
    }
    path = at == std::string_view::npos ? "/"
           : rest[at] == '?'            ? "/" + std::string(rest.substr(at))
                                        : std::string(rest.substr(at));
  } else {
    return Fail(400, "unsupported request target " + Quote(target) +
                         " (expected an absolute path such as /v1/preprocess)");
  }
  request_.method_string(method);
  request_.target(path);
  state_ = State::kFields;
}

void HttpRequestParser::OnField(std::string_view line) {
  // 5.2: obsolete line folding is refused (a server may answer 400).
  if (line.front() == ' ' || line.front() == '\t') {
    return Fail(400, "obsolete line folding in the header section is not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    return Fail(400, "header line " + Quote(line) + " has no ':'");
  }
  const std::string_view name = line.substr(0, colon);
  if (!IsToken(name)) {
    // 5.1: no whitespace between the field name and the colon (a smuggling vector).
    return Fail(400, "invalid header field name " + Quote(name));
  }
  const std::string_view value = TrimOws(line.substr(colon + 1));
  for (char c : value) {
    if (!IsFieldValueChar(static_cast<unsigned char>(c))) {
      return Fail(400, "invalid character in the value of header field " + Quote(name));
    }
  }
  if (++field_count_ > limits_.max_header_fields) {
    return Fail(431, "more than " + std::to_string(limits_.max_header_fields) + " header fields");
  }
  if (EqualsNoCase(name, "content-length")) {
    // 6.3: a list of identical values is one value; anything else is an error.
    size_t at = 0;
    while (at <= value.size()) {
      const size_t comma = std::min(value.find(',', at), value.size());
      const std::string_view item = TrimOws(value.substr(at, comma - at));
      if (item.empty() || item.size() > 19 ||
          !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return Fail(400, "invalid Content-Length " + Quote(value));
      }
      const uint64_t n = std::stoull(std::string(item));
      if (declared_length_ && *declared_length_ != n) {
        return Fail(400, "conflicting Content-Length values");
      }
      declared_length_ = n;
      at = comma + 1;
    }
  } else if (EqualsNoCase(name, "transfer-encoding")) {
    has_transfer_encoding_ = true;
    if (!transfer_encoding_.empty()) transfer_encoding_ += ',';
    transfer_encoding_ += value;
  } else if (EqualsNoCase(name, "host")) {
    ++host_fields_;
    if (!IsHostValue(value)) return Fail(400, "invalid Host " + Quote(value));
  } else if (EqualsNoCase(name, "expect")) {
    // RFC 9110 10.1.1: 100-continue is the only expectation defined.
    if (!EqualsNoCase(value, "100-continue")) {
      return Fail(417, "unsupported expectation " + Quote(value));
    }
    expect_continue_ = true;
  }
  request_.insert(name, value);
}

void HttpRequestParser::OnHeaderEnd() {
  header_complete_ = true;
  const bool http11 = request_.version() == 11;
  if (!absolute_host_.empty()) {
    request_.set(boost::beast::http::field::host, absolute_host_);
  } else if (http11 && host_fields_ == 0) {
    // 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host.
    return Fail(400, "HTTP/1.1 request without a Host header");
  }
  if (host_fields_ > 1) return Fail(400, "more than one Host header");
  if (has_transfer_encoding_) {
    // 6.1: Transfer-Encoding was added in HTTP/1.1; a 1.0 message with it is faulty framing.
    if (!http11) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    // 6.1: a request with both is a smuggling attempt or a broken client; refuse either way.
    if (declared_length_) {
      return Fail(400, "the request has both Transfer-Encoding and Content-Length");
    }
    std::vector<std::string> codings;
    size_t at = 0;
    while (at <= transfer_encoding_.size()) {
      const size_t comma = std::min(transfer_encoding_.find(',', at), transfer_encoding_.size());
      const std::string_view item =
          TrimOws(std::string_view(transfer_encoding_).substr(at, comma - at));
      if (!item.empty()) codings.push_back(Lower(item));
      at = comma + 1;
    }
    // 6.3: chunked must be the final coding of a request, and applied once.
    if (codings.empty() || codings.back() != "chunked") {
      return Fail(400, "Transfer-Encoding " + Quote(transfer_encoding_) +
                           " does not end in chunked; the request body length is unknown");
    }
    for (size_t i = 0; i + 1 < codings.size(); ++i) {
      if (codings[i] == "chunked") return Fail(400, "chunked applied more than once");
      if (!IsToken(codings[i])) {
        return Fail(400, "invalid transfer coding " + Quote(codings[i]));
      }
      return Fail(501, "transfer coding " + Quote(codings[i]) +
                           " is not supported (send the body with chunked alone)");
    }
    chunked_ = true;
    state_ = State::kChunkSize;
    return;
  }
  content_length_ = declared_length_.value_or(0);
  if (content_length_ > limits_.max_body_bytes) {
    return Fail(413, "the request body of " + std::to_string(content_length_) +
                         " bytes is over the limit of " + std::to_string(limits_.max_body_bytes) +
                         " bytes");
  }
  if (content_length_ == 0) {
    state_ = State::kDone;
    return;
  }
  // The pages are only committed as the body arrives. Reserved up to 64 MiB at once (the
  // default limit); a longer body grows as it comes, so a declared length under a raised limit
  // never asks for more than was sent (a length near 2^63 threw from reserve).
  constexpr uint64_t kMaxReserve = uint64_t{64} << 20;
  request_.body().reserve(std::min(content_length_, kMaxReserve));
  state_ = State::kBody;
}

void HttpRequestParser::OnChunkSize(std::string_view line) {
  // 7.1: chunk-size [ chunk-ext ] CRLF
  size_t digits = 0;
  uint64_t size = 0;
  while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
    if (digits == 15) return Fail(400, "chunk size " + Quote(line) + " is too large");
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[digits])));
    size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++digits;
  }
  if (digits == 0) return Fail(400, "invalid chunk size line " + Quote(line));
  const std::string_view ext = TrimOws(line.substr(digits));
  if (!ext.empty()) {
    if (ext.front() != ';') return Fail(400, "invalid chunk size line " + Quote(line));
    for (char c : ext) {
      if (!IsFieldValueChar(static_cast<unsigned char>(c))) {
        return Fail(400, "invalid character in a chunk extension");
      }
    }
  }
  if (size == 0) {
    state_ = State::kTrailers;
    return;
  }
  if (size > limits_.max_body_bytes || body_bytes() + size > limits_.max_body_bytes) {
    return Fail(413, "the chunked request body is over the limit of " +
                         std::to_string(limits_.max_body_bytes) + " bytes");
  }
  chunk_left_ = size;
  state_ = State::kChunkData;
}

void HttpRequestParser::OnTrailer(std::string_view line) {
  // 7.1.2: trailer fields have the syntax of header fields. They are checked and dropped:
  // nothing here needs them, and merging them into the header is not allowed by default.
  if (line.front() == ' ' || line.front() == '\t') {
    return Fail(400, "obsolete line folding in the trailer section is not accepted");
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    return Fail(400, "malformed trailer field " + Quote(line));
  }
  for (char c : TrimOws(line.substr(colon + 1))) {
    if (!IsFieldValueChar(static_cast<unsigned char>(c))) {
      return Fail(400, "invalid character in a trailer field value");
    }
  }
}

size_t HttpRequestParser::Feed(std::string_view data) {
  size_t used = 0;
  while (used < data.size()) {
    std::string_view line;
    switch (state_) {
      case State::kRequestLine: {
        if (!ParseLine(data, used, limits_.max_request_line, 414, "request line", line)) {
          return used;
        }
        header_bytes_ += line_.size() + 1;
        if (line.empty()) {
          // 2.2: at least one empty line before the request line is ignored.
          line_.clear();
          if (++empty_lines_ > 8) {
            Fail(400, "too many empty lines before the request line");
            return used;
          }
          continue;
        }
        OnRequestLine(line);
        line_.clear();
        break;
      }
      case State::kFields: {
        const size_t left =
            limits_.max_header_bytes > header_bytes_ ? limits_.max_header_bytes - header_bytes_ : 0;
        if (!ParseLine(data, used, left, 431, "header section", line)) {
          if (failed())
            error_message_ = "request header fields are over the limit of " +
                             std::to_string(limits_.max_header_bytes) + " bytes";
          return used;
        }
        header_bytes_ += line_.size() + 1;
        if (line.empty()) {
          line_.clear();
          OnHeaderEnd();
          return used;  // the caller looks at the header before the body is read
        }
        OnField(line);
        line_.clear();
        break;
      }
      case State::kBody: {
        const size_t take = static_cast<size_t>(
            std::min<uint64_t>(content_length_ - body_bytes(), data.size() - used));
        request_.body().append(data.substr(used, take));
        used += take;
        if (body_bytes() == content_length_) state_ = State::kDone;
        break;
      }
      case State::kChunkSize:
        if (!ParseLine(data, used, limits_.max_chunk_line, 400, "chunk size line", line)) {
          return used;
        }
        OnChunkSize(line);
        line_.clear();
        break;
      case State::kChunkData: {
        const size_t take =
            static_cast<size_t>(std::min<uint64_t>(chunk_left_, data.size() - used));
        request_.body().append(data.substr(used, take));
        used += take;
        chunk_left_ -= take;
        if (chunk_left_ == 0) state_ = State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd:
        if (!ParseLine(data, used, 0, 400, "end of chunk data", line)) {
          if (failed()) error_message_ = "chunk data is longer than its declared size";
          return used;
        }
        line_.clear();
        state_ = State::kChunkSize;
        break;
      case State::kTrailers: {
        const size_t left = limits_.max_trailer_bytes > trailer_bytes_
                                ? limits_.max_trailer_bytes - trailer_bytes_
                                : 0;
        if (!ParseLine(data, used, left, 431, "trailer section", line)) {
          if (failed())
            error_message_ = "the trailer section is over the limit of " +
                             std::to_string(limits_.max_trailer_bytes) + " bytes";
          return used;
        }
        trailer_bytes_ += line_.size() + 1;
        if (line.empty()) {
          state_ = State::kDone;
        } else {
          OnTrailer(line);
        }
        line_.clear();
        break;
      }
      case State::kDone:
      case State::kError:
        return used;
    }
    if (state_ == State::kDone || state_ == State::kError) return used;
  }
  return used;
}

}  // namespace m3::net
