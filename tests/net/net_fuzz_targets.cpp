// Fuzz properties of the HTTP request parser and the JSON request parsers (see
// net_fuzz_targets.h).
#include "tests/net/net_fuzz_targets.h"

#include <exception>
#include <random>
#include <vector>

#include "gateway/anthropic/messages_request.h"
#include "gateway/net/api_error.h"
#include "gateway/net/http_request_parser.h"
#include "gateway/net/request_json.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/completion_request.h"
#include "gateway/openai/request_body.h"
#include "gateway/preprocess/preprocess_request.h"
#include "shared/bounded_json.h"

namespace m3::net::fuzz {
namespace {

struct Outcome {
  bool done = false, failed = false;
  int status = 0;
  std::string message;
  size_t used = 0;
  std::string method, target, body;
  unsigned version = 0;
};

HttpParserLimits FuzzLimits() {
  HttpParserLimits l;
  // Small enough that the fuzzer reaches every bound.
  l.max_request_line = 256;
  l.max_header_bytes = 1024;
  l.max_header_fields = 16;
  l.max_chunk_line = 64;
  l.max_trailer_bytes = 256;
  l.max_body_bytes = 4096;
  return l;
}

// Feeds the pieces in order; a piece the parser stops in (after the header) is fed again from
// where it stopped, as the server does.
Outcome Run(std::string_view wire, const std::vector<size_t>& cuts) {
  HttpRequestParser p(FuzzLimits());
  Outcome o;
  size_t at = 0;
  size_t next_cut = 0;
  while (at < wire.size() && !p.done() && !p.failed()) {
    size_t end = wire.size();
    while (next_cut < cuts.size() && cuts[next_cut] <= at) ++next_cut;
    if (next_cut < cuts.size()) end = cuts[next_cut];
    const size_t used = p.Feed(wire.substr(at, end - at));
    if (used == 0 && !p.done() && !p.failed()) {
      // Only legal right after the header section completed with nothing left to take.
      if (!p.header_done()) {
        o.failed = true;
        o.status = -1;
        o.message = "Feed consumed nothing before the header was complete";
        return o;
      }
      if (p.Feed(wire.substr(at, end - at)) == 0) {
        o.failed = true;
        o.status = -1;
        o.message = "Feed consumed nothing twice in a row";
        return o;
      }
      continue;
    }
    at += used;
  }
  o.used = at;
  o.done = p.done();
  o.failed = p.failed();
  if (o.failed) {
    o.status = p.error_status();
    o.message = p.error_message();
  }
  if (o.done) {
    auto r = p.Release();
    o.method = std::string(r.method_string());
    o.target = std::string(r.target());
    o.body = r.body();
    o.version = r.version();
  }
  return o;
}

}  // namespace

std::string CheckHttpRequest(std::string_view wire, uint64_t split_seed) {
  try {
    const Outcome whole = Run(wire, {});
    std::mt19937_64 rng(split_seed);
    std::vector<size_t> cuts;
    for (size_t at = 0; at < wire.size();) {
      at += 1 + rng() % (split_seed % 3 == 0 ? 2 : 17);
      cuts.push_back(at);
    }
    const Outcome split = Run(wire, cuts);
    if (whole.status < 0) return whole.message;
    if (split.status < 0) return split.message;
    if (whole.done != split.done || whole.failed != split.failed || whole.status != split.status ||
        whole.body != split.body || whole.target != split.target ||
        (whole.done && whole.used != split.used)) {
      return "the outcome depends on how the bytes were split (whole: done=" +
             std::to_string(whole.done) + " status=" + std::to_string(whole.status) +
             " used=" + std::to_string(whole.used) + "; split: done=" + std::to_string(split.done) +
             " status=" + std::to_string(split.status) + " used=" + std::to_string(split.used) +
             ")";
    }
    if (whole.failed) {
      static const int kStatuses[] = {400, 413, 414, 417, 431, 501, 505};
      bool known = false;
      for (int s : kStatuses) known = known || s == whole.status;
      if (!known) return "unexpected error status " + std::to_string(whole.status);
      if (whole.message.empty()) return "a refusal without a message";
    }
    if (whole.done) {
      const HttpParserLimits l = FuzzLimits();
      if (whole.body.size() > l.max_body_bytes) return "a body over the limit was accepted";
      if (whole.used > wire.size()) return "consumed more than it was given";
      if (whole.target.empty() || (whole.target[0] != '/' && whole.target != "*")) {
        return "accepted an unusable target '" + whole.target + "'";
      }
      if (whole.version != 10 && whole.version != 11) return "accepted an unknown version";
      for (char c : whole.target) {
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7F) {
          return "accepted a target with a control or space character";
        }
      }
    }
  } catch (const std::exception& e) {
    return std::string("exception escaped: ") + e.what();
  } catch (...) {
    return "unknown exception escaped";
  }
  return {};
}

std::string CheckRequestJson(std::string_view body) {
  try {
    const preprocess::PreprocessRequest r = preprocess::ParsePreprocessRequest(body);
    if (r.items.empty()) return "a request without media items was accepted";
    for (const auto& item : r.items) {
      if (item.url.empty()) return "an item with an empty URL was accepted";
      if (item.param.empty()) return "an item without a param name";
    }
  } catch (const ParamError& e) {
    // kTooLarge: a structure over the bounded parser's limits (a key, string or count).
    if (e.code() != ErrorCode::kInvalidArgument && e.code() != ErrorCode::kTooLarge) {
      return "ParamError with code " + std::string(ErrorCodeName(e.code()));
    }
    if (std::string(e.what()).empty()) return "a refusal without a message";
  } catch (const Error& e) {
    return "m3::Error that is not a ParamError: " + std::string(e.what());
  } catch (const std::exception& e) {
    return std::string("exception escaped: ") + e.what();
  } catch (...) {
    return "unknown exception escaped";
  }
  // The depth scan must agree with the parser on what is too deep.
  if (JsonNestingDepth(body, kMaxRequestJsonDepth) > kMaxRequestJsonDepth) {
    try {
      (void)ParseRequestJson(body);
      return "JSON deeper than the limit was parsed";
    } catch (const ParamError&) {
    }
  }
  return {};
}

namespace {

// Empty when the bounded parser and nlohmann's agree on `body` (limits lifted).
std::string JsonDisagreement(std::string_view body) {
  JsonLimits open;
  open.max_depth = 1 << 20;
  open.max_object_keys = open.max_array_items = open.max_values = size_t{1} << 40;
  open.max_key_bytes = open.max_string_bytes = size_t{1} << 40;
  nlohmann::json theirs;
  bool they_accept = true;
  try {
    theirs = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception&) {
    they_accept = false;
  }
  try {
    const nlohmann::json ours = ParseBoundedJson(body, open);
    if (!they_accept) return "the bounded parser accepted what nlohmann refuses";
    if (ours.dump() != theirs.dump()) return "the bounded parser built another value";
  } catch (const JsonBodyError& e) {
    // nlohmann's lexer takes a NUL byte for the end of the input; a raw NUL is never JSON.
    const bool nul = body.find('\0') != std::string_view::npos;
    if (they_accept && e.slug() != "number_too_long" && !nul) {
      return std::string("the bounded parser refused what nlohmann accepts: ") + e.what();
    }
  }
  return {};
}

}  // namespace

std::string CheckApiRequest(std::string_view body, uint8_t which) {
  if (std::string d = JsonDisagreement(body); !d.empty()) return d;
  openai::ServedModel model;
  model.name = "m3";
  model.max_model_len = 4096;
  openai::ApiLimits limits;
  try {
    const openai::Json j = openai::ParseRequestBody(body, limits);
    switch (which % 4) {
      case 0:
        (void)openai::ParseChatRequest(j, model, limits);
        break;
      case 1:
        (void)openai::ParseCompletionRequest(j, model, limits, /*vocab_size=*/200064);
        break;
      case 2:
        (void)anthropic::ParseMessagesRequest(j, model, limits,
                                              anthropic::MessagesEndpoint::kCreate);
        break;
      default:
        (void)anthropic::ParseMessagesRequest(j, model, limits,
                                              anthropic::MessagesEndpoint::kCountTokens);
    }
  } catch (const openai::RequestError& e) {
    if (e.http_status() < 400 || e.http_status() >= 500) {
      return "RequestError with status " + std::to_string(e.http_status()) + ": " + e.what();
    }
    if (std::string(e.what()).empty()) return "a refusal without a message";
  } catch (const Error& e) {
    return "m3::Error that is not a RequestError: " + std::string(e.what());
  } catch (const std::exception& e) {
    return std::string("exception escaped: ") + e.what();
  } catch (...) {
    return "unknown exception escaped";
  }
  return {};
}

}  // namespace m3::net::fuzz
